"""Arrays of kernel objects: prog array, array of maps, perf event array.

Their values are objects (a program, a map, a perf buffer); user space stores
the object itself or its emulated fd. Like the kernel, slots start empty,
delete empties a slot (``ENOENT`` when already empty) and programs cannot
update them.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ....codecs import IntCodec
from ....errors import BpfError
from ....uapi import F_CURRENT_CPU, MapType
from .base import EXIST, NOEXIST, EmuMap, check_update_flags

if TYPE_CHECKING:
    from ..runtime import RunState


class _FdArray(EmuMap):
    has_values = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        super().__init__(vm, key_size, value_size, max_entries, **kw)
        if self.key_codec is None and key_size == 4:  # an index, as the live kernel's arrays give it
            self.key_codec = IntCodec(4)
        self.slots: list[Any] = [None] * max_entries

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if key_size != 4 or value_size != 4:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: key_size and value_size must be 4")

    def _release(self) -> None:
        self.slots = [None] * self.max_entries

    def _resolve(self, value: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _in_value(self, value: Any) -> Any:
        return self._resolve(value)

    def _index(self, key: bytes) -> int:
        return int.from_bytes(key[:4], "little")

    def get(self, key: Any, default: Any = None) -> Any:
        """The object in slot ``key`` (or ``default``)."""
        index = self._index(self._key(key))
        obj = self.slots[index] if index < self.max_entries else None
        return default if obj is None else obj

    def sys_lookup(self, key: bytes) -> Any:
        index = self._index(key)
        if index >= self.max_entries:
            return None
        obj = self.slots[index]
        return None if obj is None else getattr(obj, "id", obj)

    def _out_value_any(self, raw: Any) -> Any:
        return raw

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        err = check_update_flags(flags)
        if err:
            return err
        index = self._index(key)
        if index >= self.max_entries:
            return -errno.E2BIG
        if flags & NOEXIST and self.slots[index] is not None:
            return -errno.EEXIST
        if flags & EXIST and self.slots[index] is None:
            return -errno.ENOENT
        self.slots[index] = value
        return 0

    def sys_delete(self, key: bytes) -> int:
        index = self._index(key)
        if index >= self.max_entries:
            return -errno.E2BIG
        if self.slots[index] is None:
            return -errno.ENOENT
        self.slots[index] = None
        return 0

    def sys_keys(self) -> Iterator[bytes]:
        return (i.to_bytes(4, "little") for i, obj in enumerate(self.slots) if obj is not None)

    def sys_next_key(self, key: bytes | None) -> bytes | None:
        index = 0 if key is None else self._index(key) + 1
        if index >= self.max_entries:
            return None
        return index.to_bytes(4, "little")

    def bpf_update(self, rs: RunState, key: bytes, value: bytes, flags: int) -> int:
        return -errno.EINVAL

    def bpf_delete(self, rs: RunState, key: bytes) -> int:
        return -errno.EINVAL


class ProgArrayMap(_FdArray):
    """``BPF_MAP_TYPE_PROG_ARRAY``: programs for ``bpf_tail_call``.

    All programs in one prog array must have the same program type (the
    first one stored decides), else ``EINVAL``.
    """

    type = MapType.PROG_ARRAY

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.owner_type: int | None = None

    def _resolve(self, value: Any) -> Any:
        from ..machine import EmuProgram

        prog = value if isinstance(value, EmuProgram) else self.vm._fds.get(value) if isinstance(value, int) else None
        if not isinstance(prog, EmuProgram) or prog.vm is not self.vm:
            raise BpfError(errno.EBADF, f"prog array {self.name!r}: store an emulated program of this VM or its fd")
        if self.owner_type is not None and prog.prog_type != self.owner_type:
            raise BpfError(errno.EINVAL, f"prog array {self.name!r} holds programs of type {self.owner_type}; "
                           f"{prog.name!r} has type {prog.prog_type}")
        return prog

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        err = super().sys_update(key, value, flags)
        if not err and self.owner_type is None:
            self.owner_type = value.prog_type
        return err

    def tail_target(self, index: int) -> Any:
        """The program in slot ``index`` or ``None``."""
        if index >= self.max_entries:
            return None
        return self.slots[index]


class ArrayOfMaps(_FdArray):
    """``BPF_MAP_TYPE_ARRAY_OF_MAPS``: programs get the inner map's handle."""

    type = MapType.ARRAY_OF_MAPS

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, *, inner: EmuMap | None = None,
                 **kw: Any) -> None:
        if inner is None:
            raise BpfError(errno.EINVAL, "a map-of-maps needs an inner map template (inner=)")
        self.inner = inner
        super().__init__(vm, key_size, value_size, max_entries, **kw)

    def _resolve(self, value: Any) -> Any:
        from .hash import inner_map_value

        return inner_map_value(self, value)

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        index = self._index(key)
        if index >= self.max_entries:
            return 0
        inner = self.slots[index]
        return 0 if inner is None else inner.handle


