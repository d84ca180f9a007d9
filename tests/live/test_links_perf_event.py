"""perf_event programs on sampling events, one perf event per CPU."""

from __future__ import annotations

import os
import time

import pytest
from links_progs import Counters, counting_prog

from bpfmux.errors import InvalidArgumentError, NotSupportedError
from bpfmux.host.cpus import online_cpus
from bpfmux.live import links, perf
from bpfmux.uapi import ProgType

pytestmark = pytest.mark.usefixtures("root_required")


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_software_sampling_on_every_cpu():
    c = Counters()
    prog = counting_prog(ProgType.PERF_EVENT, c, by_cookie=True, section="perf_event")
    with links.attach(prog, "cpu_clock", sample_freq=2000, cookie=5) as link:
        assert isinstance(link, links.PerfSamplingLink) and link.mechanism == "perf_event"
        assert len(link.links) == len(online_cpus())
        assert {sub.event.cpu for sub in link.links} == set(online_cpus())
        _spin(0.3)
        assert c[5] > 0  # the busy loop was sampled
    n = c[5]
    _spin(0.05)
    assert c[5] == n  # nothing after close
    assert all(sub.closed and sub.event.closed for sub in link.links)
    prog.close()
    c.close()


def test_one_cpu_period_and_errors():
    c = Counters()
    prog = counting_prog(ProgType.PERF_EVENT, c, slot=1)
    with links.attach_sampling(prog, "task_clock", cpus=[0], sample_period=100_000, pid=os.getpid()) as link:
        assert link.targets == ("task_clock@cpu0",)
    with pytest.raises(InvalidArgumentError, match="unknown software event"):
        links.attach_sampling(prog, "no_such_event")
    prog.close()
    c.close()


def test_hardware_events_need_a_pmu():
    c = Counters()
    prog = counting_prog(ProgType.PERF_EVENT, c, slot=2)
    if os.path.exists("/sys/bus/event_source/devices/cpu"):  # a machine with a hardware PMU
        with links.attach(prog, "cpu_cycles", hardware=True, sample_period=100_000):
            _spin(0.2)
        assert c[2] > 0
    else:  # this VM: no hardware PMU, so the kernel cannot sample cycles
        with pytest.raises(NotSupportedError, match="hardware"):
            links.attach(prog, "cpu_cycles", hardware=True, sample_period=100_000)
    prog.close()
    c.close()


@pytest.mark.parametrize(("via", "cookie"), [("bogus", None), ("ioctl", 7)])
def test_refused_via_closes_the_event_it_was_given(via, cookie):
    from bpfmux.live.links.perf_event import attach_perf_event

    c = Counters()
    prog = counting_prog(ProgType.TRACEPOINT, c, slot=1)
    event = perf.open_tracepoint("syscalls:sys_enter_getppid")
    with pytest.raises(InvalidArgumentError, match="via|cookie"):
        attach_perf_event(prog, event, via=via, cookie=cookie)
    assert event.closed  # the link would have owned it: a refusal closes it, as documented
    prog.close()
    c.close()
