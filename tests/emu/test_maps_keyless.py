"""The emulated cgroup array, LPM trie, queue, stack and bloom filter, from
user space and from programs on both tiers, with the kernel's rules."""

from __future__ import annotations

import errno

import pytest

from bpfmux.emu import VM, RunContext
from bpfmux.emu.vm.runtime import Task
from bpfmux.errors import ENOTSUPP, BpfError, NotFoundError, NotSupportedError
from bpfmux.isa.asm import assemble
from bpfmux.uapi import MapFlags, MapType

TIERS = ("checked", "fast")
U64 = (1 << 64) - 1


@pytest.fixture
def vm():
    with VM(ncpus=2) as v:
        yield v


def _u32(n: int) -> bytes:
    return n.to_bytes(4, "little")


class TestQueueStack:
    @pytest.mark.parametrize("args", [(4, 4, 4), (0, 0, 4), (0, 4, 0)])
    def test_shape_rules(self, vm, args):
        with pytest.raises(BpfError) as ei:
            vm.create_map(MapType.QUEUE, *args)
        assert ei.value.errno == errno.EINVAL

    def test_fifo_lifo_and_full(self, vm):
        q = vm.create_map(MapType.QUEUE, 0, 4, 2, name="q")
        s = vm.create_map(MapType.STACK, 0, 4, 2, name="s")
        for m in (q, s):
            m.push(1)
            m.push(2)
            with pytest.raises(BpfError) as ei:
                m.push(3)
            assert ei.value.errno == errno.E2BIG
            m.push(3, flags=2)  # BPF_EXIST: the oldest (1) goes
        assert list(q.items()) == [] and len(q) == 0  # no keyed elements, as the live kernel's queue maps
        assert [q.pop(), q.pop()] == [_u32(2), _u32(3)]
        assert [s.peek(), s.pop(), s.pop()] == [_u32(3), _u32(3), _u32(2)]
        with pytest.raises(NotFoundError):
            q.pop()
        with pytest.raises(NotSupportedError):
            q[0]
        with pytest.raises(BpfError) as ei:
            q.push(1, flags=1)  # BPF_NOEXIST is not a push flag
        assert ei.value.errno == errno.EINVAL

    @pytest.mark.parametrize("tier", TIERS)
    def test_program_push_pop_peek(self, vm, tier):
        q = vm.create_map(MapType.QUEUE, 0, 8, 4, name="q")
        src = f"""
        stdw [%r10-8], 41
        lddw %r1, map_fd({q.fd})
        mov %r2, %r10
        add %r2, -8
        mov %r3, 0
        call 87
        stdw [%r10-8], 42
        lddw %r1, map_fd({q.fd})
        mov %r2, %r10
        add %r2, -8
        mov %r3, 0
        call 87
        lddw %r1, map_fd({q.fd})
        mov %r2, %r10
        add %r2, -16
        call 88
        jne %r0, 0, fail
        lddw %r1, map_fd({q.fd})
        mov %r2, %r10
        add %r2, -24
        call 89
        jne %r0, 0, fail
        ldxdw %r0, [%r10-16]
        ldxdw %r1, [%r10-24]
        lsh %r1, 8
        or %r0, %r1
        exit
        fail:
        mov %r0, -1
        exit
        """
        assert vm.load(assemble(src)).run(tier=tier).r0 == 41 | (42 << 8)
        assert q.pop() == (42).to_bytes(8, "little")
        empty = f"""
        lddw %r1, map_fd({q.fd})
        mov %r2, %r10
        add %r2, -8
        call 88
        exit
        """
        assert vm.load(assemble(empty)).run(tier=tier).r0 == (-errno.ENOENT) & U64


class TestBloomFilter:
    def test_no_false_negatives_and_rules(self, vm):
        b = vm.create_map(MapType.BLOOM_FILTER, 0, 4, 64, name="b")
        for v in range(0, 64, 2):
            b.push(v)
        assert all(b.may_contain(v) for v in range(0, 64, 2))
        assert sum(b.may_contain(v) for v in range(1000, 2000)) < 200  # false positives stay rare
        with pytest.raises(BpfError):
            vm.create_map(MapType.BLOOM_FILTER, 4, 4, 64)
        with pytest.raises(NotSupportedError):
            b.put(None, 1)

    @pytest.mark.parametrize("tier", TIERS)
    def test_program_push_peek(self, vm, tier):
        b = vm.create_map(MapType.BLOOM_FILTER, 0, 8, 16, name="b", map_extra=3)
        assert b.nr_hashes == 3
        src = f"""
        stdw [%r10-8], 7
        lddw %r1, map_fd({b.fd})
        mov %r2, %r10
        add %r2, -8
        mov %r3, 0
        call 87
        lddw %r1, map_fd({b.fd})
        mov %r2, %r10
        add %r2, -8
        call 89
        exit
        """
        assert vm.load(assemble(src)).run(tier=tier).r0 == 0
        assert b.may_contain(7)


