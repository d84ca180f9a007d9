"""Emulated array and hash maps: kernel update semantics, errnos, per-CPU
values, LRU eviction order, and what programs see through helpers."""

from __future__ import annotations

import errno
import struct

import pytest

from bpfmux.emu import VM, RunContext
from bpfmux.errors import BpfError, BpfmuxError, EmulatorFault, NotFoundError
from bpfmux.isa.asm import assemble
from bpfmux.uapi import MapFlags, MapType, UpdateFlags


@pytest.fixture
def vm():
    with VM(ncpus=2) as v:
        yield v


def errno_of(fn, *a):
    with pytest.raises(BpfError) as ei:
        fn(*a)
    return ei.value.errno


class TestArray:
    def test_elements_exist_and_start_zeroed(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 6, 3, name="a")
        assert len(m) == 3 and list(m) == [0, 1, 2]  # array indices, as the live kernel gives them
        assert m[2] == bytes(6)

    def test_update_flags(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 2)
        m.put(1, 5, UpdateFlags.EXIST)
        assert m[1] == struct.pack("<Q", 5)
        assert errno_of(m.put, 1, 6, UpdateFlags.NOEXIST) == errno.EEXIST
        assert errno_of(m.put, 2, 6) == errno.E2BIG
        assert errno_of(m.put, 0, 6, 8) == errno.EINVAL
        assert errno_of(m.delete, 0) == errno.EINVAL

    def test_missing_index_is_a_key_error(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 2)
        with pytest.raises(NotFoundError):
            m[7]
        assert m.lookup(7) is None

    def test_bad_shapes(self, vm):
        assert errno_of(vm.create_map, MapType.ARRAY, 8, 8, 2) == errno.EINVAL
        assert errno_of(vm.create_map, MapType.ARRAY, 4, 0, 2) == errno.EINVAL
        assert errno_of(vm.create_map, MapType.ARRAY, 4, 8, 0) == errno.EINVAL
        m = vm.create_map(MapType.ARRAY, 4, 8, 2)
        with pytest.raises(BpfmuxError, match="value is 3 bytes"):
            m[0] = b"abc"
        with pytest.raises(BpfmuxError, match="expected an integer key"):  # an array index is an int
            m["x"] = 1

    def test_next_key(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 2)
        assert m.next_key() == 0  # array indices come back as ints, as from the live kernel
        assert m.next_key(0) == 1
        assert m.next_key(1) is None
        assert m.next_key(9) == 0

    def test_program_writes_through_lookup_pointer(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 4, name="counts")
        src = f"""
        stw [%r10-4], 2
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        call 1
        jeq %r0, 0, out
        mov %r1, 3
        lock add [%r0], %r1
        mov %r0, 1
        out:
        exit
        """
        prog = vm.load(assemble(src))
        assert prog.run(tier="checked").r0 == 1
        assert prog.run(tier="fast").r0 == 1
        assert m[2] == struct.pack("<Q", 6)

    def test_lookup_out_of_range_returns_null(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 4)
        src = f"stw [%r10-4], 4\nlddw %r1, map_fd({m.fd})\nmov %r2, %r10\nadd %r2, -4\ncall 1\nexit"
        assert vm.load(assemble(src)).run().r0 == 0

    def test_access_past_the_value_faults(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 12, 4)
        src = f"""
        stw [%r10-4], 0
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        call 1
        ldxw %r0, [%r0+12]
        exit
        """
        prog = vm.load(assemble(src))
        for tier in ("checked", "fast", "native"):
            with pytest.raises(EmulatorFault, match="out of bounds") as ei:
                prog.run(tier=tier)
            assert ei.value.pc == 6

    def test_rdonly_prog_values_are_read_only_for_programs(self, vm):
        m = vm.create_map(MapType.ARRAY, 4, 8, 1, flags=MapFlags.RDONLY_PROG, name=".rodata")
        m[0] = 9
        m.freeze()
        assert errno_of(m.put, 0, 1) == errno.EPERM
        prog = vm.load(assemble(f"lddw %r1, map_value({m.fd}, 0)\nldxdw %r0, [%r1]\nstxdw [%r1], %r0\nexit"))
        with pytest.raises(EmulatorFault, match="read-only"):
            prog.run()

    def test_percpu_array(self, vm):
        m = vm.create_map(MapType.PERCPU_ARRAY, 4, 8, 1)
        m[0] = [1, 2]
        assert m[0] == [struct.pack("<Q", 1), struct.pack("<Q", 2)]
        m[0] = 7  # one value: every CPU
        assert m[0] == [struct.pack("<Q", 7)] * 2
        with pytest.raises(BpfmuxError, match="one value per CPU"):
            m[0] = [1, 2, 3]
        src = f"""
        stw [%r10-4], 0
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        call 1
        ldxdw %r1, [%r0]
        add %r1, 100
        stxdw [%r0], %r1
        call 8
        exit
        """
        prog = vm.load(assemble(src))
        assert prog.run(context=RunContext(cpu=1), tier="checked").r0 == 1
        assert prog.run(context=RunContext(cpu=1), tier="fast").r0 == 1
        assert m[0] == [struct.pack("<Q", 7), struct.pack("<Q", 207)]

    def test_lookup_percpu_elem(self, vm):
        m = vm.create_map(MapType.PERCPU_ARRAY, 4, 8, 1)
        m[0] = [11, 22]
        src = f"""
        stw [%r10-4], 0
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        mov %r3, 1
        call 195
        ldxdw %r0, [%r0]
        exit
        """
        assert vm.load(assemble(src)).run().r0 == 22


