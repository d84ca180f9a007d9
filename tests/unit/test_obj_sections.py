"""Section name → program facts, checked against libbpf's section table."""

from __future__ import annotations

import pytest

from bpfmux.errors import NotFoundError
from bpfmux.obj.sections import SECTION_DEFS, AttachKind, match_section, parse_section
from bpfmux.uapi import AttachType as A
from bpfmux.uapi import BtfKind, ProgFlags
from bpfmux.uapi import ProgType as P

S = ProgFlags.SLEEPABLE
# section, prog type, expected attach type, flags, target, auto-attach
CASES = [
    ("socket", P.SOCKET_FILTER, None, 0, None, False),
    ("kprobe/do_nanosleep", P.KPROBE, None, 0, "do_nanosleep", True),
    ("kprobe/do_nanosleep+0x10", P.KPROBE, None, 0, "do_nanosleep+0x10", True),
    ("kprobe", P.KPROBE, None, 0, None, False),
    ("kretprobe/do_nanosleep", P.KPROBE, None, 0, "do_nanosleep", True),
    ("kprobe.multi/bpf_fentry_test*", P.KPROBE, A.TRACE_KPROBE_MULTI, 0, "bpf_fentry_test*", True),
    ("kretprobe.multi/x", P.KPROBE, A.TRACE_KPROBE_MULTI, 0, "x", True),
    ("kprobe.multi", P.KPROBE, A.TRACE_KPROBE_MULTI, 0, None, False),
    ("kprobe.session/f", P.KPROBE, A.TRACE_KPROBE_SESSION, 0, "f", True),
    ("ksyscall/getpid", P.KPROBE, None, 0, "getpid", True),
    ("kretsyscall/getpid", P.KPROBE, None, 0, "getpid", True),
    ("uprobe//bin/true:main", P.KPROBE, None, 0, "/bin/true:main", True),
    ("uprobe", P.KPROBE, None, 0, None, False),
    ("uprobe//bin/true", P.KPROBE, None, 0, "/bin/true", False),
    ("uretprobe//bin/true:main", P.KPROBE, None, 0, "/bin/true:main", True),
    ("uprobe.s//bin/true:main", P.KPROBE, None, S, "/bin/true:main", True),
    ("uretprobe.s//bin/true:main", P.KPROBE, None, S, "/bin/true:main", True),
    ("uprobe.multi//bin/true:f*", P.KPROBE, A.TRACE_UPROBE_MULTI, 0, "/bin/true:f*", True),
    ("uretprobe.multi//bin/true:f*", P.KPROBE, A.TRACE_UPROBE_MULTI, 0, "/bin/true:f*", True),
    ("uprobe.multi.s//bin/true:f*", P.KPROBE, A.TRACE_UPROBE_MULTI, S, "/bin/true:f*", True),
    ("uprobe.session//bin/true:main", P.KPROBE, A.TRACE_UPROBE_SESSION, 0, "/bin/true:main", True),
    ("uprobe.session.s//bin/true:main", P.KPROBE, A.TRACE_UPROBE_SESSION, S, "/bin/true:main", True),
    ("usdt", P.KPROBE, None, 0, None, False),
    ("usdt//bin/x:prov:name", P.KPROBE, None, 0, "/bin/x:prov:name", True),
    ("tracepoint/syscalls/sys_enter_getpid", P.TRACEPOINT, None, 0, "syscalls/sys_enter_getpid", True),
    ("tp/sched/sched_switch", P.TRACEPOINT, None, 0, "sched/sched_switch", True),
    ("tracepoint", P.TRACEPOINT, None, 0, None, False),
    ("raw_tp/sys_enter", P.RAW_TRACEPOINT, None, 0, "sys_enter", True),
    ("raw_tracepoint/sys_exit", P.RAW_TRACEPOINT, None, 0, "sys_exit", True),
    ("raw_tp", P.RAW_TRACEPOINT, None, 0, None, False),
    ("raw_tp.w/bpf_test_finish", P.RAW_TRACEPOINT_WRITABLE, None, 0, "bpf_test_finish", True),
    ("raw_tracepoint.w/x", P.RAW_TRACEPOINT_WRITABLE, None, 0, "x", True),
    ("tp_btf/sched_switch", P.TRACING, A.TRACE_RAW_TP, 0, "sched_switch", True),
    ("fentry/bpf_fentry_test1", P.TRACING, A.TRACE_FENTRY, 0, "bpf_fentry_test1", True),
    ("fexit/bpf_fentry_test1", P.TRACING, A.TRACE_FEXIT, 0, "bpf_fentry_test1", True),
    ("fmod_ret/bpf_modify_return_test", P.TRACING, A.MODIFY_RETURN, 0, "bpf_modify_return_test", True),
    ("fentry.s/f", P.TRACING, A.TRACE_FENTRY, S, "f", True),
    ("fexit.s/f", P.TRACING, A.TRACE_FEXIT, S, "f", True),
    ("fmod_ret.s/f", P.TRACING, A.MODIFY_RETURN, S, "f", True),
    ("fsession/f", P.TRACING, A.TRACE_FSESSION, 0, "f", True),
    ("fentry.multi/bpf_fentry_test*", P.TRACING, A.TRACE_FENTRY_MULTI, 0, "bpf_fentry_test*", True),
    ("fexit.multi/bpf_fentry_test*", P.TRACING, A.TRACE_FEXIT_MULTI, 0, "bpf_fentry_test*", True),
    ("fsession.multi/bpf_fentry_test*", P.TRACING, A.TRACE_FSESSION_MULTI, 0, "bpf_fentry_test*", True),
    ("fentry.multi.s/f*", P.TRACING, A.TRACE_FENTRY_MULTI, S, "f*", True),
    ("fentry.multi", P.TRACING, A.TRACE_FENTRY_MULTI, 0, None, False),
    ("fentry.multi_func/bpf_fentry_test*", P.TRACING, A.TRACE_FENTRY, ProgFlags.MULTI_FUNC, "bpf_fentry_test*", True),
    ("fexit.multi_func/bpf_fentry_test*", P.TRACING, A.TRACE_FEXIT, ProgFlags.MULTI_FUNC, "bpf_fentry_test*", True),
    ("freplace/handler", P.EXT, None, 0, "handler", True),
    ("lsm/file_open", P.LSM, A.LSM_MAC, 0, "file_open", True),
    ("lsm.s/file_open", P.LSM, A.LSM_MAC, S, "file_open", True),
    ("lsm_cgroup/file_open", P.LSM, A.LSM_CGROUP, 0, "file_open", False),
    ("iter/task", P.TRACING, A.TRACE_ITER, 0, "task", True),
    ("syscall", P.SYSCALL, None, S, None, False),
    ("perf_event", P.PERF_EVENT, None, 0, None, False),
    ("xdp", P.XDP, A.XDP, 0, None, False),
    ("xdp.frags", P.XDP, A.XDP, ProgFlags.XDP_HAS_FRAGS, None, False),
    ("xdp/devmap", P.XDP, A.XDP_DEVMAP, 0, None, False),
    ("tc", P.SCHED_CLS, None, 0, None, False),
    ("tc/ingress", P.SCHED_CLS, A.TCX_INGRESS, 0, None, False),
    ("tcx/egress", P.SCHED_CLS, A.TCX_EGRESS, 0, None, False),
    ("classifier", P.SCHED_CLS, None, 0, None, False),
    ("cgroup_skb/ingress", P.CGROUP_SKB, A.CGROUP_INET_INGRESS, 0, None, False),
    ("cgroup/connect4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_CONNECT, 0, None, False),
    ("cgroup/sock", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE, 0, None, False),
    ("sk_lookup", P.SK_LOOKUP, A.SK_LOOKUP, 0, None, False),
    ("struct_ops/test", P.STRUCT_OPS, None, 0, "test", False),
    ("netfilter", P.NETFILTER, A.NETFILTER, 0, None, False),
]


@pytest.mark.parametrize(("section", "ptype", "attach", "flags", "target", "auto"), CASES, ids=[c[0] for c in CASES])
def test_section_facts(section, ptype, attach, flags, target, auto) -> None:
    info = parse_section(section)
    assert info.prog_type == ptype
    assert info.expected_attach_type == attach
    assert int(info.prog_flags) == int(flags)
    assert info.target == target
    assert info.auto_attach is auto
    assert info.autoload is True
    assert info.name == section


def test_question_mark_prefix_disables_autoload_only() -> None:
    plain, q = parse_section("raw_tp/sys_enter"), parse_section("?raw_tp/sys_enter")
    assert q.autoload is False and plain.autoload is True
    assert q.section == "?raw_tp/sys_enter" and q.name == "raw_tp/sys_enter"
    assert (q.prog_type, q.expected_attach_type, q.target, q.auto_attach) == (
        plain.prog_type, plain.expected_attach_type, plain.target, plain.auto_attach)


@pytest.mark.parametrize("name", ["bogus", "kprobe.foo/x", "kprobex/x", "socket/x", "syscall/x", "xdp/x", "tc/foo",
                                  "fentry.multi_func", "", "?"])
def test_unknown_sections(name: str) -> None:
    info = match_section(name)
    assert info.prog_type == P.UNSPEC and info.kind is None and not info.auto_attach
    with pytest.raises(NotFoundError, match="section kind"):
        parse_section(name)


def test_retprobe_session_and_multi_func_properties() -> None:
    assert parse_section("kretprobe/f").retprobe and not parse_section("kprobe/f").retprobe
    assert parse_section("uretprobe.multi//b:f").retprobe
    assert parse_section("fentry.multi_func/x").multi_func
    assert not parse_section("fentry.multi/x").multi_func
    assert parse_section("uprobe.s//b:f").sleepable
    assert parse_section("kprobe.multi/x").attach_kind is AttachKind.KPROBE_MULTI
    assert parse_section("fexit.multi_func/x").attach_kind is AttachKind.MULTI_FUNC


def test_btf_attach_names() -> None:
    assert parse_section("tp_btf/sched_switch").btf_attach_name() == ("btf_trace_sched_switch", BtfKind.TYPEDEF)
    assert parse_section("lsm/file_open").btf_attach_name() == ("bpf_lsm_file_open", BtfKind.FUNC)
    assert parse_section("iter/task").btf_attach_name() == ("bpf_iter_task", BtfKind.FUNC)
    assert parse_section("fentry/f").btf_attach_name() == ("f", BtfKind.FUNC)
    assert parse_section("fentry").btf_attach_name() is None
    assert parse_section("kprobe/f").btf_attach_name() is None


def test_table_has_no_duplicate_rows() -> None:
    keys = [(d.prefix, d.match) for d in SECTION_DEFS]
    assert len(keys) == len(set(keys))
