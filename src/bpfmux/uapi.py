"""Kernel uapi constants, one enum per uapi field.

The values are facts of the Linux uapi (``include/uapi/linux/bpf.h``,
``perf_event.h``, ``btf.h``), read off this project's reference kernel's BTF
(Linux 6.18) and extended with the 2026 mainline tracing-multi additions and
the seed's ``BPF_F_MULTI_FUNC`` (see ``docs`` and ``multi-attach.md``).
"""

from __future__ import annotations

import enum


class Cmd(enum.IntEnum):
    """``enum bpf_cmd``: the first argument of ``bpf(2)``."""

    MAP_CREATE = 0
    MAP_LOOKUP_ELEM = 1
    MAP_UPDATE_ELEM = 2
    MAP_DELETE_ELEM = 3
    MAP_GET_NEXT_KEY = 4
    PROG_LOAD = 5
    OBJ_PIN = 6
    OBJ_GET = 7
    PROG_ATTACH = 8
    PROG_DETACH = 9
    PROG_TEST_RUN = 10
    PROG_GET_NEXT_ID = 11
    MAP_GET_NEXT_ID = 12
    PROG_GET_FD_BY_ID = 13
    MAP_GET_FD_BY_ID = 14
    OBJ_GET_INFO_BY_FD = 15
    PROG_QUERY = 16
    RAW_TRACEPOINT_OPEN = 17
    BTF_LOAD = 18
    BTF_GET_FD_BY_ID = 19
    TASK_FD_QUERY = 20
    MAP_LOOKUP_AND_DELETE_ELEM = 21
    MAP_FREEZE = 22
    BTF_GET_NEXT_ID = 23
    MAP_LOOKUP_BATCH = 24
    MAP_LOOKUP_AND_DELETE_BATCH = 25
    MAP_UPDATE_BATCH = 26
    MAP_DELETE_BATCH = 27
    LINK_CREATE = 28
    LINK_UPDATE = 29
    LINK_GET_FD_BY_ID = 30
    LINK_GET_NEXT_ID = 31
    ENABLE_STATS = 32
    ITER_CREATE = 33
    LINK_DETACH = 34
    PROG_BIND_MAP = 35
    TOKEN_CREATE = 36
    PROG_STREAM_READ_BY_FD = 37

    PROG_RUN = 10  # alias of PROG_TEST_RUN


class ProgType(enum.IntEnum):
    """``enum bpf_prog_type``."""

    UNSPEC = 0
    SOCKET_FILTER = 1
    KPROBE = 2
    SCHED_CLS = 3
    SCHED_ACT = 4
    TRACEPOINT = 5
    XDP = 6
    PERF_EVENT = 7
    CGROUP_SKB = 8
    CGROUP_SOCK = 9
    LWT_IN = 10
    LWT_OUT = 11
    LWT_XMIT = 12
    SOCK_OPS = 13
    SK_SKB = 14
    CGROUP_DEVICE = 15
    SK_MSG = 16
    RAW_TRACEPOINT = 17
    CGROUP_SOCK_ADDR = 18
    LWT_SEG6LOCAL = 19
    LIRC_MODE2 = 20
    SK_REUSEPORT = 21
    FLOW_DISSECTOR = 22
    CGROUP_SYSCTL = 23
    RAW_TRACEPOINT_WRITABLE = 24
    CGROUP_SOCKOPT = 25
    TRACING = 26
    STRUCT_OPS = 27
    EXT = 28
    LSM = 29
    SK_LOOKUP = 30
    SYSCALL = 31
    NETFILTER = 32


