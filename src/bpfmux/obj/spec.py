"""The object model: what an ELF object holds, before any kernel is involved.

:class:`ObjectSpec` is built by :func:`bpfmux.obj.load_object`; it holds
:class:`ProgramSpec` (linked instructions with relocation records) and
:class:`MapSpec` (BTF-defined, legacy and global-data maps). Everything that
depends on the kernel (map fds, the target BTF for CO-RE, kfunc ids, kallsyms
addresses) is applied only in :meth:`ProgramSpec.instructions`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import NotFoundError
from ..isa.insn import Insn, slot_offsets
from ..uapi import AttachType, CoreReloKind, MapFlags, MapType, ProgFlags, ProgType
from .sections import SectionInfo

if TYPE_CHECKING:
    from ..btf import Btf
    from .load import CoreResolver

__all__ = [
    "CoreRelo",
    "CoreReloKind",
    "Extern",
    "ExternKind",
    "FuncInfo",
    "LineInfo",
    "MapSpec",
    "ObjectSpec",
    "PinType",
    "ProgramSpec",
    "RelocKind",
    "Relocation",
]


class RelocKind(enum.Enum):
    """What a relocation record asks the loader to put into an instruction."""

    #: ``lddw rX, map`` → ``src=BPF_PSEUDO_MAP_FD``, ``imm=fd``
    MAP = "map"
    #: ``lddw rX, &global`` → ``src=BPF_PSEUDO_MAP_VALUE``, ``imm=fd``, high word = offset
    MAP_VALUE = "map_value"
    #: bpf-to-bpf call (already linked: informational)
    CALL = "call"
    #: ``lddw rX, subprog`` (already linked, ``src=BPF_PSEUDO_FUNC``: informational)
    SUBPROG_ADDR = "subprog_addr"
    #: call of an extern function (kfunc) → ``src=BPF_PSEUDO_KFUNC_CALL``, ``imm=btf id``
    KFUNC = "kfunc"
    #: ``lddw rX, &ksym`` → typed: ``src=BPF_PSEUDO_BTF_ID``; untyped: the address
    KSYM = "ksym"
    #: ``lddw rX, &CONFIG_FOO`` → map value of the ``.kconfig`` map at the extern's offset
    KCONFIG = "kconfig"


@dataclass(frozen=True, slots=True)
class Relocation:
    """One relocation of a linked program.

    :ivar insn: index into :attr:`ProgramSpec.insns` (not a slot number).
    :ivar kind: :class:`RelocKind`.
    :ivar symbol: the ELF symbol it refers to (a section name for static data).
    :ivar target: map name (MAP, MAP_VALUE, KCONFIG), subprogram name (CALL,
        SUBPROG_ADDR) or extern name (KFUNC, KSYM).
    :ivar offset: byte offset into the map value (MAP_VALUE, KCONFIG).
    """

    insn: int
    kind: RelocKind
    symbol: str
    target: str
    offset: int = 0


@dataclass(frozen=True, slots=True)
class CoreRelo:
    """A CO-RE relocation (``struct bpf_core_relo``) of a linked program.

    :ivar insn: index into :attr:`ProgramSpec.insns`.
    :ivar type_id: root type id in the object's BTF.
    :ivar access: access string (``"0:1:2"``; an enumerator index for enum kinds).
    :ivar kind: :class:`CoreReloKind`.
    """

    insn: int
    type_id: int
    access: str
    kind: CoreReloKind


@dataclass(frozen=True, slots=True)
class FuncInfo:
    """``bpf_func_info`` of the linked program: a function starts at ``insn``."""

    insn: int
    type_id: int


@dataclass(frozen=True, slots=True)
class LineInfo:
    """``bpf_line_info`` of the linked program (string offsets kept for the kernel)."""

    insn: int
    file_name_off: int
    line_off: int
    line: int
    col: int
    file: str = ""
    text: str = ""


class ExternKind(enum.Enum):
    """Kinds of ``extern`` declarations an object may have."""

    KCONFIG = "kconfig"  # extern ... __kconfig: a value from the kernel config
    KSYM = "ksym"  # extern variable __ksym: typed (BTF) or untyped (address)
    KFUNC = "kfunc"  # extern function __ksym: a kernel function callable from BPF


@dataclass(slots=True)
class Extern:
    """An ``extern`` of the object.

    :ivar name: symbol name.
    :ivar kind: :class:`ExternKind`.
    :ivar weak: declared ``__weak`` (may stay unresolved: value 0).
    :ivar btf_id: its VAR/FUNC id in the object's BTF (0 when none).
    :ivar type_id: the variable's type id (0 for an untyped ``void`` ksym).
    :ivar offset: byte offset in the ``.kconfig`` map (KCONFIG only).
    :ivar size: size in bytes (KCONFIG only).
    :ivar kcfg_type: ``"bool" | "tristate" | "char" | "int" | "char_array"``
        (KCONFIG only) — how a config value is encoded.
    :ivar signed: integer is signed (KCONFIG ``int``).
    """

    name: str
    kind: ExternKind
    weak: bool
    btf_id: int = 0
    type_id: int = 0
    offset: int = 0
    size: int = 0
    align: int = 1
    kcfg_type: str = ""
    signed: bool = False


class PinType(enum.IntEnum):
    """``enum libbpf_pin_type`` of a map's ``pinning`` attribute."""

    NONE = 0
    BY_NAME = 1


