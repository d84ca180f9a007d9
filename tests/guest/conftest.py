"""Tests under tests/guest run only inside the VM tier's guest (tests/vm/vmtest.py boots it).

The harness sets ``BPFMUX_VMTEST_GUEST=1`` for the in-guest command; anywhere
else these tests are skipped with that reason, because they need kernel
features (kprobes, kprobe_multi, fentry/fexit/fmod_ret) this machine's kernel
lacks. On the host, tests/vm/test_vmtest.py runs them in the guest and reports
their results.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
IN_GUEST = os.environ.get("BPFMUX_VMTEST_GUEST") == "1"
SKIP_REASON = "runs only inside the VM tier (tests/vm): needs the guest kernel's kprobes and fentry"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every test of this directory outside the guest."""
    if IN_GUEST:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def guest_kernel_release() -> str:
    """The release of the kernel the harness booted (it passes it in ``BPFMUX_VMTEST_KERNEL``)."""
    return os.environ["BPFMUX_VMTEST_KERNEL"]
