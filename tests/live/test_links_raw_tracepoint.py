"""Raw tracepoint and BTF-typed tracepoint (tp_btf) links on this kernel."""

from __future__ import annotations

import os

import pytest
from links_progs import counting_prog

from bpfmux.btf import Btf
from bpfmux.errors import InvalidArgumentError, NotFoundError, NotSupportedError
from bpfmux.live import links
from bpfmux.uapi import AttachType, BtfKind, LinkType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
NR_GETPPID = 110  # x86-64


def test_raw_sys_enter_counts_one_syscall(counters):
    prog = counting_prog(ProgType.RAW_TRACEPOINT, counters, slot=3, tgid=os.getpid(), syscall_nr=NR_GETPPID)
    with links.attach(prog, "sys_enter") as link:
        assert isinstance(link, links.RawTracepointLink)
        assert link.link_type == LinkType.RAW_TRACEPOINT and link.info().prog_id == prog.id
        for _ in range(17):
            os.getppid()
        os.getpgrp()  # another syscall: filtered out by the program
    for _ in range(5):
        os.getppid()
    assert counters[3] == 17
    prog.close()


def test_raw_tp_cookie_and_section(counters):
    prog = counting_prog(ProgType.RAW_TRACEPOINT, counters, by_cookie=True, tgid=os.getpid(), syscall_nr=NR_GETPPID,
                         section="raw_tp/sys_enter")  # fmt: skip
    with prog.attach(cookie=11) as a, links.attach(prog, "raw_syscalls:sys_enter", cookie=12) as b:
        assert a.target == b.target == "sys_enter"
        for _ in range(4):
            os.getppid()
    assert (counters[11], counters[12]) == (4, 4)
    with pytest.raises(NotFoundError):
        links.attach(prog, "no_such_tracepoint_xyz")
    prog.close()


def test_tp_btf(counters):
    btf_id = Btf.vmlinux().find_ids("btf_trace_sys_enter", BtfKind.TYPEDEF)[0]
    prog = counting_prog(ProgType.TRACING, counters, by_cookie=True, tgid=os.getpid(), syscall_nr=NR_GETPPID,
                         expected_attach_type=AttachType.TRACE_RAW_TP, attach_btf_id=btf_id,
                         section="tp_btf/sys_enter")  # fmt: skip
    with links.attach(prog, cookie=21) as link:
        assert isinstance(link, links.TpBtfLink) and link.kind == "tp_btf"
        assert link.info().prog_id == prog.id
        for _ in range(6):
            os.getppid()
    with prog.attach() as link:  # without a cookie: cookie reads 0
        os.getppid()
    os.getppid()
    assert (counters[21], counters[0]) == (6, 1)
    prog.close()


def test_update_and_force_detach_are_refused_by_kind(counters):
    a = counting_prog(ProgType.RAW_TRACEPOINT, counters, slot=1, tgid=os.getpid(), syscall_nr=NR_GETPPID)
    b = counting_prog(ProgType.RAW_TRACEPOINT, counters, slot=2, tgid=os.getpid(), syscall_nr=NR_GETPPID)
    with links.attach(a, "sys_enter") as link:
        with pytest.raises(NotSupportedError, match="cannot swap the program"):
            link.update(b)
        with pytest.raises(NotSupportedError, match="force-detach"):
            link.detach()
        assert link.program is a
        os.getppid()
    assert (counters[1], counters[2]) == (1, 0)  # the refused update changed nothing
    a.close()
    b.close()


def test_tp_btf_program_is_not_an_fentry_program(counters):
    from bpfmux.live.links.tracing import attach_tracing

    btf_id = Btf.vmlinux().find_ids("btf_trace_sys_enter", BtfKind.TYPEDEF)[0]
    prog = counting_prog(ProgType.TRACING, counters, slot=1, expected_attach_type=AttachType.TRACE_RAW_TP,
                         attach_btf_id=btf_id)  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="not an fentry/fexit/fmod_ret/fsession program"):
        attach_tracing(prog)
    prog.close()
