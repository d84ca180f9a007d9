"""Fixtures shared by the live link tests."""

from __future__ import annotations

import pytest
from links_progs import Counters


@pytest.fixture
def counters():
    """A fresh counter array map (closed after the test)."""
    c = Counters()
    yield c
    c.close()
