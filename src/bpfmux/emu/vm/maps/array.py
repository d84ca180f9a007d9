"""Array and per-CPU array maps (``BPF_MAP_TYPE_ARRAY``, ``PERCPU_ARRAY``).

Values live in one contiguous buffer per CPU with an 8-byte-aligned stride,
as in the kernel (an mmap-able array, ``.data``/``.bss``/``.rodata`` global
data). Each element a program looks up becomes its own region — a
``memoryview`` slice of that buffer mapped in the VM's address space — so an
access past the element faults exactly.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ....codecs import IntCodec
from ....errors import BpfError, BpfmuxError
from ....uapi import MapFlags, MapType
from ..memory import Region
from .base import ELEMENT_OVERHEAD, EXIST, NOEXIST, PERCPU_VALUE_MAX, EmuMap, check_update_flags, round8

if TYPE_CHECKING:
    from ..runtime import RunState

_U32_MAX = 0xFFFFFFFF


def _index(key: bytes) -> int:
    return int.from_bytes(key[:4], "little")


class ArrayMap(EmuMap):
    """``BPF_MAP_TYPE_ARRAY``: ``max_entries`` zero-initialised values, u32 keys.

    ``update`` with ``BPF_NOEXIST`` fails ``EEXIST`` (every element exists),
    an index past the end fails ``E2BIG``, delete fails ``EINVAL``.
    :attr:`data` is the raw value buffer (global data sections read and
    write it directly).
    """

    type = MapType.ARRAY
    percpu = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        self.stride = round8(value_size)
        self._ncpu = vm.ncpus if self.percpu else 1
        super().__init__(vm, key_size, value_size, max_entries, **kw)
        if self.key_codec is None and key_size == 4:  # an index, as the live kernel's arrays give it
            self.key_codec = IntCodec(4)
        self._prog_writable = not (self.flags & MapFlags.RDONLY_PROG)

    def _footprint(self) -> int:
        return self._ncpu * self.stride * self.max_entries

    def _allocate(self) -> None:
        ncpu = self._ncpu
        self.storage = [bytearray(self.stride * self.max_entries) for _ in range(ncpu)]
        self._views = [memoryview(s) for s in self.storage]
        self._regions: list[dict[int, Region]] = [{} for _ in range(ncpu)]

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if key_size != 4:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: key_size must be 4 (got {key_size})")
        if value_size == 0:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: value_size must be at least 1")
        if self.percpu and round8(value_size) > PERCPU_VALUE_MAX:
            raise BpfError(errno.E2BIG, f"{self.type.name} map: a per-CPU value is at most {PERCPU_VALUE_MAX} bytes "
                           f"(got {value_size})")

    @property
    def data(self) -> bytearray:
        """The value buffer (of CPU 0 for per-CPU arrays)."""
        return self.storage[0]

    def _release(self) -> None:
        space = self.vm.space
        for regions in self._regions:
            for region in regions.values():
                space.unmap(region)
            regions.clear()

    def region(self, index: int, cpu: int = 0) -> Region:
        """The region of element ``index`` on ``cpu`` (mapped on first use)."""
        regions = self._regions[cpu]
        region = regions.get(index)
        if region is None:
            self._charged += self.vm.memory.charge(ELEMENT_OVERHEAD, f"a value of {self.type.name} map {self.name!r}")
            start = index * self.stride
            view = self._views[cpu][start : start + self.value_size]
            region = self.vm.space.map(view, f"{self.name or f'map{self.id}'}[{index}]", "map_value", self._prog_writable, self)
            regions[index] = region
        return region

    def freeze(self) -> None:
        """``BPF_MAP_FREEZE``; also makes the values read-only for programs
        when the map was created with ``BPF_F_RDONLY_PROG``."""
        super().freeze()

    # -- programs ------------------------------------------------------------

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        index = _index(key)
        if index >= self.max_entries:
            return 0
        return self.region(index, rs.cpu if self.percpu else 0).base

    def lookup_percpu(self, key: bytes, cpu: int) -> int:
        """``bpf_map_lookup_percpu_elem``: element address on ``cpu`` or 0."""
        index = _index(key)
        if index >= self.max_entries or not 0 <= cpu < len(self.storage):
            return 0
        return self.region(index, cpu).base

    def bpf_update(self, rs: RunState, key: bytes, value: bytes, flags: int) -> int:
        if not self._prog_writable:
            return -errno.EPERM
        return self._store(key, value, flags, rs.cpu if self.percpu else 0)

    def bpf_delete(self, rs: RunState, key: bytes) -> int:
        return -errno.EINVAL

    def _store(self, key: bytes, value: bytes, flags: int, cpu: int) -> int:
        err = check_update_flags(flags, self.spin_lock_off is not None)
        if err:
            return err
        index = _index(key)
        if index >= self.max_entries:
            return -errno.E2BIG
        if flags & NOEXIST:
            return -errno.EEXIST
        start = index * self.stride
        self.storage[cpu][start : start + self.value_size] = value
        return 0

    def direct_value_addr(self, offset: int) -> int:
        if not 0 <= offset < self.value_size:
            raise BpfError(errno.EINVAL, f"offset {offset} is outside the value of map {self.name!r} "
                           f"({self.value_size} bytes)")
        if self.percpu or self.max_entries != 1:
            raise BpfError(errno.EINVAL, f"map {self.name!r}: direct value access needs a one-element array")
        return self.region(0).base + offset

    # -- user space ------------------------------------------------------------

    def sys_lookup(self, key: bytes) -> Any:
        index = _index(key)
        if index >= self.max_entries:
            return None
        start = index * self.stride
        if self.percpu:
            return [bytes(s[start : start + self.value_size]) for s in self.storage]
        return bytes(self.storage[0][start : start + self.value_size])

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        if not self.percpu:
            return self._store(key, value, flags, 0)
        for cpu, v in enumerate(value):
            err = self._store(key, v, flags, cpu)
            if err:
                return err
        return 0

    def sys_delete(self, key: bytes) -> int:
        return -errno.EINVAL

    def sys_next_key(self, key: bytes | None) -> bytes | None:
        index = 0 if key is None else _index(key) + 1
        if key is not None and _index(key) >= self.max_entries:
            index = 0
        if index >= self.max_entries:
            return None
        return index.to_bytes(4, "little")

    def sys_keys(self) -> Iterator[bytes]:
        return (i.to_bytes(4, "little") for i in range(self.max_entries))

    def sys_len(self) -> int:
        return self.max_entries


class PercpuArrayMap(ArrayMap):
    """``BPF_MAP_TYPE_PERCPU_ARRAY``: one value per CPU per index.

    Programs see the current CPU's value. User space reads a list with one
    value per CPU and writes such a list (a single value is written to every
    CPU).
    """

    type = MapType.PERCPU_ARRAY
    percpu = True

    def _out_value_any(self, raw: Any) -> Any:
        return [self._out_value(v) for v in raw]

    def _in_value(self, value: Any) -> Any:
        ncpu = len(self.storage)
        if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray | memoryview | str):
            if len(value) != ncpu:
                raise BpfmuxError(f"map {self.name!r}: give one value per CPU ({ncpu}), not {len(value)}")
            return [self._value(v) for v in value]
        return [self._value(value)] * ncpu


__all__ = ["EXIST", "ArrayMap", "PercpuArrayMap"]
