"""For every corpus tool that runs on this kernel: a workload whose effect is
known, run under ``bpfmux run --json`` with the tool's settings, and what its
events or maps must show.

A workload is an action of ``workloads/act.py`` (it names itself
``bpfmux-ACTION`` and writes its pid to a file first). Where a tool filters by process
the workload's pid goes into the tool's own filter (``--pid-var``), so only
the workload's events count and the counts are exact; tools that see the
whole machine are checked on what only the workload does (its ``comm``, its
unique path, marker or port, a loop device of its own). Scheduler and
sampling tools cannot count exactly what a process does to the scheduler or
to a timer; they are checked for the workload's own entries, with lower
bounds where the workload fixes one.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_harness import ROOT, object_path, run_args
from corpus_probes import LiveProbe
from corpus_tools import TOOLS, Settings

ACT = Path(__file__).resolve().parent / "workloads" / "act.py"
N = 5
PORT = 47000 + os.getpid() % 1000
MARK = f"bpfmux-mark-{os.getpid()}"


@dataclass
class Output:
    """What ``bpfmux run --json`` printed.

    :ivar events: map → decoded events; :ivar maps: map → ``[key, value]`` items.
    :ivar pid: the workload's pid; :ivar status: the exit status; :ivar stderr: its messages.
    """

    events: dict[str, list[Any]] = field(default_factory=dict)
    maps: dict[str, list[Any]] = field(default_factory=dict)
    pid: int = 0
    status: int = 0
    stderr: str = ""

    def all_events(self) -> list[Any]:
        return [e for evs in self.events.values() for e in evs]

    def section(self, name: str = ".bss") -> dict[str, Any]:
        return {k: v for k, v in self.maps.get(name, [])}


@dataclass
class Context:
    """What a workload's setup made (a loop device, a directory, a file)."""

    tmp: Path
    loop: str = ""
    loop_dev: int = 0


@dataclass(frozen=True)
class Workload:
    """One tool's workload.

    :ivar action: ``act.py`` arguments (``{tmp}``, ``{loop}``, ``{port}``, ``{mark}`` filled in).
    :ivar check: asserts on the output.
    :ivar overrides: global values on top of the tool's settings (same placeholders, plus ``{loop_dev}``).
    :ivar pid_var: the global the workload's pid goes into.
    :ivar extra: more ``bpfmux run`` options.
    :ivar loop: the workload needs a loop device.
    """

    action: tuple[str, ...]
    check: Callable[[Output, Context], None]
    overrides: dict[str, object] = field(default_factory=dict)
    pid_var: str | None = None
    extra: tuple[str, ...] = ()
    loop: bool = False


def _s(v: Any) -> str:
    """Text of a decoded char array (a path struct's first text field)."""
    if isinstance(v, dict):
        return next((x for x in v.values() if isinstance(x, str)), "")
    if isinstance(v, list):
        return " ".join(str(x) for x in v)
    return v if isinstance(v, str) else ""


def _total(v: Any) -> int:
    if isinstance(v, dict) and "slots" in v:
        return sum(v["slots"])
    if isinstance(v, list):
        return sum(_total(x) for x in v)
    return int(v) if isinstance(v, int) else 0


# --- the checks ---------------------------------------------------------------------------------------

def _opensnoop(o: Output, c: Context) -> None:
    path = str(c.tmp / "f")
    mine = [e for e in o.events["events"] if _s(e["fname"]) == path]
    assert len(mine) == N and all(e["pid"] == o.pid and e["ret"] >= 0 for e in mine), mine


def _execsnoop(o: Output, c: Context) -> None:
    mine = [e for e in o.events["events"] if isinstance(e, dict) and e.get("comm") == "true"
            and MARK in (e["args"] if isinstance(e["args"], list) else [])]
    assert len(mine) == N and all(e["comm"] == "true" and e["ppid"] == o.pid for e in mine), mine
    assert sorted(e["args"][-1] for e in mine) == [str(i) for i in range(N)]


