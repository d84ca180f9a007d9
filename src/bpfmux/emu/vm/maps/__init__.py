"""Emulated BPF maps with the kernel's semantics.

Create maps through :meth:`bpfmux.emu.vm.machine.VM.create_map` (or
:func:`create_map`); each gets an emulated fd that ``lddw`` map relocations
refer to, an id, and a handle address programs hold in their registers.

=====================  =========================================
map type               class
=====================  =========================================
``ARRAY``              :class:`~.array.ArrayMap`
``PERCPU_ARRAY``       :class:`~.array.PercpuArrayMap`
``HASH``               :class:`~.hash.HashMap`
``PERCPU_HASH``        :class:`~.hash.PercpuHashMap`
``LRU_HASH``           :class:`~.hash.LruHashMap`
``LRU_PERCPU_HASH``    :class:`~.hash.LruPercpuHashMap`
``RINGBUF``            :class:`~.ringbuf.RingBufMap`
``PERF_EVENT_ARRAY``   :class:`~.fdarray.PerfEventArrayMap`
``STACK_TRACE``        :class:`~.stacktrace.StackTraceMap`
``PROG_ARRAY``         :class:`~.fdarray.ProgArrayMap`
``ARRAY_OF_MAPS``      :class:`~.fdarray.ArrayOfMaps`
``HASH_OF_MAPS``       :class:`~.hash.HashOfMaps`
``CGROUP_ARRAY``       :class:`~.cgroup.CgroupArrayMap`
``LPM_TRIE``           :class:`~.lpm.LpmTrieMap`
``QUEUE``              :class:`~.queue.QueueMap`
``STACK``              :class:`~.queue.StackMap`
``BLOOM_FILTER``       :class:`~.bloom.BloomFilterMap`
=====================  =========================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ....errors import NotSupportedError
from ....uapi import MapType
from .array import ArrayMap, PercpuArrayMap
from .base import ANY, EXIST, LOCK, NOEXIST, Codec, EmuMap
from .bloom import BloomFilterMap
from .cgroup import CgroupArrayMap
from .fdarray import ArrayOfMaps, PerfBuffer, PerfEventArrayMap, ProgArrayMap
from .hash import HashMap, HashOfMaps, LruHashMap, LruPercpuHashMap, PercpuHashMap
from .lpm import LpmTrieMap
from .queue import QueueMap, StackMap
from .ringbuf import RingBufMap
from .stacktrace import StackTraceMap

if TYPE_CHECKING:
    from ..machine import VM

#: Map type → class.
MAP_CLASSES: dict[MapType, type[EmuMap]] = {
    MapType.ARRAY: ArrayMap,
    MapType.PERCPU_ARRAY: PercpuArrayMap,
    MapType.HASH: HashMap,
    MapType.PERCPU_HASH: PercpuHashMap,
    MapType.LRU_HASH: LruHashMap,
    MapType.LRU_PERCPU_HASH: LruPercpuHashMap,
    MapType.RINGBUF: RingBufMap,
    MapType.PERF_EVENT_ARRAY: PerfEventArrayMap,
    MapType.STACK_TRACE: StackTraceMap,
    MapType.PROG_ARRAY: ProgArrayMap,
    MapType.ARRAY_OF_MAPS: ArrayOfMaps,
    MapType.HASH_OF_MAPS: HashOfMaps,
    MapType.CGROUP_ARRAY: CgroupArrayMap,
    MapType.LPM_TRIE: LpmTrieMap,
    MapType.QUEUE: QueueMap,
    MapType.STACK: StackMap,
    MapType.BLOOM_FILTER: BloomFilterMap,
}


def create_map(vm: VM, map_type: MapType | int, key_size: int, value_size: int, max_entries: int, *,
               flags: int = 0, name: str = "", inner: EmuMap | None = None, key_codec: Codec | None = None,
               value_codec: Codec | None = None, map_extra: int = 0) -> EmuMap:
    """Create an emulated map of ``map_type`` in ``vm`` (``map_extra``: a
    bloom filter's number of hash functions in its low 4 bits).

    :raises NotSupportedError: the emulator has no such map type.
    :raises BpfError: ``EINVAL`` bad sizes/flags for the type (as the kernel).
    """
    try:
        mtype = MapType(map_type)
    except ValueError:
        raise NotSupportedError(f"map type {map_type}", f"unknown map type {map_type}") from None
    cls = MAP_CLASSES.get(mtype)
    if cls is None:
        raise NotSupportedError(f"{mtype.name} maps", f"the emulated kernel has no {mtype.name} maps; "
                                f"supported: {', '.join(t.name for t in MAP_CLASSES)}")
    kw: dict[str, Any] = {"flags": flags, "name": name, "key_codec": key_codec, "value_codec": value_codec}
    if mtype in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
        kw["inner"] = inner
    if mtype == MapType.BLOOM_FILTER:
        kw["map_extra"] = map_extra
    return cls(vm, key_size, value_size, max_entries, **kw)


__all__ = [
    "ANY",
    "EXIST",
    "LOCK",
    "MAP_CLASSES",
    "NOEXIST",
    "ArrayMap",
    "ArrayOfMaps",
    "BloomFilterMap",
    "CgroupArrayMap",
    "Codec",
    "EmuMap",
    "HashMap",
    "HashOfMaps",
    "LpmTrieMap",
    "LruHashMap",
    "LruPercpuHashMap",
    "PerfBuffer",
    "PerfEventArrayMap",
    "PercpuArrayMap",
    "PercpuHashMap",
    "ProgArrayMap",
    "QueueMap",
    "RingBufMap",
    "StackMap",
    "StackTraceMap",
    "create_map",
]
