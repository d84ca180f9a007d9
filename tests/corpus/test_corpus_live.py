"""Every corpus object loaded and attached on this kernel the way its tool does
(settings from ``corpus_tools``), and every tool that runs here shown doing
exactly what a small workload did (``corpus_workloads``)."""

from __future__ import annotations

import os

import pytest
from corpus_harness import started, tool_names
from corpus_probes import LiveProbe
from corpus_tools import TOOLS
from corpus_workloads import WORKLOADS, run

pytestmark = pytest.mark.usefixtures("root_required", "corpus")

#: why a program may fail to load or attach on a kernel (the kernel's own lack, not bpfmux's)
KERNEL_LACKS = {
    "fentry": "does not support fentry programs",
    "fexit": "does not support fexit programs",
    "kprobe": "has no kprobe PMU",
    "hardware": "no hardware PMU",
}


def _probe() -> LiveProbe:
    global _PROBE
    if _PROBE is None:
        _PROBE = LiveProbe()
    return _PROBE


_PROBE: LiveProbe | None = None


def _lacks(why: str) -> bool:
    return any(text in why for text in KERNEL_LACKS.values())


def _needs_hw_pmu(tool: str) -> bool:
    return any(pe.hardware for pe in TOOLS[tool].perf.values())


@pytest.mark.parametrize("tool", tool_names())
def test_object_loads_and_attaches_as_its_tool(tool: str) -> None:
    """Everything the tool loads loads and everything it attaches attaches, unless this kernel lacks the
    program's kind (fentry, kprobes, a hardware PMU); a tool that needs nothing this kernel lacks starts."""
    probe = _probe()
    t = TOOLS[tool]
    with started(probe.kernel, t, t.settings(probe)) as st:
        unexplained = {n: w for n, w in {**st.failed, **st.attach_failed}.items() if not _lacks(w)}
        assert not unexplained, unexplained
        hw_missing = _needs_hw_pmu(tool) and not os.path.exists("/sys/bus/event_source/devices/cpu")
        if t.runs_here and not hw_missing:
            assert st.started, (st.failed, st.attach_failed)
            assert st.links or t.needs, f"{tool} attached nothing"


@pytest.mark.parametrize("tool", sorted(WORKLOADS))
def test_workload_shows_in_events_or_maps(tool: str, tmp_path) -> None:
    out, ctx = run(tool, tmp_path)
    assert out.status in (0, 3), out.stderr
    WORKLOADS[tool].check(out, ctx)


def test_every_tool_that_runs_here_has_a_workload() -> None:
    """Tools this kernel runs without a workload say why (a JVM, functions to name, a hardware PMU, cpufreq)."""
    without = {t for t in tool_names() if TOOLS[t].runs_here and t not in WORKLOADS}
    assert without == {"javagc", "llcstat"}, without