def _exitsnoop(o: Output, c: Context) -> None:
    kids = [e for e in o.events["events"] if e["ppid"] == o.pid]
    assert len(kids) == N and all(e["exit_code"] == 3 for e in kids), kids


def _statsnoop(o: Output, c: Context) -> None:
    path = str(c.tmp / "f")
    mine = [e for e in o.events["events"] if e["pathname"] == path]
    assert len(mine) == N and all(e["pid"] == o.pid and e["ret"] == 0 for e in mine), mine


def _syncsnoop(o: Output, c: Context) -> None:
    mine = [e for e in o.events["events"] if e["comm"] == "bpfmux-sync"]
    assert len(mine) == N and all(e["sys"] in (1, "SYS_SYNC") for e in mine), mine


def _syscount(o: Output, c: Context) -> None:
    counts = {k: v for k, v in o.maps["data"]}
    assert counts[39]["count"] == N, counts  # getpid


def _sigsnoop(o: Output, c: Context) -> None:
    usr1 = [e for e in o.events["events"] if e["sig"] == 10]
    assert len(usr1) == N and all(e["pid"] == o.pid for e in usr1), usr1


def _mountsnoop(o: Output, c: Context) -> None:
    evs = o.events["events"]
    mounts = [e["mount"] for e in evs if e["op"] == "MOUNT" and e["pid"] == o.pid]
    umounts = [e["umount"] for e in evs if e["op"] == "UMOUNT" and e["pid"] == o.pid]
    assert len(mounts) == N and all((m["src"], m["fs"], m["dest"], m["data"]) == ("bpfmux-mnt", "tmpfs", str(c.tmp),
                                                                                  "size=1m") for m in mounts), evs
    assert len(umounts) == N and all(_s(u["dest"]) == str(c.tmp) for u in umounts), evs


def _gethostlatency(o: Output, c: Context) -> None:
    mine = [e for e in o.events["events"] if e["pid"] == o.pid]
    assert len(mine) == N and all(e["host"] == "localhost" for e in mine), mine


def _bashreadline(o: Output, c: Context) -> None:
    lines = [e["str"] for e in o.events["events"]]
    assert lines.count(f"echo {MARK}") == 1, lines


def _hist_total(o: Output, name: str = "hists") -> int:
    return sum(_total(v) for _, v in o.maps[name])


def _biolatency(o: Output, c: Context) -> None:
    assert _hist_total(o) == N, o.maps["hists"]


def _biopattern(o: Output, c: Context) -> None:
    """The first completion only starts the count (biopattern needs a previous sector to compare with)."""
    counters = {k: v for k, v in o.maps["counters"]}
    v = counters[c.loop_dev]
    assert v == {"last_sector": N * 8, "bytes": (N - 1) * 4096, "sequential": N - 1, "random": 0}, counters


def _bitesize(o: Output, c: Context) -> None:
    hists = {k["comm"]: v for k, v in o.maps["hists"]}
    assert hists["bpfmux-dio"]["slots"][2] == N and _total(hists["bpfmux-dio"]) == N, hists  # 4 KiB: log2(4) = 2


def _biosnoop(o: Output, c: Context) -> None:
    mine = [e for e in o.events["events"] if e["dev"] == c.loop_dev]
    assert len(mine) == N and all(e["len"] == 4096 and e["comm"] == "bpfmux-dio" for e in mine), mine


def _biostacks(o: Output, c: Context) -> None:
    assert _hist_total(o) == N, o.maps["hists"]


def _cpudist(o: Output, c: Context) -> None:
    """Off-CPU mode: each 5 ms sleep is one off-CPU period of at least 5 ms (slot 12 and up: 4,096 us).

    (On-CPU mode counts only involuntary switches, so what it sees depends on
    the machine's other load, not on the workload.)
    """
    slots = [v["slots"] for _, v in o.maps["hists"]]
    assert sum(sum(s[12:]) for s in slots) >= 4 * N, o.maps["hists"]


