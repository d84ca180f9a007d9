"""ctypes layouts of ``union bpf_attr``'s members (one structure per
command), the info structures of ``BPF_OBJ_GET_INFO_BY_FD``, and
``struct perf_event_attr`` (facts from the uapi headers).
"""

import ctypes

u8, u16, u32, s32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64


class _S(ctypes.Structure):
    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n, *_ in self._fields_ if not n.startswith("_"))
        return f"{type(self).__name__}({fields})"


class MapCreateAttr(_S):
    """``BPF_MAP_CREATE``."""

    _fields_ = [
        ("map_type", u32),
        ("key_size", u32),
        ("value_size", u32),
        ("max_entries", u32),
        ("map_flags", u32),
        ("inner_map_fd", u32),
        ("numa_node", u32),
        ("map_name", ctypes.c_char * 16),
        ("map_ifindex", u32),
        ("btf_fd", u32),
        ("btf_key_type_id", u32),
        ("btf_value_type_id", u32),
        ("btf_vmlinux_value_type_id", u32),
        ("map_extra", u64),
        ("value_type_btf_obj_fd", s32),
        ("map_token_fd", s32),
        ("excl_prog_hash", u64),
        ("excl_prog_hash_size", u32),
    ]


class MapElemAttr(_S):
    """``BPF_MAP_LOOKUP_ELEM``, ``UPDATE``, ``DELETE``, ``GET_NEXT_KEY``,
    ``LOOKUP_AND_DELETE_ELEM``, ``FREEZE`` (``value`` doubles as ``next_key``)."""

    _fields_ = [("map_fd", u32), ("key", u64), ("value", u64), ("flags", u64)]


class MapBatchAttr(_S):
    """``BPF_MAP_*_BATCH`` (the ``batch`` member)."""

    _fields_ = [
        ("in_batch", u64),
        ("out_batch", u64),
        ("keys", u64),
        ("values", u64),
        ("count", u32),
        ("map_fd", u32),
        ("elem_flags", u64),
        ("flags", u64),
    ]


class ProgLoadAttr(_S):
    """``BPF_PROG_LOAD``."""

    _fields_ = [
        ("prog_type", u32),
        ("insn_cnt", u32),
        ("insns", u64),
        ("license", u64),
        ("log_level", u32),
        ("log_size", u32),
        ("log_buf", u64),
        ("kern_version", u32),
        ("prog_flags", u32),
        ("prog_name", ctypes.c_char * 16),
        ("prog_ifindex", u32),
        ("expected_attach_type", u32),
        ("prog_btf_fd", u32),
        ("func_info_rec_size", u32),
        ("func_info", u64),
        ("func_info_cnt", u32),
        ("line_info_rec_size", u32),
        ("line_info", u64),
        ("line_info_cnt", u32),
        ("attach_btf_id", u32),
        ("attach_prog_fd", u32),  # union with attach_btf_obj_fd
        ("core_relo_cnt", u32),
        ("fd_array", u64),
        ("core_relos", u64),
        ("core_relo_rec_size", u32),
        ("log_true_size", u32),
        ("prog_token_fd", s32),
        ("fd_array_cnt", u32),
        ("signature", u64),
        ("signature_size", u32),
        ("keyring_id", s32),
    ]


class ObjAttr(_S):
    """``BPF_OBJ_PIN`` / ``BPF_OBJ_GET``."""

    _fields_ = [("pathname", u64), ("bpf_fd", u32), ("file_flags", u32), ("path_fd", s32)]


class ProgAttachAttr(_S):
    """``BPF_PROG_ATTACH`` / ``BPF_PROG_DETACH``."""

    _fields_ = [
        ("target_fd", u32),
        ("attach_bpf_fd", u32),
        ("attach_type", u32),
        ("attach_flags", u32),
        ("replace_bpf_fd", u32),
        ("relative_fd", u32),
        ("expected_revision", u64),
    ]


