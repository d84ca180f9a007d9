"""Emulated ring buffer, perf event array, stack trace map, prog array and
maps of maps, used from programs on both tiers."""

from __future__ import annotations

import errno
import struct

import pytest

from bpfmux.emu import VM, RunContext
from bpfmux.errors import BpfError, EmulatorFault
from bpfmux.isa.asm import assemble
from bpfmux.uapi import MapFlags, MapType

TIERS = ("checked", "fast", "native")


@pytest.fixture
def vm():
    with VM(ncpus=2) as v:
        yield v


class TestRingbuf:
    def test_shape_rules(self, vm):
        for args in ((4, 0, 4096), (0, 0, 4095), (0, 0, 3 * 4096)):
            with pytest.raises(BpfError) as ei:
                vm.create_map(MapType.RINGBUF, *args)
            assert ei.value.errno == errno.EINVAL

    @pytest.mark.parametrize("tier", TIERS)
    def test_reserve_submit_discard_output_query(self, vm, tier):
        rb = vm.create_map(MapType.RINGBUF, 0, 0, 4096, name="rb")
        src = f"""
        lddw %r1, map_fd({rb.fd})
        mov %r2, 12
        mov %r3, 0
        call 131
        jeq %r0, 0, fail
        stdw [%r0], 0x11
        stw [%r0+8], 0x22
        mov %r1, %r0
        mov %r2, 0
        call 132
        lddw %r1, map_fd({rb.fd})
        mov %r2, 8
        mov %r3, 0
        call 131
        jeq %r0, 0, fail
        mov %r1, %r0
        mov %r2, 0
        call 133
        stdw [%r10-8], 0x33
        lddw %r1, map_fd({rb.fd})
        mov %r2, %r10
        add %r2, -8
        mov %r3, 8
        mov %r4, 0
        call 130
        jne %r0, 0, fail
        lddw %r1, map_fd({rb.fd})
        mov %r2, 3
        call 134
        exit
        fail:
        mov %r0, -1
        exit
        """
        r0 = vm.load(assemble(src)).run(tier=tier).r0
        assert r0 == 24 + 16 + 16  # producer position: three records with headers
        assert rb.query(0) == 56
        assert rb.consume() == [struct.pack("<QI", 0x11, 0x22), struct.pack("<Q", 0x33)]
        assert rb.query(0) == 0 and rb.query(2) == 56

    def test_reserve_fails_when_full(self, vm):
        rb = vm.create_map(MapType.RINGBUF, 0, 0, 4096)
        src = f"lddw %r1, map_fd({rb.fd})\nmov %r2, 4000\nmov %r3, 0\ncall 131\nmov %r1, %r0\nmov %r2, 0\ncall 132\nexit"
        prog = vm.load(assemble(src))
        prog.run()
        with pytest.raises(EmulatorFault, match="not a reserved record"):
            prog.run()  # the second reserve returns NULL; submitting NULL faults
        assert len(rb.consume()) == 1

    def test_record_bounds_are_checked(self, vm):
        rb = vm.create_map(MapType.RINGBUF, 0, 0, 4096)
        src = f"""
        lddw %r1, map_fd({rb.fd})
        mov %r2, 4
        mov %r3, 0
        call 131
        stdw [%r0], 1
        exit
        """
        prog = vm.load(assemble(src))
        for tier in TIERS:
            with pytest.raises(EmulatorFault, match="ringbuf|record") as ei:
                prog.run(tier=tier)
            assert ei.value.pc == 5
        assert rb.consume() == []  # the abandoned reservations were discarded

    def test_unreleased_reservation_blocks_consumer_until_run_end(self, vm):
        rb = vm.create_map(MapType.RINGBUF, 0, 0, 4096)
        seen = []
        rb.on_record = lambda: seen.append(rb.pending())
        rb.output(None, b"abc", 0)  # user-side producer helper use (rs unused)
        assert rb.consume() == [b"abc"] and seen == [1]