class MapType(enum.IntEnum):
    """``enum bpf_map_type``."""

    UNSPEC = 0
    HASH = 1
    ARRAY = 2
    PROG_ARRAY = 3
    PERF_EVENT_ARRAY = 4
    PERCPU_HASH = 5
    PERCPU_ARRAY = 6
    STACK_TRACE = 7
    CGROUP_ARRAY = 8
    LRU_HASH = 9
    LRU_PERCPU_HASH = 10
    LPM_TRIE = 11
    ARRAY_OF_MAPS = 12
    HASH_OF_MAPS = 13
    DEVMAP = 14
    SOCKMAP = 15
    CPUMAP = 16
    XSKMAP = 17
    SOCKHASH = 18
    CGROUP_STORAGE = 19
    REUSEPORT_SOCKARRAY = 20
    PERCPU_CGROUP_STORAGE = 21
    QUEUE = 22
    STACK = 23
    SK_STORAGE = 24
    DEVMAP_HASH = 25
    STRUCT_OPS = 26
    RINGBUF = 27
    INODE_STORAGE = 28
    TASK_STORAGE = 29
    BLOOM_FILTER = 30
    USER_RINGBUF = 31
    CGRP_STORAGE = 32
    ARENA = 33


class AttachType(enum.IntEnum):
    """``enum bpf_attach_type``, including the 2026 mainline fsession and
    tracing-multi attach types (58-61)."""

    CGROUP_INET_INGRESS = 0
    CGROUP_INET_EGRESS = 1
    CGROUP_INET_SOCK_CREATE = 2
    CGROUP_SOCK_OPS = 3
    SK_SKB_STREAM_PARSER = 4
    SK_SKB_STREAM_VERDICT = 5
    CGROUP_DEVICE = 6
    SK_MSG_VERDICT = 7
    CGROUP_INET4_BIND = 8
    CGROUP_INET6_BIND = 9
    CGROUP_INET4_CONNECT = 10
    CGROUP_INET6_CONNECT = 11
    CGROUP_INET4_POST_BIND = 12
    CGROUP_INET6_POST_BIND = 13
    CGROUP_UDP4_SENDMSG = 14
    CGROUP_UDP6_SENDMSG = 15
    LIRC_MODE2 = 16
    FLOW_DISSECTOR = 17
    CGROUP_SYSCTL = 18
    CGROUP_UDP4_RECVMSG = 19
    CGROUP_UDP6_RECVMSG = 20
    CGROUP_GETSOCKOPT = 21
    CGROUP_SETSOCKOPT = 22
    TRACE_RAW_TP = 23
    TRACE_FENTRY = 24
    TRACE_FEXIT = 25
    MODIFY_RETURN = 26
    LSM_MAC = 27
    TRACE_ITER = 28
    CGROUP_INET4_GETPEERNAME = 29
    CGROUP_INET6_GETPEERNAME = 30
    CGROUP_INET4_GETSOCKNAME = 31
    CGROUP_INET6_GETSOCKNAME = 32
    XDP_DEVMAP = 33
    CGROUP_INET_SOCK_RELEASE = 34
    XDP_CPUMAP = 35
    SK_LOOKUP = 36
    XDP = 37
    SK_SKB_VERDICT = 38
    SK_REUSEPORT_SELECT = 39
    SK_REUSEPORT_SELECT_OR_MIGRATE = 40
    PERF_EVENT = 41
    TRACE_KPROBE_MULTI = 42
    LSM_CGROUP = 43
    STRUCT_OPS = 44
    NETFILTER = 45
    TCX_INGRESS = 46
    TCX_EGRESS = 47
    TRACE_UPROBE_MULTI = 48
    CGROUP_UNIX_CONNECT = 49
    CGROUP_UNIX_SENDMSG = 50
    CGROUP_UNIX_RECVMSG = 51
    CGROUP_UNIX_GETPEERNAME = 52
    CGROUP_UNIX_GETSOCKNAME = 53
    NETKIT_PRIMARY = 54
    NETKIT_PEER = 55
    TRACE_KPROBE_SESSION = 56
    TRACE_UPROBE_SESSION = 57
    TRACE_FSESSION = 58
    TRACE_FENTRY_MULTI = 59
    TRACE_FEXIT_MULTI = 60
    TRACE_FSESSION_MULTI = 61


class LinkType(enum.IntEnum):
    """``enum bpf_link_type``, including the 2026 mainline ``TRACING_MULTI`` (15).

    The seed's design (2021) named the same link type ``BPF_LINK_TYPE_TRACING_MULTI``."""

    UNSPEC = 0
    RAW_TRACEPOINT = 1
    TRACING = 2
    CGROUP = 3
    ITER = 4
    NETNS = 5
    XDP = 6
    PERF_EVENT = 7
    KPROBE_MULTI = 8
    STRUCT_OPS = 9
    NETFILTER = 10
    TCX = 11
    UPROBE_MULTI = 12
    NETKIT = 13
    SOCKMAP = 14
    TRACING_MULTI = 15


