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
   pinned-by-name maps are reused from ``pin_root`` when compatible, else
   created and pinned; global data gets its initial contents (``.kconfig``
   from the running kernel's config) and ``.rodata``/``.kconfig`` are frozen.
3. **programs**: ``ProgramSpec.instructions()`` resolves CO-RE against
   ``/sys/kernel/btf/vmlinux``, map references and externs; tracing programs
   get their ``attach_btf_id`` from vmlinux BTF; each program is loaded with
   its func_info/line_info, so a verifier rejection shows source lines.
4. **slots**: statically initialised prog arrays and maps of maps are filled.

All or nothing: if anything fails, everything created so far is closed (and
pins made by this load are removed) before the error propagates.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Mapping
from typing import Any

from .. import api
from ..codecs import datasec_variables
from ..errors import BpfError, NotFoundError, NotSupportedError
from ..host.cpus import possible_cpus
from ..host.kconfig import kernel_config
from ..uapi import AttachType, MapType, ProgFlags
from . import maps as _maps
from . import sys as _sys
from .program import LiveProgram, load_insns, pack_func_info, pack_line_info

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
    """Everything loaded from one object.

    :ivar programs: name → :class:`~bpfmux.live.program.LiveProgram`.
    :ivar maps: name → :class:`~bpfmux.live.maps.LiveMap` (global data maps by
        section name: ``.data``, ``.rodata``, ``.bss``, …).
    :ivar spec: the :class:`~bpfmux.obj.ObjectSpec`.
    :ivar btf_fd: the loaded object BTF (``None`` without).
    :ivar skipped: programs not loaded, with the reason.
    :ivar warnings: degradations during load (BTF refused, …).
    """

    programs: dict[str, LiveProgram]
    maps: dict[str, _maps.LiveMap]

    def __init__(self, spec: Any = None) -> None:
        super().__init__(spec)
        self.btf_fd: _sys.Fd | None = None
        self.warnings: list[str] = []
        self._pins: list[str] = []

    def close(self) -> None:
        """Close every program, map and the BTF fd (links keep what they use)."""
        if self.closed:
            return
        super().close()
        if self.btf_fd is not None:
            self.btf_fd.close()

    def _abort(self) -> None:
        for path in self._pins:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.close()

    def __repr__(self) -> str:
        return f"<LiveCollection programs={list(self.programs)} maps={list(self.maps)}>"


class LiveKernel:
    """The running kernel as a bpfmux backend.

    :param pin_root: bpffs directory for maps pinned by name.
    """

    def __init__(self, pin_root: str = "/sys/fs/bpf") -> None:
        self.pin_root = pin_root
        self._vmlinux: Any = None
        self._ksyms: Any = None

    # --- helpers ------------------------------------------------------------------

    @property
    def vmlinux(self) -> Any:
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

    def _ksym_addr(self, name: str) -> int:
        if self._ksyms is None:
            from ..host.kallsyms import KernelSymbols

            self._ksyms = KernelSymbols.load()
        return self._ksyms.address(name)

    def _attach_btf_id(self, ps: Any) -> int:
        eat = ps.expected_attach_type
        if eat is None or AttachType(int(eat)) not in _TARGET_NAMES or not ps.attach_target:
            return 0
        fmt, kind = _TARGET_NAMES[AttachType(int(eat))]
        name = fmt.format(ps.attach_target)
        ids = self.vmlinux.find_ids(name, kind)
        if not ids:
            raise NotFoundError(f"kernel {kind}", name, f"program {ps.name!r} (section {ps.section!r}) attaches to "
                                "it, but this kernel's BTF has no such function/tracepoint")
        return ids[0]

    # --- single objects --------------------------------------------------------------

    def load_program(self, insns: Any, prog_type: Any, **options: Any) -> LiveProgram:
        """Load one program from raw instructions (``list[Insn]`` or bytes);
        options as for :func:`bpfmux.live.program.load_insns`.

        :raises VerifierError: rejected.
        :raises BpfError: any other refusal.
        """
        return load_insns(insns, prog_type, **options)

    def create_map(self, map_type: Any, key_size: int, value_size: int, max_entries: int,
                   **options: Any) -> _maps.LiveMap:
        """Create one map; options as for :func:`bpfmux.live.maps.create`.

        :raises NotSupportedError: the kernel has no such map type.
        :raises BpfError: any other refusal.
        """
        return _maps.create(map_type, key_size, value_size, max_entries, **options)

    # --- loading -------------------------------------------------------------------

    def load(self, spec_or_path: Any, *, programs: Iterable[str] | None = None,
             kconfig: Mapping[str, object] | None = None, log_level: int = 0) -> LiveCollection:
        """Load an object (a path, bytes, or an :class:`~bpfmux.obj.ObjectSpec`).

        :param programs: load only these programs (default: every program
            whose section does not start with ``?``).
        :param kconfig: extra/override values for ``__kconfig`` externs.
        :param log_level: verifier log level to keep in ``program.log``.
        :raises VerifierError: a program was rejected (log with source lines).
        :raises NotFoundError: an attach target or strong extern is missing,
            or a name in ``programs`` is not a program of the object.
        :raises NotSupportedError: the kernel lacks something the object needs.
        :raises BpfError: any other refusal; nothing stays loaded.
        :raises ParseError: the object is malformed.
        """
        spec = spec_or_path
        if isinstance(spec_or_path, str | bytes | os.PathLike):
            from ..obj import load_object

            spec = load_object(spec_or_path)
        coll = LiveCollection(spec)
        try:
            self._load_btf(spec, coll)
            self._create_maps(spec, coll, kconfig)
            self._load_programs(spec, coll, programs, log_level)
            self._fill_slots(spec, coll)
        except BaseException:
            coll._abort()
            raise
        return coll

    def _load_btf(self, spec: Any, coll: LiveCollection) -> None:
        if spec.btf is None:
            return
        from ..btf import writer
        from ..btf.sanitize import sanitize

        try:
            feats = _btf_features()
            raw = writer.write(sanitize(spec.btf, feats))
            coll.btf_fd = _sys.btf_load(raw)
        except BpfError as err:
            coll.warnings.append(f"object BTF refused by the kernel ({err}); loading without BTF")

    def _create_map(self, ms: Any, coll: LiveCollection, *, inner_fd: _sys.Fd | None = None) -> _sys.Fd:
        max_entries = ms.max_entries
        if int(ms.type) == MapType.PERF_EVENT_ARRAY and not max_entries:
            max_entries = possible_cpus()
        use_btf = coll.btf_fd is not None and (ms.btf_key_type_id or ms.btf_value_type_id) and \
            int(ms.type) not in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS, MapType.PERF_EVENT_ARRAY,
                                 MapType.PROG_ARRAY, MapType.RINGBUF, MapType.STACK_TRACE)
        name = (ms.kernel_name or ms.name)[:15]
        kw = dict(flags=int(ms.flags), name=name, inner_map_fd=inner_fd, numa_node=ms.numa_node,
                  map_extra=ms.map_extra)
        if use_btf:
            try:
                return _sys.map_create(int(ms.type), ms.key_size, ms.value_size, max_entries, btf_fd=coll.btf_fd,
                                       btf_key_type_id=ms.btf_key_type_id, btf_value_type_id=ms.btf_value_type_id,
                                       **kw)
            except BpfError as err:
                if err.errno != errno.EINVAL:
                    raise
                coll.warnings.append(f"map {ms.name!r}: kernel refused its BTF types; created without them")
        try:
            return _sys.map_create(int(ms.type), ms.key_size, ms.value_size, max_entries, **kw)
        except BpfError as err:
            if err.errno == errno.EINVAL:
                from .features import features

                if not features().map_type(MapType(int(ms.type))).supported:
                    raise NotSupportedError(f"map type {MapType(int(ms.type)).name.lower()}",
                                            f"map {ms.name!r}: this kernel has no "
                                            f"{MapType(int(ms.type)).name.lower()} maps") from err
            raise

    def _create_maps(self, spec: Any, coll: LiveCollection, kconfig: Mapping[str, object] | None) -> None:
        from ..obj.spec import PinType

        for ms in spec.maps.values():
            pin_path = os.path.join(self.pin_root, ms.name) if ms.pinning == PinType.BY_NAME else None
            if pin_path and os.path.exists(pin_path):
                fd = _sys.obj_get(pin_path, kind="map")
                with fd.close_on_error():
                    info = _sys.map_info(fd)
                    if (info.type, info.key_size, info.value_size) != (int(ms.type), ms.key_size, ms.value_size):
                        raise BpfError(errno.EEXIST, f"map {ms.name!r}: a different map is pinned at {pin_path}; remove it")
                    coll.maps[ms.name] = self._wrap(fd, ms, spec)
                continue
            inner_fd = None
            if ms.inner is not None:
                inner_fd = self._create_map(ms.inner, coll)
            try:
                fd = self._create_map(ms, coll, inner_fd=inner_fd)
            finally:
                if inner_fd is not None:
                    inner_fd.close()
            with fd.close_on_error():
                coll.maps[ms.name] = self._wrap(fd, ms, spec)
            value = ms.value
            if ms.section == ".kconfig" or ms.name == ".kconfig":
                values: dict[str, object] = dict(kernel_config())
                values.update(kconfig or {})
                value = spec.kconfig_data(values)
            if value is not None and _is_global(ms):
                _sys.map_update_elem(fd, b"\0\0\0\0", bytes(value).ljust(ms.value_size, b"\0")[: ms.value_size])
            if ms.frozen:
                _sys.map_freeze(fd)
            if pin_path:
                _sys.obj_pin(fd, pin_path)
                coll._pins.append(pin_path)

    def _wrap(self, fd: _sys.Fd, ms: Any, spec: Any) -> _maps.LiveMap:
        btf = spec.btf
        if _is_global(ms):
            variables = datasec_variables(btf, ms.section if ms.section.startswith(".") else ms.name)
            return _maps.wrap(fd, name=ms.name, cls=_maps.DataSecMap, variables=variables)
        return _maps.wrap(fd, name=ms.name, btf=btf, key_type_id=ms.btf_key_type_id,
                          value_type_id=ms.btf_value_type_id)

    def _load_programs(self, spec: Any, coll: LiveCollection, only: Iterable[str] | None, log_level: int) -> None:
        selected, skipped = spec.select(only)
        coll.skipped.update(skipped)
        for ps in selected:
            if ProgFlags.MULTI_FUNC in ProgFlags(int(ps.flags)) and ".multi_func" in ps.section:
                if only is not None:
                    raise NotSupportedError("seed multi_func", f"program {ps.name!r} uses the seed's "
                                            "BPF_F_MULTI_FUNC ABI, which only the emulated kernel implements")
                coll.skipped[ps.name] = "seed multi_func ABI: emulated kernel only"
                continue
            coll.programs[ps.name] = self._load_program(ps, spec, coll, log_level)

    def _load_program(self, ps: Any, spec: Any, coll: LiveCollection, log_level: int) -> LiveProgram:
        def map_fd(name: str) -> int:
            if name not in coll.maps:
                raise NotFoundError("map", name, f"program {ps.name!r} refers to it")
            return coll.maps[name].fd.fd

        target = self.vmlinux if (ps.core_relos or ps.externs) else None
        insns = ps.instructions(map_fd, target, ksym_addr=self._ksym_addr)
        btf_ok = coll.btf_fd is not None
        func_info = pack_func_info(ps.kernel_func_info()) if btf_ok and ps.func_info else b""
        line_info = pack_line_info(ps.kernel_line_info()) if btf_ok and ps.line_info else b""
        try:
            return load_insns(insns, ps.prog_type, name=ps.name, license=ps.license or spec.license or "GPL",
                              expected_attach_type=ps.expected_attach_type, flags=ps.flags,
                              attach_btf_id=self._attach_btf_id(ps), btf_fd=coll.btf_fd, func_info=func_info,
                              line_info=line_info, kern_version=ps.kernel_version, log_level=log_level,
                              section=ps.section, attach_target=ps.attach_target, spec=ps)
        except BpfError as err:
            missing = _missing_feature(ps)
            if missing is not None:
                raise NotSupportedError(missing[0], f"program {ps.name!r} (section {ps.section!r}): {missing[1]}") \
                    from err
            raise

    def _fill_slots(self, spec: Any, coll: LiveCollection) -> None:
        for ms in spec.maps.values():
            if not ms.init_slots:
                continue
            m = coll.maps[ms.name]
            for slot, name in ms.init_slots.items():
                obj = coll.programs.get(name) or coll.maps.get(name)
                if obj is None:
                    if name in coll.skipped:
                        continue
                    raise NotFoundError("program or map", name, f"slot {slot} of map {ms.name!r} refers to it")
                m[slot] = obj


_btf_feats: Any = None


def _btf_features() -> Any:
    global _btf_feats
    if _btf_feats is None:
        from ..btf.sanitize import KernelFeatures

        _btf_feats = KernelFeatures.probe(lambda raw: _sys.btf_load(raw, retry_with_log=False))
    return _btf_feats


def _is_global(ms: Any) -> bool:
    v = ms.is_global_data
    return bool(v() if callable(v) else v)


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
