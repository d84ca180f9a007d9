"""A corpus tool's object in the emulated kernel, driven by an emulated
workload equivalent to a real one, leaves the same map contents as the same
object with the same settings under the real workload on this kernel.

The real side is the tool's live workload (:mod:`corpus_workloads`: ``bpfmux
run --json`` with the tool's settings, the workload's pid in the tool's own
filter). The emulated side loads the same object with the same settings (the
ones the tool chooses on this kernel, the same workload overrides, the
emulated workload's pid in the filter) and replays what the real workload
does as the kernel shows it to probes: system calls (``Emulator.syscall``),
tracepoint hits (``Emulator.fire``, with the real run's device numbers),
user-function calls (``Emulator.user_call``, uprobes). The maps are read
and decoded the same way on both sides (``bpfmux.show.maps.read_map``,
per-CPU values summed) and compared on what the workload determines,
filtered to the workload (its pid, its syscalls, its device, its sizes);
:data:`COMPARED` says, per tool, exactly what is compared.

Events (ring buffers, perf buffers) are compared the same way, on the
fields the workload determines. Tools compared in the VM tier's guest are in
:data:`IN_THE_GUEST`; tools whose probes the emulated kernel cannot drive
deterministically or equivalently are in :data:`NOT_COMPARED` with the
reason; a test checks that every corpus tool is in exactly one table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from corpus_guest_workloads import GUEST_WORKLOADS, EventReaders, kstruct, run_emulated
from corpus_harness import started, tool_names
from corpus_probes import LiveProbe
from corpus_tools import TOOLS
from corpus_workloads import MARK, WORKLOADS, Context, N, Output, memleak_user_mode, run

pytestmark = pytest.mark.usefixtures("corpus")

#: the emulated workload's process (pid = tgid)
EMU_PID = 4242


def _plain_items(reading: Any) -> list[list[Any]]:
    """A map's entries as ``bpfmux run --json`` prints them (JSON round trip: same types on both sides)."""
    from bpfmux.show.values import plain

    return json.loads(json.dumps([[plain(k), plain(v)] for k, v in reading.entries]))


def _sum_cpus(v: Any) -> Any:
    """A per-CPU value (a list of per-CPU values of a dict/int) summed; anything else as it is."""
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return sum(v)
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        keys = v[0].keys()
        if all(x.keys() == keys and all(isinstance(x[k], int) for k in keys) for x in v):
            return {k: sum(x[k] for x in v) for k in keys}
    return v


@dataclass(frozen=True)
class Emulated:
    """How one tool's real workload is replayed in the emulated kernel, and what is compared.

    :ivar drive: makes the workload's probe hits in the emulator (``emu``, the real run's context).
    :ivar pick: map contents (or events) the workload determines, from one side's output.
    :ivar compared: what :attr:`pick` keeps, in words.
    """

    drive: Callable[[Any, Context], None]
    pick: Callable[[Output, Context], Any]
    compared: str


# --- the emulated workloads -----------------------------------------------------------------------------

def _drive_getpid(emu: Any, c: Context) -> None:
    for _ in range(N):
        emu.syscall("getpid", ret=EMU_PID)


#: ``REQ_OP_READ | REQ_SYNC`` (``__REQ_SYNC`` is bit 11 in 6.x): the flags of a direct read's request
DIO_READ_FLAGS = 1 << 11


def _disk_request(emu: Any, c: Context, nbytes: int, sector: int = 0) -> int:
    """A ``struct request`` of ``nbytes`` on the real run's loop device (``rq->q->disk`` with its major and
    first minor, ``rq->part``; what ``get_disk`` and the tools' device filters read)."""
    major, minor = c.loop_dev >> 20, c.loop_dev & ((1 << 20) - 1)
    disk = kstruct(emu, "gendisk", {"major": major, "first_minor": minor})
    queue = kstruct(emu, "request_queue", {"disk": disk})
    return kstruct(emu, "request", {"q": queue, "__data_len": nbytes, "__sector": sector,
                                    "cmd_flags": DIO_READ_FLAGS})


