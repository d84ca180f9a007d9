"""``LiveKernel``: load BPF objects into the running kernel.

``LiveKernel().load(path_or_spec)`` does what libbpf's object load does, in
this order, and returns a :class:`LiveCollection`:

1. **BTF**: the object's BTF is sanitized for this kernel
   (:func:`bpfmux.btf.sanitize.sanitize` with probed
   :class:`~bpfmux.btf.sanitize.KernelFeatures`), written
   (:func:`bpfmux.btf.writer.write`) and loaded with ``BPF_BTF_LOAD``. If the
   kernel refuses it, loading goes on without BTF (maps get no BTF ids,
   programs no func/line info) and :attr:`LiveCollection.warnings` says so.
2. **maps**: created in object order (an inner map template first for maps of
   maps); ``max_entries`` 0 of a perf event array becomes the CPU count;
   BTF key/value type ids are given only to the map types that take them
   (:data:`~bpfmux.obj.maptypes.NO_BTF_TYPES`), and a map whose ids the
   kernel refuses (any errno) is created again without them, with a warning;
   pinned-by-name maps are reused from ``pin_root`` when compatible, else
   created and pinned; global data gets its initial contents (``.kconfig``
   from the running kernel's config) and ``.rodata``/``.kconfig`` are frozen.
3. **programs**: ``ProgramSpec.instructions()`` resolves CO-RE against
   ``/sys/kernel/btf/vmlinux``, map references and externs; tracing programs
   get their ``attach_btf_id`` from vmlinux BTF; each program is loaded with
   its func_info/line_info, so a verifier rejection shows source lines.
4. **slots**: statically initialised prog arrays and maps of maps are filled.

All or nothing: if anything fails, everything created so far is closed (and
pins made by this load are removed) before the error propagates; with
``partial=True`` a program that fails is recorded in
:attr:`~bpfmux.api.Collection.failed` and the rest loads.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .. import api
from ..errors import InvalidArgumentError, NotFoundError, NotSupportedError
from ..uapi import AttachType, LinkType, MapFlags, MapType, ProgFlags, ProgType
from . import maps as _maps
from . import sys as _sys
from .btf_ids import BtfIds
from .program import LiveProgram, load_insns

if TYPE_CHECKING:  # pragma: no cover
    from ..btf import Btf
    from ..host.kallsyms import KernelSymbols
    from ..isa.insn import Insn
    from ..obj.spec import ObjectSpec

_C = TypeVar("_C", bound=api.Closable)

#: attach type → how the vmlinux BTF name of the target is formed, and its kind
_TARGET_NAMES: dict[AttachType, tuple[str, str]] = {
    AttachType.TRACE_RAW_TP: ("btf_trace_{}", "typedef"),
    AttachType.TRACE_FENTRY: ("{}", "func"),
    AttachType.TRACE_FEXIT: ("{}", "func"),
    AttachType.MODIFY_RETURN: ("{}", "func"),
    AttachType.TRACE_FSESSION: ("{}", "func"),
    AttachType.LSM_MAC: ("bpf_lsm_{}", "func"),
    AttachType.LSM_CGROUP: ("bpf_lsm_{}", "func"),
    AttachType.TRACE_ITER: ("bpf_iter_{}", "func"),
}


class LiveCollection(api.Collection):
    """Everything loaded from one object into the running kernel.

    :ivar programs: name → :class:`~bpfmux.live.program.LiveProgram`.
    :ivar maps: name → :class:`~bpfmux.live.maps.LiveMap` (global data maps by
        section name: ``.data``, ``.rodata``, ``.bss``, …).
    :ivar btf_fd: the loaded object BTF (``None`` without).
    """

    def __init__(self, spec: ObjectSpec | None = None) -> None:
        super().__init__(spec)
        self.btf_fd: _sys.Fd | None = None

    def close(self) -> None:
        """Close every program, map and the BTF fd (links keep what they use).

        :raises BaseException: the first error a close raised, after all were closed.
        """
        if self.closed:
            return
        try:
            super().close()
        finally:
            if self.btf_fd is not None:
                self.btf_fd.close()


class LiveKernel(api.Kernel):
    """The running kernel as a bpfmux backend (:class:`bpfmux.api.Kernel`).

    Closing it closes every collection, program and map loaded through it
    that is still open (links hold what they use and are closed by their owner).

    :param pin_root: bpffs directory for maps pinned by name.
    """

    kind = "live"

    def __init__(self, pin_root: str = "/sys/fs/bpf") -> None:
        self.pin_root = pin_root
        self._vmlinux: Btf | None = None
        self._ksyms: KernelSymbols | None = None
        self._btf_ids = BtfIds(lambda: self.vmlinux)
        self._owned: weakref.WeakValueDictionary[int, api.Closable] = weakref.WeakValueDictionary()
        self._closed = False

    def __repr__(self) -> str:
        return f"<LiveKernel {os.uname().release}{' closed' if self._closed else ''}>"

    # --- kernel facts ---------------------------------------------------------------

    @property
    def vmlinux(self) -> Btf:
        """The running kernel's BTF (parsed once, lazily).

        :raises NotSupportedError: the kernel has no ``/sys/kernel/btf/vmlinux``.
        """
        if self._vmlinux is None:
            from ..btf import Btf

            try:
                self._vmlinux = Btf.vmlinux()
            except OSError as err:
                raise NotSupportedError("vmlinux BTF", f"cannot read the kernel's BTF ({err}); CO-RE and tracing "
                                        "programs need CONFIG_DEBUG_INFO_BTF") from None
        return self._vmlinux

    @property
    def btf(self) -> Btf | None:  # type: ignore[override]  # a read-only view of the attribute
        """The running kernel's BTF, ``None`` when it has none."""
        try:
            return self.vmlinux
        except NotSupportedError:
            return None

    def ksym_addr(self, name: str) -> int:
        """Address of kernel symbol ``name`` (``/proc/kallsyms``).

        :raises NotFoundError: no such symbol.
        :raises OSError: kallsyms cannot be read.
        """
        if self._ksyms is None:
            from ..host.kallsyms import KernelSymbols

            self._ksyms = KernelSymbols.load()
        return self._ksyms.address(name)

    def attach_btf_id(self, attach_type: AttachType | int | None, target: str | None, program: str = "") -> int:
        """The vmlinux BTF id a tracing program of ``attach_type`` on ``target`` is
        loaded with (0 when the attach type takes none).

        :raises NotFoundError: the kernel's BTF has no such function/tracepoint.
        :raises NotSupportedError: the kernel has no BTF.
        """
        if attach_type is None or int(attach_type) not in _TARGET_NAMES or not target:
            return 0
        fmt, kind = _TARGET_NAMES[AttachType(int(attach_type))]
        name = fmt.format(target)
        try:
            return self._btf_ids.get(name, kind)
        except NotFoundError:
            raise NotFoundError(f"kernel {kind}", name, f"program {program!r} attaches to it, but this kernel's BTF "
                                "has no such function/tracepoint") from None

    # --- what the kernel has ---------------------------------------------------------

    def tracepoint_names(self, pattern: str = "*:*") -> list[tuple[str, str]]:
        """From tracefs (see :meth:`bpfmux.api.Kernel.tracepoint_names`).

        :raises NotSupportedError: tracefs is not mounted.
        """
        from ..host import tracefs

        return sorted(tracefs.list_tracepoints(pattern))

    def function_names(self, pattern: str) -> list[str]:
        """From tracefs ``available_filter_functions``, else kallsyms
        (see :meth:`bpfmux.api.Kernel.function_names`).

        :raises NotFoundError: a glob that matches nothing.
        """
        from ..host.targets import resolve_kernel_functions

        return resolve_kernel_functions([pattern])[0]

    def supports(self, feature: str) -> bool:
        """From the feature probes (:mod:`bpfmux.live.features`; see
        :meth:`bpfmux.api.Kernel.supports`).

        :raises InvalidArgumentError: an unknown feature name.
        """
        from .features import features

        f = features()
        checks = {
            "kprobes": lambda: os.path.exists("/sys/bus/event_source/devices/kprobe/type"),
            "uprobes": lambda: os.path.exists("/sys/bus/event_source/devices/uprobe/type"),
            "kprobe_multi": lambda: f.link_type(LinkType.KPROBE_MULTI).supported,
            "kprobe_session": lambda: self.supports("btf") and f.attach_type(AttachType.TRACE_KPROBE_SESSION).supported,
            "uprobe_multi": lambda: f.link_type(LinkType.UPROBE_MULTI).supported,
            "uprobe_session": lambda: self.supports("btf") and f.attach_type(AttachType.TRACE_UPROBE_SESSION).supported,
            "fentry": lambda: f.attach_type(AttachType.TRACE_FENTRY).supported,
            "tracing_multi": lambda: f.link_type(LinkType.TRACING_MULTI).supported,
            "btf": lambda: os.path.exists("/sys/kernel/btf/vmlinux"),
        }
        if feature not in checks:
            raise InvalidArgumentError(f"unknown feature {feature!r}; one of {', '.join(api.FEATURES)}")
        return bool(checks[feature]())

    def btf_id(self, name: str, kind: str = "func") -> int:
        """From the kernel's BTF, remembered per boot (:mod:`bpfmux.live.btf_ids`).

        :raises NotFoundError: no such type.
        :raises NotSupportedError: the kernel has no BTF.
        """
        return self._btf_ids.get(name, kind)

    # --- the contract ---------------------------------------------------------------

    def _own(self, obj: _C) -> _C:
        if self._closed:
            obj.close()
            raise InvalidArgumentError("this LiveKernel is closed; make a new one")
        self._owned[id(obj)] = obj
        return obj

    def load_program(self, insns: Sequence[Insn] | bytes, prog_type: ProgType | int, *, name: str = "",
                     section: str = "", attach_type: AttachType | int | None = None,
                     attach_target: str | None = None, flags: ProgFlags | int = 0, license: str = "GPL",
                     log_level: int = 0, **options: Any) -> LiveProgram:
        """Load one program (see :meth:`bpfmux.api.Kernel.load_program`); a tracing
        program's BTF id comes from ``attach_target`` unless ``attach_btf_id`` is given.

        :param options: further ``BPF_PROG_LOAD`` fields of
            :func:`bpfmux.live.program.load_insns` (``attach_btf_id``,
            ``attach_btf_obj_fd``, ``btf_fd``, ``func_info``, ``line_info``,
            ``kern_version``, ``spec``).
        :raises VerifierError: rejected.
        :raises NotFoundError: ``attach_target`` is not in the kernel's BTF.
        :raises BpfError: any other refusal.
        """
        if "attach_btf_id" not in options:
            options["attach_btf_id"] = self.attach_btf_id(attach_type, attach_target, name)
        return self._own(load_insns(insns, prog_type, name=name, section=section, expected_attach_type=attach_type,
                                    attach_target=attach_target, flags=flags, license=license, log_level=log_level,
                                    **options))

    def create_map(self, map_type: MapType | int, key_size: int, value_size: int, max_entries: int, *,
                   name: str = "", flags: MapFlags | int = 0, inner: api.Map | None = None,
                   **options: Any) -> _maps.LiveMap:
        """Create one map (see :meth:`bpfmux.api.Kernel.create_map`).

        :param options: further fields of :func:`bpfmux.live.maps.create`
            (``btf_fd``, ``btf``, ``key_type_id``, ``value_type_id``,
            ``map_extra``, ``numa_node``).
        :raises NotSupportedError: the kernel has no such map type.
        :raises BpfError: any other refusal.
        """
        if inner is not None and not isinstance(inner, _maps.LiveMap):
            raise InvalidArgumentError(f"inner map {inner!r} is not a map of the live kernel")
        return self._own(_maps.create(map_type, key_size, value_size, max_entries, name=name, flags=int(flags),
                                      inner_map=inner, **options))

    def load(self, spec_or_path: ObjectSpec | str | bytes | os.PathLike[str], *,
             programs: Iterable[str] | None = None, kconfig: Mapping[str, object] | None = None,
             log_level: int = 0, partial: bool = False) -> LiveCollection:
        """Load an object as libbpf does (module doc; :meth:`bpfmux.api.Kernel.load`).

        :param partial: programs that fail are recorded in ``coll.failed``
            with their errors, the others load.
        :raises VerifierError: a program was rejected (log with source lines).
        :raises NotFoundError: an attach target or strong extern is missing,
            or a name in ``programs`` is not a program of the object.
        :raises NotSupportedError: the kernel lacks something the object needs.
        :raises BpfError: any other refusal; nothing stays loaded.
        :raises ParseError: the object is malformed.
        """
        from ..loader import as_spec
        from .loading import LiveLoader

        spec = as_spec(spec_or_path)
        coll = LiveCollection(spec)
        LiveLoader(self, spec, coll).load(programs, kconfig, log_level, partial)
        return self._own(coll)

    def detach_all(self, links: Iterable[api.Link]) -> None:
        """Close every link on up to 64 threads: each perf-event or uprobe detach waits in the kernel for a
        grace period (30–80 ms here), and concurrent waits overlap.

        :raises BaseException: the first error a close raised, after every link was closed.
        """
        items = list(links)
        if len(items) < 2:
            api.close_all(items)
            return
        from .links import close_all

        close_all(items, parallel=True)

    def close(self) -> None:
        """Close every collection, program and map loaded through this kernel
        that is still open (idempotent).

        :raises BaseException: the first error a close raised, after all were closed.
        """
        if self._closed:
            return
        self._closed = True
        api.close_all(list(self._owned.values()))

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed
