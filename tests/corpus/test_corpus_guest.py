"""The corpus tools built on kprobes and fentry, in the VM tier's guest (Debian's
6.12 kernel has both; this machine's kernel has neither): each object loaded
and attached as its tool does on that kernel, and the emulated verifier's
verdicts on the programs only a kernel with fentry judges.

Runs only inside the guest (``tests/vm/vmtest.py`` lists this file in
``GUEST_SELECTION``); elsewhere every test skips, saying so.
"""

from __future__ import annotations

import os

import pytest
from corpus_guest_workloads import GUEST_WORKLOADS, run_emulated, run_real, tmpfs
from corpus_harness import started, tool_names
from corpus_probes import LiveProbe
from corpus_tools import TOOLS
from corpus_verdicts import ACCEPT, NONE, disagreements, verdicts

IN_GUEST = os.environ.get("BPFMUX_VMTEST_GUEST") == "1"
pytestmark = [
    pytest.mark.skipif(not IN_GUEST, reason="runs only inside the VM tier's guest (tests/vm): the kprobe and "
                                            "fentry tools need a kernel with kprobes and fentry"),
    pytest.mark.usefixtures("corpus"),
]

#: what the guest kernel lacks that a tool's settings may still name (its functions exist on other kernels)
ABSENT = ("no kernel func", "no kernel function", "no such function", "does not exist", "No such file",
          "ENOENT", "not found")

GUEST_TOOLS = [t for t in tool_names() if not TOOLS[t].runs_here]

#: tool → program → why the guest's verifier and the emulated one disagree on a program both judge (an
#: accept against a reject, or rejections with different errnos); the test fails when a record goes stale
KNOWN_GUEST: dict[str, dict[str, str]] = {}


def _absent(why: str) -> bool:
    return any(text in why for text in ABSENT)


@pytest.mark.parametrize("tool", GUEST_TOOLS)
def test_kprobe_and_fentry_tools_start_in_the_guest(tool: str) -> None:
    """Everything the tool loads loads and everything it attaches attaches, but for functions this kernel does
    not have (a driver not loaded, a function renamed since)."""
    probe = LiveProbe()
    t = TOOLS[tool]
    with started(probe.kernel, t, t.settings(probe)) as st:
        unexplained = {n: w for n, w in {**st.failed, **st.attach_failed}.items() if not _absent(w)}
        assert not unexplained, unexplained
        assert st.links or t.needs or st.failed or st.attach_failed, f"{tool} attached nothing"


@pytest.mark.parametrize("tool", GUEST_TOOLS)
def test_fentry_verdicts_match_the_guest_kernel(tool: str) -> None:
    """The emulated verifier on the guest's BTF gives a verdict on every program the guest's verifier judges,
    the same (accept, or reject with the same errno), each program loaded on its own with the settings the tool chooses on the guest; the
    disagreements are exactly the recorded ones."""
    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator

    probe = LiveProbe()
    t = TOOLS[tool]
    settings = t.settings(probe)
    kernel_v = verdicts(probe.kernel, t, settings)
    with Emulator(btf=Btf.vmlinux()) as emu:
        emu_v = verdicts(emu, t, settings)
    got = disagreements(kernel_v, emu_v)
    got.update({n: f"kernel {v}; emulator gives no verdict: {emu_v.get(n, (NONE, 'not loaded'))[1]}"
                for n, (v, _) in kernel_v.items() if v != NONE and emu_v.get(n, (NONE, ""))[0] == NONE})
    assert set(got) == set(KNOWN_GUEST.get(tool, {})), got
    judged = [n for n, (v, _) in kernel_v.items() if v != NONE]
    assert judged and any(kernel_v[n][0] == ACCEPT for n in judged), kernel_v


@pytest.mark.parametrize("tool", sorted(GUEST_WORKLOADS))
def test_maps_equal_the_emulated_kernel(tool: str, tmp_path) -> None:
    """The tool on the guest's kernel, a forked child doing its workload (``corpus_guest_workloads``) on a
    tmpfs, shows exactly what the workload determines; the same object in the emulated kernel, with the
    same settings and the workload's calls of the probed functions, shows the same."""
    from bpfmux.btf import Btf

    with tmpfs(tmp_path / "fs") as d:
        real = run_real(tool, d)
    assert real == GUEST_WORKLOADS[tool].expected(Btf.vmlinux()), real
    assert run_emulated(tool) == real
