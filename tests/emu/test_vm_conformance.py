"""The bpf_conformance suite on every tier of the emulator's VM (checked,
fast, native: the native tier runs natively when llvmlite is installed,
else on the fast tier), and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpfmux.cli.main import main
from bpfmux.emu.vm import TIERS
from bpfmux.emu.vm.conformance import run_case
from bpfmux.isa.conformance import load_case, load_suite

CONFORMANCE_DIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "conformance"
CASES = load_suite(CONFORMANCE_DIR)


def test_suite_is_complete():
    assert len(CASES) == 313


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path):
    case = load_case(path)
    res = run_case(case)
    assert res.passed, res.reason()
    assert res.got == {tier: case.result for tier in TIERS}


def test_cli_reports_all_passed(capsys):
    assert main(["conformance", str(CONFORMANCE_DIR)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "313 passed, 0 failed"
    assert "checked tier: 313 of 313 passed" in out
    assert "fast tier: 313 of 313 passed" in out
    assert "native tier: 313 of 313 passed" in out


def test_cli_reports_a_failing_case(tmp_path, capsys):
    text = (CONFORMANCE_DIR / "add.data").read_text()
    (tmp_path / "add.data").write_text(text)
    (tmp_path / "wrong.data").write_text("-- asm\nmov %r0, 1\nexit\n-- result\n0x2\n")
    (tmp_path / "broken.data").write_text("-- asm\nfrobnicate %r0\n-- result\n0x0\n")
    assert main(["conformance", str(tmp_path), "--tier", "fast"]) == 1
    out = capsys.readouterr().out
    assert "FAIL wrong: fast: r0 = 0x1, expected 0x2" in out
    assert "FAIL broken: cannot assemble" in out
    assert out.strip().splitlines()[-1] == "1 passed, 2 failed"


def test_cli_rejects_a_missing_directory(tmp_path, capsys):
    assert main(["conformance", str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
