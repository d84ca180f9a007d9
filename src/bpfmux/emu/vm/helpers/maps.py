"""Map helpers: lookup, update, delete, per-CPU lookup, for-each."""

from __future__ import annotations

import errno

from ....uapi import HelperId as H
from ..maps.base import EmuMap
from ..runtime import RunState
from .table import helper


def map_arg(rs: RunState, addr: int) -> EmuMap:
    """The map whose handle a program passed.

    :raises EmulatorFault: ``addr`` is not a map handle.
    """
    obj = rs.space.handle(addr)
    if not isinstance(obj, EmuMap) or obj.handle != addr:
        raise rs.fault(f"helper argument {addr:#x} is not a map", addr)
    return obj


@helper(H.map_lookup_elem, "map_lookup_elem")
def map_lookup_elem(rs: RunState, m: int, key: int, *_: int) -> int:
    """``void *bpf_map_lookup_elem(map, key)``: value address or NULL."""
    mp = map_arg(rs, m)
    return mp.bpf_lookup(rs, rs.read(key, mp.key_size))


@helper(H.map_update_elem, "map_update_elem")
def map_update_elem(rs: RunState, m: int, key: int, value: int, flags: int, *_: int) -> int:
    """``long bpf_map_update_elem(map, key, value, flags)``."""
    mp = map_arg(rs, m)
    k = rs.read(key, mp.key_size)
    v = rs.read(value, mp.value_size) if mp.has_values else b""
    return mp.bpf_update(rs, k, v, flags)


@helper(H.map_delete_elem, "map_delete_elem")
def map_delete_elem(rs: RunState, m: int, key: int, *_: int) -> int:
    """``long bpf_map_delete_elem(map, key)``."""
    mp = map_arg(rs, m)
    return mp.bpf_delete(rs, rs.read(key, mp.key_size))


@helper(H.map_lookup_percpu_elem, "map_lookup_percpu_elem")
def map_lookup_percpu_elem(rs: RunState, m: int, key: int, cpu: int, *_: int) -> int:
    """``void *bpf_map_lookup_percpu_elem(map, key, cpu)``."""
    mp = map_arg(rs, m)
    fn = getattr(mp, "lookup_percpu", None)
    if fn is None or not mp.percpu:  # array and hash maps have both
        return 0
    return fn(rs.read(key, mp.key_size), cpu & 0xFFFFFFFF)


@helper(H.for_each_map_elem, "for_each_map_elem")
def for_each_map_elem(rs: RunState, m: int, callback: int, cb_ctx: int, flags: int, *_: int) -> int:
    """``long bpf_for_each_map_elem(map, callback_fn, callback_ctx, flags)``.

    Calls ``callback(map, &key, &value, callback_ctx)`` for each element
    until it returns non-zero; returns the number of elements visited.
    """
    if flags:
        return -errno.EINVAL
    mp = map_arg(rs, m)
    if not mp.has_values:
        return -errno.EINVAL
    space = rs.space
    key_region = space.map(mp.key_size, f"{mp.name}:key", "map_key", False)
    try:
        count = 0
        for key in list(mp.sys_keys()):
            value_addr = mp.bpf_lookup(rs, key)
            if not value_addr:
                continue
            key_region.buf[:] = key
            count += 1
            if rs.call_function(callback, mp.handle, key_region.base, value_addr, cb_ctx):
                break
        return count
    finally:
        space.unmap(key_region)
