"""The live table in a real terminal: bpfmux runs in tmux, the test reads the
screen with capture-pane while a child it controls makes getpid() calls."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = pytest.mark.usefixtures("root_required")


class Tmux:
    def __init__(self, command: str, width: int = 120, height: int = 30) -> None:
        self.sock = f"bpfmux-test-{uuid.uuid4().hex[:8]}"
        self.run("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")

    def wait_for(self, predicate, timeout: float = 60) -> str:
        end = time.monotonic() + timeout
        text = ""
        while time.monotonic() < end:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"screen never matched; last screen:\n{text}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True, timeout=30)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_live_table_refreshes_in_place_then_prints_totals():
    name = "bpfmuxtty" + uuid.uuid4().hex[:5]
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "bpfmux.cli.main", "trace",
                                            "t:syscalls:sys_enter_getpid", "t:syscalls:sys_enter_getppid",
                                            "--comm", name, "-i", "0.3"])
    tmux = Tmux(f"{cmd}; echo EXITED $?; sleep 60")
    try:
        tmux.wait_for(lambda s: "bpfmux trace:" in s and "Ctrl-C to stop" in s)

        def child(calls: int) -> None:
            code = (f"open('/proc/self/comm', 'w').write({name!r})\nimport os\n"
                    f"for _ in range({calls}): os.getpid()\nos.getppid()")
            subprocess.run([sys.executable, "-c", code], check=True, timeout=30)

        child(77)
        screen = tmux.wait_for(lambda s: any("sys_enter_getpid" in ln and ln.rstrip(" │|").endswith("77")
                                             for ln in s.splitlines()))
        # one table, redrawn in place (not scrolled): a single header line, the rate column, the caption
        assert sum("PROBE" in ln for ln in screen.splitlines()) == 1
        assert "RATE/s" in screen and "2 rows, 78 hits" in screen
        child(23)  # the same row goes to 100 on the next refresh
        screen = tmux.wait_for(lambda s: any("sys_enter_getpid" in ln and ln.rstrip(" │|").endswith("100")
                                             for ln in s.splitlines()))
        assert sum("PROBE" in ln for ln in screen.splitlines()) == 1
        tmux.run("send-keys", "-t", "t", "C-c")
        final = tmux.wait_for(lambda s: "EXITED" in s)
        assert "EXITED 0" in final
        lines = [ln.split() for ln in final.splitlines()]
        assert ["tracepoint:syscalls:sys_enter_getpid", "100"] in lines
        assert ["tracepoint:syscalls:sys_enter_getppid", "2"] in lines
        assert "Traceback" not in final
    finally:
        tmux.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_readme_first_command_shows_syscall_table():
    """What a newcomer types first: every syscall, live, on a terminal."""
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "bpfmux.cli.main", "trace",
                                            "tracepoint:syscalls:sys_enter_*"])
    tmux = Tmux(f"{cmd}; echo EXITED $?; sleep 60", height=24)
    try:
        screen = tmux.wait_for(lambda s: "bpfmux trace: tracepoint:syscalls:sys_enter_*" in s and
                               "tracepoint:syscalls:sys_enter_" in s.split("RATE/s", 1)[-1])
        assert "COUNT" in screen and "hits in" in screen
        rows = [ln for ln in screen.splitlines() if "│ tracepoint:syscalls:sys_enter_" in ln]
        counts = [int(ln.split("│")[-2].strip().replace(",", "")) for ln in rows]
        assert counts and counts == sorted(counts, reverse=True) and counts[0] > 0
        assert len(screen.splitlines()) <= 24
        tmux.run("send-keys", "-t", "t", "C-c")
        final = tmux.wait_for(lambda s: "EXITED" in s)
        assert "EXITED 0" in final and "Traceback" not in final
    finally:
        tmux.close()
