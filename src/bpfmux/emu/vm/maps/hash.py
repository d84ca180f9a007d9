"""Hash maps: hash, per-CPU hash, LRU hash, LRU per-CPU hash, hash of maps.

Each element keeps its value buffer(s); the first time a program looks an
element up, its value is mapped as a region of its own, so the pointer a
program gets stays valid while the element exists (in place updates write
the same buffer) and accesses past the value fault. A deleted element's
regions are unmapped when the current run ends (the kernel frees elements
after an RCU grace period), or at once when no program is running.

Update flags follow the kernel: ``BPF_NOEXIST`` on a present key fails
``EEXIST``, ``BPF_EXIST`` on an absent key fails ``ENOENT``, inserting into a
full map fails ``E2BIG`` — except for LRU maps, which evict.

An update of a present key writes the value in place (the kernel swaps in
a new element; the difference shows only to a program that keeps a pointer
to the old value across the update).

**LRU order.** The LRU maps evict the least recently used element: an element
becomes most recent when it is inserted, updated, or looked up by a program
(``bpf_map_lookup_elem``; a lookup from user space does not count, as in the
kernel). The kernel's LRU approximates this ordering (second chance through a
reference bit, per-CPU free lists), so under heavy concurrent pressure the
real kernel may pick another victim; with one CPU and this access pattern it
evicts the same element.
"""

from __future__ import annotations

import errno
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ....errors import BpfError, BpfmuxError
from ....uapi import MapType
from ..memory import Region
from .base import EXIST, NOEXIST, EmuMap, check_update_flags, round8

if TYPE_CHECKING:
    from ..runtime import RunState


class _Elem:
    __slots__ = ("bufs", "key", "regions")

    def __init__(self, key: bytes, bufs: list[bytearray]) -> None:
        self.key = key
        self.bufs = bufs
        self.regions: list[Region | None] = [None] * len(bufs)