class TestPerfEventArray:
    @pytest.mark.parametrize("tier", TIERS)
    def test_output_to_current_cpu(self, vm, tier):
        pe = vm.create_map(MapType.PERF_EVENT_ARRAY, 4, 4, 2, name="events")
        src = f"""
        stdw [%r10-8], 0x42
        mov %r6, %r1
        mov %r1, %r6
        lddw %r2, map_fd({pe.fd})
        lddw %r3, 0xffffffff
        mov %r4, %r10
        add %r4, -8
        mov %r5, 8
        call 25
        exit
        """
        prog = vm.load(assemble(src))
        assert prog.run(tier=tier).r0 == (-errno.ENOENT) & (2**64 - 1)  # no buffer open yet
        pe.open()
        assert prog.run(tier=tier, context=RunContext(cpu=1)).r0 == 0
        assert pe.read() == [(1, struct.pack("<Q", 0x42))]

    def test_wrong_cpu_and_index(self, vm):
        pe = vm.create_map(MapType.PERF_EVENT_ARRAY, 4, 4, 2)
        pe.open()
        src = f"""
        stdw [%r10-8], 1
        lddw %r2, map_fd({pe.fd})
        mov %r3, 1
        mov %r4, %r10
        add %r4, -8
        mov %r5, 8
        call 25
        exit
        """
        assert vm.load(assemble(src)).run().r0 == (-errno.EOPNOTSUPP) & (2**64 - 1)
        src = src.replace("mov %r3, 1", "mov %r3, 5")
        assert vm.load(assemble(src)).run().r0 == (-errno.E2BIG) & (2**64 - 1)

    def test_full_buffer_loses_samples(self, vm):
        pe = vm.create_map(MapType.PERF_EVENT_ARRAY, 4, 4, 1)
        (buf,) = pe.open(capacity=64)
        assert buf.push(bytes(40)) and not buf.push(bytes(40))
        assert buf.lost == 1 and len(buf.drain()) == 1


class TestStackTrace:
    def test_ids_are_stable_and_collisions_fail(self, vm):
        st = vm.create_map(MapType.STACK_TRACE, 4, 8 * 4, 1, name="stacks")
        src = f"lddw %r2, map_fd({st.fd})\nmov %r3, 0\ncall 27\nexit"
        prog = vm.load(assemble(src))
        ctx = RunContext(kernel_stack=[0x10, 0x20, 0x30])
        sid = prog.run(context=ctx, tier="checked").r0
        assert prog.run(context=ctx, tier="fast").r0 == sid == 0  # one bucket
        assert st[sid] == struct.pack("<4Q", 0x10, 0x20, 0x30, 0)
        other = RunContext(kernel_stack=[0x99])
        assert prog.run(context=other).r0 == (-errno.EEXIST) & (2**64 - 1)
        reuse = vm.load(assemble(f"lddw %r2, map_fd({st.fd})\nmov %r3, 0x400\ncall 27\nexit"))
        assert reuse.run(context=other).r0 == 0
        assert st[0][:8] == struct.pack("<Q", 0x99)
        assert prog.run().r0 == (-errno.EFAULT) & (2**64 - 1)  # no stack at all

    def test_skip_and_user_stack(self, vm):
        st = vm.create_map(MapType.STACK_TRACE, 4, 16, 64)
        prog = vm.load(assemble(f"lddw %r2, map_fd({st.fd})\nmov %r3, 0x101\ncall 27\nexit"))
        sid = prog.run(context=RunContext(user_stack=[1, 2, 3], kernel_stack=[7])).r0
        assert st.ips(sid) == (2, 3)

    def test_get_stack_copies_the_context_stack(self, vm):
        """``bpf_get_stack(ctx, buf, size, flags)``: bytes copied, the rest zeroed; skip and user flags;
        ``-EFAULT`` (buffer zeroed) without a stack, ``-EINVAL`` for a size not a multiple of 8."""
        def get(size: int, flags: int, ctx: RunContext) -> tuple[int, bytes]:
            src = f"mov %r2, %r1\nmov %r3, {size}\nmov %r4, {flags}\ncall 67\nexit"
            prog = vm.load(assemble(src))
            a = prog.run(b"\xff" * 24, context=ctx, tier="checked")
            b = prog.run(b"\xff" * 24, context=ctx, tier="fast")
            assert (a.r0, a.ctx) == (b.r0, b.ctx)
            return a.r0, bytes(a.ctx)

        ctx = RunContext(kernel_stack=[0x10, 0x20], user_stack=[1, 2, 3])
        assert get(24, 0, ctx) == (16, struct.pack("<3Q", 0x10, 0x20, 0))
        assert get(16, 0x101, ctx) == (16, struct.pack("<2Q", 2, 3) + b"\xff" * 8)
        assert get(24, 0, RunContext()) == ((-errno.EFAULT) & (2**64 - 1), bytes(24))
        assert get(12, 0, ctx)[0] == (-errno.EINVAL) & (2**64 - 1)


