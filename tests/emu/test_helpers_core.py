"""Helpers: clock, task, CPU, random numbers, probe reads, trace_printk."""

from __future__ import annotations

import errno
import struct

import pytest

from bpfmux.emu import VM, AddressSpace, Clock, RunContext, Task
from bpfmux.emu.vm.helpers import HelperTable
from bpfmux.errors import BpfmuxError, EmulatorFault, NotSupportedError
from bpfmux.isa.asm import assemble

M64 = 2**64 - 1


@pytest.fixture
def vm():
    with VM(ncpus=4) as v:
        yield v


def both(vm, src, ctx=None, **kw):
    prog = vm.load(assemble(src))
    a = prog.run(ctx, tier="checked", **kw)
    b = prog.run(ctx, tier="fast", **kw)
    assert (a.r0, a.ctx) == (b.r0, b.ctx)
    return a


class TestClockAndTask:
    def test_settable_clock(self, vm):
        vm.clock.set(1_000_000_000)
        assert both(vm, "call 5\nexit").r0 == 1_000_000_000
        vm.clock.advance(5)
        assert both(vm, "call 5\nexit").r0 == 1_000_000_005
        assert both(vm, "call 125\nexit").r0 == 1_000_000_005  # boot clock (no suspend)
        assert both(vm, "call 208\nexit").r0 == 1_000_000_005 + vm.clock.tai_offset
        assert both(vm, "call 118\nexit").r0 == 250  # jiffies at HZ=250

    def test_auto_step_clock(self):
        with VM(clock=Clock(now=100, auto_step=10)) as vm:
            assert vm.load(assemble("call 5\nmov %r6, %r0\ncall 5\nsub %r0, %r6\nexit")).run().r0 == 10

    def test_running_clock_moves(self, vm):
        a = vm.load(assemble("call 5\nexit")).run().r0
        b = vm.load(assemble("call 5\nexit")).run().r0
        assert 0 < a <= b

    def test_current_task(self, vm):
        vm.task = Task(pid=1234, tgid=1200, comm="worker", uid=1000, gid=100)
        assert both(vm, "call 14\nexit").r0 == (1200 << 32) | 1234
        assert both(vm, "call 15\nexit").r0 == (100 << 32) | 1000
        other = RunContext(task=Task(pid=5, tgid=5, comm="a-very-long-command-name"))
        assert both(vm, "call 14\nexit", context=other).r0 == (5 << 32) | 5

    def test_current_task_struct(self, vm):
        """bpf_get_current_task (35) and bpf_get_current_task_btf (158) give the task_struct the caller
        placed for the task; a task without one is refused, saying what to give."""
        vm.task = Task(pid=7, tgid=7, task_struct=0xFFFF_8880_0123_4000)
        assert both(vm, "call 35\nexit").r0 == 0xFFFF_8880_0123_4000
        assert both(vm, "call 158\nexit").r0 == 0xFFFF_8880_0123_4000
        vm.task = Task(pid=7, tgid=7)
        for hid in (35, 158):
            for tier in ("checked", "fast"):
                with pytest.raises(NotSupportedError, match="Task.task_struct"):
                    vm.load(assemble(f"call {hid}\nexit")).run(tier=tier)

    def test_get_current_comm(self, vm):
        vm.task = Task(comm="a-very-long-command-name")
        src = "mov %r1, %r1\nmov %r2, 16\ncall 16\nexit"
        assert both(vm, src, bytes(16)).ctx == b"a-very-long-com\0"
        src = "mov %r2, 4\ncall 16\nexit"
        assert both(vm, src, b"\xff" * 8).ctx == b"a-v\0" + b"\xff" * 4
        vm.task = Task(comm="sh")
        assert both(vm, "mov %r2, 8\ncall 16\nexit", b"\xff" * 8).ctx == b"sh\0\0\0\0\0\0"
        assert both(vm, "mov %r2, 0\ncall 16\nexit", bytes(1)).r0 == (-errno.EINVAL) & M64

    def test_cpu(self, vm):
        assert both(vm, "call 8\nexit").r0 == 0
        vm.cpu = 2
        assert both(vm, "call 8\nexit").r0 == 2
        assert both(vm, "call 8\nexit", context=RunContext(cpu=3)).r0 == 3
        with pytest.raises(BpfmuxError, match="cpu 4 does not exist"):
            vm.load(assemble("call 8\nexit")).run(context=RunContext(cpu=4))
        assert both(vm, "call 42\nexit").r0 == 0

    def test_prandom_is_seeded(self):
        outs = []
        for _ in range(2):
            with VM(seed=7) as vm:
                prog = vm.load(assemble("call 7\nexit"))
                outs.append([prog.run().r0 for _ in range(5)])
        assert outs[0] == outs[1] and len(set(outs[0])) > 1 and all(v < 2**32 for v in outs[0])