class HelperId(enum.IntEnum):
    """``enum bpf_func_id``: helper function ids (``BPF_FUNC_*``)."""

    unspec = 0
    map_lookup_elem = 1
    map_update_elem = 2
    map_delete_elem = 3
    probe_read = 4
    ktime_get_ns = 5
    trace_printk = 6
    get_prandom_u32 = 7
    get_smp_processor_id = 8
    skb_store_bytes = 9
    l3_csum_replace = 10
    l4_csum_replace = 11
    tail_call = 12
    clone_redirect = 13
    get_current_pid_tgid = 14
    get_current_uid_gid = 15
    get_current_comm = 16
    get_cgroup_classid = 17
    skb_vlan_push = 18
    skb_vlan_pop = 19
    skb_get_tunnel_key = 20
    skb_set_tunnel_key = 21
    perf_event_read = 22
    redirect = 23
    get_route_realm = 24
    perf_event_output = 25
    skb_load_bytes = 26
    get_stackid = 27
    csum_diff = 28
    skb_get_tunnel_opt = 29
    skb_set_tunnel_opt = 30
    skb_change_proto = 31
    skb_change_type = 32
    skb_under_cgroup = 33
    get_hash_recalc = 34
    get_current_task = 35
    probe_write_user = 36
    current_task_under_cgroup = 37
    skb_change_tail = 38
    skb_pull_data = 39
    csum_update = 40
    set_hash_invalid = 41
    get_numa_node_id = 42
    skb_change_head = 43
    xdp_adjust_head = 44
    probe_read_str = 45
    get_socket_cookie = 46
    get_socket_uid = 47
    set_hash = 48
    setsockopt = 49
    skb_adjust_room = 50
    redirect_map = 51
    sk_redirect_map = 52
    sock_map_update = 53
    xdp_adjust_meta = 54
    perf_event_read_value = 55
    perf_prog_read_value = 56
    getsockopt = 57
    override_return = 58
    sock_ops_cb_flags_set = 59
    msg_redirect_map = 60
    msg_apply_bytes = 61
    msg_cork_bytes = 62
    msg_pull_data = 63
    bind = 64
    xdp_adjust_tail = 65
    skb_get_xfrm_state = 66
    get_stack = 67
    skb_load_bytes_relative = 68
    fib_lookup = 69
    sock_hash_update = 70
    msg_redirect_hash = 71
    sk_redirect_hash = 72
    lwt_push_encap = 73
    lwt_seg6_store_bytes = 74
    lwt_seg6_adjust_srh = 75
    lwt_seg6_action = 76
    rc_repeat = 77
    rc_keydown = 78
    skb_cgroup_id = 79
    get_current_cgroup_id = 80
    get_local_storage = 81
    sk_select_reuseport = 82
    skb_ancestor_cgroup_id = 83
    sk_lookup_tcp = 84
    sk_lookup_udp = 85
    sk_release = 86
    map_push_elem = 87
    map_pop_elem = 88
    map_peek_elem = 89
    msg_push_data = 90
    msg_pop_data = 91
    rc_pointer_rel = 92
    spin_lock = 93
    spin_unlock = 94
    sk_fullsock = 95
    tcp_sock = 96
    skb_ecn_set_ce = 97
    get_listener_sock = 98
    skc_lookup_tcp = 99
    tcp_check_syncookie = 100
    sysctl_get_name = 101
    sysctl_get_current_value = 102
    sysctl_get_new_value = 103
    sysctl_set_new_value = 104
    strtol = 105
    strtoul = 106
    sk_storage_get = 107
    sk_storage_delete = 108
    send_signal = 109
    tcp_gen_syncookie = 110
    skb_output = 111
    probe_read_user = 112
    probe_read_kernel = 113
    probe_read_user_str = 114
    probe_read_kernel_str = 115
    tcp_send_ack = 116
    send_signal_thread = 117
    jiffies64 = 118
    read_branch_records = 119
    get_ns_current_pid_tgid = 120
    xdp_output = 121
    get_netns_cookie = 122
    get_current_ancestor_cgroup_id = 123
    sk_assign = 124
    ktime_get_boot_ns = 125
    seq_printf = 126
    seq_write = 127
    sk_cgroup_id = 128
    sk_ancestor_cgroup_id = 129
    ringbuf_output = 130
    ringbuf_reserve = 131
    ringbuf_submit = 132
    ringbuf_discard = 133
    ringbuf_query = 134
    csum_level = 135
    skc_to_tcp6_sock = 136
    skc_to_tcp_sock = 137
    skc_to_tcp_timewait_sock = 138
    skc_to_tcp_request_sock = 139
    skc_to_udp6_sock = 140
    get_task_stack = 141
    load_hdr_opt = 142
    store_hdr_opt = 143
    reserve_hdr_opt = 144
    inode_storage_get = 145
    inode_storage_delete = 146
    d_path = 147
    copy_from_user = 148
    snprintf_btf = 149
    seq_printf_btf = 150
    skb_cgroup_classid = 151
    redirect_neigh = 152
    per_cpu_ptr = 153
    this_cpu_ptr = 154
    redirect_peer = 155
    task_storage_get = 156
    task_storage_delete = 157
    get_current_task_btf = 158
    bprm_opts_set = 159
    ktime_get_coarse_ns = 160
    ima_inode_hash = 161
    sock_from_file = 162
    check_mtu = 163
    for_each_map_elem = 164
    snprintf = 165
    sys_bpf = 166
    btf_find_by_name_kind = 167
    sys_close = 168
    timer_init = 169
    timer_set_callback = 170
    timer_start = 171
    timer_cancel = 172
    get_func_ip = 173
    get_attach_cookie = 174
    task_pt_regs = 175
    get_branch_snapshot = 176
    trace_vprintk = 177
    skc_to_unix_sock = 178
    kallsyms_lookup_name = 179
    find_vma = 180
    loop = 181
    strncmp = 182
    get_func_arg = 183
    get_func_ret = 184
    get_func_arg_cnt = 185
    get_retval = 186
    set_retval = 187
    xdp_get_buff_len = 188
    xdp_load_bytes = 189
    xdp_store_bytes = 190
    copy_from_user_task = 191
    skb_set_tstamp = 192
    ima_file_hash = 193
    kptr_xchg = 194
    map_lookup_percpu_elem = 195
    skc_to_mptcp_sock = 196
    dynptr_from_mem = 197
    ringbuf_reserve_dynptr = 198
    ringbuf_submit_dynptr = 199
    ringbuf_discard_dynptr = 200
    dynptr_read = 201
    dynptr_write = 202
    dynptr_data = 203
    tcp_raw_gen_syncookie_ipv4 = 204
    tcp_raw_gen_syncookie_ipv6 = 205
    tcp_raw_check_syncookie_ipv4 = 206
    tcp_raw_check_syncookie_ipv6 = 207
    ktime_get_tai_ns = 208
    user_ringbuf_drain = 209
    cgrp_storage_get = 210
    cgrp_storage_delete = 211


