"""No leaks: repeated attach/detach keeps this process's fds and the
kernel's link list (``bpftool link list``) flat.

1,000 cycles for the kinds whose detach is cheap (raw tracepoints, tp_btf,
groups of raw tracepoints); fewer for the kinds whose every detach waits for
the kernel (a perf-event close or a uprobe unregister costs tens of
milliseconds each), which exercise the same code per cycle.
"""

from __future__ import annotations

import pytest
from links_progs import bpftool_links_of_prog, counting_prog, open_fds

from bpfmux.btf import Btf
from bpfmux.errors import BpfError, NotFoundError
from bpfmux.live import links
from bpfmux.uapi import AttachType, BtfKind, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
LIBC = "libc.so.6"


def _cycles(prog, attach, n: int, kernel_link: bool = True) -> None:
    attach().close()  # warm caches (symbols, tracefs listing, feature probes) before counting
    fds = open_fds()
    peak = 0
    for i in range(n):
        with attach() as link:
            if i == n // 2 and kernel_link:
                assert bpftool_links_of_prog(prog.id), "the link should be in the kernel's list while attached"
        peak = max(peak, open_fds())
        assert link.closed
    assert open_fds() == fds
    assert peak <= fds + 4  # at most the few fds of one attachment were ever open at once
    assert bpftool_links_of_prog(prog.id) == []


def test_raw_tracepoint_1000_cycles(counters):
    prog = counting_prog(ProgType.RAW_TRACEPOINT, counters, slot=1)
    _cycles(prog, lambda: links.attach(prog, "sched_switch"), 1000)
    prog.close()


def test_tp_btf_1000_cycles(counters):
    btf_id = Btf.vmlinux().find_ids("btf_trace_sched_switch", BtfKind.TYPEDEF)[0]
    prog = counting_prog(ProgType.TRACING, counters, slot=1, expected_attach_type=AttachType.TRACE_RAW_TP,
                         attach_btf_id=btf_id)  # fmt: skip
    _cycles(prog, lambda: links.attach(prog, cookie=5), 1000)
    prog.close()


def test_raw_tracepoint_group_1000_cycles(counters):
    prog = counting_prog(ProgType.RAW_TRACEPOINT, counters, slot=1)
    fds = open_fds()
    for _ in range(1000):
        with links.attach_many(prog, ["sched_switch", "sched_wakeup"]) as ml:
            assert len(ml.links) == 2
    assert open_fds() == fds
    assert bpftool_links_of_prog(prog.id) == []
    prog.close()


@pytest.mark.parametrize("via", ["link", "ioctl"])
def test_tracepoint_perf_event_cycles(counters, via):
    prog = counting_prog(ProgType.TRACEPOINT, counters, slot=1)
    _cycles(prog, lambda: links.attach(prog, "syscalls:sys_enter_getppid", via=via), 15, kernel_link=via == "link")
    prog.close()


def test_uprobe_cycles(counters):
    prog = counting_prog(ProgType.KPROBE, counters, slot=1)
    _cycles(prog, lambda: links.attach(prog, f"{LIBC}:getppid"), 10)
    prog.close()


def test_uprobe_multi_cycles(counters):
    prog = counting_prog(ProgType.KPROBE, counters, slot=1, expected_attach_type=AttachType.TRACE_UPROBE_MULTI)
    _cycles(prog, lambda: links.attach_many(prog, [f"{LIBC}:getppid", f"{LIBC}:getpgrp"], cookies=[1, 2]), 20)
    prog.close()


def test_sampling_cycles(counters):
    prog = counting_prog(ProgType.PERF_EVENT, counters, slot=1)
    fds = open_fds()
    for _ in range(50):
        with links.attach(prog, "cpu_clock", sample_freq=99):
            pass
    assert open_fds() == fds
    prog.close()


def test_failed_attaches_leak_nothing(counters):
    prog = counting_prog(ProgType.TRACEPOINT, counters, slot=1)
    fds = open_fds()
    for _ in range(20):
        with pytest.raises(NotFoundError):
            links.attach(prog, "sched:no_such_tracepoint")
        with pytest.raises(BpfError):
            links.attach_raw_tracepoint(prog, "sched_switch")  # wrong program type: EINVAL
        with pytest.raises(BpfError):
            links.attach_uprobe(prog, f"{LIBC}:getppid")  # wrong program type, after the perf event opened
    assert open_fds() == fds
    prog.close()
