"""Instruction semantics of the emulator's VM, on every tier.

Every program runs on the checked and the fast tier; the two must agree and
match the kernel's documented semantics.
"""

from __future__ import annotations

import struct

import pytest

from bpfmux.emu import VM, RunContext
from bpfmux.errors import EmulatorFault
from bpfmux.isa.asm import assemble
from bpfmux.isa.insn import Insn

M64 = (1 << 64) - 1


@pytest.fixture
def vm():
    with VM() as v:
        yield v


def run_both(vm, src, ctx=None, **kw):
    """Run on both tiers; assert they agree; return the checked result."""
    insns = assemble(src) if isinstance(src, str) else src
    prog = vm.load(insns)
    a = prog.run(ctx, tier="checked", **kw)
    for tier in ("fast", "native"):
        b = prog.run(ctx, tier=tier, **kw)
        assert (a.r0, a.ctx) == (b.r0, b.ctx), tier
    return a


def r0(vm, src, **kw):
    return run_both(vm, src, **kw).r0


def fault_both(vm, src, ctx=None, **kw):
    """Both tiers fault with the same message, pc and address; return it."""
    prog = vm.load(assemble(src) if isinstance(src, str) else src)
    faults = []
    for tier in ("checked", "fast", "native"):
        with pytest.raises(EmulatorFault) as ei:
            prog.run(ctx, tier=tier, **kw)
        faults.append(ei.value)
    a = faults[0]
    for b in faults[1:]:
        assert (str(a), a.pc, a.address) == (str(b), b.pc, b.address)
    return a


class TestAlu:
    def test_32bit_ops_zero_extend(self, vm):
        assert r0(vm, "lddw %r0, 0xffffffffffffffff\nadd32 %r0, 1\nexit") == 0
        assert r0(vm, "lddw %r0, 0xffffffff00000005\nmov32 %r0, %r0\nexit") == 5
        assert r0(vm, "mov %r0, -1\nexit") == M64
        assert r0(vm, "mov32 %r0, -1\nexit") == 0xFFFFFFFF

    @pytest.mark.parametrize("src,expected", [
        ("mov %r0, 7\nmov %r1, 0\ndiv %r0, %r1\nexit", 0),
        ("mov %r0, 7\nmov %r1, 0\nmod %r0, %r1\nexit", 7),
        ("lddw %r0, 0x1234567800000007\nmov %r1, 0\nmod32 %r0, %r1\nexit", 7),
        ("lddw %r0, 0x1234567800000007\nmov %r1, 0\ndiv32 %r0, %r1\nexit", 0),
        ("mov %r0, -7\nmov %r1, 0\nsdiv %r0, %r1\nexit", 0),
        ("mov %r0, -7\nmov %r1, 0\nsmod %r0, %r1\nexit", (-7) & M64),
    ])
    def test_division_by_zero(self, vm, src, expected):
        assert r0(vm, src) == expected

    def test_signed_division_truncates(self, vm):
        assert r0(vm, "mov %r0, -7\nsdiv %r0, 2\nexit") == (-3) & M64
        assert r0(vm, "mov %r0, -7\nsmod %r0, 2\nexit") == (-1) & M64
        assert r0(vm, "mov %r0, 7\nsmod %r0, -2\nexit") == 1
        assert r0(vm, "lddw %r0, 0x8000000000000000\nsdiv %r0, -1\nexit") == 1 << 63
        assert r0(vm, "lddw %r0, 0x8000000000000000\nsmod %r0, -1\nexit") == 0
        assert r0(vm, "mov32 %r0, 0x80000000\nsdiv32 %r0, -1\nexit") == 0x80000000
        assert r0(vm, "mov32 %r0, -7\nsmod32 %r0, 2\nexit") == 0xFFFFFFFF

    def test_shifts_mask_their_amount(self, vm):
        assert r0(vm, "mov %r0, 1\nmov %r1, 65\nlsh %r0, %r1\nexit") == 2
        assert r0(vm, "mov %r0, 1\nmov %r1, 33\nlsh32 %r0, %r1\nexit") == 2
        assert r0(vm, "mov %r0, -8\nmov %r1, 66\narsh %r0, %r1\nexit") == (-2) & M64
        assert r0(vm, "mov32 %r0, -8\nmov %r1, 34\narsh32 %r0, %r1\nexit") == 0xFFFFFFFE
        assert r0(vm, "mov %r0, -1\nmov %r1, 68\nrsh %r0, %r1\nexit") == M64 >> 4

    def test_neg_and_movsx(self, vm):
        assert r0(vm, "mov %r0, 5\nneg %r0\nexit") == (-5) & M64
        assert r0(vm, "mov %r0, 5\nneg32 %r0\nexit") == (-5) & 0xFFFFFFFF
        assert r0(vm, "mov %r1, 0x80\nmovsx864 %r0, %r1\nexit") == (-128) & M64
        assert r0(vm, "mov %r1, 0x8000\nmovsx1632 %r0, %r1\nexit") == 0xFFFF8000
        assert r0(vm, "mov32 %r1, 0x80000000\nmovsx3264 %r0, %r1\nexit") == 0xFFFFFFFF80000000

    def test_byte_swaps(self, vm):
        assert r0(vm, "lddw %r0, 0x1122334455667788\nbe16 %r0\nexit") == 0x8877
        assert r0(vm, "lddw %r0, 0x1122334455667788\nbe32 %r0\nexit") == 0x88776655
        assert r0(vm, "lddw %r0, 0x1122334455667788\nbe64 %r0\nexit") == 0x8877665544332211
        assert r0(vm, "lddw %r0, 0x1122334455667788\nle16 %r0\nexit") == 0x7788
        assert r0(vm, "lddw %r0, 0x1122334455667788\nle64 %r0\nexit") == 0x1122334455667788
        assert r0(vm, "lddw %r0, 0x1122334455667788\nbswap32 %r0\nexit") == 0x88776655


