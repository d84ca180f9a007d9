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

import errno
import os
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .. import api
from ..codecs import datasec_variables
from ..errors import ENOTSUPP, BpfError, BpfmuxError, InvalidArgumentError, NotFoundError, NotSupportedError
from ..host.cpus import possible_cpus
from ..host.kallsyms import KernelSymbols
from ..host.kconfig import kernel_config
from ..isa.insn import Insn
from ..loader import ObjectLoader, as_spec
from ..obj.maptypes import takes_btf_ids
from ..obj.spec import MapSpec, ObjectSpec, ProgramSpec
from ..uapi import AttachType, LinkType, MapFlags, MapType, ProgFlags, ProgType
from . import maps as _maps
from . import sys as _sys
from .btf_ids import BtfIds
from .program import LiveProgram, load_insns, pack_func_info, pack_line_info

if TYPE_CHECKING:  # pragma: no cover
    from ..btf import Btf

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
        spec = as_spec(spec_or_path)
        coll = LiveCollection(spec)
        LiveLoader(self, spec, coll).load(programs, kconfig, log_level, partial)
        return self._own(coll)

    def close(self) -> None:
        """Close every collection, program and map loaded through this kernel
        that is still open (idempotent).

        :raises BaseException: the first error a close raised, after all were closed.
        """
        if self._closed:
            return
        self._closed = True
        from .links import close_all

        close_all(list(self._owned.values()))

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed


