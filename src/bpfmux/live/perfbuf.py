"""Perf buffer reader (``BPF_MAP_TYPE_PERF_EVENT_ARRAY``): one mmap'd perf ring
per CPU, epoll, no libbpf.

For every CPU it opens a ``PERF_COUNT_SW_BPF_OUTPUT`` software event
(``sample_type = PERF_SAMPLE_RAW``, wakeup after ``wakeup_events`` samples),
maps ``1 + 2**n`` pages (the ``perf_event_mmap_page`` header, then the data
ring), stores the event fd in the map slot of that CPU and enables it.

Records (uapi facts): ``struct perf_event_header {u32 type; u16 misc; u16
size}``; ``PERF_RECORD_SAMPLE`` (9) carries ``u32 size`` and the raw bytes the
program passed to ``bpf_perf_event_output`` (padded to keep 8-byte
alignment); ``PERF_RECORD_LOST`` (2) carries ``u64 id, u64 lost``. The data
ring is not double-mapped, so a record that wraps is copied out in two parts.
``data_head``/``data_tail`` live at offsets 1024/1032 of the header page.

The callback gets ``(cpu, data)`` (``data`` decoded when ``decode=`` is
given); lost samples are counted per CPU in :attr:`lost` and reported to
``lost_callback(cpu, count)``. A sample or lost-records notice too short for
its own fields is skipped and counted as one lost sample (and in
:attr:`malformed`), so one bad record neither stops the reader nor discards
samples already read. An exception in a callback propagates after the record
is consumed.
"""

from __future__ import annotations

import errno as _errno
import mmap
import select
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..errors import BpfError, NotSupportedError, ParseError
from ..host.cpus import online_cpus
from ..uapi import MapType, PerfSwId, PerfType
from . import sys as _sys
from .ringbuf import Codec, Decoder, HasFd, _decoder, _fd_of

_PAGE = mmap.PAGESIZE
_HEAD_OFF, _TAIL_OFF = 1024, 1032
_HDR = struct.Struct("<IHH")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_LOST = struct.Struct("<QQ")
PERF_RECORD_LOST = 2
PERF_RECORD_SAMPLE = 9