class TestJumps:
    def test_signed_and_unsigned_compares(self, vm):
        src = "mov %r0, 0\nmov %r1, -1\njsgt %r1, 0, +1\nmov %r0, 1\nexit"
        assert r0(vm, src) == 1
        src = "mov %r0, 0\nmov %r1, -1\njgt %r1, 0, +1\nmov %r0, 1\nexit"
        assert r0(vm, src) == 0

    def test_jmp32_compares_low_half(self, vm):
        src = "lddw %r1, 0xffffffff00000005\nmov %r0, 0\njeq32 %r1, 5, +1\nmov %r0, 1\nexit"
        assert r0(vm, src) == 0
        src = "lddw %r1, 0xffffffff00000005\nmov %r0, 0\njeq %r1, 5, +1\nmov %r0, 1\nexit"
        assert r0(vm, src) == 1

    def test_gotol(self, vm):
        assert r0(vm, "mov %r0, 1\nja32 +1\nmov %r0, 2\nexit") == 1

    def test_jump_outside_the_program_faults(self, vm):
        f = fault_both(vm, [Insn(0x05, 0, 0, 5, 0), Insn(0x95)])
        assert f.pc == 6 and "outside the program" in str(f)

    def test_falling_off_the_end_faults(self, vm):
        f = fault_both(vm, "mov %r0, 1")
        assert f.pc == 1

    def test_jump_into_lddw_faults(self, vm):
        f = fault_both(vm, [Insn(0x05, 0, 0, 1, 0), Insn(0x18, 0, 0, 0, 5), Insn(0x95)])
        assert f.pc == 2 and "middle of an lddw" in str(f)

    def test_may_goto_budget(self, vm):
        # an endless loop ended by may_goto once the run's budget is used up
        assert vm.may_goto_budget == 8 * 1024 * 1024  # the kernel's BPF_MAX_LOOPS
        vm.may_goto_budget = 1000
        src = "mov %r0, 0\nloop:\nmay_goto out\nadd %r0, 1\nja loop\nout:\nexit"
        assert r0(vm, src) == 1000


