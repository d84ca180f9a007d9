"""ProgramSpec.instructions(): externs against a target BTF, CO-RE patching rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpfmux.btf import Btf, Func, FuncProto, Int, Var
from bpfmux.errors import NotFoundError, NotSupportedError, ParseError
from bpfmux.isa.insn import Insn
from bpfmux.isa.opcodes import LDDW, CallKind, Class, Jmp, Pseudo, Size
from bpfmux.obj import CoreRelo, CoreReloKind, RelocKind, load_object
from bpfmux.obj.load import CORE_POISON_IMM, CoreResult, apply_core_result
from bpfmux.obj.spec import POISON_CALL_KFUNC_BASE

BPF = Path(__file__).resolve().parent.parent / "bpf"
CALL = Class.JMP | Jmp.CALL


def _target(with_missing: bool = False) -> Btf:
    t = Btf()
    i32 = t.add(Int("int", 4, 1))
    proto = t.add(FuncProto(0, []))
    ids = {"bpf_rcu_read_lock": t.add(Func("bpf_rcu_read_lock", proto, 1)),
           "bpf_rcu_read_unlock": t.add(Func("bpf_rcu_read_unlock", proto, 1))}
    ids["bpf_prog_active"] = t.add(Var("bpf_prog_active", i32, 1))
    return t, ids


def test_kfunc_and_ksym_resolution() -> None:
    spec = load_object(BPF / "kfunc.bpf.o")
    target, ids = _target()
    p = spec.programs["use_kfuncs"]
    addrs = {"_stext": 0xFFFFFFFF81000000}
    out = p.instructions(lambda n: 5, target, ksym_addr=addrs.get)
    by_target = {}
    for r in p.relocations:
        by_target.setdefault(r.target, []).append(out[r.insn])
    for name in ("bpf_rcu_read_lock", "bpf_rcu_read_unlock"):
        (ins,) = by_target[name]
        assert (ins.opcode, ins.src, ins.imm) == (CALL, CallKind.KFUNC_CALL, ids[name])
    # weak, missing kfunc: its address loads as 0 and its call is poisoned as libbpf does
    loads = [i for i in by_target["bpfmux_no_such_kfunc"] if i.opcode == LDDW]
    calls = [i for i in by_target["bpfmux_no_such_kfunc"] if i.opcode == CALL]
    assert loads and all(i.imm == 0 and i.src == 0 for i in loads)
    assert calls and all(i.src == 0 and i.imm >= POISON_CALL_KFUNC_BASE for i in calls)
    (stext,) = by_target["_stext"]
    assert stext.imm == 0xFFFFFFFF81000000 and stext.src == 0
    typed = spec.programs["use_typed_ksym"]
    out = typed.instructions(lambda n: 5, target)
    (r,) = [r for r in typed.relocations if r.kind is RelocKind.KSYM]
    assert (out[r.insn].src, out[r.insn].imm) == (Pseudo.BTF_ID, ids["bpf_prog_active"])


def test_unresolved_externs_are_reported() -> None:
    p = load_object(BPF / "kfunc.bpf.o").programs["use_kfuncs"]
    with pytest.raises(NotSupportedError, match="target_btf"):
        p.instructions(lambda n: 5)
    empty = Btf()
    with pytest.raises(NotFoundError, match="bpf_rcu_read_lock"):
        p.instructions(lambda n: 5, empty)
    target, _ = _target()
    with pytest.raises(NotFoundError, match="_stext"):
        p.instructions(lambda n: 5, target)  # untyped ksym without an address source


def test_core_without_target_btf_is_refused() -> None:
    p = load_object(BPF / "core.bpf.o").programs["core_reads"]
    with pytest.raises(NotSupportedError, match="target_btf"):
        p.instructions(lambda n: 5)


def test_core_patching_follows_libbpf_rules() -> None:
    p = load_object(BPF / "core.bpf.o").programs["core_reads"]
    seen = []

    def fake(local, target, relo: CoreRelo) -> CoreResult:
        ins = p.insns[relo.insn]
        seen.append(relo)
        orig = ins.off if ins.cls in (Class.LDX, Class.ST, Class.STX) else ins.imm
        if relo.kind is CoreReloKind.TYPE_EXISTS and ins.imm == 0:
            return CoreResult(orig, 0, poison=True)
        return CoreResult(orig, orig + 1000 if relo.kind is CoreReloKind.FIELD_BYTE_OFFSET else orig)

    out = p.instructions(lambda n: 9, Btf(), core_resolver=fake)
    assert len(seen) == len(p.core_relos)
    for c in p.core_relos:
        if c.kind is CoreReloKind.FIELD_BYTE_OFFSET:
            before = p.insns[c.insn]
            after = out[c.insn]
            assert after.imm == before.imm + 1000 or after.off == before.off + 1000


def _relo(kind=CoreReloKind.FIELD_BYTE_OFFSET) -> CoreRelo:
    return CoreRelo(0, 1, "0:1", kind)


def test_apply_core_result_cases() -> None:
    ldx_w = Class.LDX | Size.W | 0x60
    insns = [Insn(ldx_w, 1, 2, 16, 0)]
    apply_core_result(insns, {}, _relo(), CoreResult(16, 24, orig_size=4, new_size=8))
    assert insns[0].off == 24 and insns[0].opcode == Class.LDX | Size.DW | 0x60
    mov = Class.ALU64 | 0xB0
    insns = [Insn(mov, 1, 0, 0, 16)]
    apply_core_result(insns, {}, _relo(), CoreResult(16, 40))
    assert insns[0].imm == 40
    insns = [Insn(LDDW, 1, 0, 0, 1)]
    apply_core_result(insns, {}, _relo(CoreReloKind.ENUMVAL_VALUE), CoreResult(1, 1 << 40))
    assert insns[0].imm == 1 << 40
    poisoned: dict[int, list[Insn]] = {}
    apply_core_result([Insn(LDDW, 1, 0, 0, 1)], poisoned, _relo(), CoreResult(1, 0, poison=True))
    assert [(i.opcode, i.imm) for i in poisoned[0]] == [(CALL, CORE_POISON_IMM)] * 2
    with pytest.raises(ParseError, match="expected 8"):
        apply_core_result([Insn(mov, 1, 0, 0, 16)], {}, _relo(), CoreResult(8, 40))
    with pytest.raises(ParseError, match="only loads"):
        apply_core_result([Insn(Class.STX | Size.W | 0x60, 1, 2, 16, 0)], {}, _relo(),
                          CoreResult(16, 24, orig_size=4, new_size=8))
    with pytest.raises(ParseError, match="16 bits"):
        apply_core_result([Insn(ldx_w, 1, 2, 16, 0)], {}, _relo(), CoreResult(16, 1 << 20))