class TestHash:
    def test_flags_and_errnos(self, vm):
        m = vm.create_map(MapType.HASH, 4, 8, 2)
        assert errno_of(m.put, 1, 5, UpdateFlags.EXIST) == errno.ENOENT
        m.put(1, 5, UpdateFlags.NOEXIST)
        assert errno_of(m.put, 1, 6, UpdateFlags.NOEXIST) == errno.EEXIST
        m.put(1, 6, UpdateFlags.EXIST)
        m[2] = 7
        assert errno_of(m.put, 3, 8) == errno.E2BIG
        m[2] = 9  # replacing in a full map is fine
        assert len(m) == 2 and m[2] == struct.pack("<Q", 9)
        del m[1]
        assert errno_of(m.delete, 1) == errno.ENOENT
        with pytest.raises(NotFoundError):
            del m[1]
        m[3] = 1
        assert sorted(m) == [struct.pack("<I", 2), struct.pack("<I", 3)]

    def test_next_key_walks_all_keys(self, vm):
        m = vm.create_map(MapType.HASH, 4, 4, 8)
        for k in (5, 6, 7):
            m[k] = k
        keys, k = [], m.next_key()
        while k is not None:
            keys.append(k)
            k = m.next_key(k)
        assert sorted(keys) == [struct.pack("<I", i) for i in (5, 6, 7)]
        assert m.next_key(99) == keys[0]  # an absent key restarts

    def test_program_update_lookup_delete(self, vm):
        m = vm.create_map(MapType.HASH, 4, 8, 4)
        src = f"""
        stw [%r10-4], 42
        stdw [%r10-16], 1000
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        mov %r3, %r10
        add %r3, -16
        mov %r4, 1
        call 2
        mov %r6, %r0
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        mov %r3, %r10
        add %r3, -16
        mov %r4, 1
        call 2
        lsh %r6, 8
        and %r0, 0xff
        or %r6, %r0
        mov %r0, %r6
        exit
        """
        prog = vm.load(assemble(src))
        for tier in ("checked", "fast", "native"):
            m.clear() if len(m) else None
            r0 = prog.run(tier=tier).r0
            # first NOEXIST insert succeeds, second fails with -EEXIST
            assert r0 >> 8 == 0 and r0 & 0xFF == (-errno.EEXIST) & 0xFF
            assert m[42] == struct.pack("<Q", 1000)

    def test_pointer_stays_valid_after_delete_until_run_ends(self, vm):
        m = vm.create_map(MapType.HASH, 4, 8, 4)
        m[1] = 77
        src = f"""
        stw [%r10-4], 1
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        call 1
        mov %r6, %r0
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        call 3
        ldxdw %r0, [%r6]
        exit
        """
        prog = vm.load(assemble(src))
        assert prog.run(tier="checked").r0 == 77
        regions = len(vm.space)
        m[1] = 78
        assert prog.run(tier="fast").r0 == 78
        assert len(vm.space) <= regions  # the deleted value's region was unmapped after the run

    def test_percpu_hash(self, vm):
        m = vm.create_map(MapType.PERCPU_HASH, 4, 8, 4)
        src = f"""
        stw [%r10-4], 3
        stdw [%r10-16], 5
        lddw %r1, map_fd({m.fd})
        mov %r2, %r10
        add %r2, -4
        mov %r3, %r10
        add %r3, -16
        mov %r4, 0
        call 2
        exit
        """
        vm.load(assemble(src)).run(context=RunContext(cpu=1))
        assert m[3] == [bytes(8), struct.pack("<Q", 5)]  # a new element: other CPUs zeroed