class TestLoops:
    def test_nested_loops(self, vm):
        src = """
        mov %r0, 0
        mov %r1, 0
        outer:
        mov %r2, 0
        inner:
        add %r0, %r2
        add %r2, 1
        jlt %r2, 10, inner
        add %r1, 1
        jlt %r1, 10, outer
        exit
        """
        assert r0(vm, src) == 450

    def test_continue_outer_loop_from_inner(self, vm):
        src = """
        mov %r0, 0
        mov %r1, 0
        outer:
        add %r1, 1
        jgt %r1, 5, done
        mov %r2, 0
        inner:
        add %r2, 1
        add %r0, 1
        jeq %r2, 3, outer
        jlt %r2, 100, inner
        done:
        exit
        """
        assert r0(vm, src) == 15

    def test_runaway_loop_is_stopped_on_both_tiers(self, vm):
        vm.max_insns = 10_000
        vm.max_loop_iterations = 10_000
        prog = vm.load(assemble("mov %r0, 0\nloop:\nadd %r0, 1\nja loop"))
        for tier in ("checked", "fast"):
            with pytest.raises(EmulatorFault, match="does not terminate"):
                prog.run(tier=tier)

    def test_irreducible_flow_matches(self, vm):
        # two entries into a cycle: the fast tier falls back to block dispatch
        src = """
        mov %r0, 0
        mov %r1, 0
        jeq %r1, 0, b
        a:
        add %r0, 1
        b:
        add %r0, 2
        add %r1, 1
        jlt %r1, 4, a
        exit
        """
        assert r0(vm, src) == 2 + 3 * 3


class TestMemory:
    def test_stack_and_ctx(self, vm):
        res = run_both(vm, "stdw [%r10-8], 7\nldxdw %r0, [%r10-8]\nstxw [%r1+4], %r0\nexit", bytes(8))
        assert res.r0 == 7 and res.ctx == b"\0\0\0\0\x07\0\0\0"

    def test_sign_extending_loads(self, vm):
        res = run_both(vm, "ldxsb %r0, [%r1]\nldxsh %r2, [%r1+2]\nadd %r0, %r2\nexit", b"\xff\x00\xfe\xff")
        assert res.r0 == (-3) & M64

    def test_context_is_mapped_in_place(self, vm):
        buf = bytearray(16)
        vm.load(assemble("mov %r2, 99\nstxb [%r1+3], %r2\nmov %r0, 0\nexit")).run(buf, ctx_offset=8)
        assert buf[11] == 99

    def test_read_only_context(self, vm):
        f = fault_both(vm, "stb [%r1], 1\nexit", bytes(4), ctx_writable=False)
        assert "read-only" in str(f) and f.pc == 0

    def test_out_of_bounds_access_names_insn_and_address(self, vm):
        prog = vm.load(assemble("mov %r0, 0\nldxw %r0, [%r1+6]\nexit"))
        for tier in ("checked", "fast"):
            with pytest.raises(EmulatorFault) as ei:
                prog.run(bytes(8), tier=tier)
            assert ei.value.pc == 1
            assert ei.value.address is not None and ei.value.address & 0xFFFFFFFF == 6
            assert "out of bounds" in str(ei.value)

    def test_stack_underflow_faults(self, vm):
        f = fault_both(vm, "ldxdw %r0, [%r10-520]\nexit")
        assert f.pc == 0 and "8 bytes below stack" in str(f)

    def test_null_and_wild_pointers_fault(self, vm):
        assert "no memory" in str(fault_both(vm, "mov %r1, 0\nldxb %r0, [%r1]\nexit"))
        assert fault_both(vm, "lddw %r1, 0x123456789\nstxdw [%r1], %r1\nexit").address == 0x123456789

    def test_r10_is_read_only(self, vm):
        f = fault_both(vm, "mov %r10, 0\nexit")
        assert "read-only" in str(f)

    def test_atomics(self, vm):
        src = """
        stdw [%r10-8], 10
        mov %r1, 5
        lock fetch add [%r10-8], %r1
        ldxdw %r2, [%r10-8]
        mov %r0, %r1
        lsh %r0, 8
        or %r0, %r2
        mov %r3, 0xff
        lock and32 [%r10-8], %r3
        mov %r4, 1
        lock fetch xor [%r10-8], %r4
        ldxdw %r5, [%r10-8]
        lsh %r5, 16
        or %r0, %r5
        exit
        """
        assert r0(vm, src) == (14 << 16) | (10 << 8) | 15

    def test_cmpxchg_and_xchg(self, vm):
        src = """
        stdw [%r10-8], 3
        mov %r0, 3
        mov %r1, 9
        lock cmpxchg [%r10-8], %r1
        mov %r2, %r0
        mov %r0, 4
        lock cmpxchg [%r10-8], %r1
        mov %r3, 77
        lock xchg [%r10-8], %r3
        lsh %r2, 16
        lsh %r0, 8
        or %r0, %r2
        or %r0, %r3
        exit
        """
        assert r0(vm, src) == (3 << 16) | (9 << 8) | 9

    def test_load_acquire_store_release(self, vm):
        src = "mov %r2, 0x1234\nstreldw [%r10-8], %r2\nldacqh %r0, [%r10-8]\nexit"
        assert r0(vm, src) == 0x1234