class PerfBuffer:
    """The emulated perf event (ring) of one CPU that ``bpf_perf_event_output``
    writes to.

    :ivar cpu: the CPU it belongs to.
    :ivar capacity: bytes it holds before samples are lost.
    :ivar records: pending samples (raw bytes).
    :ivar lost: samples dropped because the buffer was full.
    """

    HEADER = 8 + 4  # perf_event_header + u32 size of PERF_SAMPLE_RAW

    def __init__(self, cpu: int, capacity: int = 64 * 4096) -> None:
        self.cpu = cpu
        self.capacity = capacity
        self.records: list[bytes] = []
        self.used = 0
        self.lost = 0

    def _size(self, n: int) -> int:
        return (self.HEADER + n + 7) & ~7

    def push(self, data: bytes) -> bool:
        """Append a sample; ``False`` (and counted as lost) when full."""
        size = self._size(len(data))
        if self.used + size > self.capacity:
            self.lost += 1
            return False
        self.records.append(data)
        self.used += size
        return True

    def drain(self) -> list[bytes]:
        """Take every pending sample (frees the space)."""
        out, self.records, self.used = self.records, [], 0
        return out


class PerfEventArrayMap(_FdArray):
    """``BPF_MAP_TYPE_PERF_EVENT_ARRAY``: slot *i* holds the perf buffer of CPU *i*.

    :meth:`open` creates the buffers (what user space does with
    ``perf_event_open`` + ``mmap``); until a slot has one, output to it fails
    ``ENOENT``, as in the kernel.
    """

    type = MapType.PERF_EVENT_ARRAY

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        EmuMap._validate(self, key_size, value_size, max_entries, flags)
        if key_size != 4 or value_size != 4:
            raise BpfError(errno.EINVAL, "PERF_EVENT_ARRAY map: key_size and value_size must be 4")

    def _resolve(self, value: Any) -> Any:
        if not isinstance(value, PerfBuffer):
            raise BpfError(errno.EBADF, f"perf event array {self.name!r}: store a PerfBuffer (see open())")
        return value

    def open(self, cpus: list[int] | None = None, capacity: int = 64 * 4096) -> list[PerfBuffer]:
        """Give each CPU (default: every CPU of the VM, up to ``max_entries``)
        a :class:`PerfBuffer` in its slot; returns them."""
        if cpus is None:
            cpus = list(range(min(self.vm.ncpus, self.max_entries)))
        out = []
        for cpu in cpus:
            if cpu >= self.max_entries:
                raise BpfError(errno.E2BIG, f"perf event array {self.name!r} has {self.max_entries} slots")
            buf = PerfBuffer(cpu, capacity)
            self.slots[cpu] = buf
            out.append(buf)
        return out

    def read(self) -> list[tuple[int, bytes]]:
        """Drain every buffer: ``(cpu, sample)`` pairs, CPU by CPU."""
        out: list[tuple[int, bytes]] = []
        for slot in self.slots:
            if slot is not None:
                out.extend((slot.cpu, rec) for rec in slot.drain())
        return out

    def output(self, rs: RunState, flags: int, data: bytes) -> int:
        """``bpf_perf_event_output`` (the tracing flavour: only the index
        bits may be set in ``flags``): 0 or ``-errno``."""
        if flags & ~0xFFFFFFFF:
            return -errno.EINVAL
        index = flags & 0xFFFFFFFF
        if index == F_CURRENT_CPU:
            index = rs.cpu
        if index >= self.max_entries:
            return -errno.E2BIG
        buf = self.slots[index]
        if buf is None:
            return -errno.ENOENT
        if buf.cpu != rs.cpu:
            return -errno.EOPNOTSUPP
        return 0 if buf.push(data) else -errno.ENOSPC


__all__ = ["ArrayOfMaps", "PerfBuffer", "PerfEventArrayMap", "ProgArrayMap"]
