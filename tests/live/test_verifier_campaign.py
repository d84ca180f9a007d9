"""The differential campaign (``tests/data/verifier/campaign.py``) at a small
count with fixed seeds: bpfmux's verifier and the running kernel's on valid
programs of every kind and on invalid ones of every defect.

* valid programs: each the kernel accepts, bpfmux accepts; none the kernel
  rejects does bpfmux accept; both VM tiers compute what the kernel computed;
* invalid programs: bpfmux accepts none the kernel rejects, rejects none the
  kernel accepts, and rejects with the kernel's errno.

The full run (tens of thousands of programs) is the script's, by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data" / "verifier"))

from campaign import run_case

from bpfmux.emu.vm.progen_cases import KINDS, valid_case
from bpfmux.emu.vm.progen_defects import DEFECTS, invalid_case

pytestmark = pytest.mark.live

VALID_PER_KIND = 30
INVALID_PER_DEFECT = 12


def _describe(o) -> str:
    return (f"{o.kind}/{o.defect or '-'} seed {o.seed}{' (dead code)' if o.dead else ''}: kernel errno "
            f"{o.kernel_errno} {o.kernel_msg!r}; bpfmux errno {o.ours_errno} {o.ours_msg!r}")


@pytest.mark.parametrize("kind", KINDS)
def test_valid_programs_agree(root_required: None, kind: str) -> None:
    for k in range(VALID_PER_KIND):
        o = run_case(valid_case(7_000 + 131 * k, kind))
        if o.kernel_errno == 0:
            assert o.ours_errno == 0, _describe(o)
        else:
            assert o.ours_errno != 0, _describe(o)
        assert not o.values.get("checked"), f"{_describe(o)}: checked tier: {o.values['checked']}"
        assert not o.values.get("fast"), f"{_describe(o)}: fast tier: {o.values['fast']}"


@pytest.mark.parametrize("defect", DEFECTS)
def test_invalid_programs_agree(root_required: None, defect: str) -> None:
    for k in range(INVALID_PER_DEFECT):
        seed = 9_000 + 97 * k
        base = valid_case(seed, "callbacks" if defect in ("callback_ret", "dead_callback", "no_func_info")
                          else KINDS[k % len(KINDS)])
        o = run_case(invalid_case(base, seed, defect), values=False)
        if o.kernel_errno:
            assert o.ours_errno, f"bpfmux accepts what the kernel rejects: {_describe(o)}"
            assert o.ours_errno == o.kernel_errno, _describe(o)
        else:
            assert o.ours_errno == 0, f"bpfmux rejects what the kernel accepts: {_describe(o)}"
