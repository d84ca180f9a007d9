"""The corpus tools and tutorial one-liners that need kprobes or kfuncs, under
``bpfmux bpftrace`` and bpftrace 0.17 at once, in the VM tier's 6.12 guest
(bpftrace is on the guest's root, the host's).

Same method as ``tests/live/test_bpftrace_tools.py``: one workload, the lines
or map rows that belong to it compared; a tool whose probes bpftrace 0.17
itself cannot attach in this guest is skipped with bpftrace's own error.
Tools whose events cannot happen in the guest (no block device, no md, no
swap, no XFS, no OOM) are compared on everything they print.
"""

from __future__ import annotations

import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "live"))
from bpftrace_oracle import bpftrace_missing, parse_maps, run_both

TIME = re.compile(r"\b\d\d:\d\d:\d\d\b")
SLOW = 600.0  # TCG: starting bpftrace takes a while


@pytest.fixture
def tools(bpftrace_tools: Path) -> Path:
    why = bpftrace_missing()
    if why:
        pytest.skip(why)
    return bpftrace_tools / "tools"


def both(script: str | Path, work, ready: str, **kw):
    try:
        return run_both(script, work, ready=ready, attach_timeout=SLOW, stop_timeout=SLOW, **kw)
    except AssertionError as e:
        if "bpftrace did not print" in str(e) or "bpftrace exited" in str(e):
            pytest.skip(f"bpftrace 0.17 itself does not run this here: {str(e)[-400:]}")
        raise


def mark() -> str:
    return f"btm{random.randint(10000, 99999)}"


def _named_python(name: str) -> str:
    d = Path(tempfile.mkdtemp())
    (d / name).symlink_to(os.path.realpath(sys.executable))
    return str(d / name)


def test_vfscount_filtered_to_the_workload(tools: Path) -> None:
    comm = mark()
    text = (tools / "vfscount.bt").read_text().replace("kprobe:vfs_*\n{", f'kprobe:vfs_* /comm == "{comm}"/\n{{')
    code = "import os\nfor _ in range(3): os.read(os.open('/etc/hostname', os.O_RDONLY), 10)"
    bt, ours, _ = both(text, lambda: subprocess.run([_named_python(comm), "-S", "-c", code], check=True), "Ctrl-C")
    mine, theirs = parse_maps(ours.stdout), parse_maps(bt.stdout)
    assert mine == theirs and int(mine["@[vfs_read]"]) >= 3
    assert ours.stdout.splitlines()[0] == bt.stdout.splitlines()[0]  # the same number of probes attached


def test_vfsstat_format(tools: Path) -> None:
    bt, ours, _ = both(tools / "vfsstat.bt", lambda: None, "Ctrl-C", settle=1.5)
    for out in (ours.stdout, bt.stdout):
        assert re.search(r"^\d\d:\d\d:\d\d$", out, re.M) and re.search(r"^@\[vfs_\w+\]: \d+$", out, re.M)


def test_capable(tools: Path) -> None:
    # giving a file away needs CAP_CHOWN (chowning /tmp to its own owner asks for no capability)
    code = "import os,tempfile\nf=tempfile.mkstemp()[1]\nos.chown(f, 1, 1)\nos.unlink(f)\nprint(os.getpid())"
    bt, ours, done = both(tools / "capable.bt", lambda: subprocess.run([sys.executable, "-S", "-c", code],
                                                                       capture_output=True, text=True), "AUDIT")  # fmt: skip
    pid = done.stdout.strip()
    mine = [TIME.sub("T", x) for x in ours.stdout.splitlines() if f" {pid} " in x]
    assert mine and mine == [TIME.sub("T", x) for x in bt.stdout.splitlines() if f" {pid} " in x]


