"""Control helpers: tail calls, ``bpf_loop``, spin locks, ``bpf_strncmp``."""

from __future__ import annotations

import errno
import struct

from ....uapi import HelperId as H
from ..maps.fdarray import ProgArrayMap
from ..runtime import MAX_TAIL_CALL_CNT, RunState
from .maps import map_arg
from .table import helper

#: ``BPF_MAX_LOOPS``: the largest ``nr_loops`` of ``bpf_loop``.
MAX_LOOPS = 1 << 23
#: Instructions of one iteration of ``bpf_loop`` as the kernel's verifier
#: inlines it (compare, two moves, the call, the increment, the test of r0),
#: charged to the run budget besides the callback's own.
LOOP_ITERATION = 6
_U32 = struct.Struct("<I")


@helper(H.tail_call, "tail_call")
def tail_call(rs: RunState, ctx: int, prog_array: int, index: int, *_: int) -> object:
    """``long bpf_tail_call(ctx, prog_array_map, index)``.

    Returns the program to continue in, or ``None`` when the tail call
    fails (index out of range, 33 tail calls already made in this run, empty
    slot) and the caller goes on with its next instruction. As in the kernel,
    the tail-call count grows before the slot is looked at.
    """
    mp = map_arg(rs, prog_array)
    if not isinstance(mp, ProgArrayMap):
        raise rs.fault(f"tail call through map {mp.name!r}, which is not a prog array", prog_array)
    index &= 0xFFFFFFFF
    if index >= mp.max_entries or rs.tail_calls >= MAX_TAIL_CALL_CNT:
        return None
    rs.tail_calls += 1
    prog = mp.tail_target(index)
    if prog is None:
        return None
    rs.current = prog
    return prog


@helper(H.loop, "loop")
def bpf_loop(rs: RunState, nr_loops: int, callback: int, cb_ctx: int, flags: int, *_: int) -> int:
    """``long bpf_loop(nr_loops, callback_fn, callback_ctx, flags)``: calls
    ``callback(i, callback_ctx)`` until it returns non-zero; returns the
    number of iterations done."""
    if flags:
        return -errno.EINVAL
    nr_loops &= 0xFFFFFFFF
    if nr_loops > MAX_LOOPS:
        return -errno.E2BIG
    if not nr_loops:
        return 0
    if rs.tier == "fast":  # the generated function called directly, the budget kept inline: the hot path
        fn, depth = rs.fast_callback(callback)
        cb_ctx &= 0xFFFFFFFFFFFFFFFF
        for i in range(nr_loops):
            rs.left -= LOOP_ITERATION
            if rs.left < 0:
                rs.charge(0)  # raises
            if fn(rs, i, cb_ctx, 0, 0, 0, depth):
                return i + 1
        return nr_loops
    call = rs.callback(callback)
    charge = rs.charge
    for i in range(nr_loops):
        charge(LOOP_ITERATION)
        if call(i, cb_ctx):
            return i + 1
    return nr_loops


@helper(H.spin_lock, "spin_lock")
def spin_lock(rs: RunState, lock: int, *_: int) -> int:
    """``long bpf_spin_lock(lock)``: one CPU runs at a time here, so taking a
    held lock is a deadlock and faults."""
    if _U32.unpack(rs.read(lock, 4))[0]:
        raise rs.fault(f"bpf_spin_lock on {lock:#x}, which is already held (deadlock)", lock)
    rs.write(lock, _U32.pack(1))
    rs.locks.add(lock)
    return 0


@helper(H.spin_unlock, "spin_unlock")
def spin_unlock(rs: RunState, lock: int, *_: int) -> int:
    """``long bpf_spin_unlock(lock)``."""
    if not _U32.unpack(rs.read(lock, 4))[0]:
        raise rs.fault(f"bpf_spin_unlock on {lock:#x}, which is not held", lock)
    rs.write(lock, _U32.pack(0))
    rs.locks.discard(lock)
    return 0


@helper(H.strncmp, "strncmp")
def strncmp(rs: RunState, s1: int, s1_sz: int, s2: int, *_: int) -> int:
    """``long bpf_strncmp(s1, s1_sz, s2)``: the kernel's ``strncmp`` (-1, 0 or 1)."""
    s1_sz &= 0xFFFFFFFF
    a = rs.read(s1, s1_sz)
    b = rs.space.try_read_str(s2, s1_sz + 1)
    if b is None:
        raise rs.fault(f"bpf_strncmp: {s2:#x} is not a readable string", s2)
    for i in range(s1_sz):
        c1 = a[i]
        c2 = b[i] if i < len(b) else 0
        if c1 != c2:
            return -1 if c1 < c2 else 1
        if not c1:
            break
    return 0