def _drive_dio_issue(emu: Any, c: Context) -> None:
    """The N 4 KiB requests of ``act.py dio`` issued and completed, one after the other, 100 us each
    (``block_rq_issue``, ``block_rq_complete``: raw tracepoints, ``TP_PROTO(rq)`` and ``(rq, error,
    nr_bytes)``)."""
    for _ in range(N):
        rq = _disk_request(emu, c, 4096)
        emu.fire("block:block_rq_issue", rq)
        emu.vm.clock.advance(100_000)
        emu.fire("block:block_rq_complete", rq, 0, 4096)


def _drive_dio_io(emu: Any, c: Context) -> None:
    """The N 4 KiB requests of ``act.py dio`` started and done, one after the other, 100 us each
    (``block_io_start``, ``block_io_done``: raw tracepoints, ``TP_PROTO(rq)``), in the workload's context."""
    for _ in range(N):
        rq = _disk_request(emu, c, 4096)
        emu.fire("block:block_io_start", rq)
        emu.vm.clock.advance(100_000)
        emu.fire("block:block_io_done", rq)


def _drive_dio_snoop(emu: Any, c: Context) -> None:
    """The N 4 KiB direct reads of ``act.py dio`` at sectors 0, 8, …: each request started in the
    workload's context, issued and completed 100 us later (``block_io_start``, ``block_rq_issue``,
    ``block_rq_complete``)."""
    for i in range(N):
        rq = _disk_request(emu, c, 4096, sector=i * 8)
        emu.fire("block:block_io_start", rq)
        emu.fire("block:block_rq_issue", rq)
        emu.vm.clock.advance(100_000)
        emu.fire("block:block_rq_complete", rq, 0, 4096)


def _pick_biosnoop(o: Output, c: Context) -> Any:
    """The loop device's events (filter_dev): comm, the pid being the workload's, sector, len, cmd_flags,
    dev, qdelta; not ts nor delta (times)."""
    return [{**{k: v for k, v in e.items() if k not in ("ts", "delta", "pid")}, "workload": e["pid"] == o.pid}
            for e in o.events["events"] if e["dev"] == c.loop_dev]


def _pick_biostacks(o: Output, c: Context) -> Any:
    """The histograms' total count (slots are latencies) and each key's pid (the workload's), comm and
    device; not the kernel stack (the emulated kernel has none: a real stack cannot be replayed)."""
    return {"total": sum(_total(v) for _, v in o.maps["hists"]),
            "keys": sorted((k["pid"] == o.pid, k["comm"], k["dev"]) for k, _ in o.maps["hists"])}


def _pick_bitesize(o: Output, c: Context) -> Any:
    return {k["comm"]: v for k, v in o.maps["hists"] if k["comm"] == "bpfmux-dio"}


def _pick_hist_total(name: str) -> Callable[[Output, Context], Any]:
    def pick(o: Output, c: Context) -> Any:
        return {"total": sum(_total(v) for _, v in o.maps[name])}

    return pick


def _total(v: Any) -> int:
    if isinstance(v, dict) and "slots" in v:
        return sum(v["slots"])
    if isinstance(v, list):
        return sum(_total(x) for x in v)
    return v if isinstance(v, int) else 0


def _pick_syscount(o: Output, c: Context) -> Any:
    return {k: _sum_cpus(v) for k, v in o.maps["data"] if k == 39}


def _drive_dio(emu: Any, c: Context) -> None:
    """What ``act.py dio LOOP N`` completes on the loop device: N requests of 8 sectors at consecutive offsets
    (``block_rq_complete``; biopattern reads ``dev``, ``sector``, ``nr_sector``)."""
    for i in range(N):
        emu.fire("block:block_rq_complete", dev=c.loop_dev, sector=i * 8, nr_sector=8, error=0)


def _pick_biopattern(o: Output, c: Context) -> Any:
    return {k: v for k, v in o.maps["counters"] if k == c.loop_dev}


