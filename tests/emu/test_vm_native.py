"""The native tier (LLVM through llvmlite) agrees with the checked tier.

The same random programs as ``test_vm_tiers`` — verifier-valid ones, wild
ones that fault, arbitrary instruction bytes, well-formed instruction soup,
map programs — run on the checked and the native tier: the same ``r0`` and
context, or the same fault (message, instruction and address). Plus the
pieces random programs rarely reach: tail calls, callbacks, atomics on map
values, regions unmapped between runs, read-only memory, the run budget,
and what the tier reports when it cannot run natively.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_vm_tiers import _random_insns, _valid_program

from bpfmux.emu import VM
from bpfmux.emu.vm import native
from bpfmux.emu.vm.progen import CTX_SIZE, random_program
from bpfmux.errors import EmulatorFault, NotSupportedError, VerifierError
from bpfmux.isa.asm import assemble
from bpfmux.isa.insn import Insn
from bpfmux.uapi import MapType

pytestmark = pytest.mark.skipif(not native.available(), reason="llvmlite is not installed (pip install bpfmux[native])")


def outcome(prog, ctx, tier):
    try:
        res = prog.run(ctx, tier=tier)
    except EmulatorFault as e:
        return ("fault", str(e), e.pc, e.address)
    assert res.tier == tier or tier == "native" and native.fallback_reason(prog) is not None
    return ("ok", res.r0, res.ctx)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(1, 80))
def test_valid_programs_agree(seed, size):
    with VM() as vm:
        g = random_program(seed, size)
        prog = vm.load(g.insns)
        a = outcome(prog, g.ctx, "checked")
        b = outcome(prog, g.ctx, "native")
        assert a[0] == "ok", a
        assert a == b
        assert len(a[2]) == CTX_SIZE
        assert native.native_code(prog) is not None


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(1, 60))
def test_wild_programs_agree_on_faults(seed, size):
    with VM() as vm:
        g = random_program(seed, size, wild=True)
        prog = vm.load(g.insns)
        assert outcome(prog, g.ctx, "checked") == outcome(prog, g.ctx, "native")


def _agree_or_both_stop(a, b):
    """``a`` checked, ``b`` native. Both count against one run budget; the
    checked tier stops at the first instruction past it, the native tier at
    the next function entry or back edge, and never counts an instruction
    before it ran: a native stop implies a checked one; a checked stop leaves
    the native run free to go a little further (and end)."""
    if b[0] == "fault" and "does not terminate" in b[1]:
        assert a[0] == "fault" and "does not terminate" in a[1], (a, b)
    elif not (a[0] == "fault" and "does not terminate" in a[1]):
        assert a == b


@settings(max_examples=150, deadline=None)
@given(data=st.binary(min_size=8, max_size=160), ctx=st.binary(min_size=0, max_size=64))
def test_arbitrary_instruction_bytes(data, ctx):
    with VM() as vm:
        vm.run_budget = 2000
        vm.may_goto_budget = 50
        try:
            prog = vm.load(_random_insns(data))
        except (VerifierError, NotSupportedError):
            return
        _agree_or_both_stop(outcome(prog, ctx, "checked"), outcome(prog, ctx, "native"))


@settings(max_examples=150, deadline=None)
@given(insns=_valid_program(), ctx=st.binary(min_size=0, max_size=64))
def test_valid_instruction_soup(insns, ctx):
    with VM() as vm:
        vm.run_budget = 2000
        vm.may_goto_budget = 50
        vm.clock.set(1_000_000_000)
        try:
            prog = vm.load(insns)
        except (VerifierError, NotSupportedError):
            return
        _agree_or_both_stop(outcome(prog, ctx, "checked"), outcome(prog, ctx, "native"))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), ops=st.integers(1, 30))
def test_map_programs_agree(seed, ops):
    from bpfmux.emu.vm.progen import random_map_program

    g = random_map_program(seed, ops)
    results = []
    for tier in ("checked", "native"):
        with VM() as vm:
            maps = [vm.create_map(t, k, v, n) for t, k, v, n in g.maps]
            res = vm.load(g.with_fds([m.fd for m in maps])).run(g.ctx, tier=tier)
            results.append((res.r0, res.ctx, [dict(m.items()) for m in maps]))
    assert results[0] == results[1]


# -- what random programs rarely reach ------------------------------------------------


def _fault(prog, tier, ctx=None, **kw):
    with pytest.raises(EmulatorFault) as ei:
        prog.run(ctx, tier=tier, **kw)
    return str(ei.value), ei.value.pc, ei.value.address


def test_region_unmapped_after_a_run_faults():
    """The region table forgets a context when the run that mapped it ends:
    its address faults in a later run, as on the checked tier."""
    with VM() as vm:
        keep = vm.load(assemble("mov %r0, %r1\nexit"))
        stale = keep.run(bytes(16), tier="native").r0  # the address the context had
        reader = vm.load(assemble("ldxdw %r0, [%r1+8]\nexit"))
        assert reader.run(bytes(range(16)), tier="native").r0 == struct.unpack_from("<Q", bytes(range(16)), 8)[0]
        assert _fault(reader, "native", regs={1: stale}) == _fault(reader, "checked", regs={1: stale})


def test_read_only_context_and_read_only_buffer():
    with VM() as vm:
        writer = vm.load(assemble("stw [%r1], 7\nmov %r0, 0\nexit"))
        got = _fault(writer, "native", bytes(8), ctx_writable=False)
        assert got == _fault(writer, "checked", bytes(8), ctx_writable=False)
        assert "read-only" in got[0]
        # a read-only buffer cannot be exported to native code: its reads take the callback
        region = vm.space.map(memoryview(bytes(range(32))), "ro", "data", False)
        try:
            reader = vm.load(assemble("ldxw %r0, [%r1+4]\nexit"))
            assert reader.run(tier="native", regs={1: region.base}).r0 == struct.unpack_from("<I", bytes(range(32)), 4)[0]
            assert _fault(reader, "native", regs={1: region.base + 30}) == _fault(reader, "checked", regs={1: region.base + 30})
        finally:
            vm.space.unmap(region)


def test_atomics_on_a_map_value():
    from bpfmux.isa.insn import Insn

    with VM() as vm:
        m = vm.create_map(MapType.ARRAY, 4, 24, 1)
        head = assemble(f"lddw %r6, map_value({m.fd}, 0)\nmov %r1, 5\nmov %r0, 0\nmov %r2, 9\nmov %r3, 3\n"
                        "mov %r4, 6\nexit")[:-1]
        atomics = [
            Insn(0xDB, 6, 1, 0, 0x00),  # *(u64 *)(r6 + 0) += r1
            Insn(0xDB, 6, 2, 8, 0xF1),  # cmpxchg at +8: 0 == r0, so it becomes 9; r0 = old (0)
            Insn(0xC3, 6, 3, 16, 0x41),  # 32-bit fetch_or at +16: r3 = old
            Insn(0xC3, 6, 4, 20, 0xE1),  # 32-bit xchg at +20: r4 = old
            Insn(0xBF, 0, 3, 0, 0),  # r0 = r3
            Insn(0x95, 0, 0, 0, 0),
        ]
        prog = vm.load(head + atomics)
        for tier in ("checked", "native"):
            m[0] = struct.pack("<QQII", 1, 0, 0x10, 0x20)
            res = prog.run(tier=tier)
            assert res.r0 == 0x10, tier
            assert struct.unpack("<QQII", m[0]) == (6, 9, 0x13, 6), tier


def test_runaway_loop_is_stopped_where_the_fast_tier_stops():
    with VM(run_budget=1000) as vm:
        prog = vm.load(assemble("mov %r0, 0\nloop:\nadd %r0, 1\nja loop\nexit"))
        text, pc, _ = _fault(prog, "native")
        assert text.startswith("insn 1: run budget of 1000 instructions exhausted") and pc == 1
        assert (text, pc) == _fault(prog, "fast")[:2]


def test_without_llvmlite_the_fast_tier_runs(monkeypatch):
    from bpfmux.emu.vm.native import engine

    monkeypatch.setattr(engine, "_AVAILABLE", False)
    with VM(tier="native") as vm:
        assert vm.tier_in_use == "fast"
        prog = vm.load(assemble("mov %r0, 3\nexit"))
        res = prog.run()
        assert (res.r0, res.tier) == (3, "fast")
        assert "llvmlite" in native.fallback_reason(prog)
        assert native.native_code(prog) is None


def test_compiled_once_per_program_and_shared_between_identical_ones():
    from bpfmux.emu.vm.native import runner

    with VM(tier="native") as vm:
        assert vm.tier_in_use == "native"
        src = "mov %r0, 11\nadd %r0, 31\nexit"
        a = vm.load(assemble(src))
        assert a.run().tier == "native" and a.run().r0 == 42
        code = runner.compiled(a)
        assert runner.compiled(a) is code
        b = vm.load(assemble(src))
        assert b.run().r0 == 42
        assert runner.compiled(b).seconds == 0.0  # the same IR: compiled once
        assert native.fallback_reason(a) is None


def test_a_tail_call_into_a_program_that_runs_on_the_fast_tier(monkeypatch):
    """A target the native tier cannot compile runs on the fast tier inside
    the native run, and its faults are the fast (= checked) tier's."""
    from bpfmux.emu.vm.native import runner

    with VM() as vm:
        pa = vm.create_map(MapType.PROG_ARRAY, 4, 4, 1)
        target = vm.load(assemble("lddw %r2, 0x1234\nldxdw %r0, [%r2]\nexit"), name="target")
        pa[0] = target
        caller = vm.load(assemble(f"lddw %r2, map_fd({pa.fd})\nmov %r3, 0\ncall 12\nmov %r0, 1\nexit"))
        real = runner.compiled
        monkeypatch.setattr(runner, "compiled",
                            lambda p: runner.Fallback("test: refused") if p is target else real(p))
        res_checked = _fault(caller, "checked")
        res_native = _fault(caller, "native")
        assert res_native == res_checked and res_native[2] == 0x1234


