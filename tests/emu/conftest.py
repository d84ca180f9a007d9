"""Fixtures of the emulated-kernel tests."""

from __future__ import annotations

import pytest

from bpfmux.emu.kernel.emulator import Emulator


@pytest.fixture
def emu():
    """An emulator with only the built-in test functions (no vmlinux BTF)."""
    e = Emulator(btf=None)
    yield e
    e.close()
