"""Kernel types as bpftrace values: BTF types, tracepoint record fields and
type names written in casts, turned into :class:`~bpfmux.bpftrace.types.T`.

- :func:`from_btf`: a BTF type (typedefs, qualifiers and enums resolved; a
  ``char`` array is a string, as bpftrace makes it);
- :func:`from_c_decl`: a tracepoint field's C type as tracefs prints it
  (``const char *``, ``unsigned long``, ``pid_t``), with bpftrace's rule that
  an 8-byte ``int``/``pid_t``/``uid_t``/``gid_t``/``unsigned int`` field is a
  64-bit integer;
- :func:`from_name`: a cast's type (``uint64``, ``int8``, ``struct sock``,
  a C base type or a BTF typedef);
- :func:`field_of`: a struct/union member of a record type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import BpfmuxError, NotFoundError
from ..record import Frozen
from ..record import set_field as _set
from .types import K, T

if TYPE_CHECKING:  # pragma: no cover
    from ..btf import types as bt


__all__ = ["FieldRef", "LazyBtf", "field_of", "from_btf", "from_c_decl", "from_name"]

#: bpftrace's own integer type names
INT_NAMES = {f"{'u' if u else ''}int{b}": T.int(b // 8, not u) for u in (False, True) for b in (8, 16, 32, 64)}
#: C base types by their spellings (x86-64)
C_INTS = {
    "char": (1, True), "signed char": (1, True), "unsigned char": (1, False),
    "short": (2, True), "short int": (2, True), "signed short": (2, True), "unsigned short": (2, False),
    "unsigned short int": (2, False), "short unsigned int": (2, False),
    "int": (4, True), "signed": (4, True), "signed int": (4, True), "unsigned": (4, False),
    "unsigned int": (4, False),
    "long": (8, True), "long int": (8, True), "signed long": (8, True), "unsigned long": (8, False),
    "long unsigned int": (8, False), "unsigned long int": (8, False),
    "long long": (8, True), "long long int": (8, True), "unsigned long long": (8, False),
    "long long unsigned int": (8, False), "unsigned long long int": (8, False),
    "_Bool": (1, False), "bool": (1, False),
    "u8": (1, False), "u16": (2, False), "u32": (4, False), "u64": (8, False),
    "s8": (1, True), "s16": (2, True), "s32": (4, True), "s64": (8, True),
    "__u8": (1, False), "__u16": (2, False), "__u32": (4, False), "__u64": (8, False),
    "__s8": (1, True), "__s16": (2, True), "__s32": (4, True), "__s64": (8, True),
}  # fmt: skip
_WIDE_AS_U64 = {"unsigned int", "unsigned", "u32", "pid_t", "uid_t", "gid_t"}
#: kernel typedefs of tracepoint fields (x86-64), so most records need no BTF lookup
KERNEL_TYPEDEFS = {
    "pid_t": (4, True), "uid_t": (4, False), "gid_t": (4, False), "size_t": (8, False), "ssize_t": (8, True),
    "loff_t": (8, True), "off_t": (8, True), "umode_t": (2, False), "mode_t": (4, False), "dev_t": (4, False),
    "sector_t": (8, False), "key_serial_t": (4, True), "clockid_t": (4, True), "timer_t": (4, True),
    "mqd_t": (4, True), "qid_t": (4, False), "rwf_t": (4, True), "aio_context_t": (8, False), "time_t": (8, True),
    "ino_t": (8, False), "gfp_t": (4, False), "fmode_t": (4, False), "bool": (1, False), "__kernel_size_t": (8, False),
    "unsigned char": (1, False), "long unsigned int": (8, False), "short int": (2, True),
}  # fmt: skip


class LazyBtf:
    """A BTF that is parsed the first time it is used (``bool()`` says
    whether there is one); most scripts never need it."""

    def __init__(self, load: Any) -> None:
        self._load = load
        self._btf: Any = None
        self._done = False

    def get(self) -> Any:
        """The BTF (``None`` when the kernel has none)."""
        if not self._done:
            self._done = True
            try:
                self._btf = self._load() if callable(self._load) else self._load
            except (BpfmuxError, OSError):
                self._btf = None
        return self._btf

    def __bool__(self) -> bool:
        return self.get() is not None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)

    def __getitem__(self, key: Any) -> Any:
        return self.get()[key]

    def __len__(self) -> int:
        return len(self.get())


class FieldRef(Frozen):
    """A member of a record: its byte offset, its type, and its bitfield shape.

    :ivar offset: bytes from the start of the record.
    :ivar type: the member's type.
    :ivar bit_shift: bitfield: bits to shift right after loading ``type.size`` bytes.
    :ivar bit_width: bitfield width (0: not a bitfield).
    """

    __slots__ = ("offset", "type", "bit_shift", "bit_width")

    offset: int
    type: T
    bit_shift: int
    bit_width: int

    def __init__(self, offset: int, type: T, bit_shift: int = 0, bit_width: int = 0) -> None:
        _set(self, "offset", offset)
        _set(self, "type", type)
        _set(self, "bit_shift", bit_shift)
        _set(self, "bit_width", bit_width)


def _resolve(btf: Any, t: bt.Type) -> bt.Type:
    from ..btf import types as bt  # only scripts that use kernel types pay for the BTF modules

    seen = 0
    while isinstance(t, bt.Typedef | bt.Const | bt.Volatile | bt.Restrict | bt.TypeTag) and seen < 64:
        t = t.type
        seen += 1
    return t


def from_btf(btf: Any, t: bt.Type, *, user: bool = False) -> T:
    """The bpftrace type of BTF type ``t``."""
    from ..btf import types as bt

    r = _resolve(btf, t)
    if isinstance(r, bt.Int):
        return T(K.INT, r.size, r.signed and not r.is_bool)
    if isinstance(r, bt.Enum):
        return T(K.INT, r.size, getattr(r, "signed", False))
    if isinstance(r, bt.Ptr):
        target = _resolve(btf, r.type) if r.type_id else None
        if target is None or isinstance(target, bt.Void | bt.FuncProto):
            return T(K.PTR, 8, user=user)
        return T(K.PTR, 8, pointee=from_btf(btf, r.type, user=user), user=user)
    if isinstance(r, bt.Composite):
        kind = "union" if isinstance(r, bt.Union) else "struct"
        return T(K.RECORD, r.size, btf_id=r.id, name=f"{kind} {r.name}" if r.name else f"{kind} (anonymous)",
                 user=user)  # fmt: skip
    if isinstance(r, bt.Fwd):
        return T(K.RECORD, 0, name=f"{'union' if r.is_union else 'struct'} {r.name}", user=user)
    if isinstance(r, bt.Array):
        elem = from_btf(btf, r.type, user=user)
        if elem.kind == K.INT and elem.size == 1:
            return T(K.STR, max(1, r.nelems), user=user)
        return T(K.ARRAY, elem.size * r.nelems if elem.size else 0, elems=(elem,), count=r.nelems, user=user)
    if isinstance(r, bt.Float):
        return T(K.INT, r.size, True)
    return T(K.INT, 8, False)


def _btf_named(btf: Any, name: str) -> bt.Type | None:
    if not btf:
        return None
    for kind in ("typedef", "int", "struct", "union", "enum"):
        try:
            return btf.find(name, kind)
        except (NotFoundError, BpfmuxError, KeyError, ValueError):
            continue
    return None


def from_name(btf: Any, name: str, ptr: int = 0) -> T | None:
    """The type a cast names (``None`` when unknown): bpftrace's ``intN``/``uintN``,
    C base types, ``struct``/``union``/``enum`` names and BTF typedefs, with
    ``ptr`` levels of pointer."""
    base: T | None
    if name in INT_NAMES:
        base = INT_NAMES[name]
    elif name in C_INTS or name in KERNEL_TYPEDEFS:
        size, signed = C_INTS.get(name) or KERNEL_TYPEDEFS[name]
        base = T.int(size, signed)
    elif name.startswith(("struct ", "union ", "enum ")):
        kind, _, bare = name.partition(" ")
        found = None
        if btf:
            try:
                found = btf.find(bare.strip(), kind)
            except (NotFoundError, BpfmuxError, KeyError, ValueError):
                found = None
        if found is None:
            return None
        base = from_btf(btf, found)
    elif name == "void":
        base = None if ptr else T.none()
        if ptr:
            out = T(K.PTR, 8)
            for _ in range(ptr - 1):
                out = T(K.PTR, 8, pointee=out)
            return out
        return base
    else:
        found = _btf_named(btf, name)
        if found is None:
            return None
        base = from_btf(btf, found)
    out = base
    for _ in range(ptr):
        out = T(K.PTR, 8, pointee=out)
    return out


def from_c_decl(btf: Any, ctype: str, size: int, signed: bool, *, user: bool = False) -> T:
    """A tracepoint field's type from its declaration (``ctype`` is the type
    without the name, as :class:`~bpfmux.abi.tpformat.TpField` has it)."""
    text = " ".join(ctype.replace("*", " * ").split())
    if "__data_loc" in text or "__rel_loc" in text:
        return T(K.STR, 64, extra=("data_loc",))
    words = [w for w in text.split() if w not in ("const", "volatile", "__user", "restrict")]
    ptr = words.count("*")
    base_words = [w for w in words if w != "*"]
    array = None
    if base_words and base_words[-1].endswith("]"):
        last = base_words[-1]
        base_words[-1] = last[: last.index("[")]
        if not base_words[-1]:
            base_words.pop()
        inner = last[last.index("[") + 1: -1]
        array = int(inner) if inner.isdigit() else None
    base = " ".join(base_words)
    if array is not None or (ptr == 0 and text.endswith("]")):
        n = array if array is not None else size
        if base in ("char", "signed char", "unsigned char", "u8", "__u8", "s8"):
            return T(K.STR, max(1, size))
        elem = from_name(btf, base) or T.int(1, False)
        if elem.size == 0:
            elem = T.int(1, False)
        return T(K.ARRAY, size, elems=(elem,), count=n if n else size // max(1, elem.size))
    if ptr:
        pointee = from_name(btf, base) if base != "void" else None
        out = T(K.PTR, 8, pointee=pointee.with_user(user) if pointee is not None else None, user=user)
        for _ in range(ptr - 1):
            out = T(K.PTR, 8, pointee=out, user=user)
        return out
    if size == 8 and base == "int":
        return T.int(8, True)
    if size == 8 and base in _WIDE_AS_U64:
        return T.int(8, False)
    known = from_name(btf, base)
    if known is not None and known.kind == K.INT and known.size == size:
        return known
    if known is not None and known.kind == K.INT and known.size < size:
        return known
    if known is not None and known.kind == K.RECORD:
        return known
    return T.int(size if size in (1, 2, 4, 8) else 8, signed)


def field_of(btf: Any, record: T, name: str) -> FieldRef | None:
    """Member ``name`` of record type ``record`` (anonymous members searched
    as in C), or ``None`` when it has none."""
    if not record.btf_id or not btf:
        return None
    try:
        info = btf.member(btf[record.btf_id], name)
    except (NotFoundError, BpfmuxError, KeyError, ValueError, TypeError):
        return None
    ftype = from_btf(btf, info.type, user=record.user)
    if info.is_bitfield:
        unit = max(1, min(8, ftype.size))
        start = (info.bit_offset // (unit * 8)) * unit
        return FieldRef(start, T.int(unit, ftype.signed), info.bit_offset - start * 8, info.bitfield_size)
    return FieldRef(info.offset, ftype)
