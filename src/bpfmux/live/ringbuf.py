"""BPF ring buffer reader (``BPF_MAP_TYPE_RINGBUF``): mmap + epoll, no libbpf.

Layout (uapi facts): the map fd is mmap'd as one read-write *consumer page*
(``consumer_pos`` at offset 0) followed, at offset ``page_size``, by a
read-only *producer page* (``producer_pos`` at offset 0) and the data area,
mapped twice back to back so a record that wraps is still contiguous. Each
record starts with an 8-byte header: ``u32 len`` (bit 31 busy, bit 30
discarded) and ``u32 pg_off``; records are 8-byte aligned.

Three ways to read, all sharing one consumer position:

- ``poll(timeout)`` / ``consume()`` call the callback per record (``bytes``,
  or the decoded value when ``decode=`` is given: a :class:`struct.Struct`, a
  codec or any callable);
- iteration: ``for event in rb:`` blocks for the next event;
- asyncio: ``async for event in rb.events():`` (the epoll fd is registered
  with the running loop).

Batch decoding: with ``dtype=`` (a numpy structured dtype of the event) and
``batch_callback=``, every poll hands over all complete records of one size as
a single numpy array, decoded in C; records of another size fall back to the
per-record callback. This is what lets Python keep up with a busy producer.

An exception raised by a callback stops the poll after that record is
consumed and propagates to the caller. ``discarded`` counts records the
producer discarded; the ring buffer itself has no drop counter (a producer
that cannot reserve space must count that itself, e.g. in a global).
"""

from __future__ import annotations

import errno as _errno
import mmap
import select
import struct
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import BpfError, NotSupportedError, ParseError
from ..uapi import MapType
from . import sys as _sys

if TYPE_CHECKING:
    import numpy

_BUSY = 1 << 31
_DISCARD = 1 << 30
_LEN_MASK = ~(_BUSY | _DISCARD) & 0xFFFFFFFF
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_PAGE = mmap.PAGESIZE

#: turns one record into an event (a ring buffer passes a view into the mapping, valid during the call; a perf
#: buffer passes bytes)
Decoder = Callable[[bytes | memoryview], Any]


class HasFd(Protocol):
    """A map object (:class:`~bpfmux.api.Map`) or an :class:`~bpfmux.live.sys.Fd`: its ``fd`` is the number."""

    @property
    def fd(self) -> int: ...


@runtime_checkable
class Codec(Protocol):
    """What ``decode=`` takes besides a :class:`struct.Struct` or a callable: an object with ``decode(data)``."""

    def decode(self, data: bytes | memoryview, /) -> Any: ...


def _fd_of(obj: HasFd | int) -> int:
    return obj if isinstance(obj, int) else obj.fd