def _drive_malloc(emu: Any, c: Context) -> None:
    """What ``act.py malloc 4242 N`` does through libc: N ``malloc(4242)`` returning distinct addresses, not
    freed."""
    for i in range(N):
        emu.user_call("libc:malloc", 4242, ret=0x5555_0000_0000 + i * 0x2000)


def _pick_memleak(o: Output, c: Context) -> Any:
    """The outstanding allocations' sizes (addresses, timestamps and stack ids are the run's own), and the
    per-stack totals summed over stacks."""
    sizes = sorted(v["size"] for _, v in o.maps["allocs"])
    return {"sizes": sizes}


def _drive_open(emu: Any, c: Context) -> None:
    """``act.py open PATH N``: N ``os.open(PATH, O_RDONLY)`` (Python adds ``O_CLOEXEC``: ``openat(AT_FDCWD,
    PATH, 0x80000, 0)``) returning a descriptor, each closed."""
    path = user_string(emu, str(c.tmp / "f"))
    for _ in range(N):
        emu.syscall("openat", -100, path, 0x80000, 0, ret=3)
        emu.syscall("close", 3, ret=0)


def _pick_opensnoop(o: Output, c: Context) -> Any:
    """The workload's opens of its file: every field but ``ts``, ``callers`` (user return addresses) and the
    descriptor's number (``ret`` compared as "a descriptor", ``ret >= 0``); the pid as "the workload's"."""
    path = str(c.tmp / "f")
    return [{**{k: v for k, v in e.items() if k not in ("ts", "callers", "ret", "pid")},
             "fd": e["ret"] >= 0, "workload": e["pid"] == o.pid}
            for e in o.events["events"] if e["fname"]["pathes"] == path]


def _drive_stat(emu: Any, c: Context) -> None:
    """``act.py stat PATH N``: N ``os.stat(PATH)`` (``newfstatat(AT_FDCWD, PATH, buf, 0)``) that succeed."""
    path = user_string(emu, str(c.tmp / "f"))
    for _ in range(N):
        emu.syscall("newfstatat", -100, path, 0x7000_0000, 0, ret=0)


def _pick_statsnoop(o: Output, c: Context) -> Any:
    """The workload's stats of its file: every field but ``ts_ns``; the pid as "the workload's"."""
    path = str(c.tmp / "f")
    return [{**{k: v for k, v in e.items() if k not in ("ts_ns", "pid")}, "workload": e["pid"] == o.pid}
            for e in o.events["events"] if e["pathname"] == path]


def _drive_sync(emu: Any, c: Context) -> None:
    for _ in range(N):
        emu.syscall("sync", ret=0)


def _pick_syncsnoop(o: Output, c: Context) -> Any:
    """The workload's syncs (by its comm: syncsnoop has no pid filter): every field but ``ts_us``."""
    return [{k: v for k, v in e.items() if k != "ts_us"} for e in o.events["events"] if e["comm"] == "bpfmux-sync"]


def _drive_getaddrinfo(emu: Any, c: Context) -> None:
    """``act.py getaddrinfo localhost N``: N ``getaddrinfo("localhost", NULL, &hints, &res)`` calls into libc
    that succeed (uprobe and uretprobe on libc's ``getaddrinfo``)."""
    host = user_string(emu, "localhost")
    for _ in range(N):
        emu.user_call("libc:getaddrinfo", host, 0, 0x7000_0000, 0x7000_1000, ret=0)


def _pick_gethostlatency(o: Output, c: Context) -> Any:
    """The workload's lookups: host, comm, the pid being the workload's; not time (the latency)."""
    return [{"host": e["host"], "comm": e["comm"], "workload": e["pid"] == o.pid}
            for e in o.events["events"] if e["pid"] == o.pid]