class HashMap(EmuMap):
    """``BPF_MAP_TYPE_HASH``: at most ``max_entries`` key/value pairs."""

    type = MapType.HASH
    percpu = False
    lru = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        super().__init__(vm, key_size, value_size, max_entries, **kw)
        self.elems: OrderedDict[bytes, _Elem] = OrderedDict() if self.lru else {}  # type: ignore[assignment]  # a dict unless LRU; only LRU uses move_to_end/popitem(last=)
        self.ncpu = vm.ncpus if self.percpu else 1
        self.evictions = 0

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if key_size == 0 or value_size == 0:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: key_size and value_size must be at least 1")

    def _release(self) -> None:
        for elem in self.elems.values():
            self._unmap(elem, now=True)
        self.elems.clear()

    def _unmap(self, elem: _Elem, now: bool = False) -> None:
        for i, region in enumerate(elem.regions):
            if region is not None:
                elem.regions[i] = None
                if now:
                    self.vm.space.unmap(region)
                else:
                    self.vm.retire(region)

    def _region(self, elem: _Elem, cpu: int) -> Region:
        region = elem.regions[cpu]
        if region is None:
            region = self.vm.space.map(elem.bufs[cpu], f"{self.name or f'map{self.id}'}[{elem.key.hex()}]", "map_value", True, self)
            elem.regions[cpu] = region
        return region

    # -- the kernel operations ---------------------------------------------------

    def _update(self, key: bytes, values: list[bytes] | None, value: bytes | None, flags: int,
                cpu: int = 0) -> int:
        """Insert or replace; ``values`` (one per CPU) or ``value`` (for
        ``cpu``; the other CPUs of a new per-CPU element start zeroed)."""
        err = check_update_flags(flags, self.spin_lock_off is not None)
        if err:
            return err
        elems = self.elems
        elem = elems.get(key)
        if elem is not None:
            if flags & NOEXIST:
                return -errno.EEXIST
            if values is not None:
                for buf, v in zip(elem.bufs, values, strict=True):
                    buf[:] = v
            else:
                elem.bufs[cpu][:] = value  # type: ignore[assignment]  # given when values is not
            if self.lru:
                elems.move_to_end(key)
            return 0
        if flags & EXIST:
            return -errno.ENOENT
        if len(elems) >= self.max_entries:
            if not self.lru:
                return -errno.E2BIG
            _, victim = elems.popitem(last=False)
            self._unmap(victim)
            self.evictions += 1
        if values is not None:
            bufs = [bytearray(v) for v in values]
        else:
            bufs = [bytearray(self.value_size) for _ in range(self.ncpu)]
            bufs[cpu][:] = value  # type: ignore[assignment]  # given when values is not
        elems[key] = _Elem(key, bufs)
        return 0

    def _delete(self, key: bytes) -> int:
        elem = self.elems.pop(key, None)
        if elem is None:
            return -errno.ENOENT
        self._unmap(elem)
        return 0

    # -- programs ------------------------------------------------------------------

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        elem = self.elems.get(key)
        if elem is None:
            return 0
        if self.lru:
            self.elems.move_to_end(key)
        return self._region(elem, rs.cpu if self.percpu else 0).base

    def lookup_percpu(self, key: bytes, cpu: int) -> int:
        """``bpf_map_lookup_percpu_elem``: value address on ``cpu`` or 0."""
        elem = self.elems.get(key)
        if elem is None or not 0 <= cpu < self.ncpu:
            return 0
        return self._region(elem, cpu).base

    def bpf_update(self, rs: RunState, key: bytes, value: bytes, flags: int) -> int:
        return self._update(key, None, value, flags, rs.cpu if self.percpu else 0)

    def bpf_delete(self, rs: RunState, key: bytes) -> int:
        return self._delete(key)

    # -- user space --------------------------------------------------------------------

    def sys_lookup(self, key: bytes) -> Any:
        elem = self.elems.get(key)
        if elem is None:
            return None
        if self.percpu:
            return [bytes(b) for b in elem.bufs]
        return bytes(elem.bufs[0])

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        if self.percpu:
            return self._update(key, value, None, flags)
        return self._update(key, [value], None, flags)

    def sys_delete(self, key: bytes) -> int:
        return self._delete(key)

    def sys_keys(self) -> Iterator[bytes]:
        return iter(list(self.elems))

    def sys_next_key(self, key: bytes | None) -> bytes | None:
        keys = list(self.elems)
        if key is None or key not in self.elems:
            return keys[0] if keys else None
        i = keys.index(key)
        return keys[i + 1] if i + 1 < len(keys) else None

    def sys_len(self) -> int:
        return len(self.elems)

    def lru_order(self) -> list[Any]:
        """Keys from least to most recently used (the eviction order)."""
        return [self._out_key(k) for k in self.elems]


class _PercpuValues:
    def _out_value_any(self, raw: Any) -> Any:
        return [self._out_value(v) for v in raw]  # type: ignore[attr-defined]  # mixed into HashMap, which has it

    def _in_value(self, value: Any) -> Any:
        ncpu = self.ncpu  # type: ignore[attr-defined]  # mixed into HashMap, which has it
        if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray | memoryview | str):
            if len(value) != ncpu:
                raise BpfmuxError(f"map {self.name!r}: give one value per CPU ({ncpu}), "  # type: ignore[attr-defined]  # mixed into HashMap, which has it
                                  f"not {len(value)}")
            return [self._value(v) for v in value]  # type: ignore[attr-defined]  # mixed into HashMap, which has it
        return [self._value(value)] * ncpu  # type: ignore[attr-defined]  # mixed into HashMap, which has it


class PercpuHashMap(_PercpuValues, HashMap):
    """``BPF_MAP_TYPE_PERCPU_HASH``: one value per CPU per key (user space
    reads and writes a list with one value per CPU)."""

    type = MapType.PERCPU_HASH
    percpu = True


class LruHashMap(HashMap):
    """``BPF_MAP_TYPE_LRU_HASH``: a full map evicts its least recently used element."""

    type = MapType.LRU_HASH
    lru = True


