"""Helpers of the keyless maps: push, pop and peek (queue, stack, bloom
filter) and ``bpf_current_task_under_cgroup`` (cgroup array)."""

from __future__ import annotations

import errno

from ....uapi import HelperId as H
from ..maps.bloom import BloomFilterMap
from ..maps.cgroup import CgroupArrayMap, task_under
from ..maps.queue import QueueMap
from ..runtime import RunState
from .maps import map_arg
from .table import helper


@helper(H.map_push_elem, "map_push_elem")
def map_push_elem(rs: RunState, m: int, value: int, flags: int, *_: int) -> int:
    """``long bpf_map_push_elem(map, value, flags)``: 0, ``-E2BIG`` full (without ``BPF_EXIST``), ``-EINVAL``."""
    mp = map_arg(rs, m)
    if not isinstance(mp, QueueMap | BloomFilterMap):
        return -errno.EINVAL
    return mp.push_raw(rs.read(value, mp.value_size), flags)


def _take(rs: RunState, m: int, out: int, delete: bool) -> int:
    mp = map_arg(rs, m)
    if isinstance(mp, BloomFilterMap) and not delete:
        return mp.peek_raw(rs.read(out, mp.value_size))
    if not isinstance(mp, QueueMap):
        return -errno.EINVAL
    raw = mp.take_raw(delete)
    if raw is None:
        return -errno.ENOENT
    rs.write(out, raw)
    return 0


@helper(H.map_pop_elem, "map_pop_elem")
def map_pop_elem(rs: RunState, m: int, value: int, *_: int) -> int:
    """``long bpf_map_pop_elem(map, value)``: the next value into ``value``; ``-ENOENT`` when empty."""
    return _take(rs, m, value, True)


@helper(H.map_peek_elem, "map_peek_elem")
def map_peek_elem(rs: RunState, m: int, value: int, *_: int) -> int:
    """``long bpf_map_peek_elem(map, value)``: queue/stack: the next value into ``value``;
    bloom filter: 0 when ``value`` may be in the set, ``-ENOENT`` when it is not."""
    return _take(rs, m, value, False)


@helper(H.current_task_under_cgroup, "current_task_under_cgroup")
def current_task_under_cgroup(rs: RunState, m: int, index: int, *_: int) -> int:
    """``long bpf_current_task_under_cgroup(map, index)``: 1 under the slot's cgroup, 0 not, ``-errno``."""
    mp = map_arg(rs, m)
    if not isinstance(mp, CgroupArrayMap):
        return -errno.EINVAL
    return task_under(mp, index & 0xFFFFFFFF, rs.task)
