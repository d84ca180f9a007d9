"""Helpers: function ip/args/ret, attach cookie, bpf_loop, for_each_map_elem,
spin locks, bpf_strncmp — on every tier."""

from __future__ import annotations

import errno
import struct

import pytest

from bpfmux.emu import VM, FuncCall, RunContext
from bpfmux.errors import EmulatorFault
from bpfmux.isa.asm import assemble
from bpfmux.uapi import MapType

M64 = 2**64 - 1


@pytest.fixture
def vm():
    with VM() as v:
        yield v


def both(vm, src, ctx=None, **kw):
    prog = vm.load(assemble(src))
    a = prog.run(ctx, tier="checked", **kw)
    for tier in ("fast", "native"):
        b = prog.run(ctx, tier=tier, **kw)
        assert (a.r0, a.ctx) == (b.r0, b.ctx), tier
    return a


class TestTracing:
    CALL = FuncCall(ip=0xFFFFFFFF81234560, args=[11, 22, 33], retval=None, cookie=5)

    def test_func_ip_and_arg_cnt(self, vm):
        ctx = RunContext(tracing=self.CALL)
        assert both(vm, "call 173\nexit", context=ctx).r0 == 0xFFFFFFFF81234560
        assert both(vm, "call 185\nexit", context=ctx).r0 == 3
        assert both(vm, "call 173\nexit").r0 == 0  # no tracing context

    def test_get_func_arg(self, vm):
        ctx = RunContext(tracing=self.CALL)
        src = "mov %r2, {n}\nmov %r3, %r1\ncall 183\nexit"
        res = both(vm, src.format(n=1), bytes(8), context=ctx)
        assert res.r0 == 0 and struct.unpack("<Q", res.ctx)[0] == 22
        res = both(vm, src.format(n=3), b"\x01" * 8, context=ctx)
        assert res.r0 == (-errno.EINVAL) & M64 and res.ctx == b"\x01" * 8  # value left alone

    def test_get_func_ret(self, vm):
        src = "mov %r2, %r1\ncall 184\nexit"
        res = both(vm, src, bytes(8), context=RunContext(tracing=self.CALL))
        assert res.r0 == (-errno.EOPNOTSUPP) & M64
        done = FuncCall(ip=1, args=[1], retval=-2)
        res = both(vm, src, bytes(8), context=RunContext(tracing=done))
        assert res.r0 == 0 and res.ctx == struct.pack("<q", -2)

    def test_attach_cookie(self, vm):
        assert both(vm, "call 174\nexit", context=RunContext(tracing=self.CALL)).r0 == 5
        assert both(vm, "call 174\nexit", context=RunContext(tracing=self.CALL, cookie=9)).r0 == 9
        assert both(vm, "call 174\nexit", context=RunContext(cookie=3)).r0 == 3
        assert both(vm, "call 174\nexit").r0 == 0

    def test_trampoline_call_info_fits(self, vm):
        """The trampoline layer's CallInfo works as RunContext.tracing."""
        from bpfmux.emu.kernel.trampoline.frame import CallInfo

        frame = bytearray(struct.pack("<8Q", 0xABC, 7, 8, 0, 0, 0, 0, 0))
        info = CallInfo(ip=0xABC, nargs=2, frame=frame, cookie=4)
        ctx = RunContext(tracing=info)
        assert both(vm, "call 185\nexit", context=ctx).r0 == 2
        res = both(vm, "mov %r2, 1\nmov %r3, %r1\ncall 183\nexit", bytes(8), context=ctx)
        assert struct.unpack("<Q", res.ctx)[0] == 8


class TestLoop:
    SRC = """
    stdw [%r10-8], 0
    mov %r1, {n}
    lddw %r2, func(cb)
    mov %r3, %r10
    add %r3, -8
    mov %r4, {flags}
    call 181
    ldxdw %r1, [%r10-8]
    lsh %r1, 32
    or %r0, %r1
    exit
    cb:
    ldxdw %r3, [%r2]
    add %r3, %r1
    add %r3, 1
    stxdw [%r2], %r3
    mov %r0, 0
    jlt %r1, 4, +1
    mov %r0, 1
    exit
    """

    def test_callback_until_it_returns_one(self, vm):
        r0 = both(vm, self.SRC.format(n=10, flags=0)).r0
        assert r0 & 0xFFFFFFFF == 5 and r0 >> 32 == 1 + 2 + 3 + 4 + 5

    def test_all_iterations(self, vm):
        r0 = both(vm, self.SRC.format(n=3, flags=0)).r0
        assert r0 & 0xFFFFFFFF == 3 and r0 >> 32 == 6

    def test_bad_flags_and_too_many_loops(self, vm):
        assert both(vm, self.SRC.format(n=3, flags=1)).r0 & 0xFFFFFFFF == (-errno.EINVAL) & 0xFFFFFFFF
        assert both(vm, self.SRC.format(n=(1 << 23) + 1, flags=0)).r0 & 0xFFFFFFFF == (-errno.E2BIG) & 0xFFFFFFFF

    def test_callback_must_be_a_function(self, vm):
        with pytest.raises(EmulatorFault, match="not the address of a BPF function"):
            vm.load(assemble("mov %r1, 1\nmov %r2, 1234\nmov %r3, 0\nmov %r4, 0\ncall 181\nexit")).run()


