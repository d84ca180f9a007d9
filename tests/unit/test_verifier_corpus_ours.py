"""bpfmux's verifier rejects every program of the invalid-program corpus, for the right reason.

The same corpus is checked against the running kernel by
``tests/live/test_verifier_corpus.py``; the slow complexity-limit case runs
only there (it interprets a million instructions).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data" / "verifier"))

from verifier_runner import CASES, ours

FAST = [c for c in CASES if not c.slow]


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 50
    assert len({c.name for c in CASES}) == len(CASES)
    assert {c.category for c in CASES} >= {"cfg", "loop", "uninit", "stack", "ctx", "map", "helper", "ptr"}


@pytest.mark.parametrize("case", FAST, ids=[c.name for c in FAST])
def test_rejected_with_reason(case) -> None:
    err = ours(case)
    assert err is not None, f"{case.name} was accepted"
    assert err.errno == case.errno, str(err)
    assert case.why in err.log, err.log
    # the log ends with the reason and the processed-instructions summary
    assert err.log.splitlines()[-1].startswith("processed ")
