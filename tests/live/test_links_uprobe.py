"""Uprobes and uretprobes through the uprobe PMU, uprobe_multi links and
uprobe sessions, on libc functions this process calls."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest
from links_progs import counting_prog

from bpfmux.errors import BpfError, InvalidArgumentError, NotFoundError
from bpfmux.host.elfsyms import ElfSymbols
from bpfmux.host.ldcache import resolve_binary
from bpfmux.live import links
from bpfmux.uapi import AttachType, LinkType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
LIBC = "libc.so.6"
ME = os.getpid()


@pytest.mark.parametrize("retprobe", [False, True])
def test_uprobe_counts_calls(counters, retprobe):
    prog = counting_prog(ProgType.KPROBE, counters, by_cookie=True, tgid=ME)
    with links.attach(prog, f"{LIBC}:getppid", cookie=3, retprobe=retprobe) as link:
        assert link.kind == ("uretprobe" if retprobe else "uprobe")
        assert link.binary == resolve_binary(LIBC)
        assert link.offset == ElfSymbols(LIBC).offset("getppid")
        assert link.link_type == LinkType.PERF_EVENT
        for _ in range(12):
            os.getppid()
    os.getppid()
    assert counters[3] == 12
    prog.close()


def test_uprobe_by_offset_version_and_section(counters):
    elf = ElfSymbols(LIBC)
    sym = elf.lookup("getppid")
    prog = counting_prog(ProgType.KPROBE, counters, slot=4, tgid=ME, section=f"uprobe/{LIBC}:{sym.versioned_name}")
    with prog.attach():
        os.getppid()
    with links.attach(prog, f"{elf.path}:{sym.offset:#x}"):
        os.getppid()
    assert counters[4] == 2
    with pytest.raises(NotFoundError):
        links.attach(prog, f"{LIBC}:no_such_function_xyz")
    with pytest.raises(NotFoundError):
        links.attach(prog, "/no/such/lib.so:f")
    with pytest.raises(InvalidArgumentError, match="glob"):
        links.attach(prog, f"{LIBC}:getpp*")
    prog.close()


def test_uprobe_pid_filter(counters):
    prog = counting_prog(ProgType.KPROBE, counters, slot=5)  # no tgid filter in the program
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with links.attach(prog, f"{LIBC}:getppid", pid=child.pid):
            for _ in range(20):
                os.getppid()  # this process is not traced
        assert counters[5] == 0
    finally:
        child.communicate(b"")


def test_uprobe_multi_cookies_and_glob(counters):
    prog = counting_prog(ProgType.KPROBE, counters, by_cookie=True, tgid=ME,
                         expected_attach_type=AttachType.TRACE_UPROBE_MULTI)  # fmt: skip
    targets = [f"{LIBC}:getppid", f"{LIBC}:getpgrp", f"{LIBC}:getpgid"]
    with links.attach_many(prog, targets, cookies=[10, 11, 12]) as link:
        assert isinstance(link, links.UprobeMultiLink) and link.mechanism == "uprobe_multi"
        assert link.link_type == LinkType.UPROBE_MULTI
        assert [n for n, _ in link.functions] == ["getppid", "getpgrp", "getpgid"]
        for _ in range(5):
            os.getppid()
        for _ in range(3):
            os.getpgrp()
        os.getpgid(0)
    assert (counters[10], counters[11], counters[12]) == (5, 3, 1)
    # a glob: its cookie goes to every function it matches
    with links.attach_many(prog, [f"{LIBC}:getpp*"], cookies=[13]) as link:
        assert {n for n, _ in link.functions} >= {"getppid"}
        os.getppid()
    assert counters[13] == 1
    prog.close()


def test_uprobe_multi_pid_filter_and_retprobe(counters):
    prog = counting_prog(ProgType.KPROBE, counters, slot=14, expected_attach_type=AttachType.TRACE_UPROBE_MULTI,
                         section=f"uretprobe.multi/{LIBC}:getppid")  # fmt: skip
    with links.attach_many(prog, [f"{LIBC}:getppid"], pid=ME) as link:
        assert link.retprobe  # from the section name
        for _ in range(7):
            os.getppid()
    assert counters[14] == 7
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with links.attach_many(prog, [f"{LIBC}:getppid"], pid=child.pid):
            os.getppid()
        assert counters[14] == 7
    finally:
        child.communicate(b"")
    prog.close()


@pytest.mark.parametrize("ret,per_call", [(0, 2), (1, 1)])
def test_uprobe_session_runs_on_return_when_entry_returns_zero(counters, ret, per_call):
    prog = counting_prog(ProgType.KPROBE, counters, slot=15, tgid=ME, ret=ret,
                         expected_attach_type=AttachType.TRACE_UPROBE_SESSION)  # fmt: skip
    with links.attach(prog, f"{LIBC}:getppid") as link:
        assert link.kind == "uprobe_session" and link.session
        for _ in range(5):
            os.getppid()
    assert counters[15] == 5 * per_call
    prog.close()


def test_uprobe_multi_errors(counters):
    prog = counting_prog(ProgType.KPROBE, counters, slot=1, expected_attach_type=AttachType.TRACE_UPROBE_MULTI)
    plain = counting_prog(ProgType.KPROBE, counters, slot=1)
    with pytest.raises(NotFoundError, match="matches nothing"):
        links.attach_many(prog, [f"{LIBC}:zz_no_such_*"])
    with pytest.raises(InvalidArgumentError, match="cookies"):
        links.attach_many(prog, [f"{LIBC}:getppid"], cookies=[1, 2])
    with pytest.raises(BpfError) as ei:  # a plain kprobe program is not an uprobe.multi program
        links.attach_uprobe_multi(plain, [f"{LIBC}:getppid"])
    assert ei.value.errno == errno.EINVAL
    prog.close()
    plain.close()
