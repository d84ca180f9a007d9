"""The tracer's BPF programs, generated with :mod:`bpfmux.isa.build` (no
compiler at run time).

A program is assembled from three choices:

- **where the probe index comes from** (:class:`IdxSource`): the BPF cookie of
  the attachment (raw tracepoints, uprobe/kprobe multi links, perf links), an
  immediate (one program per target: fentry/fexit, sampling events), or the
  syscall number looked up in the ``sysidx`` array (``sys_enter``/``sys_exit``
  raw tracepoints: the in-kernel filter that makes all syscall tracepoints one
  attachment);
- **filters**: process id (tgid) and command name, compiled in as immediates;
- **the action**: count, latency (session entry/return, or probe/return pairs
  through the ``start`` map), stack ids, or an event with the arguments in
  the ``events`` ring buffer.

Map layouts (shared with :mod:`bpfmux.trace.engine`, which creates the maps
and reads them):

| map | type | key | value |
| --- | --- | --- | --- |
| ``counts`` | percpu array | u32 probe index | u64 hits |
| ``hist`` | percpu array | u32 index × 65 + log2 bucket | u64 |
| ``latsum`` | percpu array | u32 probe index | u64 total ns |
| ``agg`` | hash | :data:`AGG_KEY` (index, bucket/kernel stack, pid, user stack, comm) | u64 |
| ``start`` | hash | u64 pid_tgid, u32 index, u32 0 | u64 ns |
| ``sysidx`` / ``sysidx_exit`` | array[1024] | u32 syscall nr | u32: low 24 bits index+1, high 8 bits string arg+1 (``sys_enter`` / ``sys_exit``) |
| ``stacks`` | stack trace | u32 id | 127 × u64 |
| ``events`` | ring buffer | | :data:`EVENT` records |
| ``drops`` | percpu array[1] | 0 | u64 events lost (ring buffer full) |

Latency buckets: 0 holds 0 ns, bucket k ≥ 1 holds [2^(k-1), 2^k) ns.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from ..isa.build import R0, R1, R2, R3, R4, R6, R7, R8, R9, R10, Asm, Program, Reg
from ..uapi import HelperId as H

#: x86-64 ``struct pt_regs`` field order (uapi ``asm/ptrace.h``), 8 bytes each;
#: kept here so generating a program does not import :mod:`bpfmux.abi`
PT_REGS = ("r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx", "dx", "si", "di",
           "orig_ax", "ip", "cs", "flags", "sp", "ss")


def reg_offset(name: str) -> int:
    """Byte offset of register ``name`` in x86-64 ``pt_regs``."""
    return 8 * PT_REGS.index(name)


__all__ = [
    "AGG_KEY",
    "PT_REGS",
    "EVENT",
    "EVENT_SIZE",
    "HIST_BUCKETS",
    "PAYLOAD_SIZE",
    "STR_SIZE",
    "SYSIDX_ENTRIES",
    "Action",
    "Filters",
    "IdxSource",
    "Payload",
    "build",
    "reg_offset",
]

HIST_BUCKETS = 65
SYSIDX_ENTRIES = 1024
#: agg key: u32 idx, u32 bucket-or-kernel-stack, u32 pid, u32 user-stack, char comm[16]
AGG_KEY = struct.Struct("<IiIi16s")
PAYLOAD_SIZE = 512
STR_SIZE = 128
#: event header: u64 ns, u32 idx, u32 pid, u32 tid, u32 cpu, char comm[16]; then payload, then a string
EVENT = struct.Struct("<QIIII16s")
EVENT_SIZE = EVENT.size + PAYLOAD_SIZE + STR_SIZE
_PAYLOAD_OFF = EVENT.size
_STR_OFF = EVENT.size + PAYLOAD_SIZE
_USER_STACK = 1 << 8  # BPF_F_USER_STACK

# stack frame slots
_COMM = -16
_KEY = -48  # 32-byte agg key
_VAL = -56
_IDX = -60
_START = -80  # 16-byte start key
_TMP = -88


class IdxSource(enum.Enum):
    """Where a program gets its probe index."""

    COOKIE = "cookie"
    IMM = "imm"
    SYSCALL_ENTER = "sys_enter"  #: raw tp sys_enter: nr = ctx->args[1]
    SYSCALL_EXIT = "sys_exit"  #: raw tp sys_exit: nr = regs->orig_ax


class Action(enum.Enum):
    """What a program does on a hit."""

    COUNT = "count"
    LAT_ENTRY = "lat_entry"  #: store the entry time in ``start``
    LAT_EXIT = "lat_exit"  #: look up ``start``, record the latency
    LAT_SESSION = "lat_session"  #: uprobe/kprobe session: both ends in one program
    STACKS = "stacks"
    ARGS = "args"


class Payload(enum.Enum):
    """What an ARGS event carries after its header."""

    REGS = "regs"  #: kprobe/uprobe: the pt_regs (168 bytes)
    SYSCALL_REGS = "syscall_regs"  #: raw sys_enter: *(struct pt_regs *)ctx->args[0]
    SYSCALL_RET = "syscall_ret"  #: raw sys_exit: ctx->args[1]
    RAW_ARGS = "raw_args"  #: raw tracepoint: u64 args[12]
    RECORD = "record"  #: classic tracepoint: the record (first PAYLOAD_SIZE bytes)
    TRACING = "tracing"  #: fentry/fexit: ctx u64 slots (count given by ``nargs``)


@dataclass(frozen=True)
class Filters:
    """In-kernel filters. ``pid`` is a process id (tgid), ``comm`` a command
    name; ``skip_comm`` a command name to ignore."""

    pid: int | None = None
    comm: str | None = None
    skip_comm: str | None = None


@dataclass(frozen=True)
class Spec:
    """Everything :func:`build` needs for one program."""

    action: Action
    idx: IdxSource
    imm: int = 0
    filters: Filters = Filters()
    by_pid: bool = False
    by_comm: bool = False
    min_latency: int = 0
    payload: Payload = Payload.REGS
    nargs: int = 0  #: TRACING payload: slots to copy
    session: bool = False  #: LAT_SESSION needs the kfuncs ``bpf_session_is_return``/``bpf_session_cookie``


def _comm_words(comm: str) -> tuple[int, int]:
    raw = comm.encode()[:15].ljust(16, b"\0")
    lo, hi = struct.unpack("<QQ", raw)
    return lo, hi


def build(spec: Spec) -> Program:
    """Assemble the program for ``spec`` (map references are relocations by
    map name; kfuncs by their kernel function name).
    """
    a = Asm()
    a.mov(R6, R1)
    skip_ret = 1 if spec.action is Action.LAT_SESSION else 0  # a session's entry returns 1 to skip the return
    if spec.action is Action.LAT_SESSION:
        a.call_kfunc("bpf_session_is_return")
        a.jne(R0, 0, "session_return")
    _filters(a, spec.filters)
    _index(a, spec)
    if spec.action is Action.COUNT:
        if spec.by_pid or spec.by_comm:
            _agg_key(a, spec, bucket=None)
            _agg_add(a)
        else:
            _array_add(a, "counts", R7, 1)
    elif spec.action is Action.STACKS:
        a.mov(R1, R6).ld_map_fd(R2, "stacks").mov(R3, 0).call(H.get_stackid).mov(R8, R0)
        a.mov(R1, R6).ld_map_fd(R2, "stacks").mov(R3, _USER_STACK).call(H.get_stackid).mov(R9, R0)
        _agg_key(a, spec, bucket=R8, force_pid=True, force_comm=True, ustack=R9)
        _agg_add(a)
    elif spec.action is Action.LAT_ENTRY:
        _start_key(a)
        a.call(H.ktime_get_ns).stxdw(R10, _TMP, R0)
        a.ld_map_fd(R1, "start").mov(R2, R10).add(R2, _START).mov(R3, R10).add(R3, _TMP).mov(R4, 0)
        a.call(H.map_update_elem)
    elif spec.action is Action.LAT_EXIT:
        _start_key(a)
        a.ld_map_fd(R1, "start").mov(R2, R10).add(R2, _START).call(H.map_lookup_elem)
        a.jeq(R0, 0, "out")
        a.ldxdw(R8, R0, 0)
        a.ld_map_fd(R1, "start").mov(R2, R10).add(R2, _START).call(H.map_delete_elem)
        a.call(H.ktime_get_ns).sub(R0, R8).mov(R8, R0)
        _record_latency(a, spec)
    elif spec.action is Action.LAT_SESSION:
        a.call_kfunc("bpf_session_cookie")
        a.jeq(R0, 0, "out")
        a.mov(R8, R0).call(H.ktime_get_ns).stxdw(R8, 0, R0)
        a.mov(R0, 0).exit()
        a.label("session_return")
        a.call_kfunc("bpf_session_cookie")
        a.jeq(R0, 0, "out")
        a.ldxdw(R8, R0, 0)
        a.jeq(R8, 0, "out")  # entry was filtered out
        a.call(H.ktime_get_ns).sub(R0, R8).mov(R8, R0)
        # the index is needed again on return: a cookie (session links carry one per function)
        _index(a, spec)
        _record_latency(a, spec)
    elif spec.action is Action.ARGS:
        _event(a, spec)
    a.label("out")
    a.mov(R0, skip_ret).exit()
    return a.assemble()


def _filters(a: Asm, f: Filters) -> None:
    if f.pid is not None:
        a.call(H.get_current_pid_tgid).rsh(R0, 32).jne(R0, f.pid, "out")
    if f.comm is not None:
        lo, hi = _comm_words(f.comm)
        a.mov(R1, R10).add(R1, _COMM).mov(R2, 16).call(H.get_current_comm)
        a.ldxdw(R1, R10, _COMM).ld_imm64(R2, lo).jne(R1, R2, "out")
        a.ldxdw(R1, R10, _COMM + 8).ld_imm64(R2, hi).jne(R1, R2, "out")
    if f.skip_comm is not None:
        lo, hi = _comm_words(f.skip_comm)
        a.mov(R1, R10).add(R1, _COMM).mov(R2, 16).call(H.get_current_comm)
        a.ldxdw(R1, R10, _COMM).ld_imm64(R2, lo).jne(R1, R2, "filters_passed")
        a.ldxdw(R1, R10, _COMM + 8).ld_imm64(R2, hi).jeq(R1, R2, "out")
        a.label("filters_passed")


def _index(a: Asm, spec: Spec) -> None:
    """Probe index into r7 (or jump out when the syscall is not traced)."""
    if spec.idx is IdxSource.IMM:
        a.mov(R7, spec.imm)
        return
    if spec.idx is IdxSource.COOKIE:
        a.mov(R1, R6).call(H.get_attach_cookie).mov(R7, R0)
        return
    if spec.idx is IdxSource.SYSCALL_ENTER:
        a.ldxdw(R1, R6, 8)
    else:  # sys_exit: the number is in regs->orig_ax
        a.ldxdw(R3, R6, 0).add(R3, reg_offset("orig_ax"))
        a.mov(R1, R10).add(R1, _TMP).mov(R2, 8).call(H.probe_read_kernel)
        a.jne(R0, 0, "out")
        a.ldxdw(R1, R10, _TMP)
    a.jge(R1, SYSIDX_ENTRIES, "out")
    a.stxw(R10, _IDX, R1)
    table = "sysidx" if spec.idx is IdxSource.SYSCALL_ENTER else "sysidx_exit"
    a.ld_map_fd(R1, table).mov(R2, R10).add(R2, _IDX).call(H.map_lookup_elem)
    a.jeq(R0, 0, "out")
    a.ldxw(R7, R0, 0)
    a.and_(R7, 0xFFFFFF)
    a.jeq(R7, 0, "out")
    a.sub(R7, 1)


def _array_add(a: Asm, map_name: str, idx_reg: Reg, value: Reg | int) -> None:
    """``map[idx] += value`` on a (per-CPU) array; clobbers r0-r5."""
    a.stxw(R10, _IDX, idx_reg)
    a.ld_map_fd(R1, map_name).mov(R2, R10).add(R2, _IDX).call(H.map_lookup_elem)
    lbl = f"skip_{map_name}_{len(a)}"
    a.jeq(R0, 0, lbl)
    a.mov(R1, value)
    a.atomic_add(R0, 0, R1)
    a.label(lbl)


def _agg_key(a: Asm, spec: Spec, bucket: Reg | None, *, force_pid: bool = False, force_comm: bool = False,
             ustack: Reg | None = None) -> None:
    for off in range(_KEY, _KEY + 32, 8):
        a.stdw(R10, off, 0)
    a.stxw(R10, _KEY, R7)
    if bucket is not None:
        a.stxw(R10, _KEY + 4, bucket)
    if spec.by_pid or force_pid:
        a.call(H.get_current_pid_tgid).rsh(R0, 32).stxw(R10, _KEY + 8, R0)
    if ustack is not None:
        a.stxw(R10, _KEY + 12, ustack)
    if spec.by_comm or force_comm:
        a.mov(R1, R10).add(R1, _KEY + 16).mov(R2, 16).call(H.get_current_comm)


def _agg_add(a: Asm) -> None:
    """``agg[key] += 1`` (insert when absent; a lost insert race retries the lookup)."""
    n = len(a)
    a.ld_map_fd(R1, "agg").mov(R2, R10).add(R2, _KEY).call(H.map_lookup_elem)
    a.jne(R0, 0, f"agg_add_{n}")
    a.stdw(R10, _VAL, 1)
    a.ld_map_fd(R1, "agg").mov(R2, R10).add(R2, _KEY).mov(R3, R10).add(R3, _VAL).mov(R4, 1)  # BPF_NOEXIST
    a.call(H.map_update_elem)
    a.jeq(R0, 0, "out")
    a.ld_map_fd(R1, "agg").mov(R2, R10).add(R2, _KEY).call(H.map_lookup_elem)
    a.jeq(R0, 0, "out")
    a.label(f"agg_add_{n}")
    a.mov(R1, 1).atomic_add(R0, 0, R1)


def _start_key(a: Asm) -> None:
    a.call(H.get_current_pid_tgid).stxdw(R10, _START, R0)
    a.stxw(R10, _START + 8, R7).stw(R10, _START + 12, 0)


def _record_latency(a: Asm, spec: Spec) -> None:
    """Latency in r8 (ns), index in r7 → hist/agg and latsum."""
    if spec.min_latency:
        if spec.min_latency < (1 << 31):
            a.jlt(R8, spec.min_latency, "out")
        else:
            a.ld_imm64(R1, spec.min_latency).jlt(R8, R1, "out")
    # r9 = bucket: 0 for 0, else floor(log2(r8)) + 1
    a.mov(R9, 0).jeq(R8, 0, "bucket_done")
    a.mov(R1, R8).mov(R9, 1)
    for s in (32, 16, 8, 4, 2, 1):
        lbl = f"log_{s}"
        a.ld_imm64(R2, 1 << s).jlt(R1, R2, lbl).rsh(R1, s).add(R9, s).label(lbl)
    a.label("bucket_done")
    _array_add(a, "latsum", R7, R8)
    if spec.by_pid or spec.by_comm:
        _agg_key(a, spec, bucket=R9)
        _agg_add(a)
    else:
        a.mov(R1, R7).mul(R1, HIST_BUCKETS).add(R1, R9)
        _array_add(a, "hist", R1, 1)


def _event(a: Asm, spec: Spec) -> None:
    a.ld_map_fd(R1, "events").mov(R2, EVENT_SIZE).mov(R3, 0).call(H.ringbuf_reserve)
    a.jne(R0, 0, "reserved")
    a.mov(R1, 0)
    _array_add(a, "drops", R1, 1)
    a.ja("out")
    a.label("reserved")
    a.mov(R8, R0)
    a.call(H.ktime_get_ns).stxdw(R8, 0, R0)
    a.stxw(R8, 8, R7)
    a.call(H.get_current_pid_tgid).stxw(R8, 16, R0).rsh(R0, 32).stxw(R8, 12, R0)
    a.call(H.get_smp_processor_id).stxw(R8, 20, R0)
    a.mov(R1, R8).add(R1, 24).mov(R2, 16).call(H.get_current_comm)
    a.stb(R8, _STR_OFF, 0)
    p = spec.payload
    if p is Payload.REGS:
        a.mov(R1, R8).add(R1, _PAYLOAD_OFF).mov(R2, 168).mov(R3, R6).call(H.probe_read_kernel)
    elif p is Payload.SYSCALL_REGS:
        a.mov(R1, R8).add(R1, _PAYLOAD_OFF).mov(R2, 168).ldxdw(R3, R6, 0).call(H.probe_read_kernel)
        # a string argument? (sysidx high byte: its argument number + 1)
        a.ld_map_fd(R1, "sysidx").mov(R2, R10).add(R2, _IDX).call(H.map_lookup_elem)
        a.jeq(R0, 0, "submit")
        a.ldxw(R9, R0, 0).rsh(R9, 24).jeq(R9, 0, "submit")
        for i, reg in enumerate(("di", "si", "dx", "r10", "r8", "r9")):
            a.jne(R9, i + 1, f"not_arg{i}")
            a.ldxdw(R3, R8, _PAYLOAD_OFF + reg_offset(reg)).ja("read_str")
            a.label(f"not_arg{i}")
        a.ja("submit")
        a.label("read_str")
        a.mov(R1, R8).add(R1, _STR_OFF).mov(R2, STR_SIZE).call(H.probe_read_user_str)
    elif p is Payload.SYSCALL_RET:
        a.ldxdw(R1, R6, 8).stxdw(R8, _PAYLOAD_OFF, R1)
    elif p is Payload.RAW_ARGS:
        a.mov(R1, R8).add(R1, _PAYLOAD_OFF).mov(R2, 8 * 12).mov(R3, R6).call(H.probe_read_kernel)
    elif p is Payload.RECORD:
        a.mov(R1, R8).add(R1, _PAYLOAD_OFF).mov(R2, PAYLOAD_SIZE).mov(R3, R6).call(H.probe_read_kernel)
    elif p is Payload.TRACING:
        for i in range(min(spec.nargs, PAYLOAD_SIZE // 8)):
            a.ldxdw(R1, R6, 8 * i).stxdw(R8, _PAYLOAD_OFF + 8 * i, R1)
    a.label("submit")
    a.mov(R1, R8).mov(R2, 0).call(H.ringbuf_submit)
