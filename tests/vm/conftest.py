"""VM tier fixtures: boot the guest once per session and report its wall time."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import vmtest

_runs: list[vmtest.VmResult] = []


@pytest.fixture(scope="session")
def guest_run() -> vmtest.VmResult:
    """Boot the guest once and run the in-guest selection (``vmtest.GUEST_SELECTION``) there."""
    reason = vmtest.skip_reason()
    if reason:
        pytest.skip(f"VM tier not run: {reason}")
    timeout = float(os.environ.get("BPFMUX_VMTEST_TIMEOUT", vmtest.DEFAULT_TIMEOUT))
    try:
        result = vmtest.run_in_vm(vmtest.guest_pytest_argv(), timeout=timeout)
    except vmtest.VmUnavailable as err:
        pytest.skip(f"VM tier not run: {err}")
    _runs.append(result)
    return result


@pytest.fixture(scope="session")
def guest_results(guest_run: vmtest.VmResult) -> dict[str, dict[str, str]]:
    """Per-test outcomes the in-guest pytest wrote (empty when the guest wrote none)."""
    raw = guest_run.files.get("results.json")
    return json.loads(raw)["results"] if raw else {}


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Report the VM tier's figures (the issue asks for its wall time in CI's output)."""
    for run in _runs:
        counts: dict[str, int] = {}
        raw = run.files.get("results.json")
        for entry in (json.loads(raw)["results"] if raw else {}).values():
            counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
        boot = f"{run.boot_time:.1f}s" if run.boot_time is not None else "never"
        tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no results"
        terminalreporter.write_line(
            f"vmtest: guest kernel {run.kernel.release} ({run.kernel.package}={run.kernel.version}); "
            f"boot to command {boot}; wall {run.wall_time:.1f}s; exit status {run.exit_status}; in guest: {tally}"
        )
        if "features.json" in run.files:
            links = json.loads(run.files["features.json"]).get("link_types", {})
            have = sorted(k for k, v in links.items() if v.get("supported"))
            terminalreporter.write_line(f"vmtest: guest link types supported (bpfmux feature probes): {', '.join(have)}")
        if "features.txt" in run.files:
            for line in run.files["features.txt"].decode(errors="replace").splitlines():
                if any(f"│ {name} " in line for name in ("kprobe_multi", "tracing", "trace_fentry")):
                    terminalreporter.write_line(f"vmtest: guest `bpfmux features`: {line.strip()}")
        log = Path(vmtest.cache_dir()) / "last-run.log"
        log.write_text(run.console)
