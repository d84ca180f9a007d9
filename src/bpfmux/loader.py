"""One load flow for both kernels: object → maps in order → programs → slots,
rolled back on any failure.

:class:`ObjectLoader` holds the flow; the live kernel
(:class:`bpfmux.live.kernel.LiveLoader`) and the emulated kernel
(:class:`bpfmux.emu.kernel.emulator.EmulatedLoader`) fill in the steps that
differ — how a map is created and wrapped, how a program is loaded — through
small hooks. What the flow decides, it decides once for both:

1. the object is parsed (a path or bytes) unless an
   :class:`~bpfmux.obj.ObjectSpec` is given;
2. :meth:`ObjectLoader.prepare` (the live kernel loads the object's BTF);
3. every map in object order: a compatible pinned map is reused
   (:meth:`~ObjectLoader.reuse_pinned`), else the map is created (an inner
   template first for maps of maps), global data (``.data``, ``.rodata``,
   ``.bss``, ``.kconfig``: :attr:`~bpfmux.obj.MapSpec.is_global_data`) gets
   its initial contents — ``.kconfig`` from :meth:`~ObjectLoader.kconfig_values`
   plus the caller's overrides —, frozen maps are frozen, pinned maps pinned;
4. the selected programs (:meth:`bpfmux.obj.ObjectSpec.select`), each
   relocated (maps, CO-RE against :meth:`~ObjectLoader.core_target`,
   externs) and loaded;
5. the statically initialised slots of prog arrays and maps of maps.

If anything fails (Ctrl-C included), everything created so far is closed
and pins made by this load are removed before the error propagates.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .api import Collection, Map, Program
from .errors import NotFoundError
from .isa.insn import Insn
from .obj.spec import MapFdFn, MapSpec, ObjectSpec, ProgramSpec

if TYPE_CHECKING:  # pragma: no cover
    from .btf import Btf

__all__ = ["ObjectLoader", "as_spec"]


def as_spec(spec_or_path: ObjectSpec | str | bytes | os.PathLike[str]) -> ObjectSpec:
    """An :class:`~bpfmux.obj.ObjectSpec` from a path, bytes, or a spec itself.

    :raises ParseError: the object is malformed.
    :raises OSError: the file cannot be read.
    """
    if isinstance(spec_or_path, ObjectSpec):
        return spec_or_path
    from .obj import load_object

    return load_object(spec_or_path)


class ObjectLoader(abc.ABC):
    """The load flow (module doc); one instance per :meth:`load` call.

    :ivar spec: the object being loaded.
    :ivar coll: the collection being filled.
    """

    def __init__(self, spec: ObjectSpec, coll: Collection) -> None:
        self.spec = spec
        self.coll = coll
        self.pins: list[str] = []

    # -- the flow ------------------------------------------------------------

    def load(self, programs: Iterable[str] | None = None, kconfig: Mapping[str, object] | None = None,
             log_level: int = 0) -> Collection:
        """Run the flow; returns the filled collection.

        :raises VerifierError: / :raises NotFoundError: / :raises NotSupportedError:
            / :raises BpfError: / :raises ParseError: as :meth:`bpfmux.api.Kernel.load`
            says; nothing stays loaded.
        """
        spec, coll = self.spec, self.coll
        only = list(programs) if programs is not None else None
        try:
            self.prepare()
            for ms in spec.maps.values():
                coll.maps[ms.name] = self._map(ms, kconfig)
            selected, skipped = spec.select(only)
            coll.skipped.update(skipped)
            for ps in selected:
                why = self.refuse(ps, explicit=only is not None)
                if why:
                    coll.skipped[ps.name] = why
                    continue
                insns = ps.instructions(self._map_fd(ps), self.core_target(ps), ksym_addr=self.ksym_addr)
                coll.programs[ps.name] = self.load_program(ps, insns, log_level)
            self._fill_slots()
        except BaseException:
            self._abort()
            raise
        return coll

    def _map(self, ms: MapSpec, kconfig: Mapping[str, object] | None) -> Map:
        reused = self.reuse_pinned(ms)
        if reused is not None:
            return reused
        m = self.create_map(ms)
        try:
            value = ms.value
            if ms.section == ".kconfig" or ms.name == ".kconfig":
                values = dict(self.kconfig_values())
                values.update(kconfig or {})
                value = self.spec.kconfig_data(values)
            if value is not None and ms.is_global_data:
                self.write_global(m, ms, bytes(value).ljust(ms.value_size, b"\0")[: ms.value_size])
            if ms.frozen:
                self.freeze(m)
            self.pin(m, ms)
        except BaseException:
            m.close()
            raise
        return m

    def _map_fd(self, ps: ProgramSpec) -> MapFdFn:
        maps = self.coll.maps

        def map_fd(name: str) -> int:
            if name not in maps:
                raise NotFoundError("map", name, f"program {ps.name!r} refers to it")
            return maps[name].fd

        return map_fd

    def _fill_slots(self) -> None:
        coll = self.coll
        for ms in self.spec.maps.values():
            for slot, name in ms.init_slots.items():
                obj: Program | Map | None = coll.programs.get(name) or coll.maps.get(name)
                if obj is None:
                    if name in coll.skipped:
                        continue
                    raise NotFoundError("program or map", name, f"slot {slot} of map {ms.name!r} refers to it")
                self.set_slot(coll.maps[ms.name], slot, obj)

    def _abort(self) -> None:
        import contextlib

        for path in self.pins:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.coll.close()

    # -- hooks -----------------------------------------------------------------

    def prepare(self) -> None:  # noqa: B027 - an optional step
        """Before any map: what the kernel needs first (the live kernel loads the object's BTF)."""

    def reuse_pinned(self, ms: MapSpec) -> Map | None:
        """A compatible map pinned under this map's name, or ``None`` (default: none).

        :raises BpfError: an incompatible map is pinned there.
        """
        return None

    @abc.abstractmethod
    def create_map(self, ms: MapSpec) -> Map:
        """Create the map of ``ms`` (and its inner template), wrapped with its
        codecs; global data as a section of variables."""

    @abc.abstractmethod
    def write_global(self, m: Map, ms: MapSpec, data: bytes) -> None:
        """Store the initial contents of a global-data map (``value_size`` bytes)."""

    @abc.abstractmethod
    def freeze(self, m: Map) -> None:
        """Freeze the map (``.rodata``, ``.kconfig``)."""

    def pin(self, m: Map, ms: MapSpec) -> None:  # noqa: B027 - an optional step
        """Pin the map when its spec asks for it (default: pinning unsupported, nothing done)."""

    def kconfig_values(self) -> Mapping[str, object]:
        """The kernel's config values for ``__kconfig`` externs (default: none)."""
        return {}

    def refuse(self, ps: ProgramSpec, *, explicit: bool) -> str | None:
        """Why this kernel leaves ``ps`` out (``None``: it loads it).

        :param explicit: the caller named the program.
        :raises NotSupportedError: an explicitly named program this kernel cannot load.
        """
        return None

    @abc.abstractmethod
    def core_target(self, ps: ProgramSpec) -> Btf | None:
        """The BTF that CO-RE relocations and typed externs of ``ps`` resolve against."""

    @abc.abstractmethod
    def ksym_addr(self, name: str) -> int | None:
        """The address of kernel symbol ``name`` (``None``: absent)."""

    @abc.abstractmethod
    def load_program(self, ps: ProgramSpec, insns: list[Insn], log_level: int) -> Program:
        """Load the relocated program."""

    @abc.abstractmethod
    def set_slot(self, m: Map, slot: int, obj: Program | Map) -> None:
        """Put a program (prog array) or map (map of maps) into a slot."""
