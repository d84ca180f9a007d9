"""Clock, current task, CPU and random-number helpers."""

from __future__ import annotations

import errno

from ....errors import NotSupportedError
from ....uapi import HelperId as H
from ..runtime import RunState
from .table import helper


@helper(H.ktime_get_ns, "ktime_get_ns")
def ktime_get_ns(rs: RunState, *_: int) -> int:
    """``u64 bpf_ktime_get_ns(void)``: the emulated monotonic clock."""
    return rs.vm.clock.monotonic()


@helper(H.ktime_get_boot_ns, "ktime_get_boot_ns")
def ktime_get_boot_ns(rs: RunState, *_: int) -> int:
    """``u64 bpf_ktime_get_boot_ns(void)``."""
    return rs.vm.clock.boot()


@helper(H.ktime_get_coarse_ns, "ktime_get_coarse_ns")
def ktime_get_coarse_ns(rs: RunState, *_: int) -> int:
    """``u64 bpf_ktime_get_coarse_ns(void)`` (the same clock here)."""
    return rs.vm.clock.monotonic()


@helper(H.ktime_get_tai_ns, "ktime_get_tai_ns")
def ktime_get_tai_ns(rs: RunState, *_: int) -> int:
    """``u64 bpf_ktime_get_tai_ns(void)``."""
    return rs.vm.clock.tai()


@helper(H.jiffies64, "jiffies64")
def jiffies64(rs: RunState, *_: int) -> int:
    """``u64 bpf_jiffies64(void)``: the clock in ticks of ``VM.hz``."""
    return rs.vm.clock.monotonic() * rs.vm.hz // 1_000_000_000


@helper(H.get_current_pid_tgid, "get_current_pid_tgid")
def get_current_pid_tgid(rs: RunState, *_: int) -> int:
    """``u64 bpf_get_current_pid_tgid(void)``: ``tgid << 32 | pid``."""
    t = rs.task
    return ((t.tgid & 0xFFFFFFFF) << 32) | (t.pid & 0xFFFFFFFF)


@helper(H.get_current_uid_gid, "get_current_uid_gid")
def get_current_uid_gid(rs: RunState, *_: int) -> int:
    """``u64 bpf_get_current_uid_gid(void)``: ``gid << 32 | uid``."""
    t = rs.task
    return ((t.gid & 0xFFFFFFFF) << 32) | (t.uid & 0xFFFFFFFF)


def _task_struct(rs: RunState, name: str) -> int:
    if not rs.task.task_struct:
        raise NotSupportedError("the current task's task_struct",
                                f"bpf_{name} needs the current task's struct task_struct: the "
                                "emulated kernel has none unless given (Task.task_struct: its address in kernel "
                                "memory, e.g. from Emulator.alloc)")
    return rs.task.task_struct


@helper(H.get_current_task, "get_current_task")
def get_current_task(rs: RunState, *_: int) -> int:
    """``u64 bpf_get_current_task(void)``: the current task's ``struct task_struct`` (``Task.task_struct``).

    :raises NotSupportedError: the current task has none.
    """
    return _task_struct(rs, "get_current_task")


@helper(H.get_current_task_btf, "get_current_task_btf")
def get_current_task_btf(rs: RunState, *_: int) -> int:
    """``struct task_struct *bpf_get_current_task_btf(void)``: the same address, typed (``Task.task_struct``).

    :raises NotSupportedError: the current task has none.
    """
    return _task_struct(rs, "get_current_task_btf")


@helper(H.get_current_comm, "get_current_comm")
def get_current_comm(rs: RunState, buf: int, size: int, *_: int) -> int:
    """``long bpf_get_current_comm(buf, size)``: NUL-terminated, truncated to
    ``size`` and zero-padded (``strscpy_pad``)."""
    size &= 0xFFFFFFFF
    if size == 0:
        return -errno.EINVAL
    rs.space.check(buf, size, True, rs.pc)  # before a buffer of ``size`` (up to 4 GiB) is made
    comm = rs.task.comm_bytes()[:size]
    if not comm.endswith(b"\0"):
        comm = comm[:-1] + b"\0"
    rs.write(buf, comm.ljust(size, b"\0"))
    return 0


@helper(H.get_smp_processor_id, "get_smp_processor_id")
def get_smp_processor_id(rs: RunState, *_: int) -> int:
    """``u32 bpf_get_smp_processor_id(void)``."""
    return rs.cpu


@helper(H.this_cpu_ptr, "this_cpu_ptr")
def this_cpu_ptr(rs: RunState, ptr: int, *_: int) -> int:
    """``void *bpf_this_cpu_ptr(percpu_ptr)``: this CPU's copy of a per-CPU
    kernel variable (the copies lie one after another from its address)."""
    return ptr + rs.cpu * rs.vm.percpu_vars.get(ptr, 0)


@helper(H.per_cpu_ptr, "per_cpu_ptr")
def per_cpu_ptr(rs: RunState, ptr: int, cpu: int, *_: int) -> int:
    """``void *bpf_per_cpu_ptr(percpu_ptr, cpu)``: CPU ``cpu``'s copy, NULL
    for a CPU the machine does not have."""
    cpu &= 0xFFFFFFFF
    if cpu >= rs.vm.ncpus:
        return 0
    return ptr + cpu * rs.vm.percpu_vars.get(ptr, 0)


@helper(H.get_numa_node_id, "get_numa_node_id")
def get_numa_node_id(rs: RunState, *_: int) -> int:
    """``long bpf_get_numa_node_id(void)``: always node 0."""
    return 0


@helper(H.get_prandom_u32, "get_prandom_u32")
def get_prandom_u32(rs: RunState, *_: int) -> int:
    """``u32 bpf_get_prandom_u32(void)``: from the VM's seeded generator."""
    return rs.vm.random.getrandbits(32)