def _drive_readline(emu: Any, c: Context) -> None:
    """``act.py readline "echo MARK"``: an interactive bash (comm ``bash``, a child of the workload) whose
    readline returns the line, then ``exit`` (the uretprobe on bash's readline function, the one the tool's
    settings name)."""
    from bpfmux.emu.vm.runtime import Task

    memory = emu.vm.task.memory
    emu.vm.task = Task(pid=EMU_PID + 1, tgid=EMU_PID + 1, comm="bash", memory=memory)
    target = TOOLS["bashreadline"].settings(LiveProbe()).attach["printret"][0]
    for line in (f"echo {MARK}", "exit"):
        emu.user_call(target, 0, ret=user_string(emu, line))


def _pick_bashreadline(o: Output, c: Context) -> Any:
    """The lines bash read, in order (bashreadline keeps only comm ``bash``); not the pid (bash's own)."""
    return [e["str"] for e in o.events["events"]]


#: tool → its emulated workload and what is compared
COMPARED: dict[str, Emulated] = {
    "syscount": Emulated(_drive_getpid, _pick_syscount,
                         "data[39] (getpid): count, total_ns (0: latency off), comm; the workload's pid only "
                         "(filter_pid); other syscalls of the real process (interpreter start) are not the "
                         "workload's"),
    "biopattern": Emulated(_drive_dio, _pick_biopattern,
                           "counters[the loop device]: last_sector, bytes, sequential, random (filter_dev)"),
    "memleak": Emulated(_drive_malloc, _pick_memleak,
                        "allocs: the sizes of the outstanding allocations (min_size = max_size = 4242); "
                        "addresses, timestamps and stack ids are each run's own"),
    "opensnoop": Emulated(_drive_open, _pick_opensnoop,
                          "events of the workload's opens of its file (targ_tgid): flags, mode, uid, comm, path, "
                          "the pid being the workload's, ret being a descriptor; not ts, callers, the fd number"),
    "statsnoop": Emulated(_drive_stat, _pick_statsnoop,
                          "events of the workload's stats of its file (target_pid): type, ret, fd, dirfd, comm, "
                          "path, the pid being the workload's; not ts_ns"),
    "gethostlatency": Emulated(_drive_getaddrinfo, _pick_gethostlatency,
                               "events of the workload's getaddrinfo calls (uprobes on libc): host, comm, pid; "
                               "not time (latency)"),
    "bashreadline": Emulated(_drive_readline, _pick_bashreadline,
                             "events: the lines an interactive bash read (uretprobe on its readline), in order"),
    "syncsnoop": Emulated(_drive_sync, _pick_syncsnoop, "events with the workload's comm: comm, sys; not ts_us"),
    "bitesize": Emulated(_drive_dio_issue, _pick_bitesize,
                         "hists[comm bpfmux-dio]: every slot (request sizes; filter_dev on the loop device)"),
    "biosnoop": Emulated(_drive_dio_snoop, _pick_biosnoop,
                         "events on the loop device: comm, pid, sector, len, cmd_flags, dev, qdelta; not ts, delta "
                         "(the emulated requests carry the sectors, size and flags of the real reads)"),
    "biostacks": Emulated(_drive_dio_io, _pick_biostacks,
                          "hists: the total count (slots are latencies), and per key the pid being the "
                          "workload's, comm and device (filter_dev); not the kernel stack"),
    "biolatency": Emulated(_drive_dio_issue, _pick_hist_total("hists"),
                           "hists: the total count over all slots (the slots are latencies: time-valued, each "
                           "run's own); filter_dev on the loop device"),
}

_NO_DEVICE = ("the VM tier's guest has no block device (its root is the host's over 9p and an overlay; the "
              "kernel's loop, ext4, xfs, btrfs and md drivers are modules its initramfs does not load, "
              "tests/vm/vmtest.py GUEST_MODULES), so no workload there reaches its probes")
_SCHED = ("its probes are the scheduler's (sched_switch, sched_wakeup): which switches and wakeups a real process "
          "causes, and when, is the machine's, so no emulated sequence is equivalent to a real run")
_SAMPLE = ("a sampling perf event: how many samples land in a real run is the timer's, not the workload's")
_MACHINE = ("counts the whole machine's events (interrupts, softirqs, TCP state of every socket) with no filter a "
            "workload fixes exactly")

