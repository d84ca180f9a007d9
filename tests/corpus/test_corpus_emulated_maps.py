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

Tools whose probes the emulated kernel cannot drive deterministically or
equivalently are listed in :data:`NOT_COMPARED` with the reason; a test
checks that every corpus tool is in one of the two tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from corpus_harness import started, tool_names
from corpus_probes import LiveProbe
from corpus_tools import TOOLS
from corpus_workloads import WORKLOADS, Context, N, memleak_user_mode, run

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
    :ivar pick: map contents the workload determines, from one side's maps (``maps``, ``pid``, context).
    :ivar compared: what :attr:`pick` keeps, in words.
    """

    drive: Callable[[Any, Context], None]
    pick: Callable[[dict[str, list[Any]], int, Context], Any]
    compared: str


# --- the emulated workloads -----------------------------------------------------------------------------

def _drive_getpid(emu: Any, c: Context) -> None:
    for _ in range(N):
        emu.syscall("getpid", ret=EMU_PID)


def kstruct(emu: Any, name: str, values: dict[str, int]) -> int:
    """A ``struct name`` of the emulated kernel's BTF in its memory, zeroed but for ``values`` (dotted field
    paths → integers, pointers included); its address."""
    from bpfmux.btf.layout import member, sizeof

    t = emu.btf.find(name, "struct")
    buf = bytearray(sizeof(emu.btf, t))
    for path, value in values.items():
        f = member(emu.btf, t, path)
        assert not f.is_bitfield, path
        buf[f.offset:f.offset + f.size] = (value & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little")
    return emu.alloc(bytes(buf), f"struct {name}")


def _disk_request(emu: Any, c: Context, nbytes: int) -> int:
    """A ``struct request`` of ``nbytes`` on the real run's loop device (``rq->q->disk`` with its major and
    first minor, ``rq->part``; what ``get_disk`` and the tools' device filters read)."""
    major, minor = c.loop_dev >> 20, c.loop_dev & ((1 << 20) - 1)
    disk = kstruct(emu, "gendisk", {"major": major, "first_minor": minor})
    queue = kstruct(emu, "request_queue", {"disk": disk})
    return kstruct(emu, "request", {"q": queue, "__data_len": nbytes, "__sector": 0})


def _drive_dio_issue(emu: Any, c: Context) -> None:
    """The N 4 KiB requests of ``act.py dio`` issued and completed, one after the other, 100 us each
    (``block_rq_issue``, ``block_rq_complete``: raw tracepoints, ``TP_PROTO(rq)`` and ``(rq, error,
    nr_bytes)``)."""
    for _ in range(N):
        rq = _disk_request(emu, c, 4096)
        emu.fire("block:block_rq_issue", rq)
        emu.vm.clock.advance(100_000)
        emu.fire("block:block_rq_complete", rq, 0, 4096)


def _pick_bitesize(maps: dict[str, list[Any]], pid: int, c: Context) -> Any:
    return {k["comm"]: v for k, v in maps["hists"] if k["comm"] == "bpfmux-dio"}


def _pick_hist_total(name: str) -> Callable[[dict[str, list[Any]], int, Context], Any]:
    def pick(maps: dict[str, list[Any]], pid: int, c: Context) -> Any:
        return {"total": sum(_total(v) for _, v in maps[name])}

    return pick


def _total(v: Any) -> int:
    if isinstance(v, dict) and "slots" in v:
        return sum(v["slots"])
    if isinstance(v, list):
        return sum(_total(x) for x in v)
    return v if isinstance(v, int) else 0


def _pick_syscount(maps: dict[str, list[Any]], pid: int, c: Context) -> Any:
    return {k: _sum_cpus(v) for k, v in maps["data"] if k == 39}


def _drive_dio(emu: Any, c: Context) -> None:
    """What ``act.py dio LOOP N`` completes on the loop device: N requests of 8 sectors at consecutive offsets
    (``block_rq_complete``; biopattern reads ``dev``, ``sector``, ``nr_sector``)."""
    for i in range(N):
        emu.fire("block:block_rq_complete", dev=c.loop_dev, sector=i * 8, nr_sector=8, error=0)


def _pick_biopattern(maps: dict[str, list[Any]], pid: int, c: Context) -> Any:
    return {k: v for k, v in maps["counters"] if k == c.loop_dev}


def _drive_malloc(emu: Any, c: Context) -> None:
    """What ``act.py malloc 4242 N`` does through libc: N ``malloc(4242)`` returning distinct addresses, not
    freed."""
    for i in range(N):
        emu.user_call("libc:malloc", 4242, ret=0x5555_0000_0000 + i * 0x2000)


def _pick_memleak(maps: dict[str, list[Any]], pid: int, c: Context) -> Any:
    """The outstanding allocations' sizes (addresses, timestamps and stack ids are the run's own), and the
    per-stack totals summed over stacks."""
    sizes = sorted(v["size"] for _, v in maps["allocs"])
    return {"sizes": sizes}


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
    "bitesize": Emulated(_drive_dio_issue, _pick_bitesize,
                         "hists[comm bpfmux-dio]: every slot (request sizes; filter_dev on the loop device)"),
    "biolatency": Emulated(_drive_dio_issue, _pick_hist_total("hists"),
                           "hists: the total count over all slots (the slots are latencies: time-valued, each "
                           "run's own); filter_dev on the loop device"),
}

#: tool → why its maps are not compared with an emulated run
NOT_COMPARED: dict[str, str] = {}


def _emulated_maps(tool_name: str, ctx: Context) -> dict[str, list[Any]]:
    """Run ``tool_name``'s object in the emulated kernel with the settings of its live run and the
    emulated workload; its maps as ``bpfmux run --json`` prints them."""
    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator
    from bpfmux.emu.vm.runtime import Task
    from bpfmux.show.maps import read_map

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
    with Emulator(btf=Btf.vmlinux()) as emu, started(emu, tool, settings) as st:
        assert st.started and st.links, (st.failed, st.attach_failed)
        emu.vm.task = Task(pid=EMU_PID, tgid=EMU_PID, comm=f"bpfmux-{wl.action[0]}")
        COMPARED[tool_name].drive(emu, ctx)
        return {name: _plain_items(read_map(name, m, sum_cpus=False)) for name, m in st.coll.maps.items()
                if name in _map_names(tool_name)}


def _map_names(tool_name: str) -> set[str]:
    return {"syscount": {"data"}, "biopattern": {"counters"}, "memleak": {"allocs"}, "bitesize": {"hists"},
            "biolatency": {"hists"}}[tool_name]


@pytest.mark.usefixtures("root_required")
@pytest.mark.parametrize("tool", sorted(COMPARED))
def test_emulated_maps_equal_this_kernels(tool: str, tmp_path: Path) -> None:
    real, ctx = run(tool, tmp_path)
    assert real.status in (0, 3), real.stderr
    WORKLOADS[tool].check(real, ctx)  # the real run did what the workload says
    emu = _emulated_maps(tool, ctx)
    pick = COMPARED[tool].pick
    want = pick(real.maps, real.pid, ctx)
    assert want, real.maps  # the workload determined something
    assert pick(emu, EMU_PID, ctx) == want


def test_every_tool_is_compared_or_says_why() -> None:
    assert set(COMPARED) | set(NOT_COMPARED) == set(tool_names()), set(tool_names()) - set(COMPARED) - set(
        NOT_COMPARED)
    assert not set(COMPARED) & set(NOT_COMPARED)
