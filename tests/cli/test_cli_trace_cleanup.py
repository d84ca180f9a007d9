"""Exact cleanup of the tracer: every link, program and map it made is gone
after close(), also when attaching fails halfway; ``bpfmux run`` stops on
SIGINT with its maps dumped."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from bpfmux.errors import BpfError, NotFoundError
from bpfmux.live import sys as bsys
from bpfmux.trace import TraceOptions, Tracer, parse_probes

pytestmark = pytest.mark.usefixtures("root_required")


def _gone(kind: bsys.ObjKind, obj_id: int, wait: float = 5.0) -> bool:
    """True once the kernel has freed the object (links/programs are freed after a grace period)."""
    end = time.monotonic() + wait
    while True:
        try:
            bsys.get_fd_by_id(kind, obj_id).close()
        except BpfError as e:
            if e.errno == 2:
                return True
            raise
        if time.monotonic() > end:
            return False
        time.sleep(0.05)


def _ids(t: Tracer) -> tuple[list[int], list[int], list[int]]:
    links = []
    for lk in t._links:
        for member in getattr(lk, "links", [lk]):
            links.append(member.id)
    return links, [p.id for p in t._programs], [bsys.map_info(m.fd).id for m in t.maps.values()]


@pytest.mark.parametrize("specs", [["t:sched:*", "t:syscalls:sys_enter_*"], ["uprobe:libc:strverscm*"]])
def test_close_releases_everything(specs):
    t = Tracer(parse_probes(specs), TraceOptions(mode="latency" if "uprobe" in specs[0] else "count"))
    t.start()
    links, progs, maps = _ids(t)
    assert links and progs and maps
    t.close()
    t.close()  # idempotent
    assert all(_gone(bsys.ObjKind.LINK, i) for i in links)
    assert all(_gone(bsys.ObjKind.PROG, i) for i in progs)
    assert all(_gone(bsys.ObjKind.MAP, i) for i in maps)


def test_failed_start_releases_what_was_attached(monkeypatch):
    """The second group fails to attach: the first group's link, program and maps are released."""
    orig = Tracer._attach_group
    seen: list = []

    def attach_then_fail(self, g):
        if g.spec.kind == "rawtracepoint":
            raise NotFoundError("raw tracepoint", "injected", "a failure injected by the test")
        orig(self, g)
        seen.append(_ids(self))

    monkeypatch.setattr(Tracer, "_attach_group", attach_then_fail)
    t = Tracer(parse_probes(["t:sched:*", "rawtracepoint:sched_switch"]))
    with pytest.raises(NotFoundError):
        t.start()
    assert seen, "the first group was attached before the failure"
    links, progs, maps = seen[0]
    assert links and progs and maps and t._links == [] and t.maps == {}
    assert all(_gone(bsys.ObjKind.LINK, i) for i in links)
    assert all(_gone(bsys.ObjKind.PROG, i) for i in progs)
    assert all(_gone(bsys.ObjKind.MAP, i) for i in maps)


@pytest.mark.parametrize("cmd", [["run", "tests/bpf/getpid.bpf.o"], ["trace", "t:syscalls:sys_enter_getpid"]])
def test_sigint_right_after_attach_still_reports(cmd):
    """SIGINT the moment the 'attached' line appears: results are still printed, exit 0."""
    p = subprocess.Popen([sys.executable, "-m", "bpfmux.cli.main", *cmd],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        assert "attached" in line, line
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert ("getpid_calls" in out) if cmd[0] == "run" else out.startswith("PROBE")
