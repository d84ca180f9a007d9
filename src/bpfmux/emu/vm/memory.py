"""The emulated address space: programs never touch host memory.

A pointer in the emulator is a plain 64-bit integer. Memory the programs may
touch (a context, a stack frame, a map value, a ring buffer record, packet
data) is a :class:`Region`: a Python buffer (``bytearray`` or a
``memoryview`` slice of one) *mapped* at a base address. Every region gets its
own 4 GiB *slot* of the address space, so

* the region holding an address is ``slots[addr >> 32]`` (one dict lookup),
* the offset inside it is ``addr & 0xFFFFFFFF`` (never negative), and
* an access past the end of the buffer is caught by the buffer itself
  (``struct.unpack_from`` raises, indexing raises).

That makes every access of both execution tiers bounds-checked against the
exact region, at the cost of one dict lookup. Read-only regions (``.rodata``
of a frozen map, a read-only context) are only in :attr:`AddressSpace.rbufs`;
stores look up :attr:`AddressSpace.wbufs` and fault on them.

Slots start at ``0x80000000`` (addresses ``0x8000_0000_0000_0000`` and up,
the kernel half), so small integers, NULL and user-space addresses are never
mapped. Besides data regions a slot may hold a *handle*: a map (``lddw`` of a
map fd yields the map's handle address) or a program's code (the address of a
subprogram, ``lddw`` ``BPF_PSEUDO_FUNC``); handles are not readable.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import BpfmuxError, EmulatorFault

#: First slot handed out; the address of slot ``s`` is ``s << 32``.
FIRST_SLOT = 0x8000_0000
LAST_SLOT = 0xFFFF_FFFE  # slot 0xFFFFFFFF (addresses just below 2**64) is never mapped
SLOT_SHIFT = 32
#: how far below a region an address is still described relative to it
_NEAR = 1 << 16
OFFSET_MASK = 0xFFFF_FFFF
#: Largest region one slot can hold.
MAX_REGION = 1 << 32

Buffer = bytearray | memoryview


class Region:
    """One mapped buffer.

    :ivar base: its address (``slot << 32``).
    :ivar buf: the buffer (``bytearray`` or writable ``memoryview``).
    :ivar name: a human-readable name used in fault messages.
    :ivar kind: ``"ctx"``, ``"stack"``, ``"map_value"``, ``"ringbuf_record"``,
        ``"packet"``, ``"data"``, ….
    :ivar writable: whether stores are allowed.
    """

    __slots__ = ("base", "buf", "kind", "name", "owner", "slot", "writable")

    def __init__(self, slot: int, buf: Buffer, name: str, kind: str, writable: bool, owner: object = None) -> None:
        self.slot = slot
        self.base = slot << SLOT_SHIFT
        self.buf = buf
        self.name = name
        self.kind = kind
        self.writable = writable
        self.owner = owner

    @property
    def size(self) -> int:
        """Size of the region in bytes."""
        return len(self.buf)

    @property
    def end(self) -> int:
        """First address past the region."""
        return self.base + len(self.buf)

    def __repr__(self) -> str:
        rw = "rw" if self.writable else "ro"
        return f"<Region {self.name!r} {self.kind} {rw} {self.base:#x}+{len(self.buf)}>"


class AddressSpace:
    """The emulated kernel's memory: regions and handles by slot.

    One address space is shared by everything a :class:`~bpfmux.emu.vm.machine.VM`
    runs, so a map value pointer stays valid across programs.

    :ivar rbufs: slot → buffer, for every readable region (loads).
    :ivar wbufs: slot → buffer, for every writable region (stores).
    :ivar regions: slot → :class:`Region`.
    :ivar handles: slot → object, for non-data addresses (maps, code).
    """

    def __init__(self, first_slot: int = FIRST_SLOT) -> None:
        """:param first_slot: slot of the first region; a task's user memory
            uses a low one (e.g. ``0x10``: addresses from ``0x10_0000_0000``)
            so its addresses look like user addresses."""
        if not 1 <= first_slot <= LAST_SLOT:
            raise BpfmuxError(f"first_slot must be in 1..{LAST_SLOT:#x}")
        self.rbufs: dict[int, Buffer] = {}
        self.wbufs: dict[int, Buffer] = {}
        self.regions: dict[int, Region] = {}
        self.handles: dict[int, object] = {}
        #: called with the slot whenever a region is unmapped or changes protection (native code's caches)
        self.listeners: list[Callable[[int], None]] = []
        self._next = first_slot
        self._free: list[int] = []

    # -- slots -------------------------------------------------------------

    def _alloc_slot(self) -> int:
        if self._free:
            return self._free.pop()
        if self._next > LAST_SLOT:
            raise BpfmuxError("emulated address space exhausted (2**31 regions); unmap regions you no longer need")
        slot = self._next
        self._next += 1
        return slot

    def map(self, buf: Buffer | int, name: str = "", kind: str = "data", writable: bool = True,
            owner: object = None) -> Region:
        """Map a buffer (or a fresh zeroed one of ``buf`` bytes) at a new address.

        The buffer is used as is (not copied): writes by programs are visible
        in it, and changes to it are visible to programs.

        :raises BpfmuxError: the buffer is larger than 4 GiB, not writable
            while ``writable`` is asked, or the address space is exhausted.
        """
        if isinstance(buf, int):
            if buf < 0:
                raise BpfmuxError(f"cannot map a region of negative size {buf}")
            buf = bytearray(buf)
        if len(buf) > MAX_REGION:
            raise BpfmuxError(f"region {name!r} of {len(buf)} bytes is larger than 4 GiB")
        if writable and isinstance(buf, memoryview) and buf.readonly:
            raise BpfmuxError(f"region {name!r}: a read-only buffer cannot be mapped writable")
        if not isinstance(buf, bytearray | memoryview):
            raise BpfmuxError(f"region {name!r}: map a bytearray or memoryview, not {type(buf).__name__}")
        slot = self._alloc_slot()
        region = Region(slot, buf, name, kind, writable, owner)
        self.regions[slot] = region
        self.rbufs[slot] = buf
        if writable:
            self.wbufs[slot] = buf
        return region

    def unmap(self, region: Region) -> None:
        """Remove a region; later accesses to its addresses fault. Idempotent."""
        slot = region.slot
        if self.regions.get(slot) is region:
            del self.regions[slot]
            self.rbufs.pop(slot, None)
            self.wbufs.pop(slot, None)
            self._free.append(slot)
            for listener in self.listeners:
                listener(slot)

    def set_writable(self, region: Region, writable: bool) -> None:
        """Make a mapped region writable or read-only (e.g. ``BPF_MAP_FREEZE``)."""
        region.writable = writable
        if self.regions.get(region.slot) is region:
            if writable:
                self.wbufs[region.slot] = region.buf
            else:
                self.wbufs.pop(region.slot, None)
            for listener in self.listeners:
                listener(region.slot)

    def add_handle(self, obj: object) -> int:
        """Give ``obj`` an address of its own (not readable); returns it."""
        slot = self._alloc_slot()
        self.handles[slot] = obj
        return slot << SLOT_SHIFT

    def remove_handle(self, addr: int) -> None:
        """Forget a handle address. Idempotent."""
        slot = addr >> SLOT_SHIFT
        if self.handles.pop(slot, None) is not None:
            self._free.append(slot)

    def handle(self, addr: int) -> Any:
        """The object whose handle address is ``addr`` (or an address inside
        its slot), or ``None``."""
        return self.handles.get(addr >> SLOT_SHIFT) if addr >= 0 else None

    # -- lookups -------------------------------------------------------------

    def region_at(self, addr: int) -> Region | None:
        """The region containing ``addr``, or ``None``."""
        if addr < 0:
            return None
        region = self.regions.get(addr >> SLOT_SHIFT)
        if region is not None and (addr & OFFSET_MASK) < len(region.buf):
            return region
        return None

    def __iter__(self) -> Iterator[Region]:
        return iter(list(self.regions.values()))

    def __len__(self) -> int:
        return len(self.regions)

    def describe(self, addr: int) -> str:
        """A short description of an address for fault messages."""
        if addr < 0 or addr >= 1 << 64:
            return f"{addr:#x} (not a 64-bit address)"
        slot = addr >> SLOT_SHIFT
        region = self.regions.get(slot)
        below = self.regions.get(slot + 1)
        if below is not None and below.base - addr > _NEAR:
            below = None
        off = addr & OFFSET_MASK
        # an address just below the next region (r10 - 520 on a 512-byte stack) is named after that region,
        # not after the region that happens to own the slot, far past its end
        if region is not None and (below is None or off - len(region.buf) < below.base - addr):
            return f"{addr:#x} ({region.name or region.kind}+{off}, size {len(region.buf)})"
        if below is not None:
            return f"{addr:#x} ({below.base - addr} bytes below {below.name or below.kind}, size {len(below.buf)})"
        if slot in self.handles:
            return f"{addr:#x} (handle of {self.handles[slot]!r}, not memory)"
        return f"{addr:#x} (unmapped)"

    def check(self, addr: int, size: int, write: bool = False, pc: int | None = None) -> tuple[Buffer, int]:
        """Resolve an access of ``size`` bytes at ``addr`` to ``(buffer, offset)``.

        :raises EmulatorFault: the access is not entirely inside one
            (writable, for ``write``) region.
        """
        if addr >= 0:
            slot = addr >> SLOT_SHIFT
            buf = (self.wbufs if write else self.rbufs).get(slot)
            if buf is not None:
                off = addr & OFFSET_MASK
                if off + size <= len(buf):
                    return buf, off
        raise self.fault(addr, size, write, pc)

    def fault(self, addr: int, size: int, write: bool, pc: int | None = None) -> EmulatorFault:
        """Build the :class:`EmulatorFault` for a bad access."""
        what = "write" if write else "read"
        where = f"insn {pc}: " if pc is not None else ""
        detail = self.describe(addr)
        region = self.regions.get(addr >> SLOT_SHIFT) if 0 <= addr < 1 << 64 else None
        if write and region is not None and not region.writable:
            reason = "region is read-only"
        elif region is not None:
            reason = "out of bounds"
        else:
            reason = "no memory there"
        return EmulatorFault(f"{where}invalid {size}-byte {what} at {detail}: {reason}", pc=pc, address=addr)

    # -- bulk access (helpers, user API) ---------------------------------------

    def read(self, addr: int, size: int, pc: int | None = None) -> bytes:
        """Read ``size`` bytes.

        :raises EmulatorFault: not entirely inside one readable region.
        """
        if size == 0:
            return b""
        buf, off = self.check(addr, size, False, pc)
        return bytes(buf[off : off + size])

    def write(self, addr: int, data: bytes | bytearray | memoryview, pc: int | None = None) -> None:
        """Write ``data`` at ``addr``.

        :raises EmulatorFault: not entirely inside one writable region.
        """
        n = len(data)
        if n == 0:
            return
        buf, off = self.check(addr, n, True, pc)
        buf[off : off + n] = data

    def try_read(self, addr: int, size: int) -> bytes | None:
        """Like :meth:`read` but returns ``None`` instead of faulting."""
        if size == 0:
            return b""
        if addr < 0:
            return None
        buf = self.rbufs.get(addr >> SLOT_SHIFT)
        if buf is None:
            return None
        off = addr & OFFSET_MASK
        if off + size > len(buf):
            return None
        return bytes(buf[off : off + size])

    def try_read_str(self, addr: int, size: int) -> bytes | None:
        """Read a NUL-terminated string of at most ``size`` bytes (NUL included).

        Returns the bytes up to and including the NUL (or ``size`` bytes, the
        last replaced by NUL, when no NUL comes first), or ``None`` when the
        first byte is not readable. Stops at the end of the region.
        """
        if size <= 0 or addr < 0:
            return None if size > 0 else b""
        buf = self.rbufs.get(addr >> SLOT_SHIFT)
        if buf is None:
            return None
        off = addr & OFFSET_MASK
        if off >= len(buf):
            return None
        chunk = bytes(buf[off : off + size])
        nul = chunk.find(0)
        if nul >= 0:
            return chunk[: nul + 1]
        if len(chunk) == size:
            return chunk[:-1] + b"\0"
        return None  # ran off the end of the region without a NUL

    def read_u64(self, addr: int, pc: int | None = None) -> int:
        """Read a little-endian u64.

        :raises EmulatorFault: not readable.
        """
        buf, off = self.check(addr, 8, False, pc)
        return _U64.unpack_from(buf, off)[0]

    def write_u64(self, addr: int, value: int, pc: int | None = None) -> None:
        """Write a little-endian u64.

        :raises EmulatorFault: not writable.
        """
        buf, off = self.check(addr, 8, True, pc)
        _U64.pack_into(buf, off, value & 0xFFFFFFFFFFFFFFFF)


_U64 = struct.Struct("<Q")
