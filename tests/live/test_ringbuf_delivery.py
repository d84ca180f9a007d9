"""Ring buffer and perf buffer readers: delivery in every form, drops and losses,
callback errors. Producers are run with BPF_PROG_TEST_RUN, so the counts are
exact (no other process's events)."""

from __future__ import annotations

import asyncio
import gc
import os
import struct

import numpy as np
import pytest
from _live_insns import perf_output, ringbuf_counted, ringbuf_output, ringbuf_reserve_discard

from bpfmux.errors import NotSupportedError
from bpfmux.host.cpus import possible_cpus
from bpfmux.live import maps
from bpfmux.live import sys as s
from bpfmux.live.perfbuf import PerfBuffer
from bpfmux.live.ringbuf import RingBuffer
from bpfmux.uapi import MapType, ProgFlags, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
EVENT = struct.Struct("<QQ")


def _syscall_prog(insns: bytes, name: str) -> s.Fd:
    return s.prog_load(ProgType.SYSCALL, insns, prog_flags=ProgFlags.SLEEPABLE, name=name)


@pytest.fixture
def ring():
    rb = maps.create(MapType.RINGBUF, 0, 0, 1 << 16, name="t_ring")
    drops = maps.create(MapType.ARRAY, 4, 8, 1, name="t_drops")
    yield rb, drops
    rb.close()
    drops.close()


def _produce(prog: s.Fd, runs: int = 1) -> None:
    for _ in range(runs):
        s.prog_test_run(prog, ctx_in=b"\0" * 8)


def test_callback_delivery_decoded_in_order(ring) -> None:
    rb, drops = ring
    got: list[tuple[int, int]] = []
    with _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 10), "t_rb10") as p, \
            RingBuffer(rb, got.append, decode=EVENT) as reader:
        assert reader.poll(0) == 0
        _produce(p, 3)
        assert reader.poll(1.0) == 30
        assert got == [(7, i) for i in range(10)] * 3
        assert reader.consumer_pos == reader.producer_pos == 30 * 24  # 8-byte header + 16, aligned


def test_iterator_and_drain(ring) -> None:
    rb, drops = ring
    with _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 4), "t_rbit") as p, RingBuffer(rb, decode=EVENT) as r:
        _produce(p)
        it = iter(r)
        assert [next(it) for _ in range(4)] == [(7, i) for i in range(4)]
        _produce(p)
        assert r.drain() == [(7, i) for i in range(4)] and r.drain() == []


def test_asyncio_forms(ring) -> None:
    rb, drops = ring

    async def main(p: s.Fd, r: RingBuffer) -> list:
        out = []
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, _produce, p)
        async for ev in r.events():
            out.append(ev)
            if len(out) == 5:
                break
        loop.call_later(0.05, _produce, p)
        n = await r.poll_async(2.0)
        return out, n

    got2: list = []
    with _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 5), "t_rbas") as p, \
            RingBuffer(rb, got2.append, decode=EVENT) as r:
        events, n = asyncio.run(main(p, r))
        assert events == [(7, i) for i in range(5)]
        assert n == 5 and got2 == [(7, i) for i in range(5)]


def test_numpy_batch_decoding(ring) -> None:
    rb, drops = ring
    batches: list[np.ndarray] = []
    dt = np.dtype([("value", "<u8"), ("seq", "<u8")])
    with _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 16), "t_rbnp") as p, \
            RingBuffer(rb, dtype=dt, batch_callback=batches.append) as r:
        _produce(p, 4)
        assert r.consume() == 64
        allev = np.concatenate(batches)
        assert len(allev) == 64 and (allev["value"] == 7).all()
        assert allev["seq"].tolist() == list(range(16)) * 4


def test_mixed_sizes_fall_back_to_the_callback(ring) -> None:
    rb, drops = ring
    batches, singles = [], []
    dt = np.dtype([("value", "<u8"), ("seq", "<u8")])
    with _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 3), "t_rbmx16") as p16, \
            _syscall_prog(ringbuf_output(rb.fd, 0x99, times=2), "t_rbmx8") as p8, \
            RingBuffer(rb, singles.append, dtype=dt, batch_callback=batches.append) as r:
        _produce(p16)
        _produce(p8)
        _produce(p16)
        assert r.consume() == 8
        assert [len(b) for b in batches] == [3, 3]
        assert singles == [(0x99).to_bytes(8, "little")] * 2


