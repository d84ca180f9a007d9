"""attach_many: one program on many targets with the fastest mechanism the
kernel offers, reported in ``.mechanism``; all or nothing; close detaches all."""

from __future__ import annotations

import errno
import math
import os

import pytest
from links_progs import bpftool_links_of_prog, counting_prog, open_fds

from bpfmux.errors import BpfError, NotFoundError, NotSupportedError
from bpfmux.live import links
from bpfmux.uapi import AttachType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
ME = os.getpid()
LIBC, LIBM = "libc.so.6", "libm.so.6"


def test_raw_tracepoints(counters):
    prog = counting_prog(ProgType.RAW_TRACEPOINT, counters, by_cookie=True, tgid=ME, syscall_nr=110)
    with links.attach_many(prog, ["sys_enter", "raw_syscalls:sys_enter"], cookies=[1, 2]) as ml:
        assert ml.mechanism == "raw_tracepoint" and ml.kind == "raw_tracepoint"
        assert len(ml.links) == 2 and all(isinstance(x, links.RawTracepointLink) for x in ml.links)
        assert len(bpftool_links_of_prog(prog.id)) == 2
        for _ in range(9):
            os.getppid()
    assert (counters[1], counters[2]) == (9, 9)
    assert bpftool_links_of_prog(prog.id) == []
    with links.attach_many(prog, ["raw_syscalls:sys_*"]) as ml:  # a glob over tracefs
        assert sorted(x.target for x in ml.links) == ["sys_enter", "sys_exit"]
    prog.close()


def test_tracepoints_through_perf_events(counters):
    prog = counting_prog(ProgType.TRACEPOINT, counters, by_cookie=True, tgid=ME)
    tps = ["syscalls:sys_enter_getppid", "syscalls:sys_enter_getpgrp", "syscalls:sys_enter_getpgid"]
    with links.attach_many(prog, tps, cookies=[3, 4, 5]) as ml:
        assert ml.mechanism == "perf_event" and ml.kind == "tracepoint" and ml.parallel_close
        assert ml.targets == tuple(tps)
        for _ in range(4):
            os.getppid()
        os.getpgrp()
        os.getpgid(0)
        os.getpgid(0)
    assert (counters[3], counters[4], counters[5]) == (4, 1, 2)
    assert all(x.closed and x.event.closed for x in ml.links)
    with links.attach_many(prog, ["syscalls:sys_enter_getp*"]) as ml:  # a glob over tracefs
        assert {x.target for x in ml.links} >= set(tps)
    prog.close()


def test_uprobe_multi_over_two_binaries(counters):
    prog = counting_prog(ProgType.KPROBE, counters, by_cookie=True, tgid=ME,
                         expected_attach_type=AttachType.TRACE_UPROBE_MULTI)  # fmt: skip
    with links.attach_many(prog, [f"{LIBC}:getppid", f"{LIBM}:erf", f"{LIBC}:getpgrp"], cookies=[6, 7, 8]) as ml:
        assert ml.mechanism == "uprobe_multi" and isinstance(ml, links.GroupLink)
        assert [len(x.functions) for x in ml.links] == [2, 1]  # one kernel link per binary
        assert len(bpftool_links_of_prog(prog.id)) == 2
        for x in range(5):
            os.getppid()
            math.erf(x + 0.5)  # CPython calls libm's erf
        os.getpgrp()
    assert (counters[6], counters[7], counters[8]) == (5, 5, 1)
    assert bpftool_links_of_prog(prog.id) == []
    prog.close()


@pytest.mark.parametrize("failure", [BpfError(errno.EINVAL, "refused"), KeyboardInterrupt()])
def test_uprobe_multi_second_binary_failing_detaches_the_first(counters, monkeypatch, failure):
    from bpfmux.live import sys as lsys

    prog = counting_prog(ProgType.KPROBE, counters, by_cookie=True, tgid=ME,
                         expected_attach_type=AttachType.TRACE_UPROBE_MULTI)  # fmt: skip
    real = lsys.link_create_uprobe_multi
    made: list[str] = []

    def create(pfd, path, *args, **kw):
        if made:
            raise failure
        made.append(path)
        return real(pfd, path, *args, **kw)

    monkeypatch.setattr(lsys, "link_create_uprobe_multi", create)
    before = open_fds()
    with pytest.raises(type(failure)):
        links.attach_many(prog, [f"{LIBC}:getppid", f"{LIBM}:erf"], cookies=[6, 7])
    assert len(made) == 1  # the first binary's link was made, then closed
    assert open_fds() == before
    assert bpftool_links_of_prog(prog.id) == []
    prog.close()


def test_plain_uprobes_one_link_each(counters):
    prog = counting_prog(ProgType.KPROBE, counters, by_cookie=True, tgid=ME)
    with links.attach_many(prog, [f"{LIBC}:getppid", f"{LIBC}:getpgrp"], cookies=[9, 10]) as ml:
        assert ml.mechanism == "perf_event" and ml.kind == "uprobe"
        os.getppid()
        os.getpgrp()
    assert (counters[9], counters[10]) == (1, 1)
    with pytest.raises(NotSupportedError, match="globs need"):
        links.attach_many(prog, [f"{LIBC}:getpp*"])
    prog.close()


def test_bound_programs_cannot_multi_attach(counters):
    from bpfmux.btf import Btf
    from bpfmux.uapi import BtfKind

    btf_id = Btf.vmlinux().find_ids("btf_trace_sys_enter", BtfKind.TYPEDEF)[0]
    prog = counting_prog(ProgType.TRACING, counters, slot=1, expected_attach_type=AttachType.TRACE_RAW_TP,
                         attach_btf_id=btf_id)  # fmt: skip
    with pytest.raises(NotSupportedError, match="bound to one target"):
        links.attach_many(prog, ["sys_enter", "sys_exit"])
    prog.close()


@pytest.mark.parametrize("kind", ["raw_tp", "tracepoint", "uprobe", "uprobe_multi"])
def test_all_or_nothing(counters, kind):
    setups = {
        "raw_tp": (ProgType.RAW_TRACEPOINT, None, ["sys_enter", "sched_switch", "no_such_tp_xyz"]),
        "tracepoint": (ProgType.TRACEPOINT, None,
                       ["syscalls:sys_enter_getppid", "syscalls:sys_enter_getpgrp", "syscalls:no_such_tp_xyz"]),
        "uprobe": (ProgType.KPROBE, None, [f"{LIBC}:getppid", f"{LIBC}:getpgrp", f"{LIBC}:no_such_fn_xyz"]),
        "uprobe_multi": (ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI,
                         [f"{LIBC}:getppid", f"{LIBM}:erf", "/no/such/binary:f"]),
    }  # fmt: skip
    ptype, at, targets = setups[kind]
    prog = counting_prog(ptype, counters, slot=1, tgid=ME, expected_attach_type=at)
    before = open_fds()
    with pytest.raises(NotFoundError):
        links.attach_many(prog, targets)
    assert open_fds() == before  # every perf event and link fd made before the failure was closed
    assert bpftool_links_of_prog(prog.id) == []
    hits = counters[1]  # (the first targets may have fired while the later ones were being attached)
    for _ in range(5):
        os.getppid()
        os.getpgrp()
    assert counters[1] == hits
    prog.close()
