"""Kernel-function link kinds: kprobe/kretprobe, kprobe_multi, kprobe
sessions, fentry/fexit/fmod_ret and tracing_multi.

This machine's kernel has none of them (no kprobe PMU, no fprobe, no BPF
trampolines, no tracing_multi uapi): there each test checks that bpfmux
raises :class:`NotSupportedError` naming the kind. On a kernel that has the
kind (the feature probes of :mod:`bpfmux.live.features` decide, by creating
a real link), the same test attaches for real and counts calls.
"""

from __future__ import annotations

import os
import time

import pytest
from links_progs import Counters, counting_insns, counting_prog, load

from bpfmux.btf import Btf
from bpfmux.errors import NotSupportedError
from bpfmux.live import links
from bpfmux.live import sys as lsys
from bpfmux.live.features import features
from bpfmux.live.links import RawProgram
from bpfmux.uapi import AttachType, BtfKind, LinkType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
ME = os.getpid()
FUNC = "do_nanosleep"  # reached by time.sleep()


def _sleep_calls(n: int) -> None:
    for _ in range(n):
        time.sleep(0.0001)


def _has_kprobe_pmu() -> bool:
    return os.path.exists("/sys/bus/event_source/devices/kprobe/type")


@pytest.mark.parametrize("retprobe", [False, True])
def test_kprobe(counters, retprobe):
    prog = counting_prog(ProgType.KPROBE, counters, slot=1, tgid=ME)
    if not _has_kprobe_pmu():
        with pytest.raises(NotSupportedError, match="kprobe PMU") as ei:
            links.attach(prog, FUNC, retprobe=retprobe)
        assert ei.value.feature == "kprobe PMU"
        prog.close()
        return
    with links.attach(prog, FUNC, retprobe=retprobe) as link:
        assert link.kind == ("kretprobe" if retprobe else "kprobe")
        _sleep_calls(5)
    assert counters[1] >= 5  # >=: the function may run more than once per sleep
    prog.close()


@pytest.mark.parametrize("session", [False, True])
def test_kprobe_multi_and_session(counters, session):
    at = AttachType.TRACE_KPROBE_SESSION if session else AttachType.TRACE_KPROBE_MULTI
    prog = counting_prog(ProgType.KPROBE, counters, by_cookie=True, tgid=ME, expected_attach_type=at, ret=1)
    supported = features().link_type(LinkType.KPROBE_MULTI).supported
    if not supported:
        with pytest.raises(NotSupportedError) as ei:
            links.attach_many(prog, [FUNC, "do_nanosleep*"], cookies=[3, 4])
        assert ei.value.feature == ("kprobe sessions" if session else "kprobe_multi")
        prog.close()
        return
    with links.attach_many(prog, [FUNC], cookies=[3]) as link:
        assert link.mechanism == "kprobe_multi" and link.kind == ("kprobe_session" if session else "kprobe_multi")
        _sleep_calls(5)
    assert counters[3] >= 5
    prog.close()


def _tracing_prog(counters: Counters, at: AttachType, func: str) -> RawProgram:
    btf_id = Btf.vmlinux().find_ids(func, BtfKind.FUNC)[0]
    return counting_prog(ProgType.TRACING, counters, slot=2, tgid=ME, expected_attach_type=at, attach_btf_id=btf_id)


@pytest.mark.parametrize("at,func", [
    (AttachType.TRACE_FENTRY, "bpf_fentry_test1"),
    (AttachType.TRACE_FEXIT, "bpf_fentry_test1"),
    (AttachType.MODIFY_RETURN, "bpf_modify_return_test"),
])  # fmt: skip
def test_trampoline_kinds(counters, at, func):
    kind = {AttachType.TRACE_FENTRY: "fentry", AttachType.TRACE_FEXIT: "fexit", AttachType.MODIFY_RETURN: "fmod_ret"}
    if not features().link_type(LinkType.TRACING).supported:
        # no trampolines: the kernel refuses to even load such a program, so
        # hand bpfmux some program fd declared as one; attach must refuse first
        stand_in = load(ProgType.RAW_TRACEPOINT, counting_insns(counters.fd, slot=2))
        fake = RawProgram(stand_in.fd, ProgType.TRACING, at)
        with pytest.raises(NotSupportedError) as ei:
            links.attach(fake)
        assert ei.value.feature == kind[at]
        stand_in.close()
        return
    prog = _tracing_prog(counters, at, func)
    with links.attach(prog) as link:
        assert link.kind == kind[at]
        lsys.prog_test_run(prog.fd)  # the test run calls bpf_fentry_test1 / bpf_modify_return_test
    assert counters[2] >= 1
    prog.close()


def test_tracing_multi(counters):
    if not features().link_type(LinkType.TRACING_MULTI).supported:
        stand_in = load(ProgType.RAW_TRACEPOINT, counting_insns(counters.fd, slot=2))
        fake = RawProgram(stand_in.fd, ProgType.TRACING, AttachType.TRACE_FENTRY_MULTI)
        with pytest.raises(NotSupportedError) as ei:
            links.attach_many(fake, ["bpf_fentry_test1", "bpf_fentry_test2"], cookies=[1, 2])
        assert ei.value.feature == "tracing_multi"
        stand_in.close()
        return
    prog = counting_prog(ProgType.TRACING, counters, by_cookie=True, tgid=ME,
                         expected_attach_type=AttachType.TRACE_FENTRY_MULTI)  # fmt: skip
    with links.attach_many(prog, ["bpf_fentry_test1", "bpf_fentry_test2"], cookies=[6, 7]) as link:
        assert link.mechanism == "tracing_multi" and link.link_type == LinkType.TRACING_MULTI
        lsys.prog_test_run(prog.fd)
    assert counters[6] >= 1 and counters[7] >= 1
    prog.close()
