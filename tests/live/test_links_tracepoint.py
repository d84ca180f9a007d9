"""Tracepoint links (perf event + BPF_PERF_EVENT link, ioctl fallback) on this kernel."""

from __future__ import annotations

import errno
import os

import pytest
from links_progs import counting_prog, open_fds

from bpfmux.errors import BpfError, NotFoundError, NotSupportedError
from bpfmux.live import links
from bpfmux.uapi import LinkType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
TP = "syscalls:sys_enter_getppid"


@pytest.mark.parametrize("via", [None, "link", "ioctl"])
def test_counts_exactly_while_attached(counters, via):
    prog = counting_prog(ProgType.TRACEPOINT, counters, slot=1, tgid=os.getpid())
    with links.attach(prog, TP, via=via) as link:
        assert isinstance(link, links.TracepointLink) and link.kind == "tracepoint"
        assert link.via == ("ioctl" if via == "ioctl" else "link")
        for _ in range(25):
            os.getppid()
        assert counters[1] == 25
        assert link.query() == [prog.id]
    for _ in range(10):
        os.getppid()
    assert counters[1] == 25  # detached: no more counts
    assert link.closed
    link.close()  # idempotent
    prog.close()


def test_link_info_and_section_target(counters):
    prog = counting_prog(ProgType.TRACEPOINT, counters, slot=2, tgid=os.getpid(), section=f"tracepoint/{TP.replace(':', '/')}")
    with prog.attach() as link:  # target from the section name
        assert link.link_type == LinkType.PERF_EVENT
        assert link.info().prog_id == prog.id
        assert link.id > 0
        os.getppid()
    assert counters[2] == 1
    prog.close()


def test_cookie_reaches_the_program(counters):
    prog = counting_prog(ProgType.TRACEPOINT, counters, by_cookie=True, tgid=os.getpid())
    with links.attach(prog, TP, cookie=7), links.attach(prog, "syscalls:sys_enter_getpgrp", cookie=9):
        for _ in range(3):
            os.getppid()
        os.getpgrp()
    assert (counters[7], counters[9]) == (3, 1)
    with pytest.raises(ValueError, match="cookie"):
        links.attach(prog, TP, cookie=7, via="ioctl")
    prog.close()


def test_errors(counters):
    prog = counting_prog(ProgType.TRACEPOINT, counters, slot=1)
    raw = counting_prog(ProgType.RAW_TRACEPOINT, counters, slot=1)
    before = open_fds()
    with pytest.raises(NotFoundError, match="no tracepoint named"):
        links.attach(prog, "syscalls:sys_enter_no_such_call")
    with pytest.raises(BpfError) as ei:  # a raw_tp program cannot ride a tracepoint perf event
        links.attach_tracepoint(raw, TP)
    assert ei.value.errno == errno.EINVAL
    with links.attach(prog, TP):
        with pytest.raises(BpfError) as ei:  # the same program twice on one tracepoint
            links.attach(prog, TP)
        assert ei.value.errno == errno.EEXIST
    assert open_fds() == before  # the failed attaches closed their perf events
    link = links.attach(prog, TP, via="ioctl")
    try:
        with pytest.raises(NotSupportedError, match="without a bpf_link"):
            link.id  # noqa: B018 - an ioctl attachment has no kernel link object
    finally:
        link.close()
    prog.close()
    raw.close()