def test_discarded_records_are_counted_not_delivered(ring) -> None:
    rb, drops = ring
    got: list = []
    with _syscall_prog(ringbuf_reserve_discard(rb.fd), "t_rbdisc") as pd, \
            _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 1), "t_rbone") as p1, \
            RingBuffer(rb, got.append, decode=EVENT) as r:
        _produce(pd, 3)
        _produce(p1)
        assert r.consume() == 1 and got == [(7, 0)] and r.discarded == 3


def test_full_buffer_drops_are_counted_by_the_producer() -> None:
    with maps.create(MapType.RINGBUF, 0, 0, 4096, name="t_small") as rb, \
            maps.create(MapType.ARRAY, 4, 8, 1, name="t_sdrops") as drops, \
            _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 64), "t_rbflood") as p, \
            RingBuffer(rb, decode=EVENT) as r:
        _produce(p, 10)  # 640 records of 24 bytes into 4096 bytes
        delivered = len(r.drain())
        dropped = int.from_bytes(drops[0], "little")
        assert delivered == 4096 // 24 and dropped == 640 - delivered


def test_callback_exception_propagates_and_record_is_consumed(ring) -> None:
    rb, drops = ring
    seen: list = []

    def cb(ev):
        seen.append(ev)
        if ev[1] == 1:
            raise ValueError("boom")

    with _syscall_prog(ringbuf_counted(rb.fd, drops.fd, 4), "t_rbexc") as p, RingBuffer(rb, cb, decode=EVENT) as r:
        _produce(p)
        with pytest.raises(ValueError, match="boom"):
            r.poll(0)
        assert seen == [(7, 0), (7, 1)]
        assert r.poll(0) == 2 and seen[2:] == [(7, 2), (7, 3)]


def test_wrong_map_type_is_refused() -> None:
    with maps.create(MapType.ARRAY, 4, 4, 1, name="t_notrb") as m, pytest.raises(NotSupportedError):
        RingBuffer(m)


def test_reader_close_releases_mappings(ring) -> None:
    rb, _ = ring
    r = RingBuffer(rb, print)
    r.close()
    r.close()
    assert r.closed
    with pytest.raises(OSError):
        r.consume()


def test_reader_close_unmaps_what_it_can_while_a_record_view_is_held(ring) -> None:
    rb, _ = ring
    held: list[memoryview] = []
    with _syscall_prog(ringbuf_output(rb.fd, 5), "t_rbview") as p:
        gc.collect()  # fds of objects earlier tests dropped must not close in the middle of the count
        before = len(os.listdir("/proc/self/fd"))
        r = RingBuffer(rb, held.append, decode=lambda rec: rec)  # the callback keeps a view of the data pages
        _produce(p)
        assert r.consume() == 1 and bytes(held[0]) == (5).to_bytes(8, "little")
        r.close()
        # each mapping holds a dup of the map fd: only the data mapping may stay while the view lives
        assert len(os.listdir("/proc/self/fd")) == before + 1
        with pytest.raises(OSError):
            r.available()  # closed: EBADF, not a ValueError from the unmapped pages
        held.clear()
        gc.collect()
        assert len(os.listdir("/proc/self/fd")) == before  # the reader itself still exists


class _FailingEpoll:
    """Stands in for ``select.epoll``: fails on creation or on register."""

    def __init__(self, fail_on: str) -> None:
        self.fail_on = fail_on
        self.made: list[_FailingEpoll] = []
        self.closed = False

    def __call__(self) -> _FailingEpoll:
        if self.fail_on == "create":
            raise OSError(24, "Too many open files")
        ep = _FailingEpoll(self.fail_on)
        self.made.append(ep)
        return ep

    def register(self, fd: int, events: int) -> None:
        raise OSError(12, "Cannot allocate memory")

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("fail_on", ["create", "register"])
def test_epoll_failure_in_init_releases_both_mappings(ring, monkeypatch, fail_on) -> None:
    import select
    import types

    from bpfmux.live import ringbuf as ringbuf_mod

    rb, _ = ring
    epoll = _FailingEpoll(fail_on)
    monkeypatch.setattr(ringbuf_mod, "select", types.SimpleNamespace(epoll=epoll, EPOLLIN=select.EPOLLIN))
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError) as excinfo:
        RingBuffer(rb, print)
    # the traceback keeps the half-made reader alive, so only an explicit
    # release frees the two mappings (each holds a dup of the map fd)
    assert excinfo.value.errno == (24 if fail_on == "create" else 12)
    assert len(os.listdir("/proc/self/fd")) == before
    assert all(ep.closed for ep in epoll.made) and len(epoll.made) == (1 if fail_on == "register" else 0)