def _cpufreq(o: Output, c: Context) -> None:
    """Every sample of the workload lands in the slot of the frequency set for its CPU (1000 MHz / 200)."""
    hists = {k["comm"]: v for k, v in o.maps["hists"]}
    slots = hists["bpfmux-spin"]["slots"]
    assert slots[5] > 0 and sum(slots) == slots[5], hists


def _runqlat(o: Output, c: Context) -> None:
    hists = {k: v for k, v in o.maps["hists"]}
    assert set(hists) == {o.pid} and _total(hists[o.pid]) >= N, hists


def _runqlen(o: Output, c: Context) -> None:
    assert _total(o.section()["hists"]) > 0, o.section()


def _runqslower(o: Output, c: Context) -> None:
    evs = o.events["events"]
    assert len(evs) >= N and {e["pid"] for e in evs} <= {o.pid} | {e["pid"] for e in evs if e["task"] != "bpfmux-sleep"}
    assert sum(e["task"] == "bpfmux-sleep" for e in evs) >= N, evs


def _offcputime(o: Output, c: Context) -> None:
    mine = [(k, v) for k, v in o.maps["info"] if k["tgid"] == o.pid]
    assert mine and sum(v["delta"] for _, v in mine) >= N * 10_000 // 2, mine  # N sleeps of 10 ms, in us


def _profile(o: Output, c: Context) -> None:
    mine = [(k, v) for k, v in o.maps["counts"] if k["pid"] == o.pid]
    assert sum(v for k, v in mine if k["name"] == "bpfmux-spin") > 0, mine


def _wakeuptime(o: Output, c: Context) -> None:
    keys = [k for k, v in o.maps["counts"] if v > 0]
    assert any(k["waker"] == "bpfmux-waker" and k["target"] == "bpfmux-wakee" for k in keys), keys


def _futexctn(o: Output, c: Context) -> None:
    mine = [(k, v) for k, v in o.maps["hists"] if k["pid_tgid"] >> 32 == o.pid]
    assert mine and sum(v["contended"] for _, v in mine) >= 1, o.maps["hists"]


def _memleak(o: Output, c: Context) -> None:
    mine = [v for _, v in o.maps["allocs"] if v["size"] == 4242]
    assert len(mine) == N, o.maps["allocs"]


def _hardirqs(o: Output, c: Context) -> None:
    infos = {k["name"]: v for k, v in o.maps["infos"]}
    assert any(name.startswith("virtio") and v["count"] > 0 for name, v in infos.items()), infos


def _softirqs(o: Output, c: Context) -> None:
    counts = o.section()["counts"]
    assert counts[3] > 0, counts  # NET_RX: the loopback traffic


def _softirqslower(o: Output, c: Context) -> None:
    assert any(e["vec"] == 3 for e in o.events["events"]), o.events  # NET_RX


def _tcplife(o: Output, c: Context) -> None:
    """Bytes as the kernel counts them (``bytes_acked``, ``bytes_received``): the data, the FIN each way, and
    the client's SYN in its acked bytes (the server's SYN-ACK acknowledgement is not counted)."""
    evs = [e for e in o.events["events"] if PORT in (e["sport"], e["dport"])]
    client = [(e["tx_b"], e["rx_b"]) for e in evs if e["dport"] == PORT]
    server = [(e["tx_b"], e["rx_b"]) for e in evs if e["sport"] == PORT]
    assert client == [(1002, 2001)] and server == [(2001, 1001)], evs
    assert all(e["pid"] == o.pid and e["comm"] == "bpfmux-tcp" for e in evs), evs


def _tcpstates(o: Output, c: Context) -> None:
    client = [(e["oldstate"], e["newstate"]) for e in o.events["events"] if e["dport"] == PORT]
    assert (7, 2) in client and (2, 1) in client, client  # CLOSE -> SYN_SENT -> ESTABLISHED


def _tcppktlat(o: Output, c: Context) -> None:
    port = socket.htons(PORT)  # tcppktlat keeps ports in network order
    mine = [e for e in o.events["events"] if port in (e["sport"], e["dport"])]
    assert mine and all(e["pid"] == o.pid for e in mine), o.events