class TestLru:
    def test_evicts_least_recently_used(self, vm):
        m = vm.create_map(MapType.LRU_HASH, 4, 8, 3)
        for k in (1, 2, 3):
            m[k] = k
        m[4] = 4  # evicts 1
        assert 1 not in m and len(m) == 3
        m[2] = 20  # an update makes 2 the most recent
        m[5] = 5  # evicts 3
        assert sorted(int.from_bytes(k, "little") for k in m) == [2, 4, 5]
        assert m.evictions == 2

    def test_program_lookup_refreshes_but_user_lookup_does_not(self, vm):
        m = vm.create_map(MapType.LRU_HASH, 4, 8, 2)
        m[1] = 1
        m[2] = 2
        assert m[1] == struct.pack("<Q", 1)  # user-space lookup: no refresh
        m[3] = 3
        assert 1 not in m
        src = f"stw [%r10-4], 2\nlddw %r1, map_fd({m.fd})\nmov %r2, %r10\nadd %r2, -4\ncall 1\nmov %r0, 0\nexit"
        vm.load(assemble(src)).run()  # a program lookup of 2 refreshes it
        m[4] = 4
        assert [int.from_bytes(k, "little") for k in m.lru_order()] == [2, 4]

    def test_lru_percpu(self, vm):
        m = vm.create_map(MapType.LRU_PERCPU_HASH, 4, 8, 1)
        m[1] = [1, 2]
        m[2] = [3, 4]
        assert list(m) == [struct.pack("<I", 2)]
        assert m[2] == [struct.pack("<Q", 3), struct.pack("<Q", 4)]


class TestCodecs:
    def test_codec_converts_keys_and_values(self, vm):
        class U32:
            def encode(self, v):
                return struct.pack("<I", v)

            def decode(self, b):
                return struct.unpack("<I", b)[0]

        class Pair:
            def encode(self, v):
                return struct.pack("<ii", *v)

            def decode(self, b):
                return struct.unpack("<ii", b)

        m = vm.create_map(MapType.HASH, 4, 8, 4, key_codec=U32(), value_codec=Pair())
        m[7] = (-1, 2)
        assert m[7] == (-1, 2) and list(m) == [7]
        assert dict(m.items()) == {7: (-1, 2)}


def test_closed_map_refuses_operations(vm):
    m = vm.create_map(MapType.HASH, 4, 8, 4)
    fd = m.fd
    m.close()
    m.close()
    assert m.closed
    assert errno_of(m.lookup, 1) == errno.EBADF
    with pytest.raises(NotFoundError):
        vm.map_by_fd(fd)


def test_direct_map_calls_follow_map_lifetime(vm):
    """The fast tier calls a map's methods directly when the map and key are
    known; closing the map rebuilds the code, which then faults like the
    checked tier."""
    m = vm.create_map(MapType.HASH, 4, 8, 4)
    m[1] = 5
    src = f"stw [%r10-4], 1\nlddw %r1, map_fd({m.fd})\nmov %r2, %r10\nadd %r2, -4\ncall 1\nexit"
    prog = vm.load(assemble(src))
    assert prog.run(tier="fast").r0 != 0
    assert "_lookup(_rs, bytes(_S[508:512]))" in prog._fast_source
    m.close()
    for tier in ("checked", "fast", "native"):
        with pytest.raises(EmulatorFault, match="is not a map"):
            prog.run(tier=tier)
