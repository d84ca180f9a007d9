"""Helper prototypes and which program types may call them (facts of Linux 6.18).

Two tables:

* :data:`PROTOS`: for each helper id the verifier models, its argument kinds
  and return kind (the kernel's ``bpf_func_proto``: ``ARG_*``/``RET_*``);
* which program types may call which helper: read from
  ``bpfmux/data/verifier_helper_types.json``, produced by probing this
  project's reference kernel (``tests/data/verifier/helper_probe.py``; the
  live test checks it still matches the running kernel). fentry/fexit/fmod_ret
  programs (which cannot be loaded on the reference kernel) get the ``tp_btf``
  set plus the trampoline-only helpers, as the kernel's
  ``tracing_prog_func_proto`` says.

A helper that a program type may call but that has no prototype here is
refused by the emulator's verifier with a message naming it (the emulator
cannot run helpers it does not know).
"""

from __future__ import annotations

import enum
import functools
import json
from dataclasses import dataclass
from importlib import resources

from ...errors import ParseError
from ...uapi import AttachType, HelperId, MapType, ProgType


class Arg(enum.Enum):
    """Argument kinds (the kernel's ``enum bpf_arg_type``, the subset modelled)."""

    ANYTHING = "anything"  # any initialized value
    CONST_MAP_PTR = "map_ptr"
    PTR_TO_MAP_KEY = "map_key"  # readable, key_size bytes
    PTR_TO_MAP_VALUE = "map_value"  # readable, value_size bytes
    PTR_TO_UNINIT_MAP_VALUE = "uninit_map_value"  # writable, value_size bytes
    PTR_TO_MAP_VALUE_OR_NULL = "map_value_or_null"
    PTR_TO_MEM = "mem"  # readable, size in the next arg
    PTR_TO_MEM_OR_NULL = "mem_or_null"
    PTR_TO_UNINIT_MEM = "uninit_mem"  # writable, size in the next arg
    PTR_TO_UNINIT_MEM_OR_NULL = "uninit_mem_or_null"
    CONST_SIZE = "const_size"  # > 0
    CONST_SIZE_OR_ZERO = "const_size_or_zero"
    CONST_ALLOC_SIZE_OR_ZERO = "alloc_size"  # a known constant
    PTR_TO_CTX = "ctx"
    PTR_TO_CTX_OR_NULL = "ctx_or_null"
    PTR_TO_ALLOC_MEM = "alloc_mem"  # ringbuf record, released by the call
    PTR_TO_FUNC = "func"
    PTR_TO_STACK_OR_NULL = "stack_or_null"
    PTR_TO_LONG = "long"  # writable 8 bytes
    PTR_TO_INT = "int"  # writable 4 bytes
    PTR_TO_CONST_STR = "const_str"  # read-only map value holding a NUL-terminated string
    PTR_TO_BTF_ID = "btf_id"
    PTR_TO_BTF_ID_OR_NULL = "btf_id_or_null"
    PTR_TO_PERCPU_BTF_ID = "percpu_btf_id"
    PTR_TO_TIMER = "timer"
    PTR_TO_SPIN_LOCK = "spin_lock"


class Ret(enum.Enum):
    """Return kinds (the kernel's ``enum bpf_return_type``, the subset modelled)."""

    INTEGER = "integer"
    VOID = "void"
    MAP_VALUE_OR_NULL = "map_value_or_null"
    MAP_VALUE = "map_value"
    ALLOC_MEM_OR_NULL = "alloc_mem_or_null"
    BTF_ID = "btf_id"  # trusted kernel object (task_struct, …)
    BTF_ID_OR_NULL = "btf_id_or_null"
    MEM_OR_BTF_ID_OR_NULL = "mem_or_btf_id_or_null"