class TestProgArray:
    def test_tail_call_chain_and_limit(self, vm):
        pa = vm.create_map(MapType.PROG_ARRAY, 4, 4, 2, name="jmp")
        # slot 0: a program that adds 1 to ctx[0] and tail-calls itself
        again = vm.load(assemble(f"""
        ldxdw %r2, [%r1]
        add %r2, 1
        stxdw [%r1], %r2
        lddw %r2, map_fd({pa.fd})
        mov %r3, 0
        call 12
        mov %r0, 7
        exit
        """), name="again")
        pa[0] = again
        for tier in TIERS:
            res = again.run(bytes(8), tier=tier)
            assert res.r0 == 7
            assert struct.unpack("<Q", res.ctx)[0] == 34  # the first run plus 33 tail calls

    def test_failed_tail_call_falls_through(self, vm):
        pa = vm.create_map(MapType.PROG_ARRAY, 4, 4, 2)
        prog = vm.load(assemble(f"lddw %r2, map_fd({pa.fd})\nmov %r3, 1\nmov %r0, 3\ncall 12\nmov %r0, 5\nexit"))
        for tier in TIERS:
            assert prog.run(tier=tier).r0 == 5  # slot 1 empty
        target = vm.load(assemble("mov %r0, 9\nexit"))
        pa[1] = target.fd
        assert pa[1] == target.id
        for tier in TIERS:
            assert prog.run(tier=tier).r0 == 9
        del pa[1]
        assert prog.run().r0 == 5

    def test_program_type_must_match(self, vm):
        pa = vm.create_map(MapType.PROG_ARRAY, 4, 4, 2)
        pa[0] = vm.load(assemble("mov %r0, 0\nexit"), prog_type=1)
        with pytest.raises(BpfError) as ei:
            pa[1] = vm.load(assemble("mov %r0, 0\nexit"), prog_type=2)
        assert ei.value.errno == errno.EINVAL


class TestMapsOfMaps:
    def test_array_of_maps(self, vm):
        inner_t = vm.create_map(MapType.ARRAY, 4, 8, 1)
        outer = vm.create_map(MapType.ARRAY_OF_MAPS, 4, 4, 2, inner=inner_t)
        inner = vm.create_map(MapType.ARRAY, 4, 8, 1)
        inner[0] = 55
        outer[1] = inner
        assert outer[1] == inner.id
        src = f"""
        stw [%r10-4], 1
        lddw %r1, map_fd({outer.fd})
        mov %r2, %r10
        add %r2, -4
        call 1
        jeq %r0, 0, out
        mov %r1, %r0
        stw [%r10-8], 0
        mov %r2, %r10
        add %r2, -8
        call 1
        jeq %r0, 0, out
        ldxdw %r0, [%r0]
        out:
        exit
        """
        prog = vm.load(assemble(src))
        assert prog.run(tier="checked").r0 == prog.run(tier="fast").r0 == 55
        with pytest.raises(BpfError) as ei:
            outer[0] = vm.create_map(MapType.ARRAY, 4, 8, 2)  # max_entries differs
        assert ei.value.errno == errno.EINVAL

    def test_hash_of_maps_with_inner_map_flag(self, vm):
        tmpl = vm.create_map(MapType.HASH, 4, 4, 4, flags=MapFlags.INNER_MAP)
        outer = vm.create_map(MapType.HASH_OF_MAPS, 4, 4, 2, inner=tmpl)
        outer[7] = vm.create_map(MapType.HASH, 4, 4, 100)  # other max_entries allowed
        assert len(outer) == 1 and outer.get_map(7).max_entries == 100
        with pytest.raises(BpfError) as ei:
            outer[8] = 12345
        assert ei.value.errno == errno.EBADF
        with pytest.raises(BpfError) as ei:
            vm.create_map(MapType.HASH_OF_MAPS, 4, 4, 2)
        assert ei.value.errno == errno.EINVAL


def test_unsupported_map_type(vm):
    from bpfmux.errors import NotSupportedError

    with pytest.raises(NotSupportedError, match="SOCKMAP"):
        vm.create_map(MapType.SOCKMAP, 4, 4, 4)


def test_map_from_spec(vm):
    class Spec:
        name = "data"
        type = MapType.ARRAY
        key_size, value_size, max_entries = 4, 8, 1
        flags = 0
        data = b"\x05\0\0\0\0\0\0\0"

    m = vm.map_from_spec(Spec())
    assert m.name == "data" and m[0] == Spec.data and vm.map_by_fd(m.fd) is m
