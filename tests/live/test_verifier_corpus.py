"""The invalid-program corpus against the running kernel, and the helper table.

For every case both the kernel (``BPF_PROG_LOAD`` through
:mod:`bpfmux.live.sys`) and bpfmux's verifier must reject the program with
the case's errno, each log naming the reason. The helper-per-program-type
table bundled with bpfmux must match what this kernel allows.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "verifier"
sys.path.insert(0, str(DATA))

from verifier_runner import CASES, kernel_verdict, ours  # noqa: E402

pytestmark = pytest.mark.live


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kernel_and_bpfmux_reject(root_required, case) -> None:
    k = kernel_verdict(case)
    assert k is not None, f"the kernel accepted {case.name}: the corpus entry is wrong"
    assert k.errno == case.errno, k.log
    assert case.kernel_fragment in k.log, k.log
    o = ours(case)
    assert o is not None, f"bpfmux accepted {case.name}; kernel said: {k.log.strip().splitlines()[-2:]}"
    assert o.errno == k.errno, f"ours: {o}\nkernel: {k.log}"
    assert case.why in o.log, o.log


def test_helper_table_matches_kernel(root_required) -> None:
    from helper_probe import probe

    bundled = json.loads(resources.files("bpfmux").joinpath("data/verifier_helper_types.json").read_text())["types"]
    live = probe()
    for name, ids in live.items():
        assert sorted(bundled.get(name, [])) == ids, f"{name}: regenerate with tests/data/verifier/helper_probe.py"