#: tool → where its maps are compared instead (the VM tier's guest runs the real side; the workloads and
#: what is compared are in ``corpus_guest_workloads.GUEST_WORKLOADS``)
IN_THE_GUEST: dict[str, str] = {
    t: f"test_corpus_guest.py::test_maps_equal_the_emulated_kernel[{t}]: {w.compared}"
    for t, w in GUEST_WORKLOADS.items()
}

#: tool → why its maps are not compared with an emulated run
NOT_COMPARED: dict[str, str] = {
    **{t: _NO_DEVICE + what for t, what in (
        ("biotop", ": it counts block I/O per process and disk"),
        ("fsdist", ": it times ext4 (btrfs, xfs, nfs, f2fs, bcachefs) file operations"),
        ("fsslower", ": it reports slow ext4 (btrfs, xfs, nfs, f2fs, bcachefs) file operations"),
        ("mdflush", ": it reports flushes of md arrays"))},
    "cachestat": ("no workload moves its counters on the guest's kernel (measured: 0, 0 and 0 after writing "
                  "and reading 1 MiB on a tmpfs and reading libc through the overlay on 9p): those file "
                  "systems reach the page cache through folio functions, not the add_to_page_cache_lru and "
                  "mark_page_accessed wrappers it probes, and dirty no buffer heads; a comparison of zeros "
                  "could not fail"),
    "readahead": ("no workload makes readahead on the guest's file systems (measured: an empty histogram after "
                  "reading 1 MiB on a tmpfs and libc through the overlay on 9p): tmpfs has no readahead, and "
                  "the guest has no block-backed file system (see biotop)"),
    "numamove": ("counts NUMA-balancing page migrations: the guest has one NUMA node (node0), so none happen "
                 "and its counters stay 0 whatever the workload; a comparison of zeros could not fail"),
    "slabratetop": ("counts the workload's slab allocations per cache: which caches a system call allocates "
                    "from (measured for a loopback TCP exchange: TCP, filp, pid, shared_policy_node, "
                    "lsm_inode_cache, request_sock_TCP, tw_sock_TCP) is the kernel's implementation, so an "
                    "emulated run would replay the guest's own allocation list instead of checking it"),
    "klockstat": ("times the mutexes and rw-semaphores the workload's system calls take: which locks the "
                  "kernel takes, through which stacks, is its implementation (an emulated run would replay "
                  "the guest's lock calls, not check them), and the times are the run's own"),
    **{t: _SCHED for t in ("cpudist", "offcputime", "runqlat", "runqslower", "wakeuptime")},
    **{t: _SAMPLE for t in ("profile", "runqlen", "cpufreq")},
    "llcstat": _SAMPLE + "; and it needs a hardware PMU this machine lacks",
    "hardirqs": _MACHINE, "softirqs": _MACHINE, "softirqslower": _MACHINE,
    "tcpstates": ("inet_sock_set_state of a real loopback connection: the states, ports and addresses would be "
                  "replayed from the kernel's TCP, not driven by the workload; not modelled"),
    "tcplife": ("reads struct sock fields at inet_sock_set_state (bytes acked/received, ports): an equivalent "
                "emulated socket would copy the real run's numbers, not check them"),
    "tcppktlat": "reads struct sock and sk_buff of real TCP packets at tcp_probe: not modelled in the emulator",
    "futexctn": ("counts contended futex waits: how many waits of the workload's threads contend is the "
                 "scheduler's"),
    "drsnoop": "direct reclaim is not provoked by a workload on a shared machine (its real run counts nothing)",
    "sigsnoop": ("calls the kfunc bpf_task_from_pid for the target's comm: the emulated kernel has no task table "
                 "and does not know the kfunc (EmulatorFault at run)"),
    "mountsnoop": ("reads the mount namespace through bpf_get_current_task (task->nsproxy->mnt_ns): the emulated "
                   "kernel has a task_struct only where a test builds one (Task.task_struct), and this comparison "
                   "does not build one yet"),
    "execsnoop": ("reads the parent's tgid through bpf_get_current_task (task->real_parent): the emulated kernel "
                  "has a task_struct only where a test builds one (Task.task_struct), and this comparison does "
                  "not build one yet"),
    "exitsnoop": ("reads the exiting task's task_struct (exit_code, real_parent, start_time) through "
                  "bpf_get_current_task: the emulated kernel has a task_struct only where a test builds one "
                  "(Task.task_struct), and this comparison does not build one yet"),
    "javagc": "needs a running JVM (USDT probes)",
}


