"""The checked and the fast tier give identical results.

Random programs (:mod:`bpfmux.emu.vm.progen`) — verifier-valid ones and wild
ones that fault — run on both tiers: the same ``r0`` and context, or the same
fault (message, instruction and address).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.emu import VM
from bpfmux.emu.vm.progen import CTX_SIZE, random_program
from bpfmux.errors import EmulatorFault


def outcome(prog, ctx, tier):
    try:
        res = prog.run(ctx, tier=tier)
    except EmulatorFault as e:
        return ("fault", str(e), e.pc, e.address)
    return ("ok", res.r0, res.ctx)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(1, 80))
def test_valid_programs_agree(seed, size):
    with VM() as vm:
        g = random_program(seed, size)
        prog = vm.load(g.insns)
        a = outcome(prog, g.ctx, "checked")
        b = outcome(prog, g.ctx, "fast")
        assert a[0] == "ok", a
        assert a == b
        assert len(a[2]) == CTX_SIZE


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(1, 60))
def test_wild_programs_agree_on_faults(seed, size):
    with VM() as vm:
        g = random_program(seed, size, wild=True)
        prog = vm.load(g.insns)
        assert outcome(prog, g.ctx, "checked") == outcome(prog, g.ctx, "fast")


def test_wild_programs_do_fault():
    """The wild generator really produces faulting programs (so the test above
    compares faults, not only clean runs)."""
    faults = 0
    with VM() as vm:
        for seed in range(200):
            g = random_program(seed, 30, wild=True)
            faults += outcome(vm.load(g.insns), g.ctx, "checked")[0] == "fault"
    assert faults >= 10


def _random_insns(data: bytes) -> list:
    """Instructions from raw 8-byte words (an lddw takes the next word's imm)."""
    import struct

    from bpfmux.isa.insn import Insn

    words = [struct.unpack_from("<BBhi", data, i) for i in range(0, len(data) // 8 * 8, 8)]
    out = []
    i = 0
    while i < len(words):
        op, regs, off, imm = words[i]
        if op == 0x18:
            hi = words[i + 1][3] if i + 1 < len(words) else 0
            out.append(Insn(op, regs & 15, regs >> 4, off, (imm & 0xFFFFFFFF) | ((hi & 0xFFFFFFFF) << 32)))
            i += 2
        else:
            out.append(Insn(op, regs & 15, regs >> 4, off, imm))
            i += 1
    return out + [Insn(0x95)]  # bias towards running: end with exit


@settings(max_examples=600, deadline=None)
@given(data=st.binary(min_size=8, max_size=160), ctx=st.binary(min_size=0, max_size=64))
def test_arbitrary_instruction_bytes(data, ctx):
    """Any decodable instruction bytes: both tiers give the same result or the
    same EmulatorFault, never another exception."""
    from bpfmux.errors import NotSupportedError, VerifierError

    with VM() as vm:
        vm.max_insns = vm.max_loop_iterations = 2000
        vm.may_goto_budget = 50
        try:
            prog = vm.load(_random_insns(data))
        except (VerifierError, NotSupportedError):
            return  # a pseudo lddw naming no map: refused at load, as the kernel does
        a = outcome(prog, ctx, "checked")
        b = outcome(prog, ctx, "fast")
        if a[0] == "fault" and "does not terminate" in a[1]:
            assert b[0] == "fault" and "does not terminate" in b[1] or b[0] == "ok"
            return
        if b[0] == "fault" and "does not terminate" in b[1]:
            assert a[0] == "fault" and "does not terminate" in a[1]
            return
        assert a == b


def _valid_program():
    from bpfmux.isa.insn import Insn
    from bpfmux.isa.strategies import valid_insns

    def fix(insn):
        # keep jumps short and pseudo loads plain so the program mostly runs
        if insn.opcode & 0x07 in (0x05, 0x06) and insn.opcode & 0xF0 not in (0x80, 0x90):
            return Insn(insn.opcode, insn.dst, insn.src, insn.off % 7 - 3, insn.imm % 7 - 3 if insn.opcode == 0x06 else insn.imm)
        if insn.opcode == 0x18:
            return Insn(0x18, insn.dst, 0, 0, insn.imm)
        if insn.opcode == 0x85 and insn.src == 1:
            return Insn(0x85, 0, 1, 0, insn.imm % 9 - 4)
        return insn

    return st.lists(valid_insns().map(fix), min_size=1, max_size=30).map(lambda xs: xs + [Insn(0x95)])


@settings(max_examples=600, deadline=None)
@given(insns=_valid_program(), ctx=st.binary(min_size=0, max_size=64))
def test_valid_instruction_soup(insns, ctx):
    """Well-formed but otherwise arbitrary instructions (every opcode): the
    tiers agree, faults included."""
    from bpfmux.errors import NotSupportedError, VerifierError

    with VM() as vm:
        vm.max_insns = vm.max_loop_iterations = 2000
        vm.may_goto_budget = 50
        vm.clock.set(1_000_000_000)  # both tiers read the same bpf_ktime_get_ns
        try:
            prog = vm.load(insns)
        except (VerifierError, NotSupportedError):
            return
        a = outcome(prog, ctx, "checked")
        b = outcome(prog, ctx, "fast")
        if "does not terminate" in str(a) or "does not terminate" in str(b):
            assert "does not terminate" in str(a)
            return
        assert a == b


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), ops=st.integers(1, 30))
def test_map_programs_agree(seed, ops):
    """Random map operations (the fast tier calls the maps directly): same
    return codes, context and map contents on both tiers."""
    from bpfmux.emu.vm.progen import random_map_program

    g = random_map_program(seed, ops)
    results = []
    for tier in ("checked", "fast"):
        with VM() as vm:
            maps = [vm.create_map(t, k, v, n) for t, k, v, n in g.maps]
            res = vm.load(g.with_fds([m.fd for m in maps])).run(g.ctx, tier=tier)
            results.append((res.r0, res.ctx, [dict(m.items()) for m in maps]))
    assert results[0] == results[1]