class TestRunAttr(_S):
    """``BPF_PROG_TEST_RUN`` (the ``test`` member)."""

    __test__ = False  # not a pytest test class
    _fields_ = [
        ("prog_fd", u32),
        ("retval", u32),
        ("data_size_in", u32),
        ("data_size_out", u32),
        ("data_in", u64),
        ("data_out", u64),
        ("repeat", u32),
        ("duration", u32),
        ("ctx_size_in", u32),
        ("ctx_size_out", u32),
        ("ctx_in", u64),
        ("ctx_out", u64),
        ("flags", u32),
        ("cpu", u32),
        ("batch_size", u32),
    ]


class GetIdAttr(_S):
    """``BPF_*_GET_NEXT_ID`` / ``BPF_*_GET_FD_BY_ID`` (``start_id`` is also
    ``prog_id``/``map_id``/``btf_id``/``link_id``)."""

    _fields_ = [("start_id", u32), ("next_id", u32), ("open_flags", u32), ("fd_by_id_token_fd", s32)]


class InfoAttr(_S):
    """``BPF_OBJ_GET_INFO_BY_FD`` (the ``info`` member)."""

    _fields_ = [("bpf_fd", u32), ("info_len", u32), ("info", u64)]


class QueryAttr(_S):
    """``BPF_PROG_QUERY`` (the ``query`` member)."""

    _fields_ = [
        ("target_fd", u32),
        ("attach_type", u32),
        ("query_flags", u32),
        ("attach_flags", u32),
        ("prog_ids", u64),
        ("prog_cnt", u32),
        ("prog_attach_flags", u64),
        ("link_ids", u64),
        ("link_attach_flags", u64),
        ("revision", u64),
    ]


class RawTracepointAttr(_S):
    """``BPF_RAW_TRACEPOINT_OPEN``."""

    _fields_ = [("name", u64), ("prog_fd", u32), ("cookie", u64)]


class BtfLoadAttr(_S):
    """``BPF_BTF_LOAD``."""

    _fields_ = [
        ("btf", u64),
        ("btf_log_buf", u64),
        ("btf_size", u32),
        ("btf_log_size", u32),
        ("btf_log_level", u32),
        ("btf_log_true_size", u32),
        ("btf_flags", u32),
        ("btf_token_fd", s32),
    ]


class TaskFdQueryAttr(_S):
    """``BPF_TASK_FD_QUERY``."""

    _fields_ = [
        ("pid", u32),
        ("fd", u32),
        ("flags", u32),
        ("buf_len", u32),
        ("buf", u64),
        ("prog_id", u32),
        ("fd_type", u32),
        ("probe_offset", u64),
        ("probe_addr", u64),
    ]


class _LcIter(_S):
    _fields_ = [("iter_info", u64), ("iter_info_len", u32)]


class _LcPerfEvent(_S):
    _fields_ = [("bpf_cookie", u64)]


class _LcKprobeMulti(_S):
    _fields_ = [("flags", u32), ("cnt", u32), ("syms", u64), ("addrs", u64), ("cookies", u64)]


class _LcTracing(_S):
    _fields_ = [("target_btf_id", u32), ("cookie", u64)]


class _LcNetfilter(_S):
    _fields_ = [("pf", u32), ("hooknum", u32), ("priority", s32), ("flags", u32)]


class _LcRelative(_S):
    _fields_ = [("relative_fd", u32), ("expected_revision", u64)]


class _LcUprobeMulti(_S):
    _fields_ = [
        ("path", u64),
        ("offsets", u64),
        ("ref_ctr_offsets", u64),
        ("cookies", u64),
        ("cnt", u32),
        ("flags", u32),
        ("pid", u32),
    ]


class _LcTracingMulti(_S):
    """The 2026 mainline ``link_create.tracing_multi {ids, cookies, cnt}``:
    ``ids`` points at ``cnt`` u32 BTF ids, ``cookies`` at ``cnt`` u64 (or 0)."""

    _fields_ = [("ids", u64), ("cookies", u64), ("cnt", u32)]


class _LcUnion(ctypes.Union):
    _anonymous_ = ("iter",)
    _fields_ = [
        ("target_btf_id", u32),
        ("iter", _LcIter),
        ("perf_event", _LcPerfEvent),
        ("kprobe_multi", _LcKprobeMulti),
        ("tracing", _LcTracing),
        ("netfilter", _LcNetfilter),
        ("tcx", _LcRelative),
        ("uprobe_multi", _LcUprobeMulti),
        ("netkit", _LcRelative),
        ("cgroup", _LcRelative),
        ("tracing_multi", _LcTracingMulti),
    ]


