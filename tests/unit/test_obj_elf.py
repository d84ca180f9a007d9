"""load_object on the committed test objects: programs, maps, data, externs, linking."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from bpfmux.errors import NotFoundError, ParseError
from bpfmux.isa.opcodes import LDDW, CallKind, Class, Jmp, Pseudo
from bpfmux.obj import ExternKind, RelocKind, load_object, match_section
from bpfmux.obj.elf import _internal_map_name
from bpfmux.uapi import BtfKind, MapFlags, MapType, ProgFlags, ProgType

BPF = Path(__file__).resolve().parent.parent / "bpf"
#: objects this suite owns (tests/bpf/README.md); others' objects must parse or raise ParseError
OWN = ["core", "fentry_test", "fexit_test", "getpid", "globals", "kfunc", "legacy_maps", "maps", "modify_return",
       "multi", "ringbuf", "sections", "subprogs", "syscount", "tailcall", "testrun"]
OBJECTS = [BPF / f"{n}.bpf.o" for n in OWN]
OTHERS = sorted(p for p in BPF.glob("*.bpf.o") if p not in OBJECTS)
CALL = Class.JMP | Jmp.CALL


def obj(name: str):
    return load_object(BPF / f"{name}.bpf.o")


@pytest.mark.parametrize("path", OBJECTS, ids=lambda p: p.name)
def test_every_object_parses_consistently(path: Path) -> None:
    spec = load_object(path)
    assert spec.programs, "every test object has programs"
    assert spec.license
    elf = ELFFile(path.open("rb"))
    funcs = {s.name for s in elf.get_section_by_name(".symtab").iter_symbols()
             if s["st_info"]["type"] == "STT_FUNC" and elf.get_section(s["st_shndx"]).name != ".text"}
    assert set(spec.programs) == funcs
    for p in spec.programs.values():
        info = match_section(p.section)
        assert (p.prog_type, p.expected_attach_type, p.attach_target, p.flags, p.autoload) == (
            info.prog_type, info.expected_attach_type, info.target, info.prog_flags, info.autoload)
        assert p.prog_type != ProgType.UNSPEC
        assert p.insns[-1].opcode == Class.JMP | Jmp.EXIT or any(
            i.opcode == Class.JMP | Jmp.EXIT for i in p.insns)
        # func_info: the program starts at 0, each subprogram has one record at its start
        starts = [f.insn for f in p.func_info]
        assert starts == [0] + [i for _, i in p.subprograms]
        for r in p.relocations:
            assert 0 <= r.insn < len(p.insns)
        for li in p.line_info:
            assert 0 <= li.insn < len(p.insns) and li.file.endswith(".bpf.c") and li.line >= 0


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: p.name)
def test_other_objects_parse_or_say_why(path: Path) -> None:
    try:
        spec = load_object(path)
    except ParseError as err:
        assert str(err)
    else:
        assert spec.name == path.name.split(".")[0]


def test_source_in_objects_matches_sections_object() -> None:
    src = (BPF / "sections.bpf.c").read_text()
    secs = dict((m.group(2), m.group(1)) for m in re.finditer(r'SEC\("([^"]+)"\) int (\w+)', src))
    spec = obj("sections")
    assert {n: p.section for n, p in spec.programs.items()} == secs
    assert spec.programs["s_no_autoload"].autoload is False
    seed = spec.programs["s_seed_fentry_multi"]
    assert seed.flags & ProgFlags.MULTI_FUNC and seed.prog_type == ProgType.TRACING
    assert seed.attach_target == "bpf_fentry_test*"


def test_btf_maps() -> None:
    m = obj("maps").maps
    assert (m["array_map"].type, m["array_map"].key_size, m["array_map"].value_size, m["array_map"].max_entries) == (
        MapType.ARRAY, 4, 16, 4)
    h = m["hash_map"]
    assert (h.type, h.key_size, h.value_size, h.max_entries, h.flags, int(h.pinning)) == (
        MapType.HASH, 8, 8, 128, MapFlags.NO_PREALLOC, 1)
    assert m["percpu_array_map"].type == MapType.PERCPU_ARRAY
    assert (m["percpu_hash_map"].type, m["percpu_hash_map"].value_size) == (MapType.PERCPU_HASH, 4)
    assert (m["lru_hash_map"].type, m["lru_hash_map"].value_size) == (MapType.LRU_HASH, 16)
    assert (m["ringbuf_map"].type, m["ringbuf_map"].max_entries, m["ringbuf_map"].key_size) == (MapType.RINGBUF, 4096, 0)
    assert (m["perf_map"].type, m["perf_map"].key_size, m["perf_map"].value_size) == (MapType.PERF_EVENT_ARRAY, 4, 4)
    assert (m["stack_map"].type, m["stack_map"].value_size, m["stack_map"].max_entries) == (MapType.STACK_TRACE, 1016, 64)
    assert (m["prog_array_map"].type, m["prog_array_map"].value_size) == (MapType.PROG_ARRAY, 4)
    aom = m["array_of_maps"]
    assert aom.type == MapType.ARRAY_OF_MAPS and aom.inner is not None
    assert (aom.inner.type, aom.inner.key_size, aom.inner.value_size, aom.inner.max_entries) == (MapType.ARRAY, 4, 4, 1)
    assert aom.init_slots == {0: "inner_a", 1: "inner_b"}
    hom = m["hash_of_maps"]
    assert (hom.type, hom.inner.type, hom.inner.value_size, hom.inner.max_entries) == (MapType.HASH_OF_MAPS, MapType.HASH, 8, 8)
    btf = obj("maps").btf
    assert btf.sizeof(h.btf_key_type_id) == 8 and btf[m["array_map"].btf_value_type_id].name == "val"


def test_prog_array_static_init() -> None:
    spec = obj("tailcall")
    assert spec.maps["jump_table"].init_slots == {0: "tail_a", 2: "tail_b"}
    assert set(spec.maps["jump_table"].init_slots.values()) <= set(spec.programs)


def test_legacy_maps_and_version() -> None:
    spec = obj("legacy_maps")
    assert spec.kernel_version == 0x060C00
    lh, la = spec.maps["legacy_hash"], spec.maps["legacy_array"]
    assert (lh.type, lh.key_size, lh.value_size, lh.max_entries, lh.section) == (MapType.HASH, 4, 8, 64, "maps")
    assert (la.type, la.value_size, la.max_entries) == (MapType.ARRAY, 4, 2)
    p = spec.programs["legacy_prog"]
    assert {r.target for r in p.relocations if r.kind is RelocKind.MAP} == {"legacy_hash", "legacy_array"}
    assert p.kernel_version == 0x060C00


def test_global_data_maps_and_btf_fixup() -> None:
    path = BPF / "globals.bpf.o"
    spec = load_object(path)
    elf = ELFFile(path.open("rb"))
    for secname in (".data", ".rodata", ".bss", ".data.foo", ".rodata.bar"):
        sec = elf.get_section_by_name(secname)
        m = spec.maps[secname]
        assert (m.type, m.key_size, m.max_entries, m.value_size) == (MapType.ARRAY, 4, 1, sec["sh_size"])
        assert m.value == (None if secname == ".bss" else sec.data())
        assert bool(m.flags & MapFlags.RDONLY_PROG) == m.frozen == secname.startswith(".rodata")
        assert m.flags & MapFlags.MMAPABLE
        ds = spec.btf[m.btf_value_type_id]
        assert ds.kind == BtfKind.DATASEC and ds.name == secname and ds.size == sec["sh_size"]
    syms = {s.name: s["st_value"] for s in elf.get_section_by_name(".symtab").iter_symbols()}
    for t in spec.btf:
        if t.kind == BtfKind.DATASEC and t.name not in (".kconfig", ".ksyms"):
            for v in t.vars:
                assert v.offset == syms[spec.btf[v.type_id].name], (t.name, spec.btf[v.type_id].name)
    assert spec.maps[".data"].value[:8] == (42).to_bytes(8, "little")
    assert spec.maps[".rodata"].value[4:10] == b"bpfmux"
    assert spec.maps[".data"].kernel_name == "globals.data" and spec.maps[".data.foo"].kernel_name == ".data.foo"
    assert spec.license == "Dual MIT/GPL"


def test_internal_map_names_follow_libbpf() -> None:
    assert _internal_map_name("my_object_name", ".rodata") == "my_objec.rodata"
    assert _internal_map_name("my_object_name", ".bss") == "my_objec.bss"
    assert _internal_map_name("obj", ".data.very_long_name") == ".data.very_long"
    assert _internal_map_name("a-b", ".data") == "a_b.data"


def test_kconfig_externs_layout_and_encoding() -> None:
    spec = obj("globals")
    ks = {e.name: e for e in spec.kconfig_externs}
    assert set(ks) == {"LINUX_KERNEL_VERSION", "CONFIG_BPF_SYSCALL", "CONFIG_HZ", "CONFIG_BPFMUX_NOT_A_REAL_OPTION"}
    # libbpf order: alignment descending, then size, then name
    assert [e.name for e in spec.kconfig_externs] == ["CONFIG_HZ", "LINUX_KERNEL_VERSION",
                                                      "CONFIG_BPFMUX_NOT_A_REAL_OPTION", "CONFIG_BPF_SYSCALL"]
    assert (ks["CONFIG_HZ"].offset, ks["LINUX_KERNEL_VERSION"].offset, ks["CONFIG_BPF_SYSCALL"].offset) == (0, 4, 9)
    assert ks["CONFIG_HZ"].weak and not ks["CONFIG_BPF_SYSCALL"].weak
    assert spec.maps[".kconfig"].value_size == 10 and spec.maps[".kconfig"].frozen
    data = spec.kconfig_data({"CONFIG_HZ": "250", "LINUX_KERNEL_VERSION": 0x061200, "CONFIG_BPF_SYSCALL": "y"})
    assert data == (250).to_bytes(4, "little") + (0x061200).to_bytes(4, "little") + b"\x00\x01"
    with pytest.raises(NotFoundError):
        spec.kconfig_data({"CONFIG_HZ": "250"})
    p = spec.programs["read_globals"]
    kc = [r for r in p.relocations if r.kind is RelocKind.KCONFIG]
    assert {r.symbol: r.offset for r in kc} == {n: ks[n].offset for n in ks}


def test_bpf_to_bpf_linking() -> None:
    spec = obj("subprogs")
    one, two = spec.programs["caller_one"], spec.programs["caller_two"]
    # appended depth-first in order of first reference, as libbpf does
    assert [n for n, _ in one.subprograms] == ["twice", "mix", "global_add", "loop_body"]
    assert [n for n, _ in two.subprograms] == ["mix", "global_add"]
    for p in (one, two):
        slots = p.slots
        start = {n: i for n, i in p.subprograms}
        for r in p.relocations:
            if r.kind in (RelocKind.CALL, RelocKind.SUBPROG_ADDR):
                ins = p.insns[r.insn]
                assert slots[r.insn] + ins.imm + 1 == slots[start[r.target]]
                if r.kind is RelocKind.SUBPROG_ADDR:
                    assert ins.opcode == LDDW and ins.src == Pseudo.FUNC
                else:
                    assert ins.opcode == CALL and ins.src == CallKind.PSEUDO_CALL
        # every pseudo call (also the ones without relocation, inside .text) lands on a function start
        for i, ins in enumerate(p.insns):
            if ins.opcode == CALL and ins.src == CallKind.PSEUDO_CALL:
                assert slots[i] + ins.imm + 1 in {slots[s] for s in [0, *start.values()]}
    assert {r.target for r in one.relocations if r.kind is RelocKind.SUBPROG_ADDR} == {"loop_body"}
    # the same subprogram body appears in both programs
    mix1 = one.insns[dict(one.subprograms)["mix"]:dict(one.subprograms)["mix"] + 5]
    mix2 = two.insns[dict(two.subprograms)["mix"]:dict(two.subprograms)["mix"] + 5]
    assert mix1 == mix2


def test_relocations_resolve_with_map_fds() -> None:
    spec = obj("globals")
    p = spec.programs["read_globals"]
    fds = {name: 100 + i for i, name in enumerate(spec.maps)}
    out = p.instructions(fds.__getitem__)
    assert len(out) == len(p.insns)
    for r in p.relocations:
        ins = out[r.insn]
        assert ins.opcode == LDDW and ins.src == Pseudo.MAP_VALUE
        assert ins.imm & 0xFFFFFFFF == fds[r.target] and ins.imm >> 32 == r.offset
    # the original spec is untouched
    assert all(p.insns[r.insn].src == 0 for r in p.relocations)
    m = obj("maps")
    fds = {name: 7 + i for i, name in enumerate(m.maps)}
    u = m.programs["use_maps"]
    out = u.instructions(fds.__getitem__)
    refs = {r.target for r in u.relocations if r.kind is RelocKind.MAP}
    assert refs == {"array_map", "hash_map", "percpu_array_map", "percpu_hash_map", "lru_hash_map", "ringbuf_map",
                    "perf_map", "stack_map", "array_of_maps", "hash_of_maps", "prog_array_map"}
    for r in u.relocations:
        assert out[r.insn].src == Pseudo.MAP_FD and out[r.insn].imm == fds[r.target]
    with pytest.raises(KeyError):
        u.instructions({}.__getitem__)


def test_core_relocations_recorded() -> None:
    p = obj("core").programs["core_reads"]
    kinds = {c.kind.name for c in p.core_relos}
    assert kinds >= {"FIELD_BYTE_OFFSET", "FIELD_EXISTS", "FIELD_BYTE_SIZE", "TYPE_EXISTS", "TYPE_SIZE",
                     "ENUMVAL_EXISTS", "ENUMVAL_VALUE", "TYPE_ID_TARGET"}
    btf = p.btf
    for c in p.core_relos:
        root = btf[c.type_id]
        assert root.name in ("task_struct", "mm_struct", "pid_type", "bpfmux_no_such_type")
        assert re.fullmatch(r"\d+(:\d+)*", c.access)


def test_externs() -> None:
    spec = obj("kfunc")
    e = spec.externs
    assert e["bpf_rcu_read_lock"].kind is ExternKind.KFUNC and not e["bpf_rcu_read_lock"].weak
    assert e["bpfmux_no_such_kfunc"].kind is ExternKind.KFUNC and e["bpfmux_no_such_kfunc"].weak
    assert e["bpf_prog_active"].kind is ExternKind.KSYM and e["bpf_prog_active"].type_id != 0
    assert e["_stext"].kind is ExternKind.KSYM and e["_stext"].type_id == 0
    p = spec.programs["use_kfuncs"]
    kinds = {(r.kind, r.target) for r in p.relocations}
    assert (RelocKind.KFUNC, "bpf_rcu_read_lock") in kinds and (RelocKind.KSYM, "_stext") in kinds
    assert (RelocKind.KSYM, "bpfmux_no_such_kfunc") in kinds  # `if (kfunc)` loads its address
    assert spec.programs["use_typed_ksym"].autoload is False