@dataclass(slots=True)
class MapSpec:
    """One map of an object.

    :ivar name: the name programs refer to: the variable name for ``.maps``
        and legacy maps, the section name (``.data``, ``.rodata``, ``.bss``,
        ``.data.foo``, ``.kconfig``) for global data.
    :ivar kernel_name: the name given to ``BPF_MAP_CREATE`` (libbpf's rules:
        at most 15 characters; global data: object-name prefix + section).
    :ivar section: ELF section it came from (``.maps``, ``maps``, ``.data`` …).
    :ivar value: initial contents for global data (the whole value, one entry)
        or ``None``.
    :ivar frozen: freeze after creating and filling (``.rodata``, ``.kconfig``).
    :ivar inner: spec of the inner map of a map-in-map.
    :ivar init_slots: statically initialised slots of a prog array or
        map-in-map: index → program or map name.
    :ivar btf_key_type_id, btf_value_type_id: type ids in the object's BTF
        (0 when none; global data maps use their DATASEC as value type).
    :ivar pinning: :class:`PinType`.
    """

    name: str
    type: MapType | int
    key_size: int
    value_size: int
    max_entries: int
    flags: MapFlags = MapFlags(0)
    kernel_name: str = ""
    section: str = ".maps"
    numa_node: int = 0
    map_extra: int = 0
    btf_key_type_id: int = 0
    btf_value_type_id: int = 0
    inner: MapSpec | None = None
    init_slots: dict[int, str] = field(default_factory=dict)
    pinning: PinType = PinType.NONE
    value: bytes | None = None
    frozen: bool = False

    @property
    def is_global_data(self) -> bool:
        """True for ``.data``/``.rodata``/``.bss``/``.kconfig`` (and custom) maps."""
        return self.section.startswith((".data", ".rodata", ".bss", ".kconfig"))


#: A function returning the fd of the map called ``name``.
MapFdFn = Callable[[str], int]
#: A function returning a kernel symbol's address, or ``None`` when absent.
KsymAddrFn = Callable[[str], "int | None"]

#: libbpf's poison for a call of an unresolved weak kfunc (never executed).
POISON_CALL_KFUNC_BASE = 2002000000