def test_for_each_map_elem(vm):
    m = vm.create_map(MapType.HASH, 4, 8, 8)
    src = f"""
    stdw [%r10-8], 0
    lddw %r1, map_fd({m.fd})
    lddw %r2, func(cb)
    mov %r3, %r10
    add %r3, -8
    mov %r4, 0
    call 164
    ldxdw %r1, [%r10-8]
    lsh %r1, 8
    or %r0, %r1
    exit
    cb:
    ldxw %r5, [%r2]
    ldxdw %r6, [%r3]
    add %r6, %r5
    stxdw [%r3], %r6
    ldxdw %r7, [%r4]
    add %r7, %r6
    stxdw [%r4], %r7
    mov %r0, 0
    exit
    """
    prog = vm.load(assemble(src))
    for tier in ("checked", "fast", "native"):
        for k in (1, 2, 3):
            m[k] = k * 10
        r0 = prog.run(tier=tier).r0
        assert r0 & 0xFF == 3 and r0 >> 8 == 11 + 22 + 33
        # the callback wrote through the value pointers
        assert sorted(struct.unpack("<Q", v)[0] for v in m.values()) == [11, 22, 33]


class TestSpinLock:
    def test_lock_unlock(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 16, 1)
        src = f"""
        lddw %r6, map_value({m.fd}, 0)
        mov %r1, %r6
        call 93
        ldxdw %r7, [%r6+8]
        add %r7, 1
        stxdw [%r6+8], %r7
        mov %r1, %r6
        call 94
        ldxw %r0, [%r6]
        exit
        """
        assert both(vm, src).r0 == 0
        assert struct.unpack("<IIQ", m[0]) == (0, 0, 3)  # one run per tier

    def test_double_lock_and_bad_unlock_fault(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 1)
        dead = f"lddw %r1, map_value({m.fd}, 0)\ncall 93\nlddw %r1, map_value({m.fd}, 0)\ncall 93\nexit"
        with pytest.raises(EmulatorFault, match="already held") as ei:
            vm.load(assemble(dead)).run(tier="fast")
        assert ei.value.pc == 5
        m[0] = 0
        with pytest.raises(EmulatorFault, match="not held"):
            vm.load(assemble(f"lddw %r1, map_value({m.fd}, 0)\ncall 94\nexit")).run(tier="checked")


def test_strncmp(vm):
    src = "mov %r2, {n}\nmov %r3, %r1\nadd %r3, 8\ncall 182\nexit"
    data = b"abcdefgh" + b"abcz\0\0\0\0"
    assert both(vm, src.format(n=3), data).r0 == 0
    assert both(vm, src.format(n=4), data).r0 == M64  # 'd' < 'z'
    data = b"abd\0xxxx" + b"abc\0\0\0\0\0"
    assert both(vm, src.format(n=8), data).r0 == 1
    data = b"ab\0\0xxxx" + b"ab\0\0\0\0\0\0"
    assert both(vm, src.format(n=8), data).r0 == 0


def test_session_kfuncs(vm):
    from bpfmux.emu.vm.helpers.tracing import KFUNCS

    vm.register_kfunc(1001, KFUNCS["bpf_session_is_return"])
    vm.register_kfunc(1002, KFUNCS["bpf_session_cookie"])
    cookie = vm.space.map(8, "cookie")
    src = "call runtime 1001\nmov %r6, %r0\ncall runtime 1002\nmov %r1, 7\nstxdw [%r0], %r1\nmov %r0, %r6\nexit"
    prog = vm.load(assemble(src))
    for tier in ("checked", "fast", "native"):
        cookie.buf[:] = bytes(8)
        r0 = prog.run(tier=tier, context=RunContext(session_is_return=True, session_cookie=cookie.base)).r0
        assert r0 == 1 and struct.unpack("<Q", cookie.buf)[0] == 7
    assert both(vm, "call runtime 1001\nexit", context=RunContext(session_cookie=cookie.base)).r0 == 0