class PerfType(enum.IntEnum):
    """``enum perf_type_id``: ``perf_event_attr.type``."""

    HARDWARE = 0
    SOFTWARE = 1
    TRACEPOINT = 2
    HW_CACHE = 3
    RAW = 4
    BREAKPOINT = 5


class PerfSwId(enum.IntEnum):
    """``enum perf_sw_ids``: software event configs."""

    CPU_CLOCK = 0
    TASK_CLOCK = 1
    PAGE_FAULTS = 2
    CONTEXT_SWITCHES = 3
    CPU_MIGRATIONS = 4
    PAGE_FAULTS_MIN = 5
    PAGE_FAULTS_MAJ = 6
    ALIGNMENT_FAULTS = 7
    EMULATION_FAULTS = 8
    DUMMY = 9
    BPF_OUTPUT = 10
    CGROUP_SWITCHES = 11


class PerfHwId(enum.IntEnum):
    """``enum perf_hw_id``: hardware event configs."""

    CPU_CYCLES = 0
    INSTRUCTIONS = 1
    CACHE_REFERENCES = 2
    CACHE_MISSES = 3
    BRANCH_INSTRUCTIONS = 4
    BRANCH_MISSES = 5
    BUS_CYCLES = 6
    STALLED_CYCLES_FRONTEND = 7
    STALLED_CYCLES_BACKEND = 8
    REF_CPU_CYCLES = 9


