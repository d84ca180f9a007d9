"""CO-RE relocation resolution on synthetic BTF (every kind, flavors, ambiguity, poisoning) and instruction patching."""

from __future__ import annotations

import pytest

from bpfmux.btf import Btf
from bpfmux.btf.builder import BtfBuilder
from bpfmux.btf.core import (
    POISON_IMM,
    CoreAmbiguityError,
    CoreRelocationError,
    essential_name,
    find_candidates,
    patch_insn,
    resolve,
)
from bpfmux.btf.ext import CoreRelo
from bpfmux.btf.ext import CoreReloKind as K
from bpfmux.isa.insn import Insn


def local_btf() -> Btf:
    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    u32 = b.int("unsigned int", 4)
    ch = b.int("char", 1, signed=True)
    inner = b.struct("inner___x", [("v", i32)])
    b.struct(
        "thing___local",
        [("b", i32, 0), ("a", u32, 32), ("flag", u32, 64, 1), ("mode", u32, 65, 3), ("name", b.array(ch, 8), 96), ("in", inner, 160), ("gone", i32, 192)],
        size=28,
    )
    b.enum("color___local", {"GREEN": 5, "RED": 4})
    b.enum("wide___local", {"W": 1}, size=8)
    b.struct("nowhere", [("x", i32)])
    b.struct("fwdmatch___l", [("p", b.ptr(b.fwd("opaque")))])
    return Btf.parse(b.write(), source="local")


def target_btf() -> Btf:
    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    u32 = b.int("unsigned int", 4)
    u64 = b.int("long unsigned int", 8)
    ch = b.int("char", 1, signed=True)
    inner = b.struct("inner", [("pad", u64), ("v", i32)])
    anon = b.union("", [("a", u32), ("alias", i32)])
    b.struct(
        "thing",
        [("x", u64, 0), ("", anon, 64), ("b", i32, 96), ("mode", u32, 128 + 5, 3), ("flag", u32, 128 + 8, 1), ("name", b.array(ch, 16), 192), ("in", inner, 320)],
        size=56,
    )
    b.enum("color", {"RED": 1, "GREEN": 2, "BLUE": 3})
    b.enum("wide", {"W": 1 << 40}, size=8)
    b.struct("opaque", [("z", i32)])
    b.struct("fwdmatch", [("p", b.ptr(b.btf.find_ids("opaque")[0]))])
    return Btf.parse(b.write(), source="target")


L, T = local_btf(), target_btf()


def relo(type_name: str, access: str, kind: K, btf: Btf = L, insn_off: int = 0) -> CoreRelo:
    return CoreRelo(insn_off, btf.find(type_name).id, access, kind)


def test_essential_name() -> None:
    assert essential_name("task_struct___v1") == "task_struct"
    assert essential_name("a___b___c") == "a___b"
    assert essential_name("___x") == "___x"
    assert essential_name("x____y") == "x____y"
    assert essential_name("plain") == "plain"


def test_candidates_strip_flavors_and_prefer_the_first_target() -> None:
    cands = find_candidates(L, L.find("thing___local").id, [T])
    assert [(b.source, b[i].name) for b, i in cands] == [("target", "thing")]
    other = BtfBuilder()
    other.struct("thing", [("zzz", other.int("int", 4))])
    mod = Btf.parse(other.write(), source="module")
    assert [b.source for b, _ in find_candidates(L, L.find("thing___local").id, [T, mod])] == ["target"]
    assert [b.source for b, _ in find_candidates(L, L.find("nowhere").id, [T, mod])] == []


@pytest.mark.parametrize(
    ("access", "kind", "orig", "new"),
    [
        ("0:0", K.FIELD_BYTE_OFFSET, 0, 12),
        ("0:1", K.FIELD_BYTE_OFFSET, 4, 8),  # found inside the target's anonymous union
        ("0:1", K.FIELD_BYTE_SIZE, 4, 4),
        ("0:1", K.FIELD_SIGNED, 0, 0),
        ("0:0", K.FIELD_SIGNED, 1, 1),
        ("0:1", K.FIELD_EXISTS, 1, 1),
        ("0:6", K.FIELD_EXISTS, 1, 0),
        ("0:4:3", K.FIELD_BYTE_OFFSET, 15, 27),
        ("0:4", K.FIELD_BYTE_SIZE, 8, 16),
        ("0:5:0", K.FIELD_BYTE_OFFSET, 20, 48),
        ("1:0", K.FIELD_BYTE_OFFSET, 28 + 0, 56 + 12),
        # bitfields: flag at bit 64 (local) / 136 (target), mode at 65 / 133
        ("0:2", K.FIELD_BYTE_OFFSET, 8, 16),
        ("0:2", K.FIELD_BYTE_SIZE, 4, 4),
        ("0:2", K.FIELD_LSHIFT_U64, 63, 55),
        ("0:2", K.FIELD_RSHIFT_U64, 63, 63),
        ("0:3", K.FIELD_BYTE_OFFSET, 8, 16),
        ("0:3", K.FIELD_LSHIFT_U64, 60, 56),
        ("0:3", K.FIELD_RSHIFT_U64, 61, 61),
    ],
)
def test_field_relocations(access: str, kind: K, orig: int, new: int) -> None:
    res = resolve(relo("thing___local", access, kind), L, T)
    assert (res.orig_val, res.new_val, res.poison) == (orig, new, False)


