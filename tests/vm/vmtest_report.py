"""pytest plugin loaded inside the guest (``-p vmtest_report``): writes every test's outcome as JSON.

The host side (tests/vm/test_vmtest.py) reads ``results.json`` from the result
share and reports each in-guest test as a host test with the same outcome.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_results: dict[str, dict[str, str]] = {}


def _text(report: pytest.TestReport | pytest.CollectReport) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longreprtext or "")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Fold setup/call/teardown into one outcome per test (the worst wins; a skip keeps its reason)."""
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.failed:
        outcome = "failed" if report.when == "call" else "error"
        if entry["outcome"] not in ("failed", "error"):
            entry.update(outcome=outcome, message=f"[{report.when}] {_text(report)}")
    elif report.skipped and entry["outcome"] == "passed":
        entry.update(outcome="skipped", message=_text(report))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _results[report.nodeid or "<collection>"] = {"outcome": "error", "message": _text(report)}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    share = os.environ.get("BPFMUX_VMTEST_SHARE")
    if share and Path(share).is_dir():
        data = {"exitstatus": int(exitstatus), "results": _results}
        Path(share, "results.json").write_text(json.dumps(data, indent=1))