class PerfEventType(enum.IntEnum):
    """``enum bpf_perf_event_type`` (link info of perf-event links)."""

    UNSPEC = 0
    UPROBE = 1
    URETPROBE = 2
    KPROBE = 3
    KRETPROBE = 4
    TRACEPOINT = 5
    EVENT = 6


class FuncLinkage(enum.IntEnum):
    """``enum btf_func_linkage``."""

    STATIC = 0
    GLOBAL = 1
    EXTERN = 2


class BtfKind(enum.IntEnum):
    """BTF type kinds (``BTF_KIND_*``)."""

    UNKN = 0
    INT = 1
    PTR = 2
    ARRAY = 3
    STRUCT = 4
    UNION = 5
    ENUM = 6
    FWD = 7
    TYPEDEF = 8
    VOLATILE = 9
    CONST = 10
    RESTRICT = 11
    FUNC = 12
    FUNC_PROTO = 13
    VAR = 14
    DATASEC = 15
    FLOAT = 16
    DECL_TAG = 17
    TYPE_TAG = 18
    ENUM64 = 19


class CoreReloKind(enum.IntEnum):
    """``enum bpf_core_relo_kind``."""

    FIELD_BYTE_OFFSET = 0
    FIELD_BYTE_SIZE = 1
    FIELD_EXISTS = 2
    FIELD_SIGNED = 3
    FIELD_LSHIFT_U64 = 4
    FIELD_RSHIFT_U64 = 5
    TYPE_ID_LOCAL = 6
    TYPE_ID_TARGET = 7
    TYPE_EXISTS = 8
    TYPE_SIZE = 9
    ENUMVAL_EXISTS = 10
    ENUMVAL_VALUE = 11
    TYPE_MATCHES = 12

    @property
    def is_field(self) -> bool:
        """A field-based relocation."""
        return self <= CoreReloKind.FIELD_RSHIFT_U64

    @property
    def is_type(self) -> bool:
        """A type-based relocation."""
        return CoreReloKind.TYPE_ID_LOCAL <= self <= CoreReloKind.TYPE_SIZE or self == CoreReloKind.TYPE_MATCHES

    @property
    def is_enumval(self) -> bool:
        """An enum-value relocation."""
        return self in (CoreReloKind.ENUMVAL_EXISTS, CoreReloKind.ENUMVAL_VALUE)

    @property
    def spelling(self) -> str:
        """libbpf's short name (``byte_off``, ``type_id_target``, …)."""
        return _CORE_RELO_SPELLING[self]


_CORE_RELO_SPELLING = {
    CoreReloKind.FIELD_BYTE_OFFSET: "byte_off",
    CoreReloKind.FIELD_BYTE_SIZE: "byte_sz",
    CoreReloKind.FIELD_EXISTS: "field_exists",
    CoreReloKind.FIELD_SIGNED: "signed",
    CoreReloKind.FIELD_LSHIFT_U64: "lshift_u64",
    CoreReloKind.FIELD_RSHIFT_U64: "rshift_u64",
    CoreReloKind.TYPE_ID_LOCAL: "local_type_id",
    CoreReloKind.TYPE_ID_TARGET: "target_type_id",
    CoreReloKind.TYPE_EXISTS: "type_exists",
    CoreReloKind.TYPE_SIZE: "type_size",
    CoreReloKind.ENUMVAL_EXISTS: "enumval_exists",
    CoreReloKind.ENUMVAL_VALUE: "enumval_value",
    CoreReloKind.TYPE_MATCHES: "type_matches",
}


class BtfIntEncoding(enum.IntFlag):
    """``BTF_INT_ENCODING`` bits of a BTF int."""

    SIGNED = 1 << 0
    CHAR = 1 << 1
    BOOL = 1 << 2