class TestCalls:
    def test_bpf_to_bpf_call_preserves_r6_to_r9_and_has_its_own_stack(self, vm):
        src = """
        mov %r6, 6
        stdw [%r10-8], 1
        mov %r1, 5
        call local f
        ldxdw %r2, [%r10-8]
        add %r0, %r2
        add %r0, %r6
        exit
        f:
        stdw [%r10-8], 100
        ldxdw %r0, [%r10-8]
        add %r0, %r1
        mov %r6, 0
        exit
        """
        assert r0(vm, src) == 105 + 1 + 6

    def test_callee_gets_pointer_to_callers_stack(self, vm):
        src = """
        stdw [%r10-8], 40
        mov %r1, %r10
        add %r1, -8
        call local f
        ldxdw %r0, [%r10-8]
        exit
        f:
        ldxdw %r2, [%r1]
        add %r2, 2
        stxdw [%r1], %r2
        exit
        """
        assert r0(vm, src) == 42

    def test_call_depth_is_limited_to_8_frames(self, vm):
        src = "call local f\nexit\nf:\ncall local f\nexit"
        f = fault_both(vm, src)
        assert "call depth exceeds 8" in str(f) and f.pc == 2

    def test_unknown_helper_faults(self, vm):
        assert "unknown helper 9999" in str(fault_both(vm, "call 9999\nexit"))

    def test_callx_with_function_address(self, vm):
        src = "lddw %r2, func(f)\nmov %r1, 20\ncall %r2\nexit\nf:\nmov %r0, %r1\nadd %r0, 1\nexit"
        assert r0(vm, src) == 21

    def test_fault_inside_callback_names_the_callback_insn(self, vm):
        src = """
        mov %r1, 3
        lddw %r2, func(cb)
        mov %r3, 0
        mov %r4, 0
        call 181
        exit
        cb:
        mov %r0, 0
        ldxb %r0, [%r2]
        exit
        """
        f = fault_both(vm, src)
        assert f.pc == 8  # slots: lddw takes two

    def test_helper_fault_names_calling_insn(self, vm):
        # bpf_probe_read_kernel into an unmapped destination: a program fault
        src = "mov %r1, 0\nmov %r2, 8\nmov %r3, %r10\nadd %r3, -8\ncall 113\nexit"
        f = fault_both(vm, src)
        assert f.pc == 4


