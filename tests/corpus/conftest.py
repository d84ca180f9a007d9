"""The corpus tier: bcc's libbpf-tools objects, read from the shared corpus
next to the checkout (``../shared/corpus/libbpf-tools``); every test skips,
saying so, when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_harness import CORPUS, SKIP_REASON


@pytest.fixture
def corpus() -> Path:
    """The ``libbpf-tools`` directory of the corpus."""
    if CORPUS is None:
        pytest.skip(SKIP_REASON)
    return CORPUS
