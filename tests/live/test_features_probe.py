"""Feature probes against this kernel, cross-checked with bpftool where it
probes the same thing, and the ``bpfmux features`` command."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from bpfmux.cli.main import main
from bpfmux.errors import NotSupportedError
from bpfmux.live import features as feat
from bpfmux.uapi import AttachType, HelperId, LinkType, MapType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> feat.Features:
    return feat.Features(tmp_path_factory.mktemp("features"))


@pytest.fixture(scope="module")
def bpftool() -> dict:
    if not shutil.which("bpftool"):
        pytest.skip("bpftool is not installed (it is on the project machines: apt-get install bpftool)")
    out = subprocess.run(["bpftool", "feature", "probe", "kernel", "-j"], capture_output=True, check=True).stdout
    return json.loads(out)


def test_program_types_agree_with_bpftool(probes: feat.Features, bpftool: dict) -> None:
    theirs = bpftool["program_types"]
    compared = 0
    for t in ProgType:
        key = f"have_{t.name.lower()}_prog_type"
        # bpftool loads tracing programs without an attach BTF id, so it always says "no"; we load tp_btf
        if key not in theirs or t == ProgType.TRACING:
            continue
        assert probes.prog_type(t).supported == theirs[key], (t.name, probes.prog_type(t))
        compared += 1
    assert compared >= 25
    assert probes.prog_type(ProgType.TRACING).supported  # tp_btf loads on this kernel


def test_map_types_agree_with_bpftool(probes: feat.Features, bpftool: dict) -> None:
    theirs = bpftool["map_types"]
    compared = 0
    for t in MapType:
        key = f"have_{t.name.lower()}_map_type"
        if key in theirs:
            assert probes.map_type(t).supported == theirs[key], (t.name, probes.map_type(t))
            compared += 1
    assert compared >= 25


def test_helpers_per_program_type(probes: feat.Features) -> None:
    kprobe = set(probes.helpers(ProgType.KPROBE))
    assert {HelperId.get_current_pid_tgid, HelperId.ringbuf_output, HelperId.get_func_ip} <= kprobe
    assert HelperId.skb_store_bytes not in kprobe and HelperId.xdp_adjust_head not in kprobe
    assert probes.helper(ProgType.XDP, HelperId.xdp_adjust_head).supported
    assert not probes.helper(ProgType.SOCKET_FILTER, HelperId.xdp_adjust_head).supported
    assert not probes.helper(ProgType.KPROBE, 100000).supported  # no such helper


def test_link_types_match_this_kernel(probes: feat.Features) -> None:
    for t in (LinkType.RAW_TRACEPOINT, LinkType.PERF_EVENT, LinkType.UPROBE_MULTI):
        p = probes.link_type(t)
        assert p.supported and p.method == "link", (t, p)
    # the brief's facts about this VM: no kprobe_multi, no fentry trampolines, no tracing_multi (6.18)
    assert not probes.link_type(LinkType.KPROBE_MULTI).supported
    assert not probes.link_type(LinkType.TRACING).supported
    assert not probes.link_type(LinkType.TRACING_MULTI).supported
    assert not probes.attach_type(AttachType.TRACE_FENTRY).supported
    assert probes.attach_type(AttachType.TRACE_UPROBE_MULTI).supported


def test_require_raises_not_supported_naming_the_feature(probes: feat.Features) -> None:
    probes.require("link_type", LinkType.RAW_TRACEPOINT)
    with pytest.raises(NotSupportedError) as exc:
        probes.require("link_type", LinkType.KPROBE_MULTI)
    assert exc.value.feature == "kprobe_multi" and "not supported" in str(exc.value)
    with pytest.raises(NotSupportedError):
        probes.require("helper", HelperId.xdp_adjust_head, ProgType.KPROBE)


def test_results_are_cached_on_disk(tmp_path, monkeypatch) -> None:
    first = feat.Features(tmp_path)
    answer = first.prog_type(ProgType.KPROBE)
    first.save()

    def refuse(*a, **k):
        raise AssertionError("a cached probe must not load anything")

    monkeypatch.setattr(feat._sys, "prog_load", refuse)
    second = feat.Features(tmp_path)
    assert second.prog_type(ProgType.KPROBE) == answer


def test_a_new_probe_reaches_the_disk_cache_without_save(tmp_path, monkeypatch) -> None:
    # each run of a tool probes what it needs: the next run must find it on disk (a link probe costs ~30 ms)
    answer = feat.Features(tmp_path).link_type(LinkType.RAW_TRACEPOINT)

    def refuse(*a, **k):
        raise AssertionError("a cached probe must not load anything")

    monkeypatch.setattr(feat._sys, "prog_load", refuse)
    assert feat.Features(tmp_path).link_type(LinkType.RAW_TRACEPOINT) == answer


def test_cli_json(capsys) -> None:
    assert main(["features", "--json", "--only", "map_types", "--helpers", "raw_tracepoint"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"map_types", "helpers"}
    assert data["map_types"]["ringbuf"]["supported"] is True
    assert "ringbuf_output" in data["helpers"]["raw_tracepoint"]["detail"].split()


def test_cli_table(capsys) -> None:
    assert main(["features", "--only", "link_types"]) == 0
    out = capsys.readouterr().out
    assert "link types" in out and "uprobe_multi" in out and "kprobe_multi" in out


def test_cli_unknown_program_type(capsys) -> None:
    assert main(["features", "--helpers", "nonsense"]) == 2  # a usage error
    assert "unknown program type" in capsys.readouterr().err