class LruPercpuHashMap(_PercpuValues, HashMap):
    """``BPF_MAP_TYPE_LRU_PERCPU_HASH``."""

    type = MapType.LRU_PERCPU_HASH
    percpu = True
    lru = True


class HashOfMaps(HashMap):
    """``BPF_MAP_TYPE_HASH_OF_MAPS``: values are maps shaped like ``inner``.

    Programs get the inner map's handle from a lookup; user space stores an
    emulated map (or its fd) and reads back the inner map's id.
    """

    type = MapType.HASH_OF_MAPS
    has_values = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, *, inner: EmuMap | None = None,
                 **kw: Any) -> None:
        if inner is None:
            raise BpfError(errno.EINVAL, "a map-of-maps needs an inner map template (inner=)")
        self.inner = inner
        self.maps: dict[bytes, EmuMap] = {}
        super().__init__(vm, key_size, value_size, max_entries, **kw)

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if value_size != 4:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: value_size must be 4 (an fd)")

    def _in_value(self, value: Any) -> Any:
        return inner_map_value(self, value)

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        inner = self.maps.get(key)
        return 0 if inner is None else inner.handle

    def bpf_update(self, rs: RunState, key: bytes, value: bytes, flags: int) -> int:
        return -errno.EINVAL  # programs cannot store maps

    def bpf_delete(self, rs: RunState, key: bytes) -> int:
        return -errno.ENOENT if self.maps.pop(key, None) is None else 0

    def sys_lookup(self, key: bytes) -> Any:
        inner = self.maps.get(key)
        return None if inner is None else inner.id

    def _out_value_any(self, raw: Any) -> Any:
        return raw

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        err = check_update_flags(flags)
        if err:
            return err
        if key in self.maps:
            if flags & NOEXIST:
                return -errno.EEXIST
        else:
            if flags & EXIST:
                return -errno.ENOENT
            if len(self.maps) >= self.max_entries:
                return -errno.E2BIG
        self.maps[key] = value
        return 0

    def sys_delete(self, key: bytes) -> int:
        return -errno.ENOENT if self.maps.pop(key, None) is None else 0

    def sys_keys(self) -> Iterator[bytes]:
        return iter(list(self.maps))

    def sys_next_key(self, key: bytes | None) -> bytes | None:
        keys = list(self.maps)
        if key is None or key not in self.maps:
            return keys[0] if keys else None
        i = keys.index(key)
        return keys[i + 1] if i + 1 < len(keys) else None

    def sys_len(self) -> int:
        return len(self.maps)

    def get_map(self, key: Any) -> EmuMap | None:
        """The inner map at ``key`` (``None`` when absent)."""
        return self.maps.get(self._key(key))


def inner_map_value(outer: Any, value: Any) -> EmuMap:
    """Resolve a map (or map fd) stored into a map-of-maps and check that
    it is shaped like the template (type, key and value size, and
    ``max_entries`` unless the template has ``BPF_F_INNER_MAP``).

    :raises BpfError: ``EBADF`` not a map, ``EINVAL`` incompatible.
    """
    from ....uapi import MapFlags

    vm = outer.vm
    inner = value if isinstance(value, EmuMap) else vm._fds.get(value) if isinstance(value, int) else None
    if not isinstance(inner, EmuMap) or inner.vm is not vm:
        raise BpfError(errno.EBADF, f"map-of-maps {outer.name!r}: the value must be an emulated map of this VM "
                       "or its fd")
    t = outer.inner
    same = (inner.type == t.type and inner.key_size == t.key_size and inner.value_size == t.value_size
            and (inner.max_entries == t.max_entries or t.flags & MapFlags.INNER_MAP))
    if not same:
        raise BpfError(errno.EINVAL, f"map-of-maps {outer.name!r}: inner map {inner.name!r} does not match the "
                       f"template ({t.type.name}, key {t.key_size}, value {t.value_size}, "
                       f"max_entries {t.max_entries})")
    return inner


__all__ = ["HashMap", "HashOfMaps", "LruHashMap", "LruPercpuHashMap", "PercpuHashMap", "inner_map_value", "round8"]