@dataclass(slots=True)
class ProgramSpec:
    """One program, linked as libbpf links it.

    :ivar name: the function name.
    :ivar section: ELF section name as written (with any ``?``).
    :ivar section_info: what the section name says
        (:class:`~bpfmux.obj.sections.SectionInfo`).
    :ivar prog_type, expected_attach_type, attach_target, flags, autoload,
        auto_attach: taken from :attr:`section_info`, editable before loading.
    :ivar insns: the program followed by every bpf-to-bpf subprogram it
        reaches, bpf-to-bpf calls and subprogram address loads already linked;
        map, global-data and extern references still unresolved (see
        :attr:`relocations`).
    :ivar subprograms: ``(name, first insn index)`` of each appended subprogram.
    :ivar relocations: :class:`Relocation` records (insn indices into ``insns``).
    :ivar func_info, line_info, core_relos: ``.BTF.ext`` records adjusted to
        the linked program.
    :ivar license: the object's license string.
    :ivar kernel_version: the object's ``version`` section (0 when absent).
    """

    name: str
    section: str
    section_info: SectionInfo
    prog_type: ProgType
    expected_attach_type: AttachType | None
    attach_target: str | None
    flags: ProgFlags
    autoload: bool
    auto_attach: bool
    insns: list[Insn]
    license: str = ""
    kernel_version: int = 0
    subprograms: list[tuple[str, int]] = field(default_factory=list)
    relocations: list[Relocation] = field(default_factory=list)
    func_info: list[FuncInfo] = field(default_factory=list)
    line_info: list[LineInfo] = field(default_factory=list)
    core_relos: list[CoreRelo] = field(default_factory=list)
    btf: Btf | None = None
    externs: Mapping[str, Extern] = field(default_factory=dict)

    @property
    def slots(self) -> list[int]:
        """Slot number (8-byte unit, as the kernel counts) of each instruction."""
        return slot_offsets(self.insns)

    def kernel_func_info(self) -> list[tuple[int, int]]:
        """``(insn_off in slots, type_id)`` records for ``BPF_PROG_LOAD``."""
        s = self.slots
        return [(s[f.insn], f.type_id) for f in self.func_info]

    def kernel_line_info(self) -> list[tuple[int, int, int, int]]:
        """``(insn_off in slots, file_name_off, line_off, line_col)`` records."""
        s = self.slots
        return [(s[li.insn], li.file_name_off, li.line_off, (li.line << 10) | (li.col & 0x3FF)) for li in self.line_info]

    def instructions(
        self,
        map_fd: MapFdFn,
        target_btf: Btf | None = None,
        *,
        ksym_addr: KsymAddrFn | None = None,
        core_resolver: CoreResolver | None = None,
    ) -> list[Insn]:
        """The final instructions for ``BPF_PROG_LOAD`` (or the emulator).

        Applies, on a copy: CO-RE relocations against ``target_btf`` (through
        :mod:`bpfmux.btf.core`), map and global-data references (``map_fd``
        gives each map's fd; an emulator may return any handle that fits 32
        bits), and extern references (kfunc and typed ksym ids from
        ``target_btf``; untyped ksym addresses from ``ksym_addr``; ``.kconfig``
        values through the ``.kconfig`` map). See :mod:`bpfmux.obj.load`.

        :raises NotFoundError: a strong extern cannot be resolved, or a
            referenced map is unknown to ``map_fd``.
        :raises NotSupportedError: CO-RE relocations are present but no
            ``target_btf`` was given, or :mod:`bpfmux.btf.core` is unavailable.
        :raises ParseError: a relocation does not fit its instruction.
        """
        from .load import finalize

        return finalize(self, map_fd, target_btf, ksym_addr=ksym_addr, core_resolver=core_resolver)