@dataclass(frozen=True, slots=True)
class HelperProto:
    """One helper's prototype.

    :ivar id: helper id (``BPF_FUNC_*``).
    :ivar args: argument kinds, r1 first (at most 5).
    :ivar ret: return kind.
    :ivar gpl_only: needs a GPL-compatible license.
    :ivar fixed_size: for ``PTR_TO_LONG``/``PTR_TO_INT`` style args the size is implied.
    :ivar callback_args: for helpers taking a callback, how many arguments the
        callback gets (bpf_loop: 2, for_each_map_elem: 4).
    """

    id: int
    args: tuple[Arg, ...]
    ret: Ret = Ret.INTEGER
    gpl_only: bool = False
    callback_args: int = 0

    @property
    def name(self) -> str:
        """``bpf_<name>``."""
        try:
            return f"bpf_{HelperId(self.id).name}"
        except ValueError:
            return f"helper#{self.id}"


A = Arg
_I = Ret.INTEGER


def _p(hid: HelperId, *args: Arg, ret: Ret = _I, gpl: bool = False, cb: int = 0) -> HelperProto:
    return HelperProto(int(hid), tuple(args), ret, gpl, cb)


H = HelperId
_MEMSZ = (A.PTR_TO_UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING)

#: Prototypes by helper id.
PROTOS: dict[int, HelperProto] = {p.id: p for p in (
    _p(H.map_lookup_elem, A.CONST_MAP_PTR, A.PTR_TO_MAP_KEY, ret=Ret.MAP_VALUE_OR_NULL),
    _p(H.map_update_elem, A.CONST_MAP_PTR, A.PTR_TO_MAP_KEY, A.PTR_TO_MAP_VALUE, A.ANYTHING),
    _p(H.map_delete_elem, A.CONST_MAP_PTR, A.PTR_TO_MAP_KEY),
    _p(H.map_push_elem, A.CONST_MAP_PTR, A.PTR_TO_MAP_VALUE, A.ANYTHING),
    _p(H.map_pop_elem, A.CONST_MAP_PTR, A.PTR_TO_UNINIT_MAP_VALUE),
    _p(H.map_peek_elem, A.CONST_MAP_PTR, A.PTR_TO_UNINIT_MAP_VALUE),
    _p(H.map_lookup_percpu_elem, A.CONST_MAP_PTR, A.PTR_TO_MAP_KEY, A.ANYTHING, ret=Ret.MAP_VALUE_OR_NULL),
    _p(H.probe_read, *_MEMSZ, gpl=True),
    _p(H.probe_read_str, *_MEMSZ, gpl=True),
    _p(H.probe_read_user, *_MEMSZ, gpl=True),
    _p(H.probe_read_kernel, *_MEMSZ, gpl=True),
    _p(H.probe_read_user_str, *_MEMSZ, gpl=True),
    _p(H.probe_read_kernel_str, *_MEMSZ, gpl=True),
    _p(H.copy_from_user, *_MEMSZ, gpl=True),
    _p(H.probe_write_user, A.ANYTHING, A.PTR_TO_MEM, A.CONST_SIZE, gpl=True),
    _p(H.ktime_get_ns),
    _p(H.ktime_get_boot_ns),
    _p(H.ktime_get_coarse_ns),
    _p(H.ktime_get_tai_ns),
    _p(H.jiffies64),
    _p(H.trace_printk, A.PTR_TO_MEM, A.CONST_SIZE, gpl=True),
    _p(H.trace_vprintk, A.PTR_TO_MEM, A.CONST_SIZE, A.PTR_TO_MEM_OR_NULL, A.CONST_SIZE_OR_ZERO, gpl=True),
    _p(H.snprintf, A.PTR_TO_UNINIT_MEM_OR_NULL, A.CONST_SIZE_OR_ZERO, A.PTR_TO_CONST_STR, A.PTR_TO_MEM_OR_NULL,
       A.CONST_SIZE_OR_ZERO),
    _p(H.get_prandom_u32),
    _p(H.get_smp_processor_id),
    _p(H.get_numa_node_id),
    _p(H.tail_call, A.PTR_TO_CTX, A.CONST_MAP_PTR, A.ANYTHING, ret=Ret.VOID),
    _p(H.get_current_pid_tgid),
    _p(H.get_current_uid_gid),
    _p(H.get_current_comm, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE),
    _p(H.get_current_task, gpl=True),
    _p(H.get_current_task_btf, ret=Ret.BTF_ID, gpl=True),
    _p(H.get_current_cgroup_id),
    _p(H.get_current_ancestor_cgroup_id, A.ANYTHING),
    _p(H.get_ns_current_pid_tgid, A.ANYTHING, A.ANYTHING, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE),
    _p(H.current_task_under_cgroup, A.CONST_MAP_PTR, A.ANYTHING),
    _p(H.send_signal, A.ANYTHING),
    _p(H.send_signal_thread, A.ANYTHING),
    _p(H.perf_event_read, A.CONST_MAP_PTR, A.ANYTHING, gpl=True),
    _p(H.perf_event_read_value, A.CONST_MAP_PTR, A.ANYTHING, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE, gpl=True),
    _p(H.perf_event_output, A.PTR_TO_CTX, A.CONST_MAP_PTR, A.ANYTHING, A.PTR_TO_MEM, A.CONST_SIZE_OR_ZERO, gpl=True),
    _p(H.perf_prog_read_value, A.PTR_TO_CTX, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE, gpl=True),
    _p(H.get_stackid, A.PTR_TO_CTX, A.CONST_MAP_PTR, A.ANYTHING, gpl=True),
    _p(H.get_stack, A.PTR_TO_CTX, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING, gpl=True),
    _p(H.get_task_stack, A.PTR_TO_BTF_ID, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING),
    _p(H.ringbuf_output, A.CONST_MAP_PTR, A.PTR_TO_MEM, A.CONST_SIZE_OR_ZERO, A.ANYTHING),
    _p(H.ringbuf_reserve, A.CONST_MAP_PTR, A.CONST_ALLOC_SIZE_OR_ZERO, A.ANYTHING, ret=Ret.ALLOC_MEM_OR_NULL),
    _p(H.ringbuf_submit, A.PTR_TO_ALLOC_MEM, A.ANYTHING, ret=Ret.VOID),
    _p(H.ringbuf_discard, A.PTR_TO_ALLOC_MEM, A.ANYTHING, ret=Ret.VOID),
    _p(H.ringbuf_query, A.CONST_MAP_PTR, A.ANYTHING),
    _p(H.get_func_ip, A.PTR_TO_CTX),
    _p(H.get_attach_cookie, A.PTR_TO_CTX),
    _p(H.get_func_arg, A.PTR_TO_CTX, A.ANYTHING, A.PTR_TO_LONG),
    _p(H.get_func_ret, A.PTR_TO_CTX, A.PTR_TO_LONG),
    _p(H.get_func_arg_cnt, A.PTR_TO_CTX),
    _p(H.loop, A.ANYTHING, A.PTR_TO_FUNC, A.PTR_TO_STACK_OR_NULL, A.ANYTHING, cb=2),
    _p(H.for_each_map_elem, A.CONST_MAP_PTR, A.PTR_TO_FUNC, A.PTR_TO_STACK_OR_NULL, A.ANYTHING, cb=4),
    _p(H.strncmp, A.PTR_TO_MEM, A.CONST_SIZE, A.PTR_TO_CONST_STR),
    _p(H.strtol, A.PTR_TO_MEM, A.CONST_SIZE, A.ANYTHING, A.PTR_TO_LONG),
    _p(H.strtoul, A.PTR_TO_MEM, A.CONST_SIZE, A.ANYTHING, A.PTR_TO_LONG),
    _p(H.get_cgroup_classid, A.PTR_TO_CTX),
    _p(H.get_socket_cookie, A.PTR_TO_CTX),
    _p(H.get_socket_uid, A.PTR_TO_CTX),
    _p(H.get_hash_recalc, A.PTR_TO_CTX),
    _p(H.set_hash_invalid, A.PTR_TO_CTX),
    _p(H.skb_load_bytes, A.PTR_TO_CTX, A.ANYTHING, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE),
    _p(H.skb_load_bytes_relative, A.PTR_TO_CTX, A.ANYTHING, A.PTR_TO_UNINIT_MEM, A.CONST_SIZE, A.ANYTHING),
    _p(H.skb_store_bytes, A.PTR_TO_CTX, A.ANYTHING, A.PTR_TO_MEM, A.CONST_SIZE, A.ANYTHING),
    _p(H.csum_diff, A.PTR_TO_MEM_OR_NULL, A.CONST_SIZE_OR_ZERO, A.PTR_TO_MEM_OR_NULL, A.CONST_SIZE_OR_ZERO,
       A.ANYTHING),
    _p(H.task_pt_regs, A.PTR_TO_BTF_ID, ret=Ret.BTF_ID, gpl=True),
    _p(H.task_storage_get, A.CONST_MAP_PTR, A.PTR_TO_BTF_ID_OR_NULL, A.PTR_TO_MAP_VALUE_OR_NULL, A.ANYTHING,
       ret=Ret.MAP_VALUE_OR_NULL),
    _p(H.task_storage_delete, A.CONST_MAP_PTR, A.PTR_TO_BTF_ID),
    _p(H.per_cpu_ptr, A.PTR_TO_PERCPU_BTF_ID, A.ANYTHING, ret=Ret.MEM_OR_BTF_ID_OR_NULL),
    _p(H.this_cpu_ptr, A.PTR_TO_PERCPU_BTF_ID, ret=Ret.BTF_ID),
    _p(H.spin_lock, A.PTR_TO_SPIN_LOCK, ret=Ret.VOID),
    _p(H.spin_unlock, A.PTR_TO_SPIN_LOCK, ret=Ret.VOID),
)}

