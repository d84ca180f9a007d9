"""The emulated kernel's steps of the one load flow (:mod:`bpfmux.loader`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ... import api
from ...errors import BpfmuxError, InvalidArgumentError, NotFoundError
from ...host.kconfig import kernel_config
from ...isa.insn import Insn
from ...loader import ObjectLoader
from ...obj.spec import MapSpec, ObjectSpec, ProgramSpec
from ...uapi import MapType
from ..vm.maps import ArrayMap, EmuMap
from .objects import DataSection, EmulatedCollection, EmulatedProgram

if TYPE_CHECKING:  # pragma: no cover
    from ...btf import Btf
    from .emulator import Emulator

__all__ = ["EmulatedLoader"]


class EmulatedLoader(ObjectLoader):
    """Maps become VM maps (global data viewed through the object's BTF),
    programs are verified and loaded by :meth:`~bpfmux.emu.Emulator.load_program`."""

    coll: EmulatedCollection

    def __init__(self, emu: Emulator, spec: ObjectSpec, coll: EmulatedCollection) -> None:
        super().__init__(spec, coll)
        self.emu = emu

    def create_map(self, ms: MapSpec) -> api.Map:
        """A VM map (an inner template first); global data as a :class:`DataSection`."""
        m = self._vm_map(ms)
        btf = self.spec.btf
        if ms.is_global_data:
            assert isinstance(m, ArrayMap)  # a global-data map is an array of one element
            return DataSection(m, btf, ms.section if ms.section.startswith(".") else ms.name)
        if btf is not None and ms.btf_value_type_id:
            from ...codecs import codec_for

            try:
                if ms.btf_key_type_id:
                    m.key_codec = codec_for(btf, ms.btf_key_type_id, ms.key_size)
                m.value_codec = codec_for(btf, ms.btf_value_type_id, ms.value_size)
            except (BpfmuxError, TypeError, ValueError):  # a type the codecs cannot describe: bytes
                m.key_codec = m.value_codec = None
        return m

    def _vm_map(self, ms: MapSpec) -> EmuMap:
        vm = self.emu.vm
        inner = self._vm_map(ms.inner) if ms.inner is not None else None
        max_entries = ms.max_entries
        if int(ms.type) == MapType.PERF_EVENT_ARRAY and not max_entries:
            max_entries = vm.ncpus  # libbpf: one slot per possible CPU
        return vm.create_map(ms.type, ms.key_size, ms.value_size, max_entries, flags=int(ms.flags), name=ms.name,
                             inner=inner)

    def write_global(self, m: api.Map, ms: MapSpec, data: bytes) -> None:
        """Store the section's initial bytes."""
        arr = _storage(m)
        assert isinstance(arr, ArrayMap)  # a global-data map is an array of one element
        arr.storage[0][: len(data)] = data

    def freeze(self, m: api.Map) -> None:
        """Freeze the map (writes from user space fail ``EPERM``)."""
        _storage(m).freeze()

    def kconfig_values(self) -> Mapping[str, object]:
        """The config of the kernel the emulated kernel models by default:
        this machine's (its BTF is the default function table too)."""
        return kernel_config()

    def core_target(self, ps: ProgramSpec) -> Btf | None:
        """The emulator's BTF; without one, the object's own types."""
        return self.emu.btf or self.spec.btf

    def ksym_addr(self, name: str) -> int | None:
        """Addresses of the emulated kernel's functions.

        :raises NotFoundError: not a function of the emulated kernel.
        """
        if name in self.emu.functions:
            return self.emu.functions[name].addr
        raise NotFoundError("kernel symbol", name, "the emulated kernel knows only its functions")

    def load_program(self, ps: ProgramSpec, insns: list[Insn], log_level: int) -> EmulatedProgram:
        """Verify and load through :meth:`~bpfmux.emu.Emulator.load_program`."""
        return self.emu.load_program(insns, ps.prog_type, name=ps.name, section=ps.section,
                                     attach_type=ps.expected_attach_type, attach_target=ps.attach_target,
                                     flags=ps.flags, license=ps.license or self.spec.license or "",
                                     log_level=log_level, spec=ps)

    def set_slot(self, m: api.Map, slot: int, obj: api.Program | api.Map) -> None:
        """Prog arrays take the VM program; maps of maps the map."""
        m[slot] = obj.vmprog if isinstance(obj, EmulatedProgram) else _storage(obj)


def _storage(m: object) -> EmuMap:
    inner = m.map if isinstance(m, DataSection) else m
    if not isinstance(inner, EmuMap):
        raise InvalidArgumentError(f"{m!r} is not a map of the emulated kernel")
    return inner