@dataclass(slots=True)
class ObjectSpec:
    """Everything in one BPF ELF object.

    :ivar name: object name (file name up to its first ``.``, as libbpf).
    :ivar programs: name → :class:`ProgramSpec`, in ELF order.
    :ivar maps: name → :class:`MapSpec`, BTF maps first, then legacy, then
        global data (``.data``, ``.rodata``, ``.bss``, custom, ``.kconfig``).
    :ivar btf: the object's BTF with DATASEC sizes and variable offsets fixed
        from the ELF symbols (``None`` when built without ``-g``).
    :ivar license: the ``license`` section.
    :ivar kernel_version: the ``version`` section (0 when absent).
    :ivar externs: name → :class:`Extern` (kconfig, ksym and kfunc externs).
    :ivar source: where it was read from.
    """

    name: str
    programs: dict[str, ProgramSpec] = field(default_factory=dict)
    maps: dict[str, MapSpec] = field(default_factory=dict)
    btf: Btf | None = None
    license: str = ""
    kernel_version: int = 0
    externs: dict[str, Extern] = field(default_factory=dict)
    source: str | None = None

    def program(self, name: str) -> ProgramSpec:
        """The program called ``name``.

        :raises NotFoundError: no such program.
        """
        try:
            return self.programs[name]
        except KeyError:
            raise NotFoundError("program", name, f"the object has: {', '.join(self.programs) or 'none'}") from None

    def map(self, name: str) -> MapSpec:
        """The map called ``name``.

        :raises NotFoundError: no such map.
        """
        try:
            return self.maps[name]
        except KeyError:
            raise NotFoundError("map", name, f"the object has: {', '.join(self.maps) or 'none'}") from None

    def select(self, only: Iterable[str] | None = None) -> tuple[list[ProgramSpec], dict[str, str]]:
        """The programs a loader loads, in object order, and why each other
        one is left out: the programs named in ``only``, or without it every
        program whose section does not start with ``?``.

        :raises NotFoundError: a name in ``only`` is not a program of the object.
        """
        chosen = set(only) if only is not None else None
        if chosen is not None:
            unknown = chosen - set(self.programs)
            if unknown:
                raise NotFoundError("program", sorted(unknown)[0], f"the object has: {', '.join(self.programs)}")
        load: list[ProgramSpec] = []
        skipped: dict[str, str] = {}
        for ps in self.programs.values():
            if chosen is not None and ps.name not in chosen:
                skipped[ps.name] = "not selected"
            elif chosen is None and not ps.autoload:
                skipped[ps.name] = "section starts with '?' (not loaded by default)"
            else:
                load.append(ps)
        return load, skipped

    @property
    def kconfig_externs(self) -> list[Extern]:
        """The ``__kconfig`` externs, in ``.kconfig`` map order."""
        return sorted((e for e in self.externs.values() if e.kind is ExternKind.KCONFIG), key=lambda e: e.offset)

    @property
    def ksym_externs(self) -> list[Extern]:
        """The ``__ksym`` externs (variables and kfuncs)."""
        return [e for e in self.externs.values() if e.kind is not ExternKind.KCONFIG]

    def set_rodata(self, name: str, value: int | bytes | str) -> None:
        """Set a ``const volatile`` global (``.rodata``, ``.rodata.*``)
        before load, as a tool's user space does (``skel->rodata->x = …``);
        the value is encoded with the variable's BTF type (text fills a
        char array).

        :raises NotFoundError: no read-only global of that name (or no BTF).
        :raises ParseError: the value does not fit the variable's type.
        """
        from ..btf.codec import codec
        from ..btf.types import Datasec, Var

        for ms in self.maps.values():
            if not ms.section.startswith(".rodata") or self.btf is None:
                continue
            try:
                ds = self.btf.find(ms.section, "datasec")
            except KeyError:
                continue
            assert isinstance(ds, Datasec)  # found by kind
            for vs in ds.vars:
                var = self.btf[vs.type_id]
                if var.name != name or not isinstance(var, Var):
                    continue
                c = codec(self.btf, var.type_id)
                v: object = value.encode() if isinstance(value, str) else value
                if isinstance(v, bytes):
                    v = v.ljust(c.size, b"\0")[: c.size]
                data = bytearray(ms.value or bytes(ms.value_size))
                data[vs.offset : vs.offset + vs.size] = c.encode(v)[: vs.size]
                ms.value = bytes(data)
                return
        raise NotFoundError("read-only global (const volatile)", name,
                            f"the object's read-only globals are in {', '.join(self.rodata_variables()) or 'none'}")

    def rodata_variables(self) -> list[str]:
        """Names of the object's ``const volatile`` globals."""
        from ..btf.types import Datasec

        out: list[str] = []
        for ms in self.maps.values():
            if ms.section.startswith(".rodata") and self.btf is not None:
                try:
                    ds = self.btf.find(ms.section, "datasec")
                except KeyError:
                    continue
                assert isinstance(ds, Datasec)  # found by kind
                out.extend(self.btf[vs.type_id].name for vs in ds.vars)
        return out

    def kconfig_data(self, values: Mapping[str, object]) -> bytes:
        """The ``.kconfig`` map value for the given config values.

        ``values`` maps names (``CONFIG_HZ``, ``LINUX_KERNEL_VERSION``) to
        values as in a kernel ``.config`` (``"y"``, ``"m"``, ``"n"``, ``"250"``,
        ``'"str"'``) or as Python ``bool``/``int``/``str``. Missing weak
        externs are 0; see :func:`bpfmux.obj.kconfig.encode`.

        :raises NotFoundError: a strong extern has no value.
        :raises ParseError: a value does not fit its extern's type.
        """
        from .kconfig import encode

        return encode(self.kconfig_externs, values)