#: Helpers that may sleep: only sleepable programs may call them.
MIGHT_SLEEP = frozenset({int(H.copy_from_user), int(H.copy_from_user_task), int(H.sys_bpf), int(H.sys_close),
                         int(H.btf_find_by_name_kind), int(H.ima_inode_hash), int(H.ima_file_hash)})

#: Prototypes that differ by program type: tracing programs (fentry, tp_btf,
#: LSM) pass ``bpf_get_socket_cookie`` a socket, not their context.
_TRACING_PROTOS: dict[int, HelperProto] = {p.id: p for p in (
    _p(H.get_socket_cookie, A.PTR_TO_BTF_ID_OR_NULL),
)}


def proto_for(helper: int, prog_type: int) -> HelperProto | None:
    """The prototype of ``helper`` for a program of ``prog_type`` (``None``: not modelled)."""
    if prog_type in (ProgType.TRACING, ProgType.LSM):
        p = _TRACING_PROTOS.get(helper)
        if p is not None:
            return p
    return PROTOS.get(helper)


#: Helpers that only programs with a trampoline (fentry/fexit/fmod_ret/multi) may call.
TRAMPOLINE_ONLY = frozenset({int(H.get_func_arg), int(H.get_func_ret), int(H.get_func_arg_cnt),
                             int(H.get_attach_cookie)})

