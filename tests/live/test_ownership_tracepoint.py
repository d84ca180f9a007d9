"""The seed's ownership case on the real kernel: several programs on one
tracepoint, each through its own perf event (and link, or the ioctl).

Closing any subset, in any order, leaves exactly the other programs running,
in attach order; the query (PERF_EVENT_IOC_QUERY_BPF) lists them in attach
order; a program lives as long as its attachment, even after its own fd is
closed; the 65th program on one tracepoint fails E2BIG.
"""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from links_progs import Counters, load, sequence_insns

from bpfmux.errors import BpfError
from bpfmux.live import links, perf
from bpfmux.live import sys as lsys
from bpfmux.uapi import ProgType

pytestmark = pytest.mark.usefixtures("root_required")
TP = "syscalls:sys_enter_getppid"
N = 5


def _trigger_and_order(c: Counters, slots: list[int]) -> list[int]:
    """Hit the tracepoint once; return the slots whose program ran, in run order."""
    before = {s: c[s] for s in slots}
    os.getppid()
    ran = [s for s in slots if c[s] != before[s]]
    return sorted(ran, key=lambda s: c[s])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(list(range(N))), n_close=st.integers(0, N), vias=st.lists(st.booleans(), min_size=N,
       max_size=N), close_prog_fds=st.booleans())  # fmt: skip
def test_closing_any_subset_leaves_exactly_the_others(order, n_close, vias, close_prog_fds):
    c = Counters()
    progs = [load(ProgType.TRACEPOINT, sequence_insns(c.fd, slot=i, tgid=os.getpid()), name=f"own{i}")
             for i in range(N)]  # fmt: skip
    ids = [p.id for p in progs]
    attached = []
    try:
        for i, p in enumerate(progs):
            attached.append(links.attach(p, TP, via="link" if vias[i] else "ioctl"))
        if close_prog_fds:  # the attachments keep the programs alive
            for p in progs:
                p.close()
        live = list(range(N))
        assert attached[0].query() == [ids[i] for i in live]
        assert _trigger_and_order(c, list(range(N))) == live
        for k in order[:n_close]:
            attached[k].close()
            live.remove(k)
            ran = _trigger_and_order(c, list(range(N)))
            assert ran == live  # exactly the others, still in attach order
            if live:
                assert attached[live[0]].query() == [ids[i] for i in live]
    finally:
        links_left = [a for a in attached if not a.closed]
        for a in links_left:
            a.close()
        for p in progs:
            p.close()
        c.close()


def test_one_program_per_perf_event_and_no_duplicates():
    c = Counters()
    a = load(ProgType.TRACEPOINT, sequence_insns(c.fd, slot=0, tgid=os.getpid()))
    b = load(ProgType.TRACEPOINT, sequence_insns(c.fd, slot=1, tgid=os.getpid()))
    event = perf.open_tracepoint(TP)
    with links.attach_perf_event(a, event) as link:
        with pytest.raises(BpfError) as ei:  # a perf event runs one program
            lsys.perf_event_set_bpf(event.fd, b.fd)
        assert ei.value.errno == errno.EEXIST
        with pytest.raises(BpfError) as ei:  # one program runs once per tracepoint
            links.attach(a, TP)
        assert ei.value.errno == errno.EEXIST
        assert link.query() == [a.id]
    assert event.closed
    a.close()
    b.close()
    c.close()


def test_65th_program_is_e2big():
    c = Counters(2)
    progs = [load(ProgType.TRACEPOINT, sequence_insns(c.fd, slot=0, tgid=os.getpid(), seq_slot=1), name=f"p{i}")
             for i in range(65)]  # fmt: skip
    group = []
    try:
        for p in progs[:64]:
            group.append(links.attach(p, TP))
        assert group[0].query(capacity=64) == [p.id for p in progs[:64]]
        with pytest.raises(BpfError) as ei:
            links.attach(progs[64], TP)
        assert ei.value.errno == errno.E2BIG
        with pytest.raises(BpfError) as ei:  # the query says how many when the buffer is too small
            group[0].query(capacity=10)
        assert ei.value.errno == errno.ENOSPC
        os.getppid()
        assert c[1] == 64  # all 64 ran once (each bumped the sequence)
    finally:
        links.GroupLink(None, group, [TP] * len(group), mechanism="perf_event", kind="tracepoint",
                        parallel_close=True).close()  # fmt: skip
        for p in progs:
            p.close()
        c.close()