class TestProbeRead:
    def test_probe_read_kernel(self, vm):
        src = "mov %r3, %r1\nadd %r3, 8\nmov %r2, 4\ncall 113\nexit"
        res = both(vm, src, bytes(8) + b"abcd")
        assert res.r0 == 0 and res.ctx == b"abcd" + bytes(4) + b"abcd"

    def test_failed_read_zeroes_destination(self, vm):
        src = "mov %r3, 16\nmov %r2, 4\ncall 113\nexit"
        res = both(vm, src, b"\xff" * 8)
        assert res.r0 == (-errno.EFAULT) & M64 and res.ctx == bytes(4) + b"\xff" * 4

    def test_probe_read_kernel_str(self, vm):
        data = b"\0" * 8 + b"hi\0zz"
        src = "mov %r3, %r1\nadd %r3, 8\nmov %r2, 8\ncall 115\nexit"
        res = both(vm, src, data)
        assert res.r0 == 3 and res.ctx[:3] == b"hi\0"
        src = "mov %r3, %r1\nadd %r3, 8\nmov %r2, 2\ncall 115\nexit"
        res = both(vm, src, data)
        assert res.r0 == 2 and res.ctx[:2] == b"h\0"

    def test_probe_read_user_from_task_memory(self, vm):
        user = AddressSpace()
        region = user.map(bytearray(b"user-data\0"), "stack")
        vm.task = Task(memory=user)
        src = f"lddw %r3, {region.base:#x}\nmov %r2, 10\ncall 114\nexit"
        res = both(vm, src, bytes(10))
        assert res.r0 == 10 and res.ctx == b"user-data\0"
        res = both(vm, f"lddw %r3, {region.base:#x}\nmov %r2, 4\ncall 112\nexit", bytes(4))
        assert res.ctx == b"user"
        vm.task = Task()  # no user memory: -EFAULT
        assert both(vm, src, bytes(10)).r0 == (-errno.EFAULT) & M64

    def test_legacy_probe_read_picks_the_address_space(self, vm):
        user = AddressSpace(first_slot=0x10)
        region = user.map(bytearray(b"U"), "u")
        assert region.base == 0x10_0000_0000
        vm.task = Task(memory=user)
        # a kernel-half address is read from the VM, a user one from the task
        res = both(vm, "mov %r3, %r1\nadd %r3, 1\nmov %r2, 1\ncall 4\nexit", b"\0K")
        assert res.ctx == b"KK"
        res = both(vm, f"lddw %r3, {region.base:#x}\nmov %r2, 1\ncall 45\nexit", b"\xff\xff")
        assert res.r0 == 1 and res.ctx == b"\0\xff"  # a 1-byte string: just the NUL
        res = both(vm, f"lddw %r3, {region.base:#x}\nmov %r2, 1\ncall 4\nexit", b"\0")
        assert res.ctx == b"U"
        assert both(vm, "mov %r3, 0x1000\nmov %r2, 1\ncall 4\nexit", b"\0").r0 == (-errno.EFAULT) & M64

    def test_bad_destination_is_a_program_fault(self, vm):
        prog = vm.load(assemble("mov %r1, 0\nmov %r2, 4\nmov %r3, 0\ncall 113\nexit"))
        for tier in ("checked", "fast", "native"):
            with pytest.raises(EmulatorFault) as ei:
                prog.run(tier=tier)
            assert ei.value.pc == 3