class LiveLoader(ObjectLoader):
    """The live kernel's steps of the one load flow (:mod:`bpfmux.loader`)."""

    coll: LiveCollection

    def __init__(self, kernel: LiveKernel, spec: ObjectSpec, coll: LiveCollection) -> None:
        super().__init__(spec, coll)
        self.kernel = kernel

    def prepare(self) -> None:
        """Load the object's BTF, sanitized for this kernel (refused BTF: load without it)."""
        if self.spec.btf is None:
            return
        from ..btf import writer
        from ..btf.sanitize import sanitize

        try:
            raw = writer.write(sanitize(self.spec.btf, _btf_features()))
            self.coll.btf_fd = _sys.btf_load(raw)
        except BpfError as err:
            self.coll.warnings.append(f"object BTF refused by the kernel ({err}); loading without BTF")

    def reuse_pinned(self, ms: MapSpec) -> _maps.LiveMap | None:
        """The map pinned under ``ms.name`` in ``pin_root`` when the spec pins by name.

        :raises BpfError: ``EEXIST`` a different map is pinned there.
        """
        path = self._pin_path(ms)
        if path is None or not os.path.exists(path):
            return None
        fd = _sys.obj_get(path, kind="map")
        with fd.close_on_error():
            info = _sys.map_info(fd)
            if (info.type, info.key_size, info.value_size) != (int(ms.type), ms.key_size, ms.value_size):
                raise BpfError(errno.EEXIST, f"map {ms.name!r}: a different map is pinned at {path}; remove it")
            return self._wrap(fd, ms)

    def _pin_path(self, ms: MapSpec) -> str | None:
        from ..obj.spec import PinType

        return os.path.join(self.kernel.pin_root, ms.name) if ms.pinning == PinType.BY_NAME else None

    def create_map(self, ms: MapSpec) -> _maps.LiveMap:
        """Create the map (an inner template first); with BTF ids where the kernel takes them."""
        inner_fd = self._create_fd(ms.inner) if ms.inner is not None else None
        try:
            fd = self._create_fd(ms, inner_fd=inner_fd)
        finally:
            if inner_fd is not None:
                inner_fd.close()
        with fd.close_on_error():
            return self._wrap(fd, ms)

    def _create_fd(self, ms: MapSpec, *, inner_fd: _sys.Fd | None = None) -> _sys.Fd:
        """``BPF_MAP_CREATE`` as libbpf does it: no BTF ids for the map types
        that take none (:data:`~bpfmux.obj.maptypes.NO_BTF_TYPES`), and one
        retry without BTF ids whatever the kernel's errno when it refuses them."""
        coll = self.coll
        max_entries = ms.max_entries
        if int(ms.type) == MapType.PERF_EVENT_ARRAY and not max_entries:
            max_entries = possible_cpus()
        use_btf = coll.btf_fd is not None and bool(ms.btf_key_type_id or ms.btf_value_type_id) and \
            takes_btf_ids(ms.type)
        name = (ms.kernel_name or ms.name)[:15]
        kw: dict[str, Any] = dict(flags=int(ms.flags), name=name, inner_map_fd=inner_fd, numa_node=ms.numa_node,
                                  map_extra=ms.map_extra)
        if use_btf:
            try:
                return _sys.map_create(int(ms.type), ms.key_size, ms.value_size, max_entries, btf_fd=coll.btf_fd,
                                       btf_key_type_id=ms.btf_key_type_id, btf_value_type_id=ms.btf_value_type_id,
                                       **kw)
            except BpfError as err:
                first = err
            try:
                fd = _sys.map_create(int(ms.type), ms.key_size, ms.value_size, max_entries, **kw)
            except BpfError as err:
                raise self._map_error(ms, err) from first
            coll.warnings.append(f"map {ms.name!r}: the kernel refused its BTF key/value types "
                                 f"({errno.errorcode.get(first.errno, first.errno)}); created without them")
            return fd
        try:
            return _sys.map_create(int(ms.type), ms.key_size, ms.value_size, max_entries, **kw)
        except BpfError as err:
            raise self._map_error(ms, err) from err

    @staticmethod
    def _map_error(ms: MapSpec, err: BpfError) -> BpfmuxError:
        """The error for a map the kernel refused: :class:`NotSupportedError`
        when the kernel has no such map type, else ``err`` with what to check."""
        try:
            known: MapType | None = MapType(int(ms.type))
        except ValueError:
            known = None
        mtype = known.name.lower() if known is not None else f"#{int(ms.type)}"
        if err.errno in (errno.EINVAL, ENOTSUPP, errno.EOPNOTSUPP):
            from .features import features

            if known is None or not features().map_type(known).supported:
                return NotSupportedError(f"map type {mtype}", f"map {ms.name!r}: this kernel has no {mtype} maps")
        if err.errno == errno.EINVAL and int(ms.type) != MapType.PERF_EVENT_ARRAY and ms.max_entries == 0:
            return BpfError(err.errno, f"creating map {ms.name!r} failed: its max_entries is 0, which the object "
                            "leaves for its user space to set; give it a size (bpfmux run --map-size "
                            f"{ms.name}=N, or spec.resize_map({ms.name!r}, N))")
        return err

    def _wrap(self, fd: _sys.Fd, ms: MapSpec) -> _maps.LiveMap:
        btf = self.spec.btf
        if ms.is_global_data:
            variables = datasec_variables(btf, ms.section if ms.section.startswith(".") else ms.name)
            return _maps.wrap(fd, name=ms.name, cls=_maps.DataSecMap, variables=variables)
        return _maps.wrap(fd, name=ms.name, btf=btf, key_type_id=ms.btf_key_type_id,
                          value_type_id=ms.btf_value_type_id)

    def write_global(self, m: api.Map, ms: MapSpec, data: bytes) -> None:
        """Store the section's initial bytes in its one element."""
        _sys.map_update_elem(m.fd, b"\0\0\0\0", data)

    def freeze(self, m: api.Map) -> None:
        """``BPF_MAP_FREEZE``."""
        _sys.map_freeze(m.fd)

    def pin(self, m: api.Map, ms: MapSpec) -> None:
        """Pin a map whose spec pins by name (removed again if the load fails)."""
        path = self._pin_path(ms)
        if path:
            _sys.obj_pin(m.fd, path)
            self.pins.append(path)

    def kconfig_values(self) -> Mapping[str, object]:
        """The running kernel's config plus ``LINUX_KERNEL_VERSION``."""
        return kernel_config()

    def refuse(self, ps: ProgramSpec, *, explicit: bool) -> str | None:
        """The seed's ``BPF_F_MULTI_FUNC`` programs run only in the emulated kernel.

        :raises NotSupportedError: such a program was named explicitly.
        """
        if ProgFlags.MULTI_FUNC in ProgFlags(int(ps.flags)) and ".multi_func" in ps.section:
            if explicit:
                raise NotSupportedError("seed multi_func", f"program {ps.name!r} uses the seed's BPF_F_MULTI_FUNC "
                                        "ABI, which only the emulated kernel implements")
            return "seed multi_func ABI: emulated kernel only"
        return None

    def core_target(self, ps: ProgramSpec) -> Btf | None:
        """vmlinux BTF, read only when the program has CO-RE relocations or externs."""
        return self.kernel.vmlinux if (ps.core_relos or ps.externs) else None

    def ksym_addr(self, name: str) -> int | None:
        """From ``/proc/kallsyms``."""
        return self.kernel.ksym_addr(name)

    def load_program(self, ps: ProgramSpec, insns: list[Insn], log_level: int) -> LiveProgram:
        """``BPF_PROG_LOAD`` with func/line info (so a rejection shows source lines)."""
        coll = self.coll
        btf_ok = coll.btf_fd is not None
        func_info = pack_func_info(ps.kernel_func_info()) if btf_ok and ps.func_info else b""
        line_info = pack_line_info(ps.kernel_line_info()) if btf_ok and ps.line_info else b""
        try:
            return load_insns(insns, ps.prog_type, name=ps.name, license=ps.license or self.spec.license or "GPL",
                              expected_attach_type=ps.expected_attach_type, flags=ps.flags,
                              attach_btf_id=self.kernel.attach_btf_id(ps.expected_attach_type, ps.attach_target,
                                                                      ps.name),
                              btf_fd=coll.btf_fd, func_info=func_info, line_info=line_info,
                              kern_version=ps.kernel_version, log_level=log_level, section=ps.section,
                              attach_target=ps.attach_target, spec=ps)
        except BpfError as err:
            missing = _missing_feature(ps)
            if missing is not None:
                raise NotSupportedError(missing[0], f"program {ps.name!r} (section {ps.section!r}): {missing[1]}") \
                    from err
            raise

    def set_slot(self, m: api.Map, slot: int, obj: api.Program | api.Map) -> None:
        """Prog arrays and maps of maps take the object itself."""
        m[slot] = obj


_btf_feats: Any = None


def _btf_features() -> Any:
    global _btf_feats
    if _btf_feats is None:
        from ..btf.sanitize import KernelFeatures

        _btf_feats = KernelFeatures.probe(lambda raw: _sys.btf_load(raw, retry_with_log=False))
    return _btf_feats


def _missing_feature(ps: Any) -> tuple[str, str] | None:
    """(feature, why) when the kernel lacks the program's type or attach type."""
    from ..uapi import ProgType
    from .features import features

    f = features()
    pt = ProgType(int(ps.prog_type))
    p = f.prog_type(pt)
    if not p.supported:
        return pt.name.lower(), f"this kernel cannot load {pt.name.lower()} programs ({p.detail})"
    if ps.expected_attach_type is not None:
        at = AttachType(int(ps.expected_attach_type))
        a = f.attach_type(at)
        if not a.supported:
            name = {AttachType.TRACE_FENTRY: "fentry", AttachType.TRACE_FEXIT: "fexit",
                    AttachType.MODIFY_RETURN: "fmod_ret"}.get(at, at.name.lower())
            return name, f"this kernel does not support {name} programs ({a.detail})"
    return None