def _loopback_up() -> None:
    """The guest's ``lo`` starts down; up, the kernel gives it 127.0.0.1."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def _tcp(port_holder: list[int]) -> None:
    srv = socket.socket()
    srv.settimeout(30)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_holder.append(srv.getsockname()[1])

    def accept() -> None:
        c, _ = srv.accept()
        c.sendall(c.recv(10))
        c.close()

    # a daemon thread with a timeout: a failed connection must not leave pytest unable to exit (the guest hangs)
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        with socket.create_connection(("127.0.0.1", port_holder[0]), timeout=30) as cli:
            cli.sendall(b"hello")
            cli.recv(10)
        t.join(timeout=30)
    finally:
        srv.close()


@pytest.mark.parametrize("name", ["tcpconnect", "tcpaccept", "tcplife"])
def test_tcp_tools(tools: Path, name: str) -> None:
    _loopback_up()
    port: list[int] = []
    bt, ours, _ = both(tools / f"{name}.bt", lambda: _tcp(port), "PID|PORT|Ctrl-C")
    mine = [TIME.sub("T", x) for x in ours.stdout.splitlines() if str(port[0]) in x]
    theirs = [TIME.sub("T", x) for x in bt.stdout.splitlines() if str(port[0]) in x]
    if name == "tcplife":  # its last column is a latency each tracer measures itself
        mine, theirs = [x.rsplit(None, 1)[0] for x in mine], [x.rsplit(None, 1)[0] for x in theirs]
    assert mine and mine == theirs


def test_dcsnoop(tools: Path) -> None:
    m = mark()
    bt, ours, _ = both(tools / "dcsnoop.bt", lambda: subprocess.run(["stat", f"/tmp/{m}"], capture_output=True), "FILE")
    mine = [TIME.sub("T", x).split(None, 1)[1] for x in ours.stdout.splitlines() if m in x]
    assert mine and mine == [TIME.sub("T", x).split(None, 1)[1] for x in bt.stdout.splitlines() if m in x]


def test_undump(tools: Path) -> None:
    m = mark()

    def work() -> None:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.sendall(m.encode())
        b.recv(100)

    bt, ours, _ = both(tools / "undump.bt", work, "Ctrl-C")
    mine = [TIME.sub("T", x) for x in ours.stdout.splitlines() if m in x]
    assert mine and mine == [TIME.sub("T", x) for x in bt.stdout.splitlines() if m in x]


@pytest.mark.parametrize("name", ["biolatency", "biosnoop", "biostacks", "mdflush", "oomkill", "swapin", "xfsdist",
                                  "tcpretrans", "tcpsynbl"])  # fmt: skip
def test_tools_without_events_here_print_the_same(tools: Path, name: str) -> None:
    # no block device, md, swap, XFS, OOM, retransmit or SYN backlog in the guest: everything printed must match
    bt, ours, _ = both(tools / f"{name}.bt", lambda: None, "Ctrl-C|PID|TIME", settle=0.2)
    strip = [TIME.sub("T", x) for x in bt.stdout.splitlines()]
    assert [TIME.sub("T", x) for x in ours.stdout.splitlines()] == strip


# -- the tutorial's kprobe lessons -------------------------------------------------------------------


def _lessons(bpftrace_tools: Path) -> list[str]:
    text = (bpftrace_tools / "docs" / "tutorial_one_liners.md").read_text()
    return re.findall(r"^#? ?bpftrace -e '(.*)'$", text, re.M)


def test_lesson6_read_sizes_by_kretprobe(tools: Path, bpftrace_tools: Path) -> None:
    (prog,) = [x for x in _lessons(bpftrace_tools) if x.startswith("kretprobe:vfs_read")]
    comm = mark()
    prog = prog.replace("kretprobe:vfs_read {", f'kretprobe:vfs_read /comm == "{comm}"/ {{')
    code = "import os\nfd=os.open('/etc/passwd',os.O_RDONLY)\nfor n in (1,300,4000):\n os.lseek(fd,0,0); os.read(fd,n)"
    bt, ours, _ = both(prog, lambda: subprocess.run([_named_python(comm), "-S", "-c", code]), "Attaching",
                       ready_delay=5.0)  # fmt: skip
    assert parse_maps(ours.stdout)["@bytes"] == parse_maps(bt.stdout)["@bytes"]


def test_lesson7_read_latency_by_comm(tools: Path, bpftrace_tools: Path) -> None:
    (prog,) = [x for x in _lessons(bpftrace_tools) if x.startswith("kprobe:vfs_read { @start")]
    comm = mark()
    prog = prog.replace("kprobe:vfs_read {", f'kprobe:vfs_read /comm == "{comm}"/ {{')
    code = "import os\nfor _ in range(20): os.read(os.open('/etc/passwd', os.O_RDONLY), 100)"
    bt, ours, _ = both(prog, lambda: subprocess.run([_named_python(comm), "-S", "-c", code]), "Attaching",
                       ready_delay=5.0)  # fmt: skip
    mine, theirs = parse_maps(ours.stdout), parse_maps(bt.stdout)
    key = f"@ns[{comm}]"
    # latencies: each tracer times the calls itself; the number of calls is the same
    count = re.compile(r"\s(\d+) \|")
    assert sum(map(int, count.findall(mine[key]))) == sum(map(int, count.findall(theirs[key]))) >= 20


def test_lesson12_kernel_struct_tracing(tools: Path) -> None:
    m = mark()
    prog = ('kprobe:vfs_open { printf("open path: %s\\n", str(((struct path *)arg0)->dentry->d_name.name)); } '
            'BEGIN { printf("go\\n"); }')  # fmt: skip
    bt, ours, _ = both(prog, lambda: Path(f"/tmp/{m}").write_text("x"), "go")
    assert f"open path: {m}" in ours.stdout.splitlines()
    assert lines_with(ours.stdout, m) == lines_with(bt.stdout, m)


def lines_with(out: str, needle: str) -> list[str]:
    return [x for x in out.splitlines() if needle in x]


def test_kfunc_arguments_and_return_values(tools: Path) -> None:
    comm = mark()
    prog = (f'kfunc:vfs_read /comm == "{comm}"/ {{ @[args->count] = count(); }} '
            f'kretfunc:vfs_read /comm == "{comm}"/ {{ @r = hist(retval); }} BEGIN {{ printf("go\\n"); }}')  # fmt: skip
    code = "import os\nfd=os.open('/etc/passwd',os.O_RDONLY)\nfor n in (7, 7, 123):\n os.lseek(fd,0,0); os.read(fd,n)"
    bt, ours, _ = both(prog, lambda: subprocess.run([_named_python(comm), "-S", "-c", code]), "go")
    mine, theirs = parse_maps(ours.stdout), parse_maps(bt.stdout)
    assert mine == theirs and mine["@[7]"] == "2"