def _drsnoop(o: Output, c: Context) -> None:
    assert o.status == 0, o.stderr  # nothing to count: direct reclaim is not provoked on a shared machine


_LOOP = {"filter_dev": True, "targ_dev": "{loop_dev}"}
_SPIN = ("spin", "1")

#: tool → its workload
WORKLOADS: dict[str, Workload] = {
    "opensnoop": Workload(("open", "{tmp}/f", str(N)), _opensnoop, pid_var="targ_tgid"),
    "execsnoop": Workload(("exec", MARK, str(N)), _execsnoop),
    "exitsnoop": Workload(("exit", "3", str(N)), _exitsnoop),
    "statsnoop": Workload(("stat", "{tmp}/f", str(N)), _statsnoop, pid_var="target_pid"),
    "syncsnoop": Workload(("sync", str(N)), _syncsnoop),
    "syscount": Workload(("getpid", str(N)), _syscount, pid_var="filter_pid"),
    "sigsnoop": Workload(("kill", "10", str(N)), _sigsnoop, pid_var="filtered_pid"),
    "mountsnoop": Workload(("mount", "{tmp}", str(N)), _mountsnoop, pid_var="target_pid"),
    "gethostlatency": Workload(("getaddrinfo", "localhost", str(N)), _gethostlatency),
    "bashreadline": Workload(("readline", f"echo {MARK}"), _bashreadline),
    "biolatency": Workload(("dio", "{loop}", str(N)), _biolatency, dict(_LOOP), loop=True),
    "biopattern": Workload(("dio", "{loop}", str(N)), _biopattern, dict(_LOOP), loop=True),
    "bitesize": Workload(("dio", "{loop}", str(N)), _bitesize, dict(_LOOP), loop=True),
    "biosnoop": Workload(("dio", "{loop}", str(N)), _biosnoop, dict(_LOOP), loop=True),
    "biostacks": Workload(("dio", "{loop}", str(N)), _biostacks, dict(_LOOP), loop=True),
    "cpudist": Workload(("sleep", "5", str(4 * N)), _cpudist, {"targ_offcpu": True}, pid_var="targ_tgid"),
    "cpufreq": Workload(_SPIN, _cpufreq, {"freqs_mhz": ",".join(["1000"] * os.cpu_count())}),
    "runqlat": Workload(("sleep", "2", str(4 * N)), _runqlat, {"targ_per_process": True}, pid_var="targ_tgid"),
    "runqlen": Workload(_SPIN, _runqlen),
    "runqslower": Workload(("sleep", "2", str(2 * N)), _runqslower, {"min_us": 0}, pid_var="targ_tgid"),
    "offcputime": Workload(("sleep", "10", str(N)), _offcputime),
    "profile": Workload(_SPIN, _profile),
    "wakeuptime": Workload(("wake", str(2 * N)), _wakeuptime),
    "futexctn": Workload(("futex", "4", "20"), _futexctn, pid_var="targ_pid"),
    "memleak": Workload(("malloc", "4242", str(N)), _memleak,
                        {"stack_flags": 1 << 8, "min_size": 4242, "max_size": 4242}, extra=("--pid", "command")),
    "hardirqs": Workload(("fsync", "{tmp}/f", str(N)), _hardirqs),
    "softirqs": Workload(("tcp", "{port}", "1000", "2000"), _softirqs),
    "softirqslower": Workload(("tcp", "{port}", "1000", "2000"), _softirqslower, {"min_us": 0}),
    "tcplife": Workload(("tcp", "{port}", "1000", "2000"), _tcplife),
    "tcpstates": Workload(("tcp", "{port}", "1000", "2000"), _tcpstates),
    "tcppktlat": Workload(("tcp", "{port}", "1000", "2000"), _tcppktlat),
    "drsnoop": Workload(("sleep", "1", "1"), _drsnoop),
}


