"""Fixtures of the emulated-kernel tests, built on the shipped pytest plugin
(:mod:`bpfmux.testing`): the project tests its emulator the way its users do."""

from __future__ import annotations

import pytest


@pytest.fixture
def emu(emulator_factory):
    """An emulator with only the built-in test functions (no vmlinux BTF)."""
    return emulator_factory(btf=None)
