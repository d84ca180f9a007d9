"""The checked and the fast tier give identical results.

Random programs (:mod:`bpfmux.emu.progen`) — verifier-valid ones and wild
ones that fault — run on both tiers: the same ``r0`` and context, or the same
fault (message, instruction and address).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.emu import VM
from bpfmux.emu.progen import CTX_SIZE, random_program
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