# --- perf buffer -------------------------------------------------------------


def _run_on(prog: s.Fd, cpu: int, times: int) -> None:
    for _ in range(times):
        s.prog_test_run(prog, ctx_in=b"\0" * 8, flags=s.F_TEST_RUN_ON_CPU, cpu=cpu)


def test_perfbuf_delivers_per_cpu_and_counts_lost() -> None:
    ncpu = possible_cpus()
    with maps.create(MapType.PERF_EVENT_ARRAY, 4, 4, ncpu, name="t_perf") as pa:
        got: list[tuple[int, int]] = []
        lost_notes: list[tuple[int, int]] = []
        with PerfBuffer(pa, lambda cpu, v: got.append((cpu, v[0])), lost_callback=lambda c, n: lost_notes.append((c, n)),
                        pages=1, decode=struct.Struct("<Q")) as pb, \
                s.prog_load(ProgType.RAW_TRACEPOINT, perf_output(pa.fd, 0x55), name="t_perfout") as p:
            assert pb.cpus == list(range(ncpu))
            _run_on(p, 0, 3)
            _run_on(p, ncpu - 1, 2)
            assert pb.poll(1.0) >= 1
            pb.consume()
            assert sorted(got) == sorted([(0, 0x55)] * 3 + [(ncpu - 1, 0x55)] * 2)
            # overflow one CPU's single page: each sample takes 8 + 4 + 12 = 24 bytes
            got.clear()
            _run_on(p, 0, 400)
            first = len(pb.drain())
            _run_on(p, 0, 1)  # the next write after an overflow records the loss
            pb.consume()
            total_lost = pb.lost.get(0, 0)
            assert first < 400 and total_lost == 400 - first and lost_notes == [(0, total_lost)]
        assert pb.closed


def test_perfbuf_callback_exception_propagates() -> None:
    with maps.create(MapType.PERF_EVENT_ARRAY, 4, 4, possible_cpus(), name="t_perfx") as pa:

        def cb(cpu, data):
            raise RuntimeError("cb failed")

        with PerfBuffer(pa, cb, pages=1) as pb, \
                s.prog_load(ProgType.RAW_TRACEPOINT, perf_output(pa.fd, 1), name="t_perfx") as p:
            _run_on(p, 0, 2)
            with pytest.raises(RuntimeError, match="cb failed"):
                pb.consume()
            assert pb.delivered == 0 or pb.delivered == 1


def test_perfbuf_async_iteration() -> None:
    with maps.create(MapType.PERF_EVENT_ARRAY, 4, 4, possible_cpus(), name="t_perfa") as pa, \
            PerfBuffer(pa, pages=1, decode=struct.Struct("<Q")) as pb, \
            s.prog_load(ProgType.RAW_TRACEPOINT, perf_output(pa.fd, 0x77), name="t_perfa") as p:

        async def main() -> list:
            asyncio.get_running_loop().call_later(0.05, _run_on, p, 0, 3)
            out = []
            async for cpu, value in pb.events():
                out.append((cpu, value[0]))
                if len(out) == 3:
                    break
            return out

        assert asyncio.run(main()) == [(0, 0x77)] * 3


def test_live_kernel_single_object_helpers() -> None:
    from _live_insns import ret

    from bpfmux.live import LiveKernel

    k = LiveKernel()
    with k.create_map(MapType.HASH, 4, 4, 2, name="t_kmap") as m, \
            k.load_program(ret(3), ProgType.SOCKET_FILTER, name="t_kprog") as p:
        m[1] = 1
        assert len(m) == 1 and p.test_run(data_in=b"\0" * 64).retval == 3
