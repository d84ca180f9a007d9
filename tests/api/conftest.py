"""Fixtures of the kernel contract's scenarios (see api_kernels.py): ``kernel``
over both kernels, ``driver`` for the events that make programs run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from api_kernels import KERNELS, Driver

from bpfmux.api import Kernel


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest, emulator_factory) -> Iterator[Kernel]:
    """The emulated kernel (the shipped fixture's emulator), or the live kernel as root."""
    if request.param == "emulated":
        if os.environ.get("BPFMUX_VMTEST_GUEST") == "1":
            pytest.skip("the host runs the emulated half; the guest runs the live half on its kernel")
        yield emulator_factory()
        return
    if os.geteuid() != 0:
        pytest.skip("the live half of the contract needs root for bpf(2); run the suite as root")
    from bpfmux.live import LiveKernel

    with LiveKernel() as k:
        yield k


@pytest.fixture
def driver(kernel: Kernel) -> Driver:
    """Events for ``kernel``."""
    return Driver(kernel)