class TestLddw:
    def test_map_and_value_loads(self, vm):
        from bpfmux.uapi import MapType

        data = vm.create_map(MapType.ARRAY, 4, 16, 1, name=".data")
        data[0] = struct.pack("<QQ", 5, 6)
        src = f"lddw %r1, map_value({data.fd}, 8)\nldxdw %r0, [%r1]\nadd %r0, 1\nstxdw [%r1], %r0\nexit"
        prog = vm.load(assemble(src))
        for tier in ("checked", "fast"):
            data[0] = struct.pack("<QQ", 5, 6)
            assert prog.run(tier=tier).r0 == 7
            assert data[0] == struct.pack("<QQ", 5, 7)

    def test_bad_map_fd_is_rejected_at_load(self, vm):
        from bpfmux.errors import VerifierError

        with pytest.raises(VerifierError, match="not a map"):
            vm.load(assemble("lddw %r1, map_fd(77)\nmov %r0, 0\nexit"))

    def test_fd_array(self, vm):
        from bpfmux.uapi import MapType

        m = vm.create_map(MapType.ARRAY, 4, 8, 1)
        m[0] = 31
        prog = vm.load(assemble("lddw %r1, map_idx_value(0, 0)\nldxdw %r0, [%r1]\nexit"), fd_array=[m.fd])
        assert prog.run(tier="checked").r0 == prog.run(tier="fast").r0 == 31


class TestLegacyPacket:
    def test_ld_abs_and_ind(self, vm):
        pkt = bytes(range(32))
        ctx = RunContext(packet=pkt)
        assert run_both(vm, "ldabsh 4\nexit", context=ctx).r0 == 0x0405
        assert run_both(vm, "mov %r1, 8\nldindw %r1, 2\nexit", context=ctx).r0 == 0x0A0B0C0D
        # out of the packet: the program ends with r0 = 0
        assert run_both(vm, "mov %r0, 5\nldabsw 30\nmov %r0, 9\nexit", context=ctx).r0 == 0


def test_fast_tier_dispatch_form_agrees(vm):
    """The fallback block-dispatch translation computes the same results."""
    from bpfmux.emu.vm import translate
    from bpfmux.emu.vm.progen import random_program

    for seed in range(40):
        g = random_program(seed)
        prog = vm.load(g.insns)
        structured = prog.run(g.ctx, tier="fast")
        prog._fast = translate.compile_program(prog, dispatch=True)
        assert "_nx = " in prog._fast_source
        dispatched = prog.run(g.ctx, tier="fast")
        assert (structured.r0, structured.ctx) == (dispatched.r0, dispatched.ctx)
        prog.close()


def test_source_is_cached_between_identical_programs(vm):
    from bpfmux.emu.vm import translate

    insns = assemble("mov %r0, 1\nadd %r0, 2\nexit")
    a, b = vm.load(insns), vm.load(insns, name="prog")
    a.run(tier="fast")
    before = len(translate._CODE_CACHE)
    b.run(tier="fast")
    assert len(translate._CODE_CACHE) == before
    assert a._fast[0].__code__ is b._fast[0].__code__


def test_same_source_different_slots_report_their_own_pc(vm):
    """Two programs that translate to the same Python (no-op jumps vanish)
    still name their own faulting instruction."""
    a = vm.load(assemble("ldxh %r0, [%r1+32]\nexit"))
    b = vm.load(assemble("ja +0\nja +0\nldxh %r0, [%r1+32]\nexit"))
    for prog, pc in ((b, 2), (a, 0)):
        with pytest.raises(EmulatorFault) as ei:
            prog.run(b"", tier="fast")
        assert ei.value.pc == pc


def test_fused_and_dead_values(vm):
    """Copy propagation, expression fusion and dead values keep the semantics."""
    src = """
    mov %r1, 3
    mov %r2, %r1
    add %r2, 4
    mov %r3, %r2
    mul %r3, %r3
    mov %r4, %r3
    mov %r3, 1
    or %r4, %r3
    mov %r0, %r4
    mov %r5, %r10
    add %r5, -8
    stxdw [%r5], %r0
    ldxdw %r0, [%r10-8]
    add %r0, %r2
    exit
    """
    assert r0(vm, src) == (49 | 1) + 7