class LinkCreateAttr(_S):
    """``BPF_LINK_CREATE``; the per-kind arguments are in the anonymous union
    ``u`` (``attr.perf_event.bpf_cookie`` works as in C)."""

    _anonymous_ = ("u",)
    _fields_ = [("prog_fd", u32), ("target_fd", u32), ("attach_type", u32), ("flags", u32), ("u", _LcUnion)]


class LinkUpdateAttr(_S):
    """``BPF_LINK_UPDATE``."""

    _fields_ = [("link_fd", u32), ("new_prog_fd", u32), ("flags", u32), ("old_prog_fd", u32)]


class LinkDetachAttr(_S):
    """``BPF_LINK_DETACH``."""

    _fields_ = [("link_fd", u32)]


class EnableStatsAttr(_S):
    """``BPF_ENABLE_STATS``."""

    _fields_ = [("type", u32)]


class IterCreateAttr(_S):
    """``BPF_ITER_CREATE``."""

    _fields_ = [("link_fd", u32), ("flags", u32)]


class ProgBindMapAttr(_S):
    """``BPF_PROG_BIND_MAP``."""

    _fields_ = [("prog_fd", u32), ("map_fd", u32), ("flags", u32)]


# --- info structures (BPF_OBJ_GET_INFO_BY_FD) -------------------------------


class ProgInfo(_S):
    """``struct bpf_prog_info``."""

    _fields_ = [
        ("type", u32),
        ("id", u32),
        ("tag", u8 * 8),
        ("jited_prog_len", u32),
        ("xlated_prog_len", u32),
        ("jited_prog_insns", u64),
        ("xlated_prog_insns", u64),
        ("load_time", u64),
        ("created_by_uid", u32),
        ("nr_map_ids", u32),
        ("map_ids", u64),
        ("name", ctypes.c_char * 16),
        ("ifindex", u32),
        ("gpl_compatible", u32),  # bit 0
        ("netns_dev", u64),
        ("netns_ino", u64),
        ("nr_jited_ksyms", u32),
        ("nr_jited_func_lens", u32),
        ("jited_ksyms", u64),
        ("jited_func_lens", u64),
        ("btf_id", u32),
        ("func_info_rec_size", u32),
        ("func_info", u64),
        ("nr_func_info", u32),
        ("nr_line_info", u32),
        ("line_info", u64),
        ("jited_line_info", u64),
        ("nr_jited_line_info", u32),
        ("line_info_rec_size", u32),
        ("jited_line_info_rec_size", u32),
        ("nr_prog_tags", u32),
        ("prog_tags", u64),
        ("run_time_ns", u64),
        ("run_cnt", u64),
        ("recursion_misses", u64),
        ("verified_insns", u32),
        ("attach_btf_obj_id", u32),
        ("attach_btf_id", u32),
    ]


class MapInfo(_S):
    """``struct bpf_map_info``."""

    _fields_ = [
        ("type", u32),
        ("id", u32),
        ("key_size", u32),
        ("value_size", u32),
        ("max_entries", u32),
        ("map_flags", u32),
        ("name", ctypes.c_char * 16),
        ("ifindex", u32),
        ("btf_vmlinux_value_type_id", u32),
        ("netns_dev", u64),
        ("netns_ino", u64),
        ("btf_id", u32),
        ("btf_key_type_id", u32),
        ("btf_value_type_id", u32),
        ("btf_vmlinux_id", u32),
        ("map_extra", u64),
        ("hash", u64),
        ("hash_size", u32),
    ]


class BtfInfo(_S):
    """``struct bpf_btf_info``."""

    _fields_ = [("btf", u64), ("btf_size", u32), ("id", u32), ("name", u64), ("name_len", u32), ("kernel_btf", u32)]


class _LiRawTp(_S):
    _fields_ = [("tp_name", u64), ("tp_name_len", u32), ("cookie", u64)]


class _LiTracing(_S):
    _fields_ = [("attach_type", u32), ("target_obj_id", u32), ("target_btf_id", u32), ("cookie", u64)]