def memleak_user_mode(settings: Settings) -> None:
    """memleak -p: the kernel tracepoints off, libc's allocators probed (what its attach_uprobes does)."""
    settings.off.update(p for p in ("memleak__kmalloc", "memleak__kmalloc_node", "memleak__kfree",
                                    "memleak__kmem_cache_alloc", "memleak__kmem_cache_alloc_node",
                                    "memleak__kmem_cache_free", "memleak__mm_page_alloc", "memleak__mm_page_free",
                                    "memleak__percpu_alloc_percpu", "memleak__percpu_free_percpu"))
    settings.skip_attach.clear()
    for func in ("malloc", "calloc", "realloc", "posix_memalign", "memalign", "valloc", "pvalloc", "aligned_alloc"):
        settings.attach[f"{func}_enter"] = [f"libc:{func}"]
        settings.attach[f"{func}_exit"] = [f"libc:{func}"]
    settings.attach["free_enter"] = ["libc:free"]
    settings.attach["munmap_enter"] = ["libc:munmap"]
    for func in ("mmap", "mremap"):
        settings.attach[f"{func}_enter"] = [f"libc:{func}"]
        settings.attach[f"{func}_exit"] = [f"libc:{func}"]


@contextmanager
def context(needs_loop: bool, tmp: Path) -> Iterator[Context]:
    """A scratch directory with a file ``f``; a loop device of its own when ``needs_loop``."""
    (tmp / "f").write_bytes(b"corpus\n")
    ctx = Context(tmp)
    if not needs_loop:
        yield ctx
        return
    backing = tmp / "loop.img"
    with open(backing, "wb") as f:
        f.truncate(16 << 20)
    dev = subprocess.run(["losetup", "--find", "--show", str(backing)], check=True, capture_output=True,
                         text=True).stdout.strip()
    try:
        st = os.stat(dev)
        ctx.loop = dev
        ctx.loop_dev = (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)  # the kernel's MKDEV
        yield ctx
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False, capture_output=True)


def run(tool_name: str, tmp: Path) -> tuple[Output, Context]:
    """Run ``tool_name``'s workload under ``bpfmux run --json``: the parsed output (not yet checked) and the
    context it ran in."""
    tool = TOOLS[tool_name]
    wl = WORKLOADS[tool_name]
    settings = tool.settings(LiveProbe())
    if tool_name == "memleak":
        memleak_user_mode(settings)
    with context(wl.loop, tmp) as ctx:
        fill = {"tmp": str(ctx.tmp), "loop": ctx.loop, "port": str(PORT), "mark": MARK, "loop_dev": str(ctx.loop_dev)}
        for name, value in wl.overrides.items():
            settings.globals[name] = value.format(**fill) if isinstance(value, str) else value
        action = [a.format(**fill) for a in wl.action]
        args = [sys.executable, "-m", "bpfmux.cli.main", "run", str(object_path(tool_name)), "--json",
                *run_args(tool, settings), *wl.extra, "-c", shlex.join([sys.executable, str(ACT), *action])]
        if wl.pid_var:
            args += ["--pid-var", wl.pid_var]
        pidfile = ctx.tmp / "workload.pid"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ACT_PIDFILE": str(pidfile)}
        proc = subprocess.run(args, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env)
        pid = int(pidfile.read_text()) if pidfile.exists() else 0
    out = Output(status=proc.returncode, stderr=proc.stderr, pid=pid)
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "event" in rec:
            out.events.setdefault(rec["map"], []).append(rec["event"])
        elif "items" in rec and "interval" not in rec:
            out.maps[rec["map"]] = rec["items"]
    out.events.setdefault("events", [])
    return out, ctx


def check(tool_name: str, tmp: Path) -> tuple[bool, str]:
    """Run and check one tool's workload: ``(passed, detail)`` (for bench/compat.py)."""
    try:
        out, ctx = run(tool_name, tmp)
        if out.status not in (0, 3):
            return False, (out.stderr.strip().splitlines() or ["no output"])[-1]
        WORKLOADS[tool_name].check(out, ctx)
    except AssertionError as err:
        return False, f"wrong events or counts: {str(err)[:200]}"
    except (OSError, subprocess.SubprocessError, KeyError) as err:
        return False, f"could not run or read: {type(err).__name__}: {err}"
    return True, "as expected"
