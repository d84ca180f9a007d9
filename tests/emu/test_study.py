"""The trampoline-policy study: measured rows, plots that render, data that
is exactly what bench/emu_dispatch.py measured, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bpfmux.cli.main import main
from bpfmux.emu import study
from bpfmux.errors import BpfmuxError, InvalidArgumentError

ROOT = Path(__file__).resolve().parents[2]
EMU_DISPATCH = ROOT / "bench" / "results" / "emu_dispatch.json"

pytest.importorskip("matplotlib", reason="the plots need matplotlib (pip install bpfmux[study])")


@pytest.fixture(scope="module")
def small():
    return study.measure(functions=40, counts=[1, 5, 20], calls=5)


def test_measure_rows(small):
    assert set(small["results"]) == {"clone", "filter", "per-function"}
    for policy, res in small["results"].items():
        rows = res["rows"]
        assert [r["own_functions"] for r in rows] == [1, 5, 20]
        assert all(r["us_plain"] > 0 and r["us_own"] > 0 for r in rows)
        assert res["detach_s"] >= 0
        # what the policies are known to do: one dispatch step per call, except filter's compare chain
        steps = [r["steps_plain"] for r in rows]
        if policy == "filter":
            assert steps == [2, 6, 21]
        else:
            assert steps == [1, 1, 1]
    clone = small["results"]["clone"]["rows"]
    per_fn = small["results"]["per-function"]["rows"]
    assert clone[-1]["grace_periods"] == 0  # clone never frees a shared image
    assert per_fn[-1]["images_built"] > clone[-1]["images_built"]


def test_plots_render_the_rows(small, tmp_path):
    paths = study.draw(small, tmp_path)
    assert [p.name for p in paths] == ["study.png", "study.svg"]
    assert all(p.stat().st_size > 10_000 for p in paths)
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in paths[1].read_bytes()[:1000]
    s = study.series(small)
    for policy, res in small["results"].items():
        for metric in study.METRICS:
            assert s[metric][policy] == [(r["own_functions"], r[metric]) for r in res["rows"]]


@pytest.mark.skipif(not EMU_DISPATCH.exists(), reason="bench/results/emu_dispatch.json is not in this checkout")
def test_the_data_behind_the_plots_is_emu_dispatchs(tmp_path):
    raw = json.loads(EMU_DISPATCH.read_text())
    data = study.load(EMU_DISPATCH)
    s = study.series(data)
    for policy, res in raw["results"].items():
        for metric in ("us_plain", "us_own", "setup_s", "images_built", "image_bytes"):
            assert s[metric][policy] == [(r["own_functions"], r[metric]) for r in res["rows"]]
    assert all(p.stat().st_size > 0 for p in study.draw(data, tmp_path, stem="emu_dispatch"))


def test_reading_and_terminal(small):
    from io import StringIO

    from rich.console import Console

    text = study.reading(small)
    assert "clone:" in text and "dispatch steps" in text
    buf = StringIO()
    study.terminal(small, Console(file=buf, width=100))
    assert "dispatch steps per call" in buf.getvalue() and "█" in buf.getvalue()


def test_bad_input():
    with pytest.raises(InvalidArgumentError):
        study.measure(functions=10, counts=[5, 1])
    with pytest.raises(InvalidArgumentError):
        study.measure(functions=10, counts=[1, 11])
    with pytest.raises(InvalidArgumentError):
        study.measure(functions=10, counts=[1], policies=["nope"])


def test_cli(tmp_path, capsys):
    assert main(["study", "--functions", "20", "--counts", "1,5", "--calls", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "clone:" in out and "wrote" in out
    assert json.loads((tmp_path / "study.json").read_text())["counts"] == [1, 5]
    assert (tmp_path / "study.png").stat().st_size > 0 and (tmp_path / "study.svg").stat().st_size > 0
    assert main(["study", "--from", str(tmp_path / "study.json"), "--out", str(tmp_path / "again"), "--no-plots"]) == 0
    assert not (tmp_path / "again" / "study.png").exists()
    assert main(["study", "--counts", "1,x"]) == 2
    assert "not a comma-separated list" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("[]")
    assert main(["study", "--from", str(tmp_path / "bad.json")]) == 1
    with pytest.raises(BpfmuxError):
        study.load(tmp_path / "bad.json")
