"""The one-liners of bpftrace's tutorial (``docs/tutorial_one_liners.md`` of
the corpus), under ``bpfmux bpftrace`` and bpftrace 0.17 at once.

Each test takes the one-liner from the tutorial itself. One-liners that
count what the whole machine does also run with the workload's pid in the
predicate (the tutorial's own lesson 5 does that), so the values can be
compared; the kprobe lessons (6, 7 and 12) run in the VM tier's guest
(``tests/guest/test_vmguest_bpftrace.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from bpftrace_oracle import BPFMUX, ROOT, bpftrace_missing, hist_counts, parse_maps, run_both

pytestmark = pytest.mark.live


@pytest.fixture
def lessons(bpftrace_tools: Path, root_required: None) -> list[str]:
    why = bpftrace_missing()
    if why:
        pytest.skip(why)
    text = (bpftrace_tools / "docs" / "tutorial_one_liners.md").read_text()
    return re.findall(r"^#? ?bpftrace -e '(.*)'$", text, re.M)


def one(lessons: list[str], needle: str) -> str:
    found = [x for x in lessons if needle in x]
    assert len(found) == 1, f"the tutorial has no one-liner with {needle!r}"
    return found[0]


class Held:
    """A workload process started first (so its pid can go into a predicate), released later."""

    def __init__(self, code: str) -> None:
        self.p = subprocess.Popen([sys.executable, "-c", "import sys\nsys.stdin.read(1)\n" + code],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
        self.pid = self.p.pid

    def release(self) -> bytes:
        out, _ = self.p.communicate(b"g", timeout=60)
        return out


def test_lesson1_listing(bpftrace_tools: Path, root_required: None) -> None:
    if bpftrace_missing():
        pytest.skip(bpftrace_missing())
    text = (bpftrace_tools / "docs" / "tutorial_one_liners.md").read_text()
    pattern = re.search(r"^bpftrace -l '(.*)'$", text, re.M).group(1)  # type: ignore[union-attr]
    theirs = subprocess.run(["bpftrace", "-l", pattern], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    ours = subprocess.run([*BPFMUX, "-l", pattern], capture_output=True, text=True, check=True, env=env).stdout
    assert ours == theirs and ours.count("\n") > 300


def test_lesson2_hello_world(lessons: list[str]) -> None:
    prog = one(lessons, "hello world")
    bt, ours, _ = run_both(prog, lambda: None, ready="hello world")
    assert ours.stdout == bt.stdout == "Attaching 1 probe...\nhello world\n\n\n"


def test_lesson3_file_opens(lessons: list[str]) -> None:
    prog = one(lessons, "sys_enter_openat")
    m = f"btm{os.getpid()}x"

    def work() -> None:
        path = Path(tempfile.gettempdir()) / m
        path.write_text("")
        path.unlink()

    bt, ours, _ = run_both(prog, work, ready="Attaching", settle=0.5, ready_delay=2.0)
    mine = [x for x in ours.stdout.splitlines() if m in x]
    assert mine and mine == [x for x in bt.stdout.splitlines() if m in x]
    assert all(x == f"python3 {Path(tempfile.gettempdir()) / m}" for x in mine)


def test_lesson4_syscall_counts_by_process(lessons: list[str]) -> None:
    prog = one(lessons, "raw_syscalls:sys_enter { @[comm]")
    comm = f"btm{os.getpid() % 100000}"
    exe = Path(tempfile.mkdtemp()) / comm
    exe.symlink_to(os.path.realpath(sys.executable))

    def work() -> None:
        subprocess.run([str(exe), "-c", "import os\nfor i in range(300): os.getppid()"], check=True)

    bt, ours, _ = run_both(prog, work, ready="Attaching", settle=0.5, ready_delay=2.0)
    mine, theirs = parse_maps(ours.stdout), parse_maps(bt.stdout)
    assert mine[f"@[{comm}]"] == theirs[f"@[{comm}]"] and int(mine[f"@[{comm}]"]) > 300
    values = [int(v) for v in mine.values()]
    assert values == sorted(values)  # printed by increasing count, as bpftrace does


def test_lesson5_read_size_distribution_of_one_pid(lessons: list[str]) -> None:
    prog = one(lessons, "sys_exit_read")
    held = Held("import os\nfd=os.open('/etc/passwd',os.O_RDONLY)\nfor n in (1,2,3,100,4096,0):\n"
                "    os.lseek(fd,0,0); os.read(fd,n)")  # fmt: skip
    prog = re.sub(r"pid == \d+", f"pid == {held.pid}", prog)
    bt, ours, _ = run_both(prog, held.release, ready="Attaching", settle=0.3, ready_delay=2.0)
    mine, theirs = parse_maps(ours.stdout), parse_maps(bt.stdout)
    assert mine["@bytes"] == theirs["@bytes"]
    assert hist_counts(mine["@bytes"])["[1]"] >= 1
    assert ours.stdout == bt.stdout


def test_lesson8_scheduler_tracepoints_count_and_exit(lessons: list[str]) -> None:
    prog = one(lessons, "sched:sched*")
    bt, ours, _ = run_both(prog, lambda: None, ready="Attaching", settle=0.0, ready_delay=1.0)
    # both attach every sched tracepoint and exit by themselves after 5 s, printing counts by increasing value
    assert ours.stdout.splitlines()[0] == bt.stdout.splitlines()[0]
    names = re.findall(r"^@\[(tracepoint:sched:\w+)\]: \d+$", ours.stdout, re.M)
    assert "tracepoint:sched:sched_switch" in names
    assert set(names) <= set(re.findall(r"^(tracepoint:sched:\w+)$", subprocess.run(
        ["bpftrace", "-l", "tracepoint:sched:sched*"], capture_output=True, text=True).stdout, re.M))  # fmt: skip


def test_lesson8_scheduler_tracepoints_of_one_pid(lessons: list[str]) -> None:
    prog = one(lessons, "sched:sched*")
    held = Held("import time, os\nfor i in range(20): time.sleep(0.002)\nos.sched_yield()")
    prog = prog.replace("sched:sched* {", f"sched:sched* /pid == {held.pid}/ {{").replace("interval:s:5 { exit(); }",
                                                                                           "")  # fmt: skip
    bt, ours, _ = run_both(prog, held.release, ready="Attaching", settle=0.3, ready_delay=2.0)
    mine, theirs = parse_maps(ours.stdout), parse_maps(bt.stdout)
    assert mine == theirs
    assert int(mine["@[tracepoint:sched:sched_switch]"]) >= 20


def test_lesson9_profile_kernel_stacks(lessons: list[str]) -> None:
    prog = one(lessons, "profile:hz:99")

    def work() -> None:
        subprocess.run([sys.executable, "-c", "import os,time\nt=time.time()\nwhile time.time()-t<1: os.getppid()"])

    bt, ours, _ = run_both(prog, work, ready="Attaching", settle=0.0, ready_delay=1.0)
    # sampling: each tracer has its own perf events, so the stacks seen differ; their form does not
    frame = re.compile(r"^    [\w.]+\+\d+$")
    for out in (ours.stdout, bt.stdout):
        blocks = re.findall(r"^@\[\n((?:    .*\n)*)\]: (\d+)$", out, re.M)
        assert blocks
        assert all(frame.match(f) for b, _ in blocks for f in b.splitlines())
    ours_funcs = {f.split("+")[0] for f in re.findall(r"^    (\S+)$", ours.stdout, re.M)}
    assert ours_funcs & {f.split("+")[0] for f in re.findall(r"^    (\S+)$", bt.stdout, re.M)}
    # no stack starts in a BPF program (a JIT image's symbol, bpf_prog_<tag>_<name>) or its caller; frames such as
    # bpf_prog_load are other processes on this shared machine loading programs, sampled like anything else
    tops = [b.splitlines()[0].strip().split("+")[0] for b in re.findall(r"^@\[\n((?:    .*\n)+)\]: \d+$", ours.stdout, re.M)]
    assert tops and not any(re.match(r"bpf_prog_[0-9a-f]{16}|bpf_overflow_handler|bpf_trace_run", f) for f in tops)
    assert not re.search(r"^    bpf_prog_[0-9a-f]{16}", ours.stdout, re.M)


def test_lesson10_scheduler_stacks_of_one_pid(lessons: list[str]) -> None:
    prog = one(lessons, "sched_switch { @[kstack]")
    held = Held("import time\nfor i in range(5): time.sleep(0.01)")
    prog = prog.replace("sched_switch {", f"sched_switch /pid == {held.pid}/ {{")
    bt, ours, _ = run_both(prog, held.release, ready="Attaching", settle=0.3, ready_delay=2.0)
    # the same stacks, starting at the tracepoint (not in bpfmux's own program)
    assert parse_maps(ours.stdout) == parse_maps(bt.stdout)
    assert "__traceiter_sched_switch" in ours.stdout and "bpf_prog_" not in ours.stdout


def test_lesson11_block_io_sizes(lessons: list[str]) -> None:
    prog = one(lessons, "block_rq_issue")
    comm = f"btm{os.getpid() % 100000}"
    dd = Path(tempfile.mkdtemp()) / comm
    dd.symlink_to("/bin/dd")
    prog = prog.replace("block_rq_issue {", f'block_rq_issue /args->comm == "{comm}"/ {{')

    def work() -> None:
        path = Path(tempfile.gettempdir()) / f"{comm}.dat"
        subprocess.run([str(dd), "if=/dev/zero", f"of={path}", "bs=8k", "count=4", "oflag=direct"],
                       capture_output=True, check=True)  # fmt: skip
        path.unlink()

    bt, ours, _ = run_both(prog, work, ready="Attaching", settle=0.3, ready_delay=2.0)
    assert ours.stdout == bt.stdout
    # dd's four 8 KiB direct writes; the filesystem may issue more requests in dd's name (journal,
    # allocation), which both tracers see alike
    assert hist_counts(parse_maps(ours.stdout)["@"]).get("[8K, 16K)", 0) >= 4