#: Map types a helper accepts (helpers not listed accept any map type not
#: reserved by :data:`MAP_ONLY`).
HELPER_MAPS: dict[int, frozenset[int]] = {
    int(H.tail_call): frozenset({MapType.PROG_ARRAY}),
    int(H.perf_event_read): frozenset({MapType.PERF_EVENT_ARRAY}),
    int(H.perf_event_output): frozenset({MapType.PERF_EVENT_ARRAY}),
    int(H.perf_event_read_value): frozenset({MapType.PERF_EVENT_ARRAY}),
    int(H.get_stackid): frozenset({MapType.STACK_TRACE}),
    int(H.ringbuf_output): frozenset({MapType.RINGBUF}),
    int(H.ringbuf_reserve): frozenset({MapType.RINGBUF}),
    int(H.ringbuf_query): frozenset({MapType.RINGBUF}),
    int(H.current_task_under_cgroup): frozenset({MapType.CGROUP_ARRAY}),
    int(H.map_push_elem): frozenset({MapType.QUEUE, MapType.STACK, MapType.BLOOM_FILTER}),
    int(H.map_pop_elem): frozenset({MapType.QUEUE, MapType.STACK}),
    int(H.map_peek_elem): frozenset({MapType.QUEUE, MapType.STACK, MapType.BLOOM_FILTER}),
    int(H.map_lookup_percpu_elem): frozenset({MapType.PERCPU_ARRAY, MapType.PERCPU_HASH,
                                              MapType.LRU_PERCPU_HASH}),
    int(H.task_storage_get): frozenset({MapType.TASK_STORAGE}),
    int(H.task_storage_delete): frozenset({MapType.TASK_STORAGE}),
}