class TestLpmTrie:
    def _trie(self, vm):
        return vm.create_map(MapType.LPM_TRIE, 8, 4, 16, name="lpm", flags=MapFlags.NO_PREALLOC)

    @staticmethod
    def key(plen: int, *octets: int) -> bytes:
        return _u32(plen) + bytes(octets).ljust(4, b"\0")

    def test_rules(self, vm):
        for kw in ({"flags": 0}, {"flags": MapFlags.NO_PREALLOC, "key": 4}, {"flags": MapFlags.NO_PREALLOC, "key": 261}):
            with pytest.raises(BpfError) as ei:
                vm.create_map(MapType.LPM_TRIE, kw.get("key", 8), 4, 16, flags=kw["flags"])
            assert ei.value.errno == errno.EINVAL
        t = self._trie(vm)
        with pytest.raises(BpfError) as ei:
            t[self.key(33, 10)] = 1
        assert ei.value.errno == errno.EINVAL

    def test_longest_prefix_wins(self, vm):
        t = self._trie(vm)
        t[self.key(8, 10)] = 1
        t[self.key(16, 10, 1)] = 2
        t[self.key(24, 10, 1, 2, 99)] = 3  # bits past the prefix do not count
        assert t[self.key(32, 10, 1, 2, 3)] == _u32(3)
        assert t[self.key(32, 10, 1, 3, 3)] == _u32(2)
        assert t[self.key(32, 10, 9, 9, 9)] == _u32(1)
        assert t[self.key(20, 10, 1, 2, 3)] == _u32(2)  # the key's own prefix length bounds the match
        assert t.lookup(self.key(32, 11)) is None
        t[self.key(24, 10, 1, 2)] = 4  # the same element as 10.1.2.99/24
        assert len(t) == 3 and t[self.key(32, 10, 1, 2, 3)] == _u32(4)
        del t[self.key(16, 10, 1)]
        assert t[self.key(32, 10, 1, 3, 3)] == _u32(1)
        with pytest.raises(NotFoundError):
            del t[self.key(16, 10, 1)]

    @pytest.mark.parametrize("tier", TIERS)
    def test_program_lookup(self, vm, tier):
        t = self._trie(vm)
        t[self.key(16, 192, 168)] = 5
        src = f"""
        stw [%r10-8], 32
        stw [%r10-4], 0x0901a8c0
        lddw %r1, map_fd({t.fd})
        mov %r2, %r10
        add %r2, -8
        call 1
        jeq %r0, 0, miss
        ldxw %r0, [%r0]
        exit
        miss:
        mov %r0, 0
        exit
        """
        assert vm.load(assemble(src)).run(tier=tier).r0 == 5


class TestCgroupArray:
    def test_user_space(self, vm):
        c = vm.create_map(MapType.CGROUP_ARRAY, 4, 4, 2, name="cg")
        c[0] = "/sys/fs/cgroup/work"
        assert c.get(0) == "/work"
        with pytest.raises(BpfError) as ei:
            c.lookup(0)
        assert ei.value.errno == ENOTSUPP
        with pytest.raises(BpfError):
            vm.create_map(MapType.CGROUP_ARRAY, 4, 8, 2)

    @pytest.mark.parametrize("tier", TIERS)
    @pytest.mark.parametrize("cgroup,expected", [("/work", 1), ("/work/job", 1), ("/other", 0), ("/", 0)])
    def test_current_task_under_cgroup(self, vm, tier, cgroup, expected):
        c = vm.create_map(MapType.CGROUP_ARRAY, 4, 4, 2, name="cg")
        c[0] = "/work"
        src = f"""
        lddw %r1, map_fd({c.fd})
        mov %r2, {{index}}
        call 37
        exit
        """
        task = Task(pid=5, tgid=5, cgroup=cgroup)
        prog = vm.load(assemble(src.format(index=0)))
        assert prog.run(tier=tier, context=RunContext(task=task)).r0 == expected
        assert vm.load(assemble(src.format(index=1))).run(tier=tier).r0 == (-errno.EAGAIN) & U64
        assert vm.load(assemble(src.format(index=2))).run(tier=tier).r0 == (-errno.E2BIG) & U64
