"""Every live map type behaves as a Python mapping."""

from __future__ import annotations

import errno
import os

import pytest
from _live_insns import ret

from bpfmux.errors import BpfError, NotFoundError, NotSupportedError, ParseError
from bpfmux.host.cpus import possible_cpus
from bpfmux.live import maps
from bpfmux.live import sys as s
from bpfmux.uapi import MapFlags, MapType, ProgType, UpdateFlags

pytestmark = pytest.mark.usefixtures("root_required")
NCPU = possible_cpus()


def test_array_map_mapping() -> None:
    with maps.create(MapType.ARRAY, 4, 8, 4, name="t_array") as m:
        assert isinstance(m, maps.ArrayMap) and len(m) == 4 and list(m) == [0, 1, 2, 3]
        assert m[2] == bytes(8)
        m[2] = 7  # ints accepted for 8-byte raw values
        assert m[2] == (7).to_bytes(8, "little")
        assert 3 in m and 4 not in m
        with pytest.raises(NotFoundError):
            m[4]
        with pytest.raises(KeyError):  # NotFoundError is a KeyError
            m[-1]
        with pytest.raises(BpfError) as no_delete:  # the kernel's EINVAL, as the emulated kernel gives it
            del m[0]
        assert no_delete.value.errno == errno.EINVAL
        with pytest.raises(ParseError):
            m[0] = b"short"
        assert dict(m.items())[2] == (7).to_bytes(8, "little")
        m.clear()
        assert m[2] == bytes(8)


def test_hash_map_mapping_and_batched_len() -> None:
    with maps.create(MapType.HASH, 4, 4, 1000, name="t_hash") as m:
        assert len(m) == 0 and list(m) == []
        for i in range(600):
            m[i] = i * 2
        assert len(m) == 600  # counted with batched lookups (> one batch)
        assert m._batch_ok is True
        assert sorted(int.from_bytes(k, "little") for k in m) == list(range(600))
        assert m[5] == (10).to_bytes(4, "little")
        assert m.get(1000) is None and 1000 not in m and 5 in m
        del m[5]
        with pytest.raises(NotFoundError):
            del m[5]
        with pytest.raises(FileExistsError):
            m.put(6, 1, UpdateFlags.NOEXIST)
        m.put(6, 1, UpdateFlags.EXIST)
        assert m.lookup_and_delete(6) == (1).to_bytes(4, "little") and 6 not in m
        items = m.items()
        assert len(items) == 598 and dict(items)[(7).to_bytes(4, "little")] == (14).to_bytes(4, "little")
        m.clear()
        assert len(m) == 0


def test_lru_hash_evicts_instead_of_failing() -> None:
    with maps.create(MapType.LRU_HASH, 4, 4, 64, name="t_lru") as m:
        assert isinstance(m, maps.LruHashMap)
        for i in range(500):
            m[i] = i
        assert 0 < len(m) <= 64 + NCPU * 64  # never full; old keys evicted
        assert 499 in m


def test_hash_full_raises_e2big() -> None:
    with maps.create(MapType.HASH, 4, 4, 2, name="t_full") as m:
        m[1] = 1
        m[2] = 2
        with pytest.raises(BpfError, match="full"):
            m[3] = 3


@pytest.mark.parametrize("map_type", [MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, MapType.LRU_PERCPU_HASH])
def test_percpu_values_are_lists(map_type: MapType) -> None:
    with maps.create(map_type, 4, 4, 8, name="t_percpu") as m:
        m[1] = 3  # one value: every CPU
        assert m[1] == [3] * NCPU and m.sum(1) == 3 * NCPU
        m[1] = list(range(NCPU))
        assert m[1] == list(range(NCPU))
        with pytest.raises(ParseError):
            m[1] = [1] * (NCPU + 1)
        key = 1 if map_type == MapType.PERCPU_ARRAY else (1).to_bytes(4, "little")  # raw keys without BTF
        assert dict(m.items())[key] == list(range(NCPU))


def test_prog_array_holds_programs_and_reports_ids() -> None:
    with maps.create(MapType.PROG_ARRAY, 4, 4, 4, name="t_progs") as m, \
         s.prog_load(ProgType.SOCKET_FILTER, ret(1), name="t_tail") as p:
        assert len(m) == 0 and list(m) == []
        m[2] = p
        assert list(m) == [2] and len(m) == 1 and m[2] == s.prog_info(p).id
        del m[2]
        assert 2 not in m and len(m) == 0


def test_array_and_hash_of_maps() -> None:
    inner = maps.create(MapType.ARRAY, 4, 4, 1, name="t_inner")
    with inner, maps.create(MapType.ARRAY_OF_MAPS, 4, 4, 2, name="t_aom", inner_map=inner) as aom, \
            maps.create(MapType.HASH_OF_MAPS, 4, 4, 2, name="t_hom", inner_map=inner) as hom:
        aom[1] = inner
        hom[7] = inner
        assert aom[1] == inner.id and hom[7] == inner.id
        assert list(aom) == [1] and list(hom) == [(7).to_bytes(4, "little")] and len(hom) == 1  # raw keys: no BTF
        with aom.inner(1) as again:
            again[0] = 9
            assert inner[0] == (9).to_bytes(4, "little")
        del hom[7]
        assert len(hom) == 0


def test_stack_trace_map_is_empty_then_readable() -> None:
    with maps.create(MapType.STACK_TRACE, 4, 8 * 4, 4, name="t_stack") as m:
        assert len(m) == 0 and m.items() == []
        with pytest.raises(NotFoundError):
            m[0]


def test_ringbuf_and_perf_array_are_channels() -> None:
    with maps.create(MapType.RINGBUF, 0, 0, 4096, name="t_rb") as rb:
        assert isinstance(rb, maps.RingBufMap) and len(rb) == 0
        with pytest.raises(NotSupportedError, match="reader"):
            rb[0]
    with maps.create(MapType.PERF_EVENT_ARRAY, 4, 4, NCPU, name="t_pa") as pa:
        assert isinstance(pa, maps.PerfEventArrayMap) and len(pa) == 0


def test_queue_map_push_pop() -> None:
    with maps.create(MapType.QUEUE, 0, 4, 4, name="t_queue") as q:
        q.push(1)
        q.push(2)
        assert q.peek() == (1).to_bytes(4, "little")
        assert q.pop() == (1).to_bytes(4, "little") and q.pop() == (2).to_bytes(4, "little")
        with pytest.raises(NotFoundError):
            q.pop()


def test_frozen_array_refuses_writes() -> None:
    with maps.create(MapType.ARRAY, 4, 4, 1, name="t_frz", flags=MapFlags.RDONLY_PROG) as m:
        m[0] = 1
        m.freeze()
        with pytest.raises(PermissionError):
            m[0] = 2


def test_from_id_and_pin(tmp_path) -> None:
    with maps.create(MapType.HASH, 4, 4, 4, name="t_byid") as m:
        m[1] = 2
        with maps.from_id(m.id) as again:
            assert again.name == "t_byid" and again[1] == (2).to_bytes(4, "little")
        path = f"/sys/fs/bpf/bpfmux_maps_{os.getpid()}"
        m.pin(path)
        try:
            with maps.from_pin(path) as pinned:
                assert pinned.id == m.id
        finally:
            os.unlink(path)


def test_closed_map_raises_ebadf() -> None:
    m = maps.create(MapType.ARRAY, 4, 4, 1, name="t_closed")
    m.close()
    m.close()
    assert m.closed
    with pytest.raises(BpfError) as exc:
        m[0]
    assert exc.value.errno == 9
