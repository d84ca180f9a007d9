"""CO-RE: resolving compile-once-run-everywhere relocations against a target BTF.

The semantics are libbpf's (facts of the CO-RE ABI, reimplemented here):

* **Candidates** for a local type are the target types of the same kind
  (ENUM and ENUM64 count as one) whose name equals the local name with any
  ``___flavor`` suffix stripped on both sides; vmlinux is searched first and
  module BTFs only when vmlinux has none.
* **Field relocations** walk the access string (``"0:1:3"``: an array index
  on the root pointer, then member/element indexes) through the local type,
  then look each *named* member up by name in the candidate (descending into
  anonymous members) and check the final types are compatible.
* Every matching candidate must give the same answer, else the relocation
  is ambiguous (:class:`CoreAmbiguityError`).
* When nothing matches, ``*_EXISTS``/``TYPE_*`` kinds evaluate to 0 and the
  others cannot be satisfied: the result has ``poison=True`` (the loader turns
  the instruction into a call of the invalid helper ``0xbad2310``, which the
  verifier rejects only if it is reachable), or :func:`resolve` raises
  :class:`CoreRelocationError` with ``poison=False``.

Use :func:`resolve` for one :class:`~bpfmux.btf.ext.CoreRelo`, and
:func:`patch_insn` to apply the result to an instruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import BpfmuxError
from ..isa.insn import Insn
from ..uapi import BtfIntEncoding, BtfKind
from .ext import CoreRelo, CoreReloKind
from .layout import TypeKindError, sizeof
from .layout import resolve as skip_mods
from .types import Array, Composite, Enum, FuncProto, Fwd, Int, Ptr, Type

if TYPE_CHECKING:
    from .model import Btf

__all__ = [
    "POISON_IMM",
    "CoreAmbiguityError",
    "CoreRelocationError",
    "CoreResult",
    "CoreSpec",
    "essential_name",
    "find_candidates",
    "parse_spec",
    "patch_insn",
    "resolve",
]

#: ``imm`` of the call that replaces a poisoned instruction (``0xbad2310``, "bad relo").
POISON_IMM = 0xBAD2310
MAX_SPEC_LEN = 64
_MAX_DEPTH = 32


class CoreRelocationError(BpfmuxError):
    """A CO-RE relocation cannot be resolved (bad record, or no target satisfies it in strict mode).

    :ivar relo: the relocation record.
    """

    def __init__(self, message: str, relo: CoreRelo | None = None) -> None:
        self.relo = relo
        super().__init__(message)


class CoreAmbiguityError(CoreRelocationError):
    """Several target candidates match but give different answers."""


def essential_name(name: str) -> str:
    """``name`` without its ``___flavor`` suffix (``task_struct___v2`` → ``task_struct``)."""
    n = len(name)
    for i in range(n - 5, -1, -1):
        if name[i] != "_" and name[i + 1 : i + 4] == "___" and name[i + 4] != "_":
            return name[: i + 1]
    return name


def _core_kind(k: BtfKind) -> BtfKind:
    return BtfKind.ENUM if k == BtfKind.ENUM64 else k


# ----------------------------------------------------------------- specs
@dataclass
class Accessor:
    """One high-level step of a spec: a named member (``name``) or an array index (``name is None``)."""

    type_id: int
    idx: int
    name: str | None = None


@dataclass
class CoreSpec:
    """A resolved access: the accessors walked and the resulting bit offset."""

    btf: Btf
    root_type_id: int
    kind: CoreReloKind
    raw_spec: list[int] = field(default_factory=list)
    spec: list[Accessor] = field(default_factory=list)
    bit_offset: int = 0

    def describe(self) -> str:
        """``[id] struct name.field[2].x`` (libbpf's spec notation, roughly)."""
        t = self.btf[self.root_type_id]
        head = f"[{self.root_type_id}] {t.kind.name.lower()} {t.name or '(anon)'}"
        if self.kind.is_type or not self.spec:
            return head
        if self.kind.is_enumval:
            return f"{head}::{self.spec[0].name}"
        path = ""
        for i, a in enumerate(self.spec):
            if a.name is not None:
                path += f".{a.name}"
            elif i > 0:
                path += f"[{a.idx}]"
            elif a.idx:
                path += f"[{a.idx}]"
        return f"{head}{path} (access {':'.join(map(str, self.raw_spec))}, bit offset {self.bit_offset})"


def _size(btf: Btf, type_id: int) -> int:
    try:
        return sizeof(btf, btf[type_id])
    except TypeKindError as err:
        raise CoreRelocationError(f"type [{type_id}] has no size: {err}") from None


def _skip(btf: Btf, type_id: int) -> tuple[Type, int]:
    t = skip_mods(btf, btf[type_id])
    return t, t.id


def _is_flex(btf: Btf, parent: Accessor | None, arr: Array) -> bool:
    if parent is None or parent.name is None or arr.nelems > 0:
        return False
    t = btf[parent.type_id]
    return isinstance(t, Composite) and parent.idx == len(t.members) - 1


def _member_bits(t: Composite, idx: int) -> tuple[int, int]:
    m = t.members[idx]
    return m.bit_offset, (m.bitfield_size if t.kind_flag else 0)


def parse_spec(btf: Btf, relo: CoreRelo) -> CoreSpec:
    """Turn a relocation's access string into a spec on the local BTF.

    :raises CoreRelocationError: malformed access string or one that does not fit the type.
    """
    s = relo.access_str
    spec = CoreSpec(btf, relo.type_id, relo.kind)
    if not s or s[0] == ":":
        raise CoreRelocationError(f"empty or malformed CO-RE access string {s!r}", relo)
    if relo.kind.is_type:
        if s != "0":
            raise CoreRelocationError(f"type relocation with access string {s!r} (must be '0')", relo)
        return spec
    try:
        raw = [int(x) for x in s.split(":")]
    except ValueError:
        raise CoreRelocationError(f"malformed CO-RE access string {s!r}", relo) from None
    if any(x < 0 for x in raw) or len(raw) > MAX_SPEC_LEN:
        raise CoreRelocationError(f"malformed CO-RE access string {s!r}", relo)
    spec.raw_spec = raw
    t, tid = _skip(btf, relo.type_id)
    first = Accessor(tid, raw[0])
    spec.spec.append(first)
    if relo.kind.is_enumval:
        if not isinstance(t, Enum) or len(raw) > 1 or raw[0] >= len(t.values):
            raise CoreRelocationError(f"enum relocation {s!r} does not fit {t!r}", relo)
        first.name = t.values[raw[0]].name
        return spec
    spec.bit_offset = raw[0] * _size(btf, tid) * 8
    for i in range(1, len(raw)):
        t, tid = _skip(btf, tid)
        idx = raw[i]
        if isinstance(t, Composite):
            if idx >= len(t.members):
                raise CoreRelocationError(f"access {s!r}: member #{idx} past the {len(t.members)} of {t!r}", relo)
            spec.bit_offset += t.members[idx].bit_offset
            m = t.members[idx]
            if m.name:
                spec.spec.append(Accessor(tid, idx, m.name))
            tid = m.type_id
        elif isinstance(t, Array):
            parent = spec.spec[-1] if spec.spec else None
            et, tid = _skip(btf, t.type_id)
            if not _is_flex(btf, parent, t) and idx >= t.nelems:
                raise CoreRelocationError(f"access {s!r}: index {idx} past the {t.nelems} elements", relo)
            spec.spec.append(Accessor(tid, idx))
            spec.bit_offset += idx * _size(btf, tid) * 8
        else:
            raise CoreRelocationError(f"access {s!r} (step {i}) reaches {t!r}, which has no members or elements", relo)
    return spec


# -------------------------------------------------------- compatibility
def _fields_compat(lb: Btf, lid: int, tb: Btf, tid: int) -> bool:
    for _ in range(_MAX_DEPTH):
        lt, lid = _skip(lb, lid)
        tt, tid = _skip(tb, tid)
        if isinstance(lt, Composite) and isinstance(tt, Composite):
            return True
        if _core_kind(lt.kind) != _core_kind(tt.kind):
            return False
        k = lt.kind
        if k in (BtfKind.PTR, BtfKind.FLOAT):
            return True
        if k in (BtfKind.FWD, BtfKind.ENUM, BtfKind.ENUM64):
            ln, tn = essential_name(lt.name), essential_name(tt.name)
            return not ln or not tn or ln == tn
        # the core kinds are equal: lt's class is tt's
        if isinstance(lt, Int) and isinstance(tt, Int):
            return lt.bits_offset == 0 and tt.bits_offset == 0
        if isinstance(lt, Array) and isinstance(tt, Array):
            lid, tid = lt.type_id, tt.type_id
            continue
        return False
    return False


def types_are_compat(lb: Btf, lid: int, tb: Btf, tid: int, level: int = _MAX_DEPTH) -> bool:
    """libbpf's type compatibility for TYPE_* relocations (names already matched).

    :raises CoreRelocationError: nesting too deep.
    """
    if _core_kind(lb.kind_of(lid)) != _core_kind(tb.kind_of(tid)):
        return False
    for _ in range(_MAX_DEPTH):
        lt, lid = _skip(lb, lid)
        tt, tid = _skip(tb, tid)
        if _core_kind(lt.kind) != _core_kind(tt.kind):
            return False
        k = lt.kind
        if k in (BtfKind.UNKN, BtfKind.STRUCT, BtfKind.UNION, BtfKind.ENUM, BtfKind.FWD, BtfKind.ENUM64):
            return True
        # the core kinds are equal: lt's class is tt's
        if isinstance(lt, Int) and isinstance(tt, Int):
            return lt.bits_offset == 0 and tt.bits_offset == 0
        if isinstance(lt, Ptr | Array) and isinstance(tt, Ptr | Array):
            lid, tid = lt.type_id, tt.type_id
            continue
        if k == BtfKind.FUNC_PROTO:
            assert isinstance(lt, FuncProto) and isinstance(tt, FuncProto)
            if len(lt.params) != len(tt.params):
                return False
            for lp, tp in zip(lt.params, tt.params, strict=True):
                if level <= 0:
                    raise CoreRelocationError("CO-RE type compatibility check nests too deeply")
                if not types_are_compat(lb, skip_mods(lb, lb[lp.type_id]).id, tb, skip_mods(tb, tb[tp.type_id]).id, level - 1):
                    return False
            lid, tid = lt.return_type_id, tt.return_type_id
            continue
        return False
    raise CoreRelocationError("CO-RE type compatibility check nests too deeply")


def _names_match(ln: str, tn: str) -> bool:
    if not tn:
        return not ln
    return essential_name(ln) == essential_name(tn)


def types_match(lb: Btf, lid: int, tb: Btf, tid: int, behind_ptr: bool = False, level: int = _MAX_DEPTH) -> bool:
    """libbpf's TYPE_MATCHES relation (stricter than compatibility: members, enumerators, sizes).

    :raises CoreRelocationError: nesting too deep.
    """
    if level <= 0:
        raise CoreRelocationError("CO-RE type match nests too deeply")
    for _ in range(_MAX_DEPTH):
        lt, lid = _skip(lb, lid)
        tt, tid = _skip(tb, tid)
        if not _names_match(lt.name, tt.name):
            return False
        lk, tk = lt.kind, tt.kind
        if lk == BtfKind.UNKN:
            return tk == lk
        if lk == BtfKind.FWD:
            assert isinstance(lt, Fwd)
            if isinstance(tt, Fwd):
                return lt.is_union == tt.is_union
            if behind_ptr:
                return (tk == BtfKind.STRUCT and not lt.is_union) or (tk == BtfKind.UNION and lt.is_union)
            return False
        if isinstance(lt, Enum):  # ENUM and ENUM64
            if not isinstance(tt, Enum) or lt.size != tt.size or len(lt.values) > len(tt.values):
                return False
            return all(any(_names_match(lv.name, tv.name) for tv in tt.values) for lv in lt.values)
        if lk in (BtfKind.STRUCT, BtfKind.UNION):
            if behind_ptr:
                if lk == tk:
                    return True
                return isinstance(tt, Fwd) and (lk == BtfKind.UNION) == tt.is_union
            if lk != tk:
                return False
            assert isinstance(lt, Composite) and isinstance(tt, Composite)
            if len(lt.members) > len(tt.members):
                return False
            for lm in lt.members:
                if not any(
                    _names_match(lm.name, tm.name) and types_match(lb, lm.type_id, tb, tm.type_id, behind_ptr, level - 1) for tm in tt.members
                ):
                    return False
            return True
        if isinstance(lt, Int):
            if not isinstance(tt, Int):
                return False
            return lt.size == tt.size and (lt.encoding & BtfIntEncoding.SIGNED) == (tt.encoding & BtfIntEncoding.SIGNED)
        if isinstance(lt, Ptr):
            if not isinstance(tt, Ptr):
                return False
            behind_ptr = True
            lid, tid = lt.type_id, tt.type_id
            continue
        if isinstance(lt, Array):
            if not isinstance(tt, Array) or lt.nelems != tt.nelems:
                return False
            lid, tid = lt.type_id, tt.type_id
            continue
        if isinstance(lt, FuncProto):
            if not isinstance(tt, FuncProto) or len(lt.params) != len(tt.params):
                return False
            for lp, tp in zip(lt.params, tt.params, strict=True):
                if not types_match(lb, lp.type_id, tb, tp.type_id, behind_ptr, level - 1):
                    return False
            lid, tid = lt.return_type_id, tt.return_type_id
            continue
        return False
    raise CoreRelocationError("CO-RE type match nests too deeply")


# -------------------------------------------------------------- matching
def _match_member(lb: Btf, lacc: Accessor, tb: Btf, tid: int, spec: CoreSpec) -> tuple[bool, int]:
    tt, tid = _skip(tb, tid)
    if not isinstance(tt, Composite):
        return False, tid
    lt = lb[lacc.type_id]
    assert isinstance(lt, Composite)
    lm = lt.members[lacc.idx]
    for i, m in enumerate(tt.members):
        if len(spec.raw_spec) >= MAX_SPEC_LEN:
            raise CoreRelocationError("CO-RE access nests too deeply in the target")
        spec.bit_offset += m.bit_offset
        spec.raw_spec.append(i)
        if not m.name:
            found, nxt = _match_member(lb, lacc, tb, m.type_id, spec)
            if found:
                return True, nxt
        elif m.name == lm.name:
            spec.spec.append(Accessor(tid, i, m.name))
            if _fields_compat(lb, lm.type_id, tb, m.type_id):
                return True, m.type_id
            spec.spec.pop()
            return False, tid
        spec.bit_offset -= m.bit_offset
        spec.raw_spec.pop()
    return False, tid


def spec_match(local: CoreSpec, tb: Btf, tid: int) -> CoreSpec | None:
    """Match a local spec against target type ``tid``; the target spec, or ``None``.

    :raises CoreRelocationError: nesting too deep, or a target type without size.
    """
    ts = CoreSpec(tb, tid, local.kind)
    kind = local.kind
    if kind.is_type:
        if kind == CoreReloKind.TYPE_MATCHES:
            ok = types_match(local.btf, local.root_type_id, tb, tid)
        else:
            ok = types_are_compat(local.btf, local.root_type_id, tb, tid)
        return ts if ok else None
    lacc = local.spec[0]
    if kind.is_enumval:
        tt, tid = _skip(tb, tid)
        if not isinstance(tt, Enum):
            return None
        want = essential_name(lacc.name or "")
        for i, v in enumerate(tt.values):
            if essential_name(v.name) == want:
                ts.spec.append(Accessor(tid, i, v.name))
                ts.raw_spec.append(i)
                return ts
        return None
    for i, la in enumerate(local.spec):
        tt, tid = _skip(tb, tid)
        if la.name is not None:
            found, tid = _match_member(local.btf, la, tb, tid, ts)
            if not found:
                return None
        else:
            if i > 0:
                if not isinstance(tt, Array):
                    return None
                parent = ts.spec[-1] if ts.spec else None
                if not _is_flex(tb, parent, tt) and la.idx >= tt.nelems:
                    return None
                _, tid = _skip(tb, tt.type_id)
            if len(ts.raw_spec) >= MAX_SPEC_LEN:
                raise CoreRelocationError("CO-RE access nests too deeply in the target")
            ts.spec.append(Accessor(tid, la.idx))
            ts.raw_spec.append(la.idx)
            ts.bit_offset += la.idx * _size(tb, tid) * 8
    return ts


# ---------------------------------------------------------- computation
@dataclass(frozen=True)
class CoreResult:
    """What a relocation resolves to.

    :ivar orig_val: the value the compiler put in the instruction (from the local BTF).
    :ivar new_val: the value to patch in.
    :ivar poison: the relocation cannot be satisfied; poison the instruction.
    :ivar validate: check the instruction holds ``orig_val`` before patching.
    :ivar fail_memsz_adjust: a load/store would need an unsafe size change (poison LDX/ST/STX).
    :ivar orig_sz: memory access size in the local type (field byte offset relocations).
    :ivar new_sz: memory access size in the target type.
    :ivar target: the matched target spec (``None`` when nothing matched).
    :ivar relo: the relocation record.
    :ivar reason: why it is poisoned (for messages), else ``""``.
    """

    orig_val: int
    new_val: int
    poison: bool = False
    validate: bool = True
    fail_memsz_adjust: bool = False
    orig_sz: int = 0
    new_sz: int = 0
    orig_type_id: int = 0
    new_type_id: int = 0
    target: CoreSpec | None = None
    relo: CoreRelo | None = None
    reason: str = ""


class _Poison(Exception):
    pass


def _elem_size(btf: Btf, type_id: int) -> tuple[int, int]:
    t, tid = _skip(btf, type_id)
    while isinstance(t, Array):
        t, tid = _skip(btf, t.type_id)
    return _size(btf, tid), tid


def _calc_field(relo: CoreRelo, spec: CoreSpec | None) -> tuple[int, int, int, bool]:
    """(value, mem size, type id, validate) for a field relocation, per the spec (or poison)."""
    kind = relo.kind
    if kind == CoreReloKind.FIELD_EXISTS:
        return (1 if spec is not None else 0), 0, 0, True
    if spec is None:
        raise _Poison
    btf = spec.btf
    acc = spec.spec[-1]
    if acc.name is None:
        if kind == CoreReloKind.FIELD_BYTE_OFFSET:
            sz, _ = _elem_size(btf, acc.type_id)
            return spec.bit_offset // 8, sz, acc.type_id, True
        if kind == CoreReloKind.FIELD_BYTE_SIZE:
            return _size(btf, acc.type_id), 0, 0, True
        raise CoreRelocationError(f"{kind.spelling} relocation cannot apply to an array element access", relo)
    t = btf[acc.type_id]
    assert isinstance(t, Composite)
    m = t.members[acc.idx]
    mt, field_tid = _skip(btf, m.type_id)
    bit_off = spec.bit_offset
    bit_sz = m.bitfield_size if t.kind_flag else 0
    bitfield = bit_sz > 0
    if bitfield:
        if not isinstance(mt, Int | Enum):
            raise CoreRelocationError(f"bitfield {m.name!r} is a {mt.kind.name.lower()}, not an integer or enum", relo)
        byte_sz = mt.size
        byte_off = bit_off // 8 // byte_sz * byte_sz
        while bit_off + bit_sz - byte_off * 8 > byte_sz * 8:
            if byte_sz >= 8:
                raise CoreRelocationError(f"bitfield {m.name!r} cannot be read with one 64-bit load", relo)
            byte_sz *= 2
            byte_off = bit_off // 8 // byte_sz * byte_sz
    else:
        byte_sz = _size(btf, field_tid)
        byte_off = bit_off // 8
        bit_sz = byte_sz * 8
    validate = not bitfield
    if kind == CoreReloKind.FIELD_BYTE_OFFSET:
        if not bitfield:
            sz, _ = _elem_size(btf, field_tid)
            return byte_off, sz, field_tid, validate
        return byte_off, 0, 0, validate
    if kind == CoreReloKind.FIELD_BYTE_SIZE:
        return byte_sz, 0, 0, validate
    if kind == CoreReloKind.FIELD_SIGNED:
        signed = (isinstance(mt, Enum) and mt.signed) or (isinstance(mt, Int) and bool(mt.encoding & BtfIntEncoding.SIGNED))
        return int(signed), 0, 0, True
    if kind == CoreReloKind.FIELD_LSHIFT_U64:
        return 64 - (bit_off + bit_sz - byte_off * 8), 0, 0, validate
    if kind == CoreReloKind.FIELD_RSHIFT_U64:
        return 64 - bit_sz, 0, 0, True
    raise CoreRelocationError(f"unknown field relocation kind {kind}", relo)


def _calc_type(relo: CoreRelo, spec: CoreSpec | None) -> int:
    if spec is None:
        return 0
    if relo.kind == CoreReloKind.TYPE_ID_TARGET:
        return spec.root_type_id
    if relo.kind in (CoreReloKind.TYPE_EXISTS, CoreReloKind.TYPE_MATCHES):
        return 1
    if relo.kind == CoreReloKind.TYPE_SIZE:
        return _size(spec.btf, spec.root_type_id)
    raise CoreRelocationError(f"unexpected type relocation kind {relo.kind}", relo)


def _calc_enum(relo: CoreRelo, spec: CoreSpec | None) -> int:
    if relo.kind == CoreReloKind.ENUMVAL_EXISTS:
        return 1 if spec is not None else 0
    if spec is None:
        raise _Poison
    t = spec.btf[spec.spec[0].type_id]
    assert isinstance(t, Enum)
    v = t.values[spec.spec[0].idx].value
    return v & 0xFFFFFFFFFFFFFFFF


def _calc(relo: CoreRelo, local: CoreSpec, target: CoreSpec | None) -> CoreResult:
    kind = relo.kind
    try:
        if kind.is_field:
            ov, osz, otid, validate = _calc_field(relo, local)
            try:
                nv, nsz, ntid, _ = _calc_field(relo, target)
            except _Poison:
                return CoreResult(ov, 0, poison=True, validate=validate, relo=relo)
            fail = False
            if osz != nsz:
                assert target is not None  # only FIELD_EXISTS goes without a target, and it has no sizes
                ot, nt = local.btf[otid], target.btf[ntid]
                safe = (ot.kind == BtfKind.PTR and nt.kind == BtfKind.PTR) or (
                    isinstance(ot, Int) and isinstance(nt, Int) and ot.encoding != BtfIntEncoding.SIGNED and nt.encoding != BtfIntEncoding.SIGNED
                )
                fail = not safe
            return CoreResult(ov, nv, False, validate, fail, osz, nsz, otid, ntid, target, relo)
        if kind.is_type:
            ov = _calc_type(relo, local)
            nv = _calc_type(relo, target)
            return CoreResult(ov, nv, validate=kind != CoreReloKind.TYPE_ID_TARGET, target=target, relo=relo)
        ov = _calc_enum(relo, local)
        try:
            nv = _calc_enum(relo, target)
        except _Poison:
            return CoreResult(ov, 0, poison=True, relo=relo)
        return CoreResult(ov, nv, target=target, relo=relo)
    except _Poison:
        raise CoreRelocationError("the local spec itself cannot be evaluated", relo) from None


# ------------------------------------------------------------ candidates
def _essential_index(btf: Btf) -> dict[str, list[int]]:
    cached = getattr(btf, "_core_flavored", None)
    if cached is not None:
        return cached
    idx: dict[str, list[int]] = {}
    for key, ids in btf._name_index().items():
        if b"___" not in key:
            continue
        name = key.decode("utf-8", "surrogateescape")
        ess = essential_name(name)
        if ess != name:
            idx.setdefault(ess, []).extend([ids] if isinstance(ids, int) else ids)
    btf._core_flavored = idx
    return idx


def _own_candidates(local_t: Type, ess: str, target: Btf) -> list[int]:
    ids = set()
    hit = target._name_index().get(ess.encode("utf-8", "surrogateescape"))
    if hit is not None:
        ids.update([hit] if isinstance(hit, int) else hit)
    ids.update(_essential_index(target).get(ess, ()))
    want = _core_kind(local_t.kind)
    return sorted(i for i in ids if _core_kind(target.kind_of(i)) == want)


def find_candidates(local: Btf, local_id: int, targets: Sequence[Btf]) -> list[tuple[Btf, int]]:
    """Target types a local type may relocate to: the first target (vmlinux) first, the others only if it has none.

    :raises CoreRelocationError: the local type is anonymous.
    """
    lt = local[local_id]
    if not lt.name:
        raise CoreRelocationError(f"CO-RE relocation of anonymous type [{local_id}] is not supported")
    ess = essential_name(lt.name)
    out: list[tuple[Btf, int]] = []
    for i, tgt in enumerate(targets):
        if i > 0 and out:
            break
        out.extend((tgt, c) for c in _own_candidates(lt, ess, tgt))
    return out


def resolve(relo: CoreRelo, local: Btf, targets: Btf | Sequence[Btf], poison: bool = True) -> CoreResult:
    """Resolve one CO-RE relocation.

    :param local: the object's BTF (``relo.type_id`` refers to it).
    :param targets: the target BTF (vmlinux), or vmlinux followed by module BTFs.
    :param poison: return a poisoned result when unsatisfiable (libbpf's
        behaviour); with ``False`` raise :class:`CoreRelocationError` instead.
    :raises CoreRelocationError: malformed relocation, or (``poison=False``) unsatisfiable.
    :raises CoreAmbiguityError: candidates disagree.
    """
    tlist = [targets] if not isinstance(targets, Sequence) else list(targets)
    spec = parse_spec(local, relo)
    if relo.kind == CoreReloKind.TYPE_ID_LOCAL:
        return CoreResult(relo.type_id, relo.type_id, validate=False, relo=relo)
    cands = find_candidates(local, relo.type_id, tlist)
    best: CoreResult | None = None
    best_spec: CoreSpec | None = None
    for tb, cid in cands:
        ts = spec_match(spec, tb, cid)
        if ts is None:
            continue
        res = _calc(relo, spec, ts)
        if best is None:
            best, best_spec = res, ts
        elif best_spec is not None and ts.bit_offset != best_spec.bit_offset:
            raise CoreAmbiguityError(
                f"{spec.describe()}: candidates [{best_spec.root_type_id}] and [{ts.root_type_id}] put the field at "
                f"different bit offsets ({best_spec.bit_offset} != {ts.bit_offset}); use a ___flavor type to pick one",
                relo,
            )
        elif res.poison != best.poison or res.new_val != best.new_val:
            raise CoreAmbiguityError(
                f"{spec.describe()}: candidates [{best_spec.root_type_id if best_spec else '?'}] and [{ts.root_type_id}] "
                f"give different {relo.kind.spelling} values ({best.new_val} != {res.new_val})",
                relo,
            )
    if best is None:
        best = _calc(relo, spec, None)
        if best.poison:
            names = ", ".join(t.source or "target" for t in tlist)
            why = "no type of that name" if not cands else f"{len(cands)} candidate(s), none has this field/value"
            best = replace(best, reason=f"{relo.kind.spelling} of {spec.describe()}: {why} in {names}")
    if best.poison and not poison:
        raise CoreRelocationError(f"CO-RE relocation cannot be satisfied: {best.reason}", relo)
    return best


# --------------------------------------------------------------- patching
_SIZE_BITS = {8: 0x18, 4: 0x00, 2: 0x08, 1: 0x10}
_BYTES_OF_SIZE = {v: k for k, v in _SIZE_BITS.items()}


def patch_insn(insn: Insn, res: CoreResult) -> Insn:
    """The instruction with ``res`` applied (as libbpf patches it).

    ALU/ALU64 with an immediate get ``imm``; LDX/ST/STX get ``off`` (and a
    new access size when the field's size changed safely); ``lddw`` gets its
    64-bit ``imm``. A poisoned result (or an unsafe size change on a load or
    store) gives ``call 0xbad2310``.

    :raises CoreRelocationError: the instruction is not of a patchable form,
        or does not hold the value the compiler should have put there.
    """
    poison = Insn(0x85, 0, 0, 0, POISON_IMM)
    if res.poison:
        return poison
    cls = insn.opcode & 0x07
    orig, new = res.orig_val, res.new_val
    if cls in (0x04, 0x07):  # ALU, ALU64
        if insn.opcode & 0x08:
            raise CoreRelocationError(f"cannot relocate register-source ALU instruction {insn!r}", res.relo)
        if res.validate and (insn.imm & 0xFFFFFFFF) != (orig & 0xFFFFFFFF):
            raise CoreRelocationError(f"instruction {insn!r} has imm {insn.imm}, expected {orig} (object and BTF disagree)", res.relo)
        val = new & 0xFFFFFFFF
        return insn.replace(imm=val - (1 << 32) if val & 0x80000000 else val)
    if cls in (0x01, 0x02, 0x03):  # LDX, ST, STX
        if res.validate and insn.off != orig:
            raise CoreRelocationError(f"instruction {insn!r} has offset {insn.off}, expected {orig}", res.relo)
        if new > 0x7FFF:
            raise CoreRelocationError(f"relocated offset {new} does not fit a 16-bit instruction offset", res.relo)
        if res.fail_memsz_adjust:
            return poison
        opcode = insn.opcode
        if res.new_sz != res.orig_sz:
            have = _BYTES_OF_SIZE.get(opcode & 0x18)
            if have != res.orig_sz:
                raise CoreRelocationError(f"instruction {insn!r} accesses {have} bytes, expected {res.orig_sz}", res.relo)
            if res.new_sz not in _SIZE_BITS:
                raise CoreRelocationError(f"relocated field size {res.new_sz} is no load/store size", res.relo)
            opcode = (opcode & ~0x18) | _SIZE_BITS[res.new_sz]
        return insn.replace(opcode=opcode, off=new)
    if insn.opcode == 0x18:  # lddw
        if insn.src != 0 or insn.off != 0:
            raise CoreRelocationError(f"lddw {insn!r} has an unexpected form for a CO-RE relocation", res.relo)
        if res.validate and (insn.imm & 0xFFFFFFFFFFFFFFFF) != (orig & 0xFFFFFFFFFFFFFFFF):
            raise CoreRelocationError(f"lddw {insn!r} holds {insn.imm}, expected {orig}", res.relo)
        return insn.replace(imm=new & 0xFFFFFFFFFFFFFFFF)
    raise CoreRelocationError(f"cannot relocate instruction {insn!r} (opcode {insn.opcode:#x})", res.relo)