def _emulated(tool_name: str, ctx: Context) -> Output:
    """Run ``tool_name``'s object in the emulated kernel with the settings of its live run and the
    emulated workload: its maps and events as ``bpfmux run --json`` prints them."""
    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator
    from bpfmux.emu.vm.memory import AddressSpace
    from bpfmux.emu.vm.runtime import Task
    from bpfmux.show.maps import read_map
    from bpfmux.uapi import MapType

    tool = TOOLS[tool_name]
    wl = WORKLOADS[tool_name]
    settings = tool.settings(LiveProbe())
    if tool_name == "memleak":
        memleak_user_mode(settings)
    fill = {"tmp": str(ctx.tmp), "loop": ctx.loop, "loop_dev": str(ctx.loop_dev)}
    for name, value in wl.overrides.items():
        settings.globals[name] = value.format(**fill) if isinstance(value, str) else value
    if wl.pid_var:
        settings.globals[wl.pid_var] = EMU_PID
    out = Output(pid=EMU_PID)
    with Emulator(btf=Btf.vmlinux()) as emu, started(emu, tool, settings) as st:
        assert st.started and st.links, (st.failed, st.attach_failed)
        events = EventReaders(tool_name, st.coll.maps, emulated=True)
        try:
            user = AddressSpace()
            emu.vm.task = Task(pid=EMU_PID, tgid=EMU_PID, comm=f"bpfmux-{wl.action[0]}", memory=user)
            COMPARED[tool_name].drive(emu, ctx)
            out.events.update(events.take())
        finally:
            events.close()
        for name, m in st.coll.maps.items():
            if int(m.type) not in (MapType.RINGBUF, MapType.PERF_EVENT_ARRAY, MapType.STACK_TRACE):
                out.maps[name] = _plain_items(read_map(name, m, sum_cpus=False))
    out.events.setdefault("events", [])
    return out


def user_string(emu: Any, text: str) -> int:
    """``text`` NUL-terminated in the current task's user memory; its address."""
    return int(emu.vm.task.memory.map(bytearray(text.encode() + b"\0"), "user string").base)


@pytest.mark.usefixtures("root_required")
@pytest.mark.parametrize("tool", sorted(COMPARED))
def test_emulated_maps_equal_this_kernels(tool: str, tmp_path: Path) -> None:
    real, ctx = run(tool, tmp_path)
    assert real.status in (0, 3), real.stderr
    WORKLOADS[tool].check(real, ctx)  # the real run did what the workload says
    emu = _emulated(tool, ctx)
    pick = COMPARED[tool].pick
    want = pick(real, ctx)
    assert want, (real.maps, real.events)  # the workload determined something
    assert pick(emu, ctx) == want


def test_every_tool_is_compared_or_says_why() -> None:
    tables = (set(COMPARED), set(IN_THE_GUEST), set(NOT_COMPARED))
    assert set.union(*tables) == set(tool_names()), set(tool_names()) - set.union(*tables)
    assert sum(map(len, tables)) == len(set.union(*tables)), "a tool in two tables"


@pytest.mark.parametrize("tool", sorted(GUEST_WORKLOADS))
def test_guest_workloads_emulated_show_what_the_workload_determines(tool: str) -> None:
    """The emulated half of each guest comparison, on this machine: the emulated workload leaves exactly
    what the real workload must leave (the guest test checks the real kernel against the same values)."""
    from bpfmux.btf import Btf

    assert run_emulated(tool) == GUEST_WORKLOADS[tool].expected(Btf.vmlinux())
