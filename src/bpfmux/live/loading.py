"""The live kernel's steps of the one load flow (:mod:`bpfmux.loader`): the
object's BTF sanitized and loaded, maps created with libbpf's BTF rules
(pinned maps reused), global data written and frozen, programs loaded with
their func/line info. :meth:`bpfmux.live.LiveKernel.load` runs it."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import api
from ..codecs import datasec_variables
from ..errors import BpfError, NotSupportedError
from ..host.cpus import possible_cpus
from ..host.kconfig import kernel_config
from ..isa.insn import Insn
from ..loader import ObjectLoader
from ..obj.spec import MapSpec, ObjectSpec, ProgramSpec
from ..uapi import AttachType, MapType, ProgFlags, ProgType
from . import maps as _maps
from . import sys as _sys
from .program import LiveProgram, load_insns, pack_func_info, pack_line_info

if TYPE_CHECKING:  # pragma: no cover
    from ..btf import Btf
    from ..btf.sanitize import KernelFeatures
    from .kernel import LiveCollection, LiveKernel

__all__ = ["LiveLoader"]


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
        coll = self.coll
        max_entries = ms.max_entries
        if int(ms.type) == MapType.PERF_EVENT_ARRAY and not max_entries:
            max_entries = possible_cpus()
        use_btf = coll.btf_fd is not None and (ms.btf_key_type_id or ms.btf_value_type_id) and \
            int(ms.type) not in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS, MapType.PERF_EVENT_ARRAY,
                                 MapType.PROG_ARRAY, MapType.RINGBUF, MapType.STACK_TRACE)
        name = (ms.kernel_name or ms.name)[:15]
        kw: dict[str, Any] = dict(flags=int(ms.flags), name=name, inner_map_fd=inner_fd, numa_node=ms.numa_node,
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


_btf_feats: KernelFeatures | None = None


def _btf_features() -> KernelFeatures:
    global _btf_feats
    if _btf_feats is None:
        from ..btf.sanitize import KernelFeatures

        _btf_feats = KernelFeatures.probe(lambda raw: _sys.btf_load(raw, retry_with_log=False))
    return _btf_feats


def _missing_feature(ps: ProgramSpec) -> tuple[str, str] | None:
    """(feature, why) when the kernel lacks the program's type or attach type."""
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