#: Map types only some helpers accept (the kernel's ``check_map_func_compatibility``).
MAP_ONLY: dict[int, frozenset[int]] = {
    MapType.PROG_ARRAY: frozenset({int(H.tail_call)}),
    MapType.PERF_EVENT_ARRAY: frozenset({int(H.perf_event_read), int(H.perf_event_output),
                                         int(H.perf_event_read_value), int(H.skb_output), int(H.xdp_output)}),
    MapType.RINGBUF: frozenset({int(H.ringbuf_output), int(H.ringbuf_reserve), int(H.ringbuf_query),
                                int(H.ringbuf_reserve_dynptr), int(H.ringbuf_submit_dynptr),
                                int(H.ringbuf_discard_dynptr)}),
    MapType.STACK_TRACE: frozenset({int(H.get_stackid)}),
    MapType.CGROUP_ARRAY: frozenset({int(H.skb_under_cgroup), int(H.current_task_under_cgroup)}),
    MapType.QUEUE: frozenset({int(H.map_push_elem), int(H.map_pop_elem), int(H.map_peek_elem)}),
    MapType.STACK: frozenset({int(H.map_push_elem), int(H.map_pop_elem), int(H.map_peek_elem)}),
    MapType.BLOOM_FILTER: frozenset({int(H.map_push_elem), int(H.map_peek_elem)}),
    MapType.TASK_STORAGE: frozenset({int(H.task_storage_get), int(H.task_storage_delete)}),
    MapType.ARRAY_OF_MAPS: frozenset({int(H.map_lookup_elem)}),
    MapType.HASH_OF_MAPS: frozenset({int(H.map_lookup_elem)}),
}


def map_compatible(helper: int, map_type: int) -> bool:
    """Whether ``helper`` may be passed a map of ``map_type``."""
    only = MAP_ONLY.get(map_type)
    if only is not None and helper not in only:
        return False
    wanted = HELPER_MAPS.get(helper)
    return wanted is None or map_type in wanted


@functools.lru_cache(maxsize=1)
def _availability() -> dict[str, frozenset[int]]:
    try:
        raw = resources.files("bpfmux").joinpath("data/verifier_helper_types.json").read_text()
        table = json.loads(raw)["types"]
        return {k: frozenset(int(x) for x in v) for k, v in table.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ParseError(f"bundled helper table unreadable ({exc}); reinstall bpfmux") from exc


_TYPE_KEYS = {
    ProgType.SOCKET_FILTER: "socket_filter",
    ProgType.KPROBE: "kprobe",
    ProgType.SCHED_CLS: "sched_cls",
    ProgType.TRACEPOINT: "tracepoint",
    ProgType.XDP: "xdp",
    ProgType.PERF_EVENT: "perf_event",
    ProgType.RAW_TRACEPOINT: "raw_tracepoint",
    ProgType.RAW_TRACEPOINT_WRITABLE: "raw_tracepoint",
    ProgType.SYSCALL: "syscall",
    ProgType.LSM: "tp_btf",
}


def helpers_for(prog_type: int, attach_type: int | None = None) -> frozenset[int]:
    """Ids of the helpers a program of this type (and attach type) may call.

    :raises ParseError: the bundled table is damaged.
    """
    return _helpers_for(int(prog_type), None if attach_type is None else int(attach_type))


@functools.lru_cache(maxsize=64)
def _helpers_for(prog_type: int, attach_type: int | None) -> frozenset[int]:
    avail = _availability()
    if prog_type == ProgType.TRACING:
        base = avail.get("tp_btf", frozenset())
        if attach_type == AttachType.TRACE_RAW_TP:
            return base
        return base | TRAMPOLINE_ONLY
    key = _TYPE_KEYS.get(ProgType(prog_type)) if prog_type in ProgType._value2member_map_ else None
    if key is None:
        return frozenset()
    return avail.get(key, frozenset())
