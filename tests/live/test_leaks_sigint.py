"""Ctrl-C during a long attach leaves nothing behind.

A child process attaches one raw tracepoint program to thousands of targets
over and over; the test sends it SIGINT at a random moment. The child catches
the KeyboardInterrupt, reports where it landed and how many fds it holds
beyond its start, and stays alive (holding its program) while the test reads
``bpftool link list``: no link of that program may remain.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from links_progs import bpftool_links_of_prog

pytestmark = pytest.mark.usefixtures("root_required")

CHILD = textwrap.dedent(
    """
    import resource, sys
    sys.path.insert(0, {here!r})
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    from links_progs import Counters, counting_prog, open_fds
    from bpfmux.live import links
    from bpfmux.uapi import ProgType

    c = Counters()
    prog = counting_prog(ProgType.RAW_TRACEPOINT, c, slot=1)
    targets = ["sched_switch", "sched_wakeup", "sched_waking", "sched_process_fork"] * {per_tp}
    links.attach_many(prog, targets[:8]).close()  # warm up (imports, tracefs)
    fds = open_fds()
    print("ready", prog.id, flush=True)
    phase = "none"
    try:
        while True:
            phase = "attach"
            ml = links.attach_many(prog, targets)
            phase = "close"
            ml.close()
    except KeyboardInterrupt:
        print("interrupted", phase, open_fds() - fds, flush=True)
    sys.stdin.readline()  # stay alive, holding the program, while the parent looks
    print("bye", flush=True)
    """
)


def _run_once(per_tp: int, delay: float) -> tuple[str, int]:
    code = CHILD.format(here=str(Path(__file__).parent), per_tp=per_tp)
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        assert line and line[0] == "ready", f"child failed to start: {line}"
        prog_id = int(line[1])
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        rep = child.stdout.readline().split()
        assert rep and rep[0] == "interrupted", f"child did not report: {rep}"
        phase, extra_fds = rep[1], int(rep[2])
        assert extra_fds == 0, f"{extra_fds} fds left open after Ctrl-C during {phase}"
        assert child.poll() is None  # still alive and holding the program ...
        assert bpftool_links_of_prog(prog_id) == [], f"links left after Ctrl-C during {phase}"  # ... yet no links
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "bye"
        return phase, prog_id
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)
        child.stdout.close()
        child.stdin.close()


def test_sigint_mid_attach_leaves_nothing():
    rng = random.Random(os.getpid())
    phases = []
    for _ in range(8):
        phase, _ = _run_once(per_tp=4000, delay=rng.uniform(0.05, 0.4))
        phases.append(phase)
        if phases.count("attach") >= 2:
            break
    assert "attach" in phases, f"SIGINT never landed inside attach_many: {phases}"