class TestTracePrintk:
    def printk(self, vm, fmt: bytes, *args: int):
        ctx = fmt + b"\0"
        movs = "\n".join(f"lddw %r{3 + i}, {a & M64:#x}" for i, a in enumerate(args))
        src = f"mov %r2, {len(ctx)}\n{movs}\ncall 6\nexit"
        vm.trace_log.clear()
        prog = vm.load(assemble(src))
        r = prog.run(ctx, tier="checked").r0
        first = list(vm.trace_log)
        assert prog.run(ctx, tier="fast").r0 == r
        assert vm.trace_log == first * 2
        return r, first

    def test_integers(self, vm):
        r, log = self.printk(vm, b"a=%d b=%u c=%x\n", -5, -1, 255)
        assert log == [f"a=-5 b={2**32 - 1} c=ff\n"]
        assert r == len(log[0])
        r, log = self.printk(vm, b"d=%lld e=%lx f=%llu", -7, 2**40, -1)
        assert log == [f"d=-7 e={2**40:x} f={2**64 - 1}"]

    def test_flags_width_and_char(self, vm):
        _, log = self.printk(vm, b"[%5d|%-4x|%04u]", 42, 10, 7)
        assert log == ["[   42|a   |0007]"]
        _, log = self.printk(vm, b"%c%c", ord("O"), ord("K"))
        assert log == ["OK"]

    def test_string_and_percent(self, vm):
        vm.trace_log.clear()
        src = "mov %r3, %r1\nadd %r3, 8\nmov %r2, 8\ncall 6\nexit"
        vm.load(assemble(src)).run(b"s=%s%%\0\0" + b"text\0")
        assert vm.trace_log == ["s=text%"]

    def test_invalid_format_is_einval(self, vm):
        r, log = self.printk(vm, b"%q", 1)
        assert r == (-errno.EINVAL) & M64 and log == []
        r, log = self.printk(vm, b"%d %d %d %d", 1, 2, 3)
        assert r == (-errno.EINVAL) & M64
        # not NUL-terminated within fmt_size
        assert vm.load(assemble("mov %r2, 2\ncall 6\nexit")).run(b"ab").r0 == (-errno.EINVAL) & M64

    def test_vprintk_and_on_trace(self, vm):
        seen = []
        vm.on_trace = seen.append
        src = """
        stdw [%r10-32], 1
        stdw [%r10-24], 2
        stdw [%r10-16], 3
        stdw [%r10-8], 4
        mov %r2, 12
        mov %r3, %r10
        add %r3, -32
        mov %r4, 32
        call 177
        exit
        """
        vm.load(assemble(src)).run(b"%d%d%d%d!\0\0\0")
        assert seen == ["1234!"]

    def test_snprintf(self, vm):
        src = """
        stdw [%r10-8], 77
        mov %r6, %r1
        mov %r2, 6
        mov %r3, %r1
        add %r3, 8
        mov %r4, %r10
        add %r4, -8
        mov %r5, 8
        call 165
        exit
        """
        res = both(vm, src, bytes(8) + b"n=%d!\0\0\0")
        assert res.r0 == 6 and res.ctx[:6] == b"n=77!\0"


class TestRegistration:
    def test_custom_helper_and_kfunc(self, vm):
        def add3(rs, r1, r2, r3, r4, r5):
            return r1 + r2 + r3

        vm.helpers.register(300, add3, "add3")
        vm.register_kfunc(99, lambda rs, *a: -1)
        assert both(vm, "mov %r1, 1\nmov %r2, 2\nmov %r3, 3\ncall 300\nexit").r0 == 6
        assert vm.helpers.name(300) == "add3" and 300 in vm.helpers
        assert both(vm, "call runtime 99\nexit").r0 == M64

    def test_fast_tier_sees_later_registrations(self, vm):
        prog = vm.load(assemble("call 301\nexit"))
        with pytest.raises(EmulatorFault, match="unknown helper 301"):
            prog.run(tier="fast")
        vm.helpers.register(301, lambda rs, *a: 5)
        assert prog.run(tier="fast").r0 == 5
        vm.helpers.unregister(301)
        with pytest.raises(EmulatorFault, match="unknown helper 301"):
            prog.run(tier="fast")

    def test_bad_registration(self):
        with pytest.raises(BpfmuxError):
            HelperTable().register(-1, print)
        with pytest.raises(BpfmuxError):
            HelperTable().register(5, "not callable")

    def test_empty_table(self):
        with VM(helpers=HelperTable(defaults=False)) as vm:
            assert len(vm.helpers) == 0
            with pytest.raises(EmulatorFault, match="unknown helper 5"):
                vm.load(assemble("call 5\nexit")).run()


def test_helper_reads_through_rs(vm):
    """A helper gets the run state: memory access faults like the program's."""
    def peek(rs, r1, *_):
        return struct.unpack("<I", rs.read(r1, 4))[0]

    vm.helpers.register(302, peek)
    assert both(vm, "call 302\nexit", struct.pack("<I", 0xABCD)).r0 == 0xABCD
    prog = vm.load(assemble("mov %r1, 8\ncall 302\nexit"))
    for tier in ("checked", "fast", "native"):
        with pytest.raises(EmulatorFault) as ei:
            prog.run(tier=tier)
        assert ei.value.pc == 1 and ei.value.address == 8
