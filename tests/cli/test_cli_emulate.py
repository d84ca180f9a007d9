"""``bpfmux emulate``: objects in the emulated kernel from the command line (no root needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BPF = ROOT / "tests" / "bpf"


def bpfmux(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bpfmux.cli.main", *args], capture_output=True, text=True,
                          timeout=120, input=input, cwd=ROOT)


@pytest.mark.parametrize("policy,image", [("clone", "multi"), ("filter", "filter"), ("per-function", "per-function")])
def test_show_multi_object(policy, image):
    r = bpfmux("emulate", str(BPF / "multi.bpf.o"), "--btf", "none", "--policy", policy, "--show", "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    sites = {s["function"]: s for s in rep["sites"]}
    assert sites["bpf_fentry_test1"]["image"] == image
    assert sites["bpf_fentry_test1"]["programs"] == ["mainline_entry", "seed_entry", "mainline_exit", "seed_exit"]
    if policy == "clone":
        assert sites["bpf_fentry_test1"]["shared_with"] == len(sites)
    assert rep["costs"]["images_built"] >= 1
    # test_run called every bpf_fentry_test function once: test6 saw arg1 16 and returned 111
    exits = rep["maps"]["seed_exit_by_ip"]
    assert {"calls": 1, "arg1": 16, "ret": 111} in exits.values()
    assert all(p["runs"] >= 9 for p in rep["programs"].values())


def test_replay_call_stream(tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text('# a recorded stream\n{"call": "bpf_fentry_test2", "args": [40, 2], "repeat": 3}\n'
                     '{"call": "bpf_fentry_test1", "args": [9]}\n')
    r = bpfmux("emulate", str(BPF / "fentry_test.bpf.o"), "--btf", "none", "--calls", str(calls), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["events"] == 4
    bss = rep["maps"][".bss"]
    assert bss["entry_calls"][:2] == [1, 3]
    assert bss["entry_args"][1][:2] == [40, 2] and bss["entry_args"][0][0] == 9


def test_workload_and_text_output():
    r = bpfmux("emulate", str(BPF / "modify_return.bpf.o"), "--btf", "none", "--workload", "test_run*2", "--show")
    assert r.returncode == 0, r.stderr
    assert "mr_modret" in r.stdout and "standard" in r.stdout
    assert '"exit_seq": 6' in r.stdout.replace("\n", "")  # two test runs of three programs each


@pytest.mark.parametrize("stream,needle", [
    ('{"call": "bpf_fentry_test1", "args": [1]}\nnot json\n', "line 2: not JSON"),
    ('{"call": "no_such_function", "args": []}\n', "no_such_function"),
    ('{"call": "bpf_fentry_test1", "args": [1, 2]}\n', "takes 1 arguments"),
])
def test_bad_streams_give_one_line(tmp_path, stream, needle):
    calls = tmp_path / "bad.jsonl"
    calls.write_text(stream)
    r = bpfmux("emulate", str(BPF / "fentry_test.bpf.o"), "--btf", "none", "--calls", str(calls))
    assert r.returncode == 1
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
