"""Trampolines of the emulated kernel run their programs' fast-tier code in line, on frames mapped once
(the per-call path ``bench/emu_dispatch.py`` measures). What they must keep: every program sees its own
call's frame (also across nested calls), a program whose tier changes after the attach runs on its new
tier, code compiled before a helper changed is rebuilt, and a fault is the same
:class:`~bpfmux.errors.EmulatorFault` as on the checked tier, leaving nothing taken."""

from __future__ import annotations

import pytest
from emu_progs import ctx_dump_prog, words

from bpfmux.emu.kernel.emulator import Emulator
from bpfmux.errors import EmulatorFault
from bpfmux.isa.build import R0, R1, R2, R6, R10, Asm
from bpfmux.uapi import AttachType, HelperId, MapType, ProgFlags, ProgType

SEED = dict(attach_type=AttachType.TRACE_FENTRY, flags=ProgFlags.MULTI_FUNC)


def _pools(emu: Emulator) -> tuple[int, int]:
    """How many run states (each frame's own) and frames are free (every taken one is given back after a call)."""
    free = [info for v in emu.policy.frames._free.values() for info in v]  # type: ignore[union-attr]
    return sum(info.rs is not None for info in free), len(free)


def test_each_call_sees_its_own_frame_also_when_nested(emu):
    """``outer``'s body calls ``inner`` (both under the seed multi program); ``outer``'s fexit program, running
    after the nested call returned, still sees ``outer``'s ip, arguments and return value."""
    inner = emu.define("inner", [8], 8, lambda a: a * 3)
    outer = emu.define("outer", [8, 8], 8, lambda a, b: emu.call(inner, a + b) + 1)
    multi, mm = ctx_dump_prog(emu, ProgType.TRACING, [8 * i for i in range(8)], name="seed", **SEED)
    emu.link_tracing_multi(multi, [inner, outer])
    fexit, fm = ctx_dump_prog(emu, ProgType.TRACING, [0, 8, 16], name="fx", attach_type=AttachType.TRACE_FEXIT,
                              attach_target="outer")
    fexit.attach("outer")
    assert emu.call(outer, 4, 5) == 28
    assert words(fm, 3) == [4, 5, 28]  # outer's a, b and ret, not inner's
    assert words(mm, 8) == [inner.addr, 9, 0, 0, 0, 0, 0, 0]  # the multi program ran last on inner's entry
    assert multi.runs == 2 and fexit.runs == 1
    run_states, frames = _pools(emu)
    assert run_states >= 2 and frames >= 2  # the nested call took a frame and a run state of its own
    assert emu.vm._running == 0
    assert emu.call(outer, 1, 1) == 7 and _pools(emu) == (run_states, frames)  # reused, not grown


@pytest.mark.parametrize("tier", ["checked", "native"])
def test_a_tier_changed_after_the_attach_is_the_one_that_runs(emu, tier):
    f = emu.define("f3", [8, 8, 8], 8, lambda a, b, c: a + b + c)
    p, m = ctx_dump_prog(emu, ProgType.TRACING, [0, 8, 16], name="fe", attach_type=AttachType.TRACE_FENTRY,
                         attach_target="f3")
    p.attach("f3")
    assert emu.call(f, 1, 2, 3) == 6 and words(m, 3) == [1, 2, 3]
    p.vmprog.tier = tier
    seen: list[str] = []
    run = p.vmprog._execute

    def spy(t, args, context):
        seen.append(t)
        return run(t, args, context)

    p.vmprog._execute = spy  # type: ignore[method-assign]
    assert emu.call(f, 7, 8, 9) == 24 and words(m, 3) == [7, 8, 9]
    assert seen and seen[0] == tier  # native falls back to the fast tier inside when it cannot compile
    assert p.runs == 2


def _prandom_prog(emu: Emulator):
    """A fentry program storing ``bpf_get_prandom_u32()`` in element 0 of a fresh array."""
    out = emu.vm.create_map(MapType.ARRAY, 4, 8, 1, name="out")
    a = Asm()
    a.call(HelperId.get_prandom_u32).mov(R6, R0)
    a.mov(R1, 0).stxw(R10, -4, R1)
    a.ld_map_fd(R1, "out").mov(R2, R10).add(R2, -4).call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out").stxdw(R0, 0, R6)
    a.label("out").mov(R0, 0).exit()
    insns = a.assemble().resolve({"out": out.fd})
    return emu.load_program(insns, ProgType.TRACING, name="rnd", attach_type=AttachType.TRACE_FENTRY,
                            attach_target="bpf_fentry_test1"), out


def test_code_compiled_before_a_helper_changed_is_rebuilt(emu):
    p, out = _prandom_prog(emu)
    p.attach("bpf_fentry_test1")
    emu.vm.helpers.register(int(HelperId.get_prandom_u32), lambda rs, *a: 0x1234, "get_prandom_u32")
    emu.call("bpf_fentry_test1", 1)
    assert words(out, 1) == [0x1234]
    emu.vm.helpers.register(int(HelperId.get_prandom_u32), lambda rs, *a: 0x5678, "get_prandom_u32")
    emu.call("bpf_fentry_test1", 1)
    assert words(out, 1) == [0x5678]


def _faulting(emu: Emulator, name: str):
    """Reads ctx past the end of a one-argument function's frame (loaded unverified: the verifier would refuse)."""
    insns = Asm().ldxdw(R0, R1, 64).mov(R0, 0).exit().assemble().insns
    return emu.load_program(insns, ProgType.TRACING, name=name, attach_type=AttachType.TRACE_FENTRY,
                            attach_target="bpf_fentry_test1")


def test_a_fault_is_the_checked_tiers_and_leaves_nothing_taken(emulator_factory):
    emu = emulator_factory(btf=None, verify=False)
    p = _faulting(emu, "bad")
    p.attach("bpf_fentry_test1")
    with pytest.raises(EmulatorFault) as fast:
        emu.call("bpf_fentry_test1", 1)
    before = _pools(emu)
    assert emu.vm._running == 0
    p.vmprog.tier = "checked"
    with pytest.raises(EmulatorFault) as checked:
        emu.call("bpf_fentry_test1", 1)
    assert (fast.value.pc, fast.value.address) == (checked.value.pc, checked.value.address) == (0, fast.value.address)
    assert fast.value.address is not None
    assert emu.vm._running == 0 and _pools(emu) == before
    assert emu.call("bpf_fentry_test2", 1, 2) == 3  # nothing left held: other calls run