class _LiKprobeMulti(_S):
    _fields_ = [("addrs", u64), ("count", u32), ("flags", u32), ("missed", u64), ("cookies", u64)]


class _LiUprobeMulti(_S):
    _fields_ = [
        ("path", u64),
        ("offsets", u64),
        ("ref_ctr_offsets", u64),
        ("cookies", u64),
        ("path_size", u32),
        ("count", u32),
        ("flags", u32),
        ("pid", u32),
    ]


class _LiPeUprobe(_S):
    _fields_ = [("file_name", u64), ("name_len", u32), ("offset", u32), ("cookie", u64), ("ref_ctr_offset", u64)]


class _LiPeKprobe(_S):
    _fields_ = [
        ("func_name", u64),
        ("name_len", u32),
        ("offset", u32),
        ("addr", u64),
        ("missed", u64),
        ("cookie", u64),
    ]


class _LiPeTracepoint(_S):
    _fields_ = [("tp_name", u64), ("name_len", u32), ("cookie", u64)]


class _LiPeEvent(_S):
    _fields_ = [("config", u64), ("type", u32), ("cookie", u64)]


class _LiPeUnion(ctypes.Union):
    _fields_ = [("uprobe", _LiPeUprobe), ("kprobe", _LiPeKprobe), ("tracepoint", _LiPeTracepoint), ("event", _LiPeEvent)]


class _LiPerfEvent(_S):
    _anonymous_ = ("u",)
    _fields_ = [("type", u32), ("u", _LiPeUnion)]


class _LiIfAttach(_S):
    _fields_ = [("ifindex", u32), ("attach_type", u32)]


class _LiMapAttach(_S):
    _fields_ = [("map_id", u32), ("attach_type", u32)]


class _LiNetns(_S):
    _fields_ = [("netns_ino", u32), ("attach_type", u32)]


class _LiUnion(ctypes.Union):
    _fields_ = [
        ("raw_tracepoint", _LiRawTp),
        ("tracing", _LiTracing),
        ("kprobe_multi", _LiKprobeMulti),
        ("uprobe_multi", _LiUprobeMulti),
        ("perf_event", _LiPerfEvent),
        ("netns", _LiNetns),
        ("tcx", _LiIfAttach),
        ("netkit", _LiIfAttach),
        ("sockmap", _LiMapAttach),
    ]


class LinkInfo(_S):
    """``struct bpf_link_info`` (the members bpfmux reads; the union is
    sized to the kernel's; ``info.perf_event`` works as in C)."""

    _anonymous_ = ("u",)
    _fields_ = [("type", u32), ("id", u32), ("prog_id", u32), ("u", _LiUnion)]


class FuncInfo(_S):
    """``struct bpf_func_info``."""

    _fields_ = [("insn_off", u32), ("type_id", u32)]


class LineInfo(_S):
    """``struct bpf_line_info``."""

    _fields_ = [("insn_off", u32), ("file_name_off", u32), ("line_off", u32), ("line_col", u32)]


class PerfEventAttr(_S):
    """``struct perf_event_attr`` (``PERF_ATTR_SIZE_VER8``, 136 bytes).

    The bit-field word is ``flags`` (see :class:`PerfFlag`); ``precise_ip``
    lives in bits 15-16.
    """

    _fields_ = [
        ("type", u32),
        ("size", u32),
        ("config", u64),
        ("sample_period", u64),  # union with sample_freq
        ("sample_type", u64),
        ("read_format", u64),
        ("flags", u64),
        ("wakeup_events", u32),  # union with wakeup_watermark
        ("bp_type", u32),
        ("config1", u64),  # bp_addr / kprobe_func / uprobe_path
        ("config2", u64),  # bp_len / kprobe_addr / probe_offset
        ("branch_sample_type", u64),
        ("sample_regs_user", u64),
        ("sample_stack_user", u32),
        ("clockid", s32),
        ("sample_regs_intr", u64),
        ("aux_watermark", u32),
        ("sample_max_stack", u16),
        ("_reserved_2", u16),
        ("aux_sample_size", u32),
        ("aux_action", u32),
        ("sig_data", u64),
        ("config3", u64),
    ]