def test_type_and_enum_relocations() -> None:
    tid = T.find("thing").id
    assert resolve(relo("thing___local", "0", K.TYPE_ID_TARGET), L, T).new_val == tid
    r = resolve(relo("thing___local", "0", K.TYPE_ID_LOCAL), L, T)
    assert r.new_val == r.orig_val == L.find("thing___local").id and not r.validate
    assert resolve(relo("thing___local", "0", K.TYPE_SIZE), L, T).new_val == 56
    assert resolve(relo("thing___local", "0", K.TYPE_EXISTS), L, T).new_val == 1
    assert resolve(relo("nowhere", "0", K.TYPE_EXISTS), L, T).new_val == 0
    assert resolve(relo("nowhere", "0", K.TYPE_SIZE), L, T).new_val == 0
    assert resolve(relo("color___local", "1", K.ENUMVAL_VALUE), L, T).new_val == 1  # RED
    assert resolve(relo("color___local", "0", K.ENUMVAL_VALUE), L, T).orig_val == 5
    assert resolve(relo("color___local", "0", K.ENUMVAL_EXISTS), L, T).new_val == 1
    assert resolve(relo("wide___local", "0", K.ENUMVAL_VALUE), L, T).new_val == 1 << 40
    # type matches: pointer to a forward matches pointer to the struct; extra member names do not
    assert resolve(relo("fwdmatch___l", "0", K.TYPE_MATCHES), L, T).new_val == 1
    assert resolve(relo("thing___local", "0", K.TYPE_MATCHES), L, T).new_val == 0


def test_unsatisfiable_relocations_poison_or_raise() -> None:
    r = relo("thing___local", "0:6", K.FIELD_BYTE_OFFSET)
    res = resolve(r, L, T)
    assert res.poison and "thing___local.gone" in res.reason and "none has this field" in res.reason
    with pytest.raises(CoreRelocationError, match="cannot be satisfied"):
        resolve(r, L, T, poison=False)
    assert resolve(relo("nowhere", "0:0", K.FIELD_BYTE_OFFSET), L, T).poison
    assert patch_insn(Insn(0x07, 1, 0, 0, 24), res) == Insn(0x85, 0, 0, 0, POISON_IMM)


def test_ambiguous_candidates_are_an_error() -> None:
    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    b.struct("thing", [("b", i32, 0)], size=4)
    b.struct("thing___2", [("x", i32, 0), ("b", i32, 32)], size=8)
    two = Btf.parse(b.write(), source="two")
    with pytest.raises(CoreAmbiguityError, match="different bit offsets"):
        resolve(relo("thing___local", "0:0", K.FIELD_BYTE_OFFSET), L, two)
    # libbpf checks the bit offset for every field kind, existence included
    with pytest.raises(CoreAmbiguityError):
        resolve(relo("thing___local", "0:0", K.FIELD_EXISTS), L, two)
    # agreeing candidates are fine
    assert resolve(relo("thing___local", "0", K.TYPE_EXISTS), L, two).new_val == 1


def test_malformed_relocations() -> None:
    for access, kind in [("", K.FIELD_BYTE_OFFSET), ("0:99", K.FIELD_BYTE_OFFSET), ("0:x", K.FIELD_BYTE_OFFSET), ("1", K.TYPE_SIZE), ("7", K.ENUMVAL_VALUE)]:
        with pytest.raises(CoreRelocationError):
            resolve(relo("thing___local" if not kind.is_enumval else "color___local", access, kind), L, T)


def test_patch_insn_forms() -> None:
    res = resolve(relo("thing___local", "0:1", K.FIELD_BYTE_OFFSET), L, T)
    assert patch_insn(Insn(0x07, 1, 0, 0, 4), res).imm == 8  # r1 += 4
    assert patch_insn(Insn(0x61, 2, 1, 4, 0), res).off == 8  # r2 = *(u32 *)(r1 + 4)
    with pytest.raises(CoreRelocationError, match="expected 4"):
        patch_insn(Insn(0x07, 1, 0, 0, 5), res)
    with pytest.raises(CoreRelocationError):
        patch_insn(Insn(0x0F, 1, 2, 0, 0), res)  # register source
    wide = resolve(relo("wide___local", "0", K.ENUMVAL_VALUE), L, T)
    assert patch_insn(Insn(0x18, 1, 0, 0, 1), wide).imm == 1 << 40
    # a size change that is safe for unsigned ints rewrites the access size
    b = BtfBuilder()
    b.struct("thing", [("a", b.int("long unsigned int", 8), 0)], size=8)
    grown = resolve(relo("thing___local", "0:1", K.FIELD_BYTE_OFFSET), L, Btf.parse(b.write()))
    assert (grown.orig_sz, grown.new_sz, grown.fail_memsz_adjust) == (4, 8, False)
    assert patch_insn(Insn(0x61, 2, 1, 4, 0), grown) == Insn(0x79, 2, 1, 0, 0)
    # a signed field changing size poisons loads
    b2 = BtfBuilder()
    b2.struct("thing", [("b", b2.int("long", 8, signed=True), 0)], size=8)
    bad = resolve(relo("thing___local", "0:0", K.FIELD_BYTE_OFFSET), L, Btf.parse(b2.write()))
    assert bad.fail_memsz_adjust
    assert patch_insn(Insn(0x61, 2, 1, 0, 0), bad).imm == POISON_IMM
