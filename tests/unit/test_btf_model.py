"""BTF type model, parser and lookups: synthetic BTF and the machine's vmlinux (checked against bpftool's JSON)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess

import pytest

from bpfmux.btf import Btf, TypeKindError
from bpfmux.btf.builder import BtfBuilder
from bpfmux.btf.types import Composite, Enum, Func, FuncProto, Int, Struct
from bpfmux.btf.writer import write
from bpfmux.errors import NotFoundError, ParseError
from bpfmux.uapi import BtfKind, FuncLinkage

VMLINUX = "/sys/kernel/btf/vmlinux"
needs_vmlinux = pytest.mark.skipif(not os.path.exists(VMLINUX), reason="kernel without BTF: /sys/kernel/btf/vmlinux missing")
needs_bpftool = pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed (.ci/install installs it)")


def sample() -> BtfBuilder:
    """A BTF holding every kind, bitfields of both encodings, an anonymous union, prototypes."""
    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    u8 = b.int("unsigned char", 1)
    u64 = b.int("long long unsigned int", 8)
    ch = b.int("char", 1, signed=True, char=True)
    bl = b.int("_Bool", 1, bool_=True)
    u32b = b.btf.add(Int("unsigned int", 4, 0, 3, 0))  # legacy bitfield int: 3 bits
    flt = b.float("double", 8)
    inner = b.union("", [("x", i32), ("y", u64)])
    s = b.struct(
        "thing",
        [
            ("a", u8, 0),
            ("b", u64, 64),
            ("", inner, 128),
            ("flags", i32, 192, 3),
            ("more", i32, 195, 5),
            ("name", b.array(ch, 16), 224),
            ("ok", bl, 352),
        ],
        size=48,
    )
    legacy = b.struct("legacy", [("lo", u32b, 0), ("hi", u32b, 3)], size=4)
    tdef = b.typedef("thing_t", s)
    cs = b.const(tdef)
    vs = b.volatile(cs)
    pt = b.ptr(vs)
    b.restrict(pt)
    b.type_tag("user", pt)
    e = b.enum("color", {"RED": 0, "GREEN": 1, "NEG": -1})
    b.enum("big", {"HUGE": 1 << 40, "ONE": 1}, size=8)
    b.fwd("opaque")
    b.fwd("uopaque", union=True)
    proto = b.func_proto(i32, [("t", pt), ("v", s), ("c", e)])
    f = b.func("do_thing", proto, FuncLinkage.GLOBAL)
    b.decl_tag("tagged", f, 1)
    b.func("printf_like", b.func_proto(i32, [("fmt", b.ptr(ch))], variadic=True))
    v = b.var("global_thing", s)
    b.datasec(".data", [(v, 0, 48)])
    b.packed = b.struct("packed", [("c", u8, 0), ("l", u64, 8)], size=9)  # type: ignore[attr-defined]
    _ = (flt, legacy)
    return b


def test_roundtrip_every_kind_little_and_big_endian() -> None:
    b = sample()
    for order in ("little", "big"):
        blob = b.write(order)
        got = Btf.parse(blob, source=order)
        assert got.byteorder == order
        assert len(got) == len(b.btf)
        for t in b.btf:
            assert got[t.id] == t, (order, t)
        assert write(got) == b.write("little")
    assert {t.kind for t in b.btf} == set(BtfKind) - {BtfKind.UNKN}


def test_lookups_by_name_kind_and_c_tag() -> None:
    btf = Btf.parse(sample().write())
    assert btf.find("thing").kind == BtfKind.STRUCT
    assert btf.find("struct thing") is btf.find("thing", "struct")
    assert btf.find("color", BtfKind.ENUM).value_of("NEG") == -1
    assert btf.find("big", "enum").kind == BtfKind.ENUM64
    assert btf.find("enum big").value_of("HUGE") == 1 << 40
    assert [t.kind for t in btf.find_all("opaque")] == [BtfKind.FWD]
    assert btf.find("uopaque").is_union
    with pytest.raises(NotFoundError) as err:
        btf.find("thingy")
    assert "thing" in str(err.value)
    with pytest.raises(KeyError):
        btf.find("thing", "union")
    with pytest.raises(NotFoundError):
        btf[len(btf)]
    with pytest.raises(NotFoundError):
        btf[-1]
    assert btf.get(10_000) is None
    assert btf[0].kind == BtfKind.UNKN


def test_resolve_sizeof_alignof() -> None:
    btf = Btf.parse(sample().write())
    r = btf.find("user", BtfKind.TYPE_TAG)
    ptr = btf.resolve(r)
    assert ptr.kind == BtfKind.PTR
    assert btf.resolve(ptr.type).name == "thing"
    assert btf.sizeof("thing_t") == 48 and btf.alignof("thing_t") == 8
    assert btf.sizeof(ptr) == 8
    assert btf.alignof("packed") == 1
    arr = btf.member("thing", "name").type
    assert btf.sizeof(arr) == 16 and btf.alignof(arr) == 1
    for bad in ("opaque", "do_thing"):
        with pytest.raises(TypeKindError):
            btf.sizeof(bad)
    with pytest.raises(TypeKindError):
        btf.sizeof(0)


def test_fields_both_bitfield_encodings_and_anonymous_members() -> None:
    btf = Btf.parse(sample().write())
    flat = {f.name: (f.bit_offset, f.bitfield_size) for f in btf.fields("thing", flatten=True)}
    assert flat == {"a": (0, 0), "b": (64, 0), "x": (128, 0), "y": (128, 0), "flags": (192, 3), "more": (195, 5), "name": (224, 0), "ok": (352, 0)}
    nested = [f.name for f in btf.fields("thing")]
    assert nested == ["a", "b", "", "flags", "more", "name", "ok"]
    legacy = {f.name: (f.bit_offset, f.bitfield_size) for f in btf.fields("legacy")}
    assert legacy == {"lo": (0, 3), "hi": (3, 3)}
    assert btf.member("thing", "y").offset == 16
    assert btf.member("thing", "name[5]").bit_offset == 224 + 40
    assert btf.member("thing", "more").is_bitfield
    with pytest.raises(NotFoundError):
        btf.member("thing", "nope")
    with pytest.raises(NotFoundError):
        btf.member("thing", "name[16]")
    with pytest.raises(TypeKindError):
        btf.member("thing", "a.b")
    with pytest.raises(TypeKindError):
        btf.fields("int")


def test_function_prototypes() -> None:
    btf = Btf.parse(sample().write())
    sig = btf.func("do_thing")
    assert sig.nargs == 3 and sig.arg_names == ["t", "v", "c"]
    assert sig.arg_sizes == [8, 48, 4]
    assert sig.has_struct_args and [a.by_value_struct for a in sig.args] == [False, True, False]
    assert sig.args[2].signed and not sig.args[0].signed
    assert sig.return_type.name == "int" and sig.return_size == 4
    assert sig.linkage == FuncLinkage.GLOBAL and not sig.variadic
    v = btf.func("printf_like")
    assert v.variadic and v.nargs == 1
    with pytest.raises(NotFoundError):
        btf.func("thing")


def test_split_btf_continues_base_ids_and_strings() -> None:
    base = Btf.parse(sample().write(), source="base")
    sb = BtfBuilder(base)
    i32 = base.find("int").id
    mod = sb.struct("mod_state", [("count", i32), ("owner", sb.ptr(base.find("thing").id))])
    blob = sb.write()
    split = Btf.parse(blob, base=base, source="mod")
    assert split.start_id == len(base)
    assert split[mod].name == "mod_state"
    assert split.find("thing") is base.find("thing")
    assert [(t.kind, t.name) for t in split.own_types()] == [(BtfKind.PTR, ""), (BtfKind.STRUCT, "mod_state")]
    assert split.sizeof("mod_state") == 16
    assert split.member("mod_state", "owner").type.type.name == "thing"
    hdr = struct.unpack_from("<HBBIIIII", blob)
    # the split's own string section holds only the new names, offsets continue the base's
    assert b"thing\0" not in blob[24 + hdr[6] :]
    assert write(split) == blob


def test_edits_then_write() -> None:
    btf = Btf.parse(sample().write())
    sec = btf.find(".data", "datasec")
    sec.size = 64
    sec.vars[0].offset = 16
    nid = btf.add(Struct("added", 4, []))
    btf.replace(btf.find("opaque").id, Int("renamed", 2))
    again = Btf.parse(write(btf))
    assert again.find(".data").size == 64 and again.find(".data").vars[0].offset == 16
    assert again[nid].name == "added"
    assert again.find("renamed").kind == BtfKind.INT
    with pytest.raises(NotFoundError):
        again.find("opaque")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:10], "shorter than"),
        (lambda b: b"\x00\x00" + b[2:], "magic"),
        (lambda b: b[:2] + b"\x02" + b[3:], "version"),
        (lambda b: b[:-1], "run past"),
        (lambda b: b[:-1] + b"x", "NUL-terminated"),
    ],
)
def test_malformed_headers(mutate, message) -> None:
    with pytest.raises(ParseError, match=message):
        Btf.parse(mutate(sample().write()), source="t")


def test_bad_kind_and_bad_reference() -> None:
    blob = bytearray(sample().write())
    # first type record starts at 24: set its kind to 31
    blob[24 + 7] = 31
    with pytest.raises(ParseError, match="unknown kind"):
        Btf.parse(bytes(blob))
    b = BtfBuilder()
    b.ptr(77)
    btf = Btf.parse(b.write())
    with pytest.raises(ParseError, match="past the last type"):
        btf[1]
    with pytest.raises(ParseError):
        btf.validate()


def test_reference_loop_is_a_parse_error() -> None:
    b = BtfBuilder()
    b.typedef("a", 2)
    b.typedef("b", 1)
    btf = Btf.parse(b.write())
    with pytest.raises(ParseError, match="loop"):
        btf.sizeof("a")
    with pytest.raises(ParseError, match="loop"):
        btf.resolve("b")


@needs_vmlinux
def test_vmlinux_is_cached_and_lazy() -> None:
    btf = Btf.vmlinux()
    assert Btf.vmlinux() is btf
    assert len(btf) > 1000
    task = btf.find("task_struct", "struct")
    assert isinstance(task, Composite) and task.size == btf.sizeof(task)
    assert btf.member(task, "pid").type.name == "pid_t"
    sig = btf.func("schedule")
    assert sig.nargs == 0 and sig.return_size == 0
    with pytest.raises(NotFoundError):
        Btf.module("bpfmux_no_such_module")


@needs_vmlinux
@needs_bpftool
def test_vmlinux_every_type_matches_bpftool_json() -> None:
    out = subprocess.run(["bpftool", "-j", "btf", "dump", "file", VMLINUX], check=True, capture_output=True).stdout
    ref = json.loads(out)["types"]
    btf = Btf.parse(open(VMLINUX, "rb").read(), source=VMLINUX)
    assert len(ref) == len(btf) - 1
    for r in ref:
        t = btf[r["id"]]
        assert t.kind.name == r["kind"], r
        assert (t.name or "(anon)") == r["name"], r
        if "type_id" in r:
            assert t.type_id == r["type_id"], r
        if "size" in r:
            assert t.size == r["size"], r
        if isinstance(t, Int):
            assert (t.bits, t.bits_offset) == (r["nr_bits"], r["bits_offset"]), r
        elif isinstance(t, Composite):
            assert [(m.name or "(anon)", m.type_id, m.bit_offset, m.bitfield_size) for m in t.members] == [
                (m["name"], m["type_id"], m["bits_offset"], m.get("bitfield_size", 0)) for m in r["members"]
            ], r
        elif isinstance(t, Enum):
            # bpftool 7.1's JSON sign-extends 32-bit enum values, so compare those modulo 2**32
            mask = (1 << 64) - 1 if t.kind == BtfKind.ENUM64 else (1 << 32) - 1
            assert [(v.name, v.value & mask) for v in t.values] == [(v["name"], v["val"] & mask) for v in r["values"]], r
            assert all(v.value >= 0 for v in t.values) or t.signed
        elif isinstance(t, FuncProto):
            assert t.return_type_id == r["ret_type_id"]
            assert [(p.name or "(anon)", p.type_id) for p in t.params] == [(p["name"], p["type_id"]) for p in r["params"]], r
        elif isinstance(t, Func):
            assert t.linkage.name.lower() == r["linkage"], r
    # byte-for-byte round trip of the kernel's own blob
    assert write(btf) == open(VMLINUX, "rb").read()


def test_misuse_of_btf_editing_and_packing_raises_parse_error() -> None:
    from bpfmux.btf.ext import FuncInfo, LineInfo, pack_func_info, pack_line_info

    one, other = Btf.parse(sample().write()), Btf.parse(sample().write())
    with pytest.raises(ParseError, match="already belongs to another Btf"):
        other.add(one.find("opaque"))
    with pytest.raises(ParseError, match="byteorder"):
        write(one, byteorder="middle")
    with pytest.raises(ParseError, match="func_info offset 12"):
        pack_func_info([FuncInfo(8, 1), FuncInfo(12, 2)])
    with pytest.raises(ParseError, match="line_info offset 4"):
        pack_line_info([LineInfo(4, "a.c", "x;", 1, 1)])
    assert pack_func_info([FuncInfo(16, 3)], base_insn=1) == struct.pack("<II", 3, 3)
