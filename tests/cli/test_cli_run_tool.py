"""``bpfmux run`` on a tool-like object (tests/bpf/run_tool.bpf.o): settings
before load, one twin per hook, events typed from DWARF, histograms, sorted
maps, intervals, and programs that fail to load or attach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("root_required")

ROOT = Path(__file__).resolve().parents[2]
OBJ = str(ROOT / "tests" / "bpf" / "run_tool.bpf.o")
GETPID = f"{sys.executable} {ROOT / 'examples' / 'workloads' / 'getpid.py'}"
N = 5


def bpfmux(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "bpfmux.cli.main", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


def records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_one_twin_runs_events_from_dwarf_and_globals() -> None:
    r = bpfmux("run", OBJ, "--json", "--pid-var", "target_tgid", "-c", f"{GETPID} {N}")
    assert r.returncode == 0, r.stderr
    recs = records(r.stdout)
    bss = dict(next(x for x in recs if x.get("map") == ".bss")["items"])
    assert (bss["seen_by_tp_btf"], bss["seen_by_raw_tp"]) == (N, 0)  # tp_btf preferred, raw_tp left out
    assert "enter_btf: attached; its twin enter_raw on the same hook is not" in r.stderr
    events = [x["event"] for x in recs if x.get("map") == "events"]
    assert [e["seq"] for e in events] == list(range(N)) and all(e["nr"] == 39 for e in events)
    assert {e["comm"] for e in events} == {"python3"}  # struct dwarf_event: only the object's DWARF has it
    hists = next(x for x in recs if x.get("map") == "hists")["items"]
    assert [v["slots"][2] for _, v in hists] == [N]


def test_all_twins_and_settings() -> None:
    r = bpfmux("run", OBJ, "--json", "--all-twins", "--set", "slot=5", "--pid-var", "target_tgid", "-c",
               f"{GETPID} {N}")
    assert r.returncode == 0, r.stderr
    bss = dict(next(x for x in records(r.stdout) if x.get("map") == ".bss")["items"])
    assert (bss["seen_by_tp_btf"], bss["seen_by_raw_tp"]) == (N, N)
    assert bss["global_hist"]["slots"][5] == 2 * N


def test_histograms_drawn_and_maps_sorted() -> None:
    r = bpfmux("run", OBJ, "--hist", "hists=linear:10", "--pid-var", "target_tgid", "-c", f"{GETPID} {N}")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "[20, 30)" in out  # slot 2 of a linear histogram, step 10
    assert "global_hist:" in out and "[4, 8)" in out  # the .bss histogram stays log2
    line = next(x for x in out.splitlines() if x.strip().startswith("[4, 8)"))
    assert line.rstrip().endswith("|") and f" {N} |" in line and "@" in line


def test_skip_and_strict() -> None:
    r = bpfmux("run", OBJ, "--skip", "enter_btf", "--json", "--pid-var", "target_tgid", "-c", f"{GETPID} 2")
    assert r.returncode == 0, r.stderr
    bss = dict(next(x for x in records(r.stdout) if x.get("map") == ".bss")["items"])
    assert (bss["seen_by_tp_btf"], bss["seen_by_raw_tp"]) == (0, 2)
    rejected = str(ROOT / "tests" / "bpf" / "rejected.bpf.o")
    from bpfmux.obj import load_object

    names = list(load_object(rejected).programs)
    args = [a for n in names for a in ("--program", n)]
    r = bpfmux("run", rejected, *args, "-d", "0.2")
    assert r.returncode == 3, r.stderr  # ran, but one program did not load: said on stderr
    assert "not loaded:" in r.stderr
    r = bpfmux("run", rejected, *args, "--strict", "-d", "0.2")
    assert r.returncode == 1 and "--strict" in r.stderr and r.stderr.strip().splitlines()[-1].startswith("bpfmux")


def test_interval_counts() -> None:
    r = bpfmux("run", OBJ, "--json", "-i", "0.3", "-d", "1.0")
    assert r.returncode == 0, r.stderr
    ticks = {x["interval"] for x in records(r.stdout) if "interval" in x}
    assert len(ticks) >= 2


@pytest.mark.parametrize("args,needle", [
    (["--set", "target_tgid=abc"], "is not an integer"),
    (["--set", "nosuch=1"], "no read-only global"),
    (["--map-size", "nosuch=4"], "no map 'nosuch'"),
    (["--skip", "nosuch"], "no program 'nosuch'"),
    (["--event-type", "nosuch"], "--event-type nosuch"),
])
def test_setting_errors_are_one_line(args: list[str], needle: str) -> None:
    r = bpfmux("run", OBJ, *args, "-d", "0")
    assert r.returncode == 1 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--map-size", "hists=0"], "positive integer"),
    (["--hist", "hists=cubic"], "not a histogram kind"),
    (["--pid", "command"], "--pid command needs -c"),
    (["-i", "0"], "-i needs"),
])
def test_usage_errors_exit_2(args: list[str], needle: str) -> None:
    r = bpfmux("run", OBJ, *args, "-d", "0")
    assert r.returncode == 2 and needle in r.stderr, r.stderr