class RingBuffer:
    """Reader of one BPF ring buffer map.

    :param ringbuf: a :class:`~bpfmux.live.maps.RingBufMap` (or its ``Fd``).
    :param callback: called with each record (decoded if ``decode`` is set).
    :param decode: a :class:`struct.Struct` (records are unpacked to tuples),
        an object with ``decode(bytes)`` (a codec), or a callable.
    :param dtype: numpy dtype of fixed-size events for batch decoding.
    :param batch_callback: called with a numpy array per batch (needs ``dtype``).
    :raises BpfError: mmap or epoll failed.
    :raises NotSupportedError: the map is not a ring buffer.
    """

    def __init__(self, ringbuf: HasFd | int, callback: Callable[[Any], Any] | None = None, *,
                 decode: struct.Struct | Codec | Decoder | None = None, dtype: Any = None,
                 batch_callback: Callable[[numpy.ndarray[Any, Any]], Any] | None = None) -> None:
        fd = _fd_of(ringbuf)
        info = _sys.map_info(fd)
        if info.type != MapType.RINGBUF:
            raise NotSupportedError("ringbuf reader", f"map {info.name.decode()!r} is not a ring buffer "
                                    f"(type {info.type}); use PerfBuffer for perf event arrays")
        self.size = info.max_entries
        self._mask = self.size - 1
        self._fdnum = int(fd)
        self._keep = ringbuf
        self.callback = callback
        self._decode = _decoder(decode)
        self.batch_callback = batch_callback
        self._dtype: numpy.dtype[Any] | None = None
        self._np = None
        if dtype is not None:
            import numpy as np

            self._np = np
            self._dtype = np.dtype(dtype)
            rec = (self._dtype.itemsize + 8 + 7) & ~7
            self._rec_size = rec
            self._batch_dtype = np.dtype({"names": ["hdr", "ev"], "formats": ["<u4", self._dtype],
                                          "offsets": [0, 8], "itemsize": rec})
        self.discarded = 0
        self.delivered = 0
        self._closed = False
        try:
            self._cons = mmap.mmap(self._fdnum, _PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as err:
            raise BpfError(err.errno or _errno.EINVAL, f"mmap of ring buffer consumer page failed: {err.strerror}") from None
        try:
            self._prod = mmap.mmap(self._fdnum, _PAGE + 2 * self.size, mmap.MAP_SHARED, mmap.PROT_READ,
                                   offset=_PAGE)
        except OSError as err:
            self._cons.close()
            raise BpfError(err.errno or _errno.EINVAL, f"mmap of ring buffer data failed: {err.strerror}") from None
        self._data = memoryview(self._prod)[_PAGE:]
        ep = None
        try:
            ep = select.epoll()
            ep.register(self._fdnum, select.EPOLLIN)
        except BaseException as err:
            if ep is not None:
                ep.close()
            self._data.release()
            self._prod.close()
            self._cons.close()
            if isinstance(err, OSError):
                raise BpfError(err.errno or _errno.EINVAL, f"epoll for the ring buffer failed: {err.strerror}; "
                               "close unused readers or raise the open-file limit (ulimit -n)") from None
            raise
        self._ep = ep
        self._pending: deque[Any] = deque()

    # --- lifecycle --------------------------------------------------------------

    def close(self) -> None:
        """Unmap and close the epoll fd (the map itself is not closed)."""
        if self._closed:
            return
        self._closed = True
        self._ep.close()
        self._data.release()
        maps = (self._prod, self._cons)
        del self._prod, self._cons  # no use after close; a record view still held keeps its mapping alone
        for mm in maps:
            try:
                mm.close()
            except BufferError:  # a caller still holds a view of a record: the mapping (and its fd) goes with it
                pass

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def __enter__(self) -> RingBuffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fileno(self) -> int:
        """The epoll fd (readable when data is available), for external loops."""
        return self._ep.fileno()

    # --- positions ----------------------------------------------------------------

    @property
    def consumer_pos(self) -> int:
        """Bytes consumed so far.

        :raises BpfError: ``EBADF`` closed.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "ring buffer reader is closed")
        pos: int = _U64.unpack_from(self._cons, 0)[0]
        return pos

    @property
    def producer_pos(self) -> int:
        """Bytes committed by producers so far.

        :raises BpfError: ``EBADF`` closed.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "ring buffer reader is closed")
        pos: int = _U64.unpack_from(self._prod, 0)[0]
        return pos

    def available(self) -> int:
        """Bytes produced but not consumed yet.

        :raises BpfError: ``EBADF`` closed.
        """
        return self.producer_pos - self.consumer_pos

    # --- consuming ----------------------------------------------------------------

    def consume(self) -> int:
        """Deliver every complete record now in the buffer (no waiting).

        :returns: records delivered.
        :raises BpfError: the buffer is closed.
        :raises Exception: whatever a callback raised (after consuming that record).
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "ring buffer reader is closed")
        return self._consume(self._deliver)

    def _deliver(self, rec: memoryview) -> None:
        cb = self.callback
        if cb is None:
            raise ParseError("RingBuffer has no callback; pass callback= or iterate over it")
        dec = self._decode
        cb(dec(rec) if dec is not None else bytes(rec))

    def _consume(self, deliver: Callable[[memoryview], Any]) -> int:
        cons_map, data, mask = self._cons, self._data, self._mask
        unpack64, unpack32 = _U64.unpack_from, _U32.unpack_from
        cons = unpack64(cons_map, 0)[0]
        prod = unpack64(self._prod, 0)[0]
        n = 0
        dtype = self._dtype  # set (with self._np) when batch decoding is possible
        batching = dtype is not None and self.batch_callback is not None
        batch_len = dtype.itemsize if dtype is not None and batching else -1
        try:
            while cons < prod:
                if batching:
                    k, cons = self._batch(cons, prod)
                    n += k
                    if k:
                        if cons >= prod:
                            prod = unpack64(self._prod, 0)[0]
                        continue
                off = cons & mask
                hdr = unpack32(data, off)[0]
                if hdr & _BUSY:
                    break
                length = hdr & _LEN_MASK
                if batching and hdr == batch_len:
                    continue  # committed since the batch scan: take it with the next batch
                nxt = cons + ((length + 15) & ~7)
                if hdr & _DISCARD:
                    self.discarded += 1
                    cons = nxt
                    continue
                rec = data[off + 8:off + 8 + length]
                cons = nxt
                n += 1
                deliver(rec)
                if cons >= prod:  # refresh: producers may have added more meanwhile
                    prod = unpack64(self._prod, 0)[0]
        finally:
            _U64.pack_into(cons_map, 0, cons)
            self.delivered += n
        return n

    def _batch(self, cons: int, prod: int) -> tuple[int, int]:
        """Decode the run of same-size records at ``cons`` as one numpy array."""
        np, dtype, callback, rec = self._np, self._dtype, self.batch_callback, self._rec_size
        assert np is not None and dtype is not None and callback is not None  # _consume batches only then
        want = dtype.itemsize
        off = cons & self._mask
        count = min((prod - cons) // rec, self.size // rec)
        if count <= 0:
            return 0, cons
        arr = np.frombuffer(self._data, dtype=self._batch_dtype, count=count, offset=off)
        good = arr["hdr"] == want  # not busy, not discarded, the expected length
        if not good[0]:
            del arr, good
            return 0, cons
        if not good.all():
            count = int(np.argmin(good))
            arr = arr[:count]
        events = arr["ev"].copy()
        del arr, good  # no view into the mapping may outlive this call (close() unmaps)
        cons += count * rec
        _U64.pack_into(self._cons, 0, cons)
        callback(events)
        return count, cons

    def poll(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: forever) for data, then consume.

        :returns: records delivered (0 on timeout).
        :raises Exception: whatever a callback raised.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "ring buffer reader is closed")
        if self.available() <= 0:
            try:
                self._ep.poll(-1 if timeout is None else timeout, 1)
            except InterruptedError:
                return 0
        return self.consume()

    # --- iteration ----------------------------------------------------------------

    def __iter__(self) -> Iterator[Any]:
        """Yield events forever (blocking); stop with ``break`` or ``close()``."""
        while not self._closed:
            yield from self.drain()
            if not self._closed and self.available() <= 0:
                self._ep.poll(-1, 1)

    def drain(self) -> list[Any]:
        """Every record available now, decoded, without calling the callback.

        :raises BpfError: closed.
        """
        if self._closed:
            raise BpfError(_errno.EBADF, "ring buffer reader is closed")
        out: list[Any] = []
        dec = self._decode
        self._consume(lambda rec: out.append(dec(rec) if dec is not None else bytes(rec)))
        return out

    async def events(self) -> AsyncIterator[Any]:
        """Async iterator of events; waits on the epoll fd with the running loop."""
        import asyncio  # only async readers pay for it (the import costs ~0.1 s)

        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        while not self._closed:
            for ev in self.drain():
                yield ev
            if self.available() <= 0:
                ready.clear()
                loop.add_reader(self._fdnum, ready.set)  # the map fd itself, see poll_async
                try:
                    if self.available() <= 0:
                        await ready.wait()
                finally:
                    loop.remove_reader(self._fdnum)

    async def poll_async(self, timeout: float | None = None) -> int:
        """Async :meth:`poll`: wait for data on the event loop, then consume.

        :returns: records delivered (0 on timeout).
        """
        if self.available() <= 0:
            import asyncio

            loop = asyncio.get_running_loop()
            ready = asyncio.Event()
            # the loop watches the map fd itself (a nested epoll fd can miss wakeups)
            loop.add_reader(self._fdnum, ready.set)
            try:
                if self.available() <= 0:
                    await asyncio.wait_for(ready.wait(), timeout)
            except TimeoutError:
                return 0
            finally:
                loop.remove_reader(self._fdnum)
        return self.consume()


def _decoder(decode: object) -> Decoder | None:
    if decode is None:
        return None
    if isinstance(decode, struct.Struct):
        s = decode
        return lambda rec: s.unpack_from(rec)
    if isinstance(decode, Codec) and (not callable(decode) or hasattr(decode, "size")):
        return decode.decode
    if callable(decode):
        return decode
    raise ParseError(f"decode= must be a struct.Struct, a codec or a callable, not {type(decode).__name__}")