class _CpuRing:
    __slots__ = ("cpu", "fd", "mm", "size", "mask")

    def __init__(self, cpu: int, fd: _sys.Fd, pages: int) -> None:
        self.cpu, self.fd = cpu, fd
        self.size = pages * _PAGE
        self.mask = self.size - 1
        try:
            self.mm = mmap.mmap(fd.fd, _PAGE + self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as err:
            raise BpfError(err.errno or _errno.EINVAL, f"mmap of the perf ring of CPU {cpu} failed: {err.strerror}; "
                           "try fewer pages (ulimit -l / perf_event_mlock_kb)") from None

    def close(self) -> None:
        self.mm.close()
        self.fd.close()


class PerfBuffer:
    """Reader of a perf event array map.

    :param perf_map: a :class:`~bpfmux.live.maps.PerfEventArrayMap`.
    :param callback: ``callback(cpu, data)`` per sample.
    :param lost_callback: ``lost_callback(cpu, count)`` per lost-records notice.
    :param pages: data pages per CPU (a power of two).
    :param decode: as for :class:`~bpfmux.live.ringbuf.RingBuffer`.
    :param wakeup_events: samples per wakeup.
    :ivar lost: lost samples per CPU (the kernel's notices, plus malformed records).
    :ivar malformed: records skipped because they were too short for their fields.
    :raises BpfError: perf_event_open or mmap failed.
    :raises NotSupportedError: the map is not a perf event array.
    :raises ParseError: ``pages`` is not a power of two.
    """

    def __init__(self, perf_map: HasFd | int, callback: Callable[[int, Any], Any] | None = None, *,
                 lost_callback: Callable[[int, int], Any] | None = None, pages: int = 8,
                 decode: struct.Struct | Codec | Decoder | None = None, wakeup_events: int = 1) -> None:
        if pages <= 0 or pages & (pages - 1):
            raise ParseError(f"pages must be a power of two, got {pages}")
        fd = _fd_of(perf_map)
        info = _sys.map_info(fd)
        if info.type != MapType.PERF_EVENT_ARRAY:
            raise NotSupportedError("perfbuf reader", f"map {info.name.decode()!r} is not a perf event array")
        self._map_fd = fd
        self.callback, self.lost_callback = callback, lost_callback
        self._decode = _decoder(decode)
        self.lost: dict[int, int] = {}
        self.malformed = 0
        self.delivered = 0
        self._rings: dict[int, _CpuRing] = {}
        self._closed = False
        self._ep = select.epoll()
        try:
            for cpu in online_cpus():
                if cpu >= info.max_entries:
                    break
                attr = _sys.PerfEventAttr(type=PerfType.SOFTWARE, config=PerfSwId.BPF_OUTPUT,
                                          sample_type=_sys.PerfSample.RAW, sample_period=1,
                                          wakeup_events=max(1, wakeup_events))
                efd = _sys.perf_event_open(attr, pid=-1, cpu=cpu)
                with efd.close_on_error():
                    ring = _CpuRing(cpu, efd, pages)
                self._rings[efd.fd] = ring
                _sys.map_update_elem(fd, cpu.to_bytes(4, "little"), efd.fd.to_bytes(4, "little"))
                _sys.perf_event_enable(efd)
                self._ep.register(efd.fd, select.EPOLLIN)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove the events from the map, unmap and close everything."""
        if self._closed:
            return
        self._closed = True
        for ring in self._rings.values():
            try:
                _sys.map_delete_elem(self._map_fd, ring.cpu.to_bytes(4, "little"))
            except BpfError:
                pass  # the map may already be gone
            ring.close()
        self._rings.clear()
        self._ep.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def __enter__(self) -> PerfBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fileno(self) -> int:
        """The epoll fd."""
        return self._ep.fileno()

    @property
    def cpus(self) -> list[int]:
        """CPUs with a ring."""
        return sorted(r.cpu for r in self._rings.values())

    # --- reading ----------------------------------------------------------------

    def _read_ring(self, ring: _CpuRing, deliver: Callable[[int, Any], Any]) -> int:
        mm, size, mask = ring.mm, ring.size, ring.mask
        head = _U64.unpack_from(mm, _HEAD_OFF)[0]
        tail = _U64.unpack_from(mm, _TAIL_OFF)[0]
        n = 0
        try:
            while tail < head:
                off = tail & mask
                hdr = self._copy(mm, off, 8, size)
                rtype, _misc, rsize = _HDR.unpack(hdr)
                if rsize < 8:
                    raise BpfError(_errno.EIO, f"corrupt perf record on CPU {ring.cpu} (size {rsize})")
                body = self._copy(mm, (off + 8) & mask, rsize - 8, size)
                tail += rsize
                if rtype == PERF_RECORD_SAMPLE:
                    if len(body) < _U32.size:
                        self._count_malformed(ring.cpu)
                        continue
                    raw_len = _U32.unpack_from(body, 0)[0]
                    data = body[4:4 + raw_len]
                    n += 1
                    deliver(ring.cpu, self._decode(data) if self._decode is not None else data)
                elif rtype == PERF_RECORD_LOST:
                    if len(body) < _LOST.size:
                        self._count_malformed(ring.cpu)
                        continue
                    _id, lost = _LOST.unpack_from(body, 0)
                    self._count_lost(ring.cpu, lost)
        finally:
            _U64.pack_into(mm, _TAIL_OFF, tail)
            self.delivered += n
        return n

    def _count_lost(self, cpu: int, count: int) -> None:
        self.lost[cpu] = self.lost.get(cpu, 0) + count
        if self.lost_callback is not None:
            self.lost_callback(cpu, count)

    def _count_malformed(self, cpu: int) -> None:
        # A sample or lost-records notice too short for its own fields: its
        # size is known, so the ring stays readable; the sample (or, for a
        # notice, at least one) is gone, so it is reported as one lost.
        self.malformed += 1
        self._count_lost(cpu, 1)

    @staticmethod
    def _copy(mm: mmap.mmap, off: int, length: int, size: int) -> bytes:
        start = _PAGE + off
        if off + length <= size:
            return mm[start:start + length]
        first = size - off
        return mm[start:start + first] + mm[_PAGE:_PAGE + length - first]

    def _deliver(self, cpu: int, data: Any) -> None:
        if self.callback is None:
            raise ParseError("PerfBuffer has no callback; pass callback= or iterate over it")
        self.callback(cpu, data)

    def consume(self) -> int:
        """Read every CPU's ring now (no waiting).

        :returns: samples delivered.
        :raises Exception: whatever a callback raised.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "perf buffer reader is closed")
        return sum(self._read_ring(r, self._deliver) for r in list(self._rings.values()))

    def poll(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds for data, then read the ready rings.

        :returns: samples delivered (0 on timeout).
        :raises Exception: whatever a callback raised.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "perf buffer reader is closed")
        try:
            ready = self._ep.poll(-1 if timeout is None else timeout)
        except InterruptedError:
            return 0
        n = 0
        for fdnum, _ev in ready:
            ring = self._rings.get(fdnum)
            if ring is not None:
                n += self._read_ring(ring, self._deliver)
        return n

    def drain(self) -> list[tuple[int, Any]]:
        """Every sample available now as ``(cpu, data)``, without the callback.

        :raises BpfError: closed.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "perf buffer reader is closed")
        out: list[tuple[int, Any]] = []
        for r in list(self._rings.values()):
            self._read_ring(r, lambda cpu, d: out.append((cpu, d)))
        return out

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        """Yield ``(cpu, data)`` forever (blocking)."""
        while not self._closed:
            got = self.drain()
            yield from got
            if not got and not self._closed:
                self._ep.poll(-1)

    async def events(self) -> AsyncIterator[tuple[int, Any]]:
        """Async iterator of ``(cpu, data)``; the loop watches every CPU's event fd."""
        import asyncio  # only async readers pay for it (the import costs ~0.1 s)

        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        while not self._closed:
            got = self.drain()
            for item in got:
                yield item
            if not got and not self._closed:
                ready.clear()
                fds = list(self._rings)
                for fd in fds:
                    loop.add_reader(fd, ready.set)
                try:
                    await ready.wait()
                finally:
                    for fd in fds:
                        loop.remove_reader(fd)
