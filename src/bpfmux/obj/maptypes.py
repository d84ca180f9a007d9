"""Facts about map types that a loader needs before it calls ``BPF_MAP_CREATE``.

:data:`NO_BTF_TYPES` are the map types created without BTF key/value type
ids, whatever the object's BTF describes: the kernel refuses those ids for
them (``ENOTSUPP`` for ``cgroup_array``, ``EINVAL`` for others) because
their keys and values are file descriptors, ids or nothing at all. libbpf
(1.1 and later) drops the ids for the same types before creating the map,
then retries any other map once without BTF if the kernel refuses it.
"""

from __future__ import annotations

from ..uapi import MapType

__all__ = ["NO_BTF_TYPES", "takes_btf_ids"]

#: map types created without ``btf_key_type_id``/``btf_value_type_id``
NO_BTF_TYPES: frozenset[MapType] = frozenset({
    MapType.PERF_EVENT_ARRAY,
    MapType.CGROUP_ARRAY,
    MapType.STACK_TRACE,
    MapType.ARRAY_OF_MAPS,
    MapType.HASH_OF_MAPS,
    MapType.DEVMAP,
    MapType.DEVMAP_HASH,
    MapType.CPUMAP,
    MapType.XSKMAP,
    MapType.SOCKMAP,
    MapType.SOCKHASH,
    MapType.QUEUE,
    MapType.STACK,
    MapType.PROG_ARRAY,
    MapType.RINGBUF,
})


def takes_btf_ids(map_type: MapType | int) -> bool:
    """Whether a map of ``map_type`` is created with its BTF key/value type ids."""
    return int(map_type) not in {int(t) for t in NO_BTF_TYPES}