class BtfVarLinkage(enum.IntEnum):
    """Linkage of a BTF ``VAR``."""

    STATIC = 0
    GLOBAL_ALLOCATED = 1
    GLOBAL_EXTERN = 2


class ProgFlags(enum.IntFlag):
    """``BPF_PROG_LOAD`` ``prog_flags``.

    ``MULTI_FUNC`` is the seed's flag (Jiri Olsa's 2021 series, bit 5): a
    tracing program not bound to one function. Mainline later gave bit 5 to
    ``XDP_HAS_FRAGS`` (only meaningful for XDP programs); the seed ABI exists
    only in the emulated kernel, where the two never meet.
    """

    STRICT_ALIGNMENT = 1 << 0
    ANY_ALIGNMENT = 1 << 1
    TEST_RND_HI32 = 1 << 2
    TEST_STATE_FREQ = 1 << 3
    SLEEPABLE = 1 << 4
    MULTI_FUNC = 1 << 5
    XDP_HAS_FRAGS = 1 << 5
    XDP_DEV_BOUND_ONLY = 1 << 6
    TEST_REG_INVARIANTS = 1 << 7
    TOKEN_FD = 1 << 16


class MapFlags(enum.IntFlag):
    """``BPF_MAP_CREATE`` ``map_flags``."""

    NO_PREALLOC = 1 << 0
    NO_COMMON_LRU = 1 << 1
    NUMA_NODE = 1 << 2
    RDONLY = 1 << 3
    WRONLY = 1 << 4
    STACK_BUILD_ID = 1 << 5
    ZERO_SEED = 1 << 6
    RDONLY_PROG = 1 << 7
    WRONLY_PROG = 1 << 8
    CLONE = 1 << 9
    MMAPABLE = 1 << 10
    PRESERVE_ELEMS = 1 << 11
    INNER_MAP = 1 << 12
    LINK = 1 << 13
    PATH_FD = 1 << 14
    VTYPE_BTF_OBJ_FD = 1 << 15
    TOKEN_FD = 1 << 16
    SEGV_ON_FAULT = 1 << 17
    NO_USER_CONV = 1 << 18


class UpdateFlags(enum.IntFlag):
    """``BPF_MAP_UPDATE_ELEM`` flags."""

    ANY = 0
    NOEXIST = 1
    EXIST = 2
    LOCK = 4


class KprobeMultiFlags(enum.IntFlag):
    """``link_create.kprobe_multi.flags``."""

    RETURN = 1 << 0


class UprobeMultiFlags(enum.IntFlag):
    """``link_create.uprobe_multi.flags``."""

    RETURN = 1 << 0


class StackFlags(enum.IntFlag):
    """Flags of ``bpf_get_stackid``/``bpf_get_stack``."""

    SKIP_MASK = 0xFF
    USER_STACK = 1 << 8
    FAST_STACK_CMP = 1 << 9
    REUSE_STACKID = 1 << 10
    USER_BUILD_ID = 1 << 11


class RingbufFlags(enum.IntFlag):
    """Flags of ``bpf_ringbuf_output``/``submit``/``discard``."""

    NO_WAKEUP = 1 << 0
    FORCE_WAKEUP = 1 << 1


#: ``BPF_F_CURRENT_CPU`` for ``bpf_perf_event_output``.
F_CURRENT_CPU = 0xFFFFFFFF
#: Ring buffer record header size and header bits.
RINGBUF_HDR_SZ = 8
RINGBUF_BUSY_BIT = 1 << 31
RINGBUF_DISCARD_BIT = 1 << 30
#: Most programs one perf event / tracepoint prog array may hold.
BPF_TRACE_MAX_PROGS = 64
#: Most programs on one trampoline image (x86-64).
BPF_MAX_TRAMP_LINKS = 38
#: Most functions one tracing multi link may cover.
MAX_MULTI_FUNCS = 1 << 20
#: Size of the BPF stack of one frame.
MAX_BPF_STACK = 512
#: Kernel's ``BPF_OBJ_NAME_LEN``.
OBJ_NAME_LEN = 16