def test_emulator_and_cli_say_which_tier_runs(capsys):
    from bpfmux.cli.main import main
    from bpfmux.emu.kernel.emulator import Emulator

    with Emulator(btf=None, tier="native") as emu:
        assert emu.tier == "native"
    obj = str(Path(__file__).resolve().parents[1] / "bpf" / "multi.bpf.o")
    assert main(["emulate", obj, "--btf", "none", "--tier", "native", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tier"] == "native"
    assert all(p["runs"] == 9 for p in report["programs"].values())  # bpf_fentry_test1..9, each program once


def test_region_table_grows_while_running():
    """A region past the table's end, first touched in the middle of a run,
    makes the table grow (it is reallocated under running code, which reads
    its address from the run state); accesses stay exact."""
    from bpfmux.emu.vm.native import runner

    with VM() as vm:
        regions = [vm.space.map(bytearray(struct.pack("<Q", i) * 2), f"r{i}", "data", True) for i in range(300)]
        prog = vm.load(assemble("ldxdw %r2, [%r2]\nldxdw %r0, [%r1+8]\nadd %r0, %r2\nexit"))
        assert prog.run(tier="native", regs={1: regions[5].base, 2: regions[1].base}).r0 == 5 + 1
        size_before = runner.table_of(vm).size
        late = [vm.space.map(bytearray(struct.pack("<Q", 1000 + i) * 2), f"l{i}", "data", True)
                for i in range(2 * size_before)]
        res = prog.run(tier="native", regs={1: regions[7].base, 2: late[-1].base})
        assert res.r0 == 7 + 1000 + 2 * size_before - 1
        assert runner.table_of(vm).size > size_before
        vm.space.unmap(late[-1])
        assert _fault(prog, "native", regs={1: regions[7].base, 2: late[-1].base}) == \
            _fault(prog, "checked", regs={1: regions[7].base, 2: late[-1].base})


# -- the run budget ----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), size=st.integers(1, 80))
def test_instruction_count_is_the_checked_tiers(seed, size):
    """Blocks charged on entry, calls ending blocks: a run that ends normally
    counts exactly the instructions it executed."""
    with VM() as vm:
        g = random_program(seed, size)
        prog = vm.load(g.insns)
        checked = prog.run(g.ctx, tier="checked")
        ran = prog.run(g.ctx, tier="native")
        assert ran.tier == "native"
        assert (ran.r0, ran.insns) == (checked.r0, checked.insns)


#: r6 = 50; 50 x (call sub; r6 -= 1; loop while r6 != 0); exit. sub: r0 = 7 + 1. 302 instructions.
_CALLS_IN_A_LOOP = [
    Insn(0xB7, 6, 0, 0, 50), Insn(0x85, 0, 1, 0, 3), Insn(0x17, 6, 0, 0, 1), Insn(0x55, 6, 0, -3, 0),
    Insn(0x95), Insn(0xB7, 0, 0, 0, 7), Insn(0x07, 0, 0, 0, 1), Insn(0x95),
]


def test_bpf_to_bpf_calls_share_the_run_budget():
    """Caller and callee charge one budget: with any budget, a native stop
    implies a checked stop (nothing counted before it ran), a checked
    success is a native success with the same count, and the native run goes
    past the checked tier's stop only on the straight code after its last
    check (the callee's entry in the last iteration: 6 instructions)."""
    with VM() as vm:
        prog = vm.load(_CALLS_IN_A_LOOP)
        differ = []
        for budget in range(0, 320):
            vm.run_budget = budget
            a = outcome(prog, None, "checked")
            b = outcome(prog, None, "native")
            if b[0] == "fault":
                assert f"run budget of {budget} instructions exhausted" in b[1], b
                assert a[0] == "fault" and "run budget" in a[1], (budget, a, b)
            if a[0] == "ok":
                assert b == a and prog.run(tier="native").insns == 302
            if a[0] != b[0]:
                differ.append(budget)
        assert differ == list(range(296, 302))


def test_a_tail_call_target_charges_the_same_budget():
    with VM() as vm:
        pa = vm.create_map(MapType.PROG_ARRAY, 4, 4, 1)
        target = vm.load(assemble("mov %r0, 0\nmov %r1, 100\nloop:\nadd %r0, 1\nsub %r1, 1\njne %r1, 0, loop\nexit"),
                         name="target")
        pa[0] = target
        caller = vm.load(assemble(f"lddw %r2, map_fd({pa.fd})\nmov %r3, 0\ncall 12\nmov %r0, 1\nexit"))
        checked = caller.run(tier="checked")
        ran = caller.run(tier="native")
        assert (ran.r0, ran.insns, ran.tier) == (checked.r0, checked.insns, "native") == (100, 306, "native")
        vm.run_budget = 150
        text, pc, _ = _fault(caller, "native")
        assert text.startswith("insn 2: run budget of 150 instructions exhausted") and pc == 2
        assert (text, pc) == _fault(caller, "fast")[:2]


def test_bpf_loop_callbacks_share_the_run_budget():
    """Nested ``bpf_loop`` at the maximum (``tests/bpf/hostile.bpf.o``): the
    native run stops where the fast one does, after as many callbacks."""
    from bpfmux.emu.kernel.emulator import Emulator

    seen = []
    for tier in ("fast", "native"):
        with Emulator(btf=None, run_budget=100_000, tier=tier) as emu:
            coll = emu.load(Path(__file__).parents[1] / "bpf" / "hostile.bpf.o")
            coll.attach_all()
            with pytest.raises(EmulatorFault, match="run budget of 100000 instructions exhausted") as e:
                emu.call("bpf_fentry_test1", 1)
            seen.append((str(e.value), e.value.pc, coll.maps[".bss"]["inner_calls"]))
    assert seen[0] == seen[1]
    assert 0 < seen[1][2] < 100_000 // 6


# -- the memory budget ---------------------------------------------------------------------

#: main calls f1, f1 calls f2, f2 returns 5: three stack frames.
_THREE_FRAMES = [Insn(0x85, 0, 1, 0, 1), Insn(0x95), Insn(0x85, 0, 1, 0, 1), Insn(0x95), Insn(0xB7, 0, 0, 0, 5),
                 Insn(0x95)]


def test_stack_frames_are_charged_to_the_memory_budget_as_on_the_other_tiers():
    from bpfmux.errors import BpfError

    messages = []
    for tier in ("checked", "fast", "native"):
        with VM(memory_budget=2 * 1024 + 100) as vm:  # two frames (1 KiB each with their guard) fit
            prog = vm.load(_THREE_FRAMES)
            with pytest.raises(BpfError, match="a program stack frame needs 1.0 KiB") as e:
                prog.run(tier=tier)
            messages.append(str(e.value))
            assert vm.memory.used == 2 * 1024
    assert len(set(messages)) == 1


def test_region_table_is_charged_or_left_to_the_callback():
    """The region table grows within the memory budget; without room, the
    code reaches every region through the callback, with the same results."""
    ctx = bytes(range(16))
    src = "ldxdw %r0, [%r1+8]\nstxdw [%r10-8], %r0\nldxdw %r0, [%r10-8]\nexit"
    want = struct.unpack_from("<Q", ctx, 8)[0]
    with VM(memory_budget=1024 + 100) as vm:  # one frame, no table
        res = vm.load(assemble(src)).run(ctx, tier="native")
        assert (res.r0, res.tier) == (want, "native")
        assert vm.memory.used == 1024
    with VM() as vm:
        res = vm.load(assemble(src)).run(ctx, tier="native")
        assert (res.r0, res.tier) == (want, "native")
        assert vm.memory.used == 1024 + 24 * 256  # the frame and the table's first 256 entries


def test_a_long_run_counts_exactly_and_stops_at_its_last_check():
    n = 10_000_000
    need = 3 * n + 3
    with VM(run_budget=need) as vm:
        prog = vm.load(assemble(f"mov %r0, 0\nmov %r1, {n}\nloop:\nadd %r0, 1\nsub %r1, 1\njne %r1, 0, loop\nexit"))
        res = prog.run(tier="native")
        assert (res.r0, res.insns, res.tier) == (n, need, "native")
        vm.run_budget = need - 4  # the last check (the last back edge) sees 3n - 1 counted: passes
        assert prog.run(tier="native").r0 == n
        vm.run_budget = need - 5  # that check fails
        text, pc, _ = _fault(prog, "native")
        assert text.startswith(f"insn 2: run budget of {need - 5} instructions exhausted") and pc == 2
        assert (text, pc) == _fault(prog, "fast")[:2]


def test_a_signal_ends_a_run_that_calls_helpers():
    """A signal arriving while native code runs is handled at the next
    callback's first instruction, where ``ctypes`` would print and drop the
    handler's exception: it ends the run instead."""
    import signal
    import time

    class Alarm(Exception):
        pass

    def ring(*_):
        raise Alarm

    with VM(run_budget=1 << 62) as vm:
        prog = vm.load(assemble("mov %r6, 0\nloop:\ncall 5\nadd %r6, 1\nja loop\nexit"))  # bpf_ktime_get_ns
        assert native.native_code(prog) is not None
        old = signal.signal(signal.SIGALRM, ring)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            t0 = time.monotonic()
            with pytest.raises(Alarm):
                prog.run(tier="native")
            assert time.monotonic() - t0 < 10
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def test_unknown_helper_with_a_negative_id_is_named_as_on_the_checked_tier():
    with VM() as vm:
        prog = vm.load([Insn(0x85, 0, 0, 0, -1), Insn(0x95)])
        assert _fault(prog, "native") == _fault(prog, "checked")
        assert "unknown helper -1;" in _fault(prog, "native")[0]
