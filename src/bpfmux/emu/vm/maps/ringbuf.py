"""``BPF_MAP_TYPE_RINGBUF``: the BPF ring buffer.

Positions follow the kernel: every record takes an 8-byte header plus its
data rounded up to 8; the producer position advances on reserve, the
consumer position when user space consumes. A reservation fails (NULL) when
it would put more than ``max_entries`` bytes between the consumer and the
producer. User space consumes records in reservation order and stops at the
first one still reserved (busy); discarded records are skipped.

A reserved record is a region of its own (so the checked tier faults on any
access outside it); submit copies it into the ring and unmaps it.
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ....errors import BpfError
from ....uapi import RINGBUF_HDR_SZ, MapType
from ..memory import Region
from .base import EmuMap

if TYPE_CHECKING:
    from ..runtime import RunState

BUSY, COMMITTED, DISCARDED = 0, 1, 2
NO_WAKEUP, FORCE_WAKEUP = 1, 2
#: ``bpf_ringbuf_query`` flags.
RB_AVAIL_DATA, RB_RING_SIZE, RB_CONS_POS, RB_PROD_POS = 0, 1, 2, 3

_PAGE = 4096


class _Record:
    __slots__ = ("data", "pos", "size", "state", "total")

    def __init__(self, pos: int, size: int) -> None:
        self.pos = pos
        self.size = size
        self.total = (size + RINGBUF_HDR_SZ + 7) & ~7
        self.state = BUSY
        self.data = b""


class Reservation:
    """A record reserved by a program and not yet submitted or discarded."""

    __slots__ = ("rb", "record", "region")

    def __init__(self, rb: RingBufMap, record: _Record, region: Region) -> None:
        self.rb = rb
        self.record = record
        self.region = region

    def commit(self, discard: bool) -> None:
        """Submit (or discard) the record and unmap its region."""
        rec = self.record
        if discard:
            rec.state = DISCARDED
        else:
            rec.data = bytes(self.region.buf)
            rec.state = COMMITTED
            self.rb.submitted += 1
        self.rb.vm.space.unmap(self.region)
        if rec.state == COMMITTED and self.rb.on_record is not None:
            self.rb.on_record()

    def abandon(self) -> None:
        """The run ended without releasing the record: discard it."""
        self.commit(True)


class RingBufMap(EmuMap):
    """``BPF_MAP_TYPE_RINGBUF`` with ``max_entries`` bytes of data area.

    :ivar on_record: called after each commit (e.g. to wake a poller).
    """

    type = MapType.RINGBUF
    has_values = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        self.prod_pos = 0
        self.cons_pos = 0
        self.submitted = 0
        self.on_record: Callable[[], None] | None = None
        super().__init__(vm, key_size, value_size, max_entries, **kw)

    def _footprint(self) -> int:
        # the data area (records and reserved regions never hold more), a header per smallest record
        return self.max_entries + (self.max_entries // 8) * 8

    def _allocate(self) -> None:
        self.records: deque[_Record] = deque()

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        if key_size or value_size:
            raise BpfError(errno.EINVAL, "RINGBUF map: key_size and value_size must be 0")
        if max_entries < _PAGE or max_entries & (max_entries - 1):
            raise BpfError(errno.EINVAL, f"RINGBUF map: max_entries ({max_entries}) must be a power of 2 and a "
                           "multiple of the page size (4096)")

    @property
    def size(self) -> int:
        """Size of the data area."""
        return self.max_entries

    # -- programs --------------------------------------------------------------

    def reserve(self, rs: RunState, size: int, flags: int) -> int:
        """``bpf_ringbuf_reserve``: address of the new record or 0."""
        if flags or size < 0 or size > 0xFFFFFFFF - RINGBUF_HDR_SZ:
            return 0
        rec = _Record(self.prod_pos, size)
        if rec.total > self.max_entries or self.prod_pos + rec.total - self.cons_pos > self.max_entries:
            return 0
        region = self.vm.space.map(size, f"{self.name}:record@{self.prod_pos}", "ringbuf_record", True, self)
        self.prod_pos += rec.total
        self.records.append(rec)
        rs.reservations[region.base] = Reservation(self, rec, region)
        return region.base

    def output(self, rs: RunState, data: bytes, flags: int) -> int:
        """``bpf_ringbuf_output``: 0 or ``-errno``."""
        if flags & ~(NO_WAKEUP | FORCE_WAKEUP):
            return -errno.EINVAL
        rec = _Record(self.prod_pos, len(data))
        if rec.total > self.max_entries or self.prod_pos + rec.total - self.cons_pos > self.max_entries:
            return -errno.EAGAIN
        self.prod_pos += rec.total
        rec.data = bytes(data)
        rec.state = COMMITTED
        self.records.append(rec)
        self.submitted += 1
        if self.on_record is not None:
            self.on_record()
        return 0

    def query(self, flags: int) -> int:
        """``bpf_ringbuf_query``."""
        if flags == RB_AVAIL_DATA:
            return self.prod_pos - self.cons_pos
        if flags == RB_RING_SIZE:
            return self.max_entries
        if flags == RB_CONS_POS:
            return self.cons_pos
        if flags == RB_PROD_POS:
            return self.prod_pos
        return 0

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        return 0

    # -- user space ----------------------------------------------------------------

    def consume(self, limit: int | None = None) -> list[bytes]:
        """Take committed records in order (stopping at the first one still
        reserved); discarded records are skipped. Frees their space."""
        out: list[bytes] = []
        records = self.records
        while records and records[0].state != BUSY:
            if limit is not None and len(out) >= limit:
                break
            rec = records.popleft()
            self.cons_pos = rec.pos + rec.total
            if rec.state == COMMITTED:
                out.append(rec.data)
        return out

    def reader(self, callback: Callable[[bytes], Any] | None = None) -> RingReader:
        """A reader shaped like the live kernel's
        :class:`~bpfmux.live.ringbuf.RingBuffer`: ``poll()``/``consume()``
        hand each committed record to ``callback`` (or collect them)."""
        return RingReader(self, callback)

    def pending(self) -> int:
        """Number of records not yet consumed (committed or busy)."""
        return sum(1 for r in self.records if r.state != DISCARDED)

    def sys_len(self) -> int:
        return 0


class RingReader:
    """User space's side of an emulated ring buffer.

    :ivar records: what was consumed when no callback was given.
    """

    def __init__(self, ring: RingBufMap, callback: Callable[[bytes], Any] | None) -> None:
        self.ring = ring
        self.callback = callback
        self.records: list[bytes] = []
        self._closed = False

    def consume(self) -> int:
        """Deliver every committed record now; returns how many.

        :raises BpfError: ``EBADF`` the reader is closed.
        """
        if self._closed:
            raise BpfError(errno.EBADF, "ring buffer reader is closed")
        got = self.ring.consume()
        for rec in got:
            if self.callback is not None:
                self.callback(rec)
            else:
                self.records.append(rec)
        return len(got)

    def poll(self, timeout: float | None = None) -> int:
        """Like :meth:`consume`: the emulated kernel runs in this thread, so
        nothing new arrives while waiting (``timeout`` is accepted and not slept)."""
        return self.consume()

    def close(self) -> None:
        """Stop reading (idempotent)."""
        self._closed = True

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def __enter__(self) -> RingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["RB_AVAIL_DATA", "RB_CONS_POS", "RB_PROD_POS", "RB_RING_SIZE", "Reservation", "RingBufMap", "RingReader"]
