"""What the kernel contract's scenarios share (the fixtures are in conftest.py).

The kernel contract's scenarios run on both kernels.

Every test of this directory takes the ``kernel`` fixture, parametrized over
the emulated kernel (``emulated``: no root) and the running kernel
(``live``: root). A scenario needs kernel features through :func:`need`: a
live kernel that lacks one skips with that reason, and the VM tier's guest
(tests/vm, Debian's 6.12 kernel with kprobes and fentry) runs the scenario
there. Events come from a :class:`Driver`: real system calls and test runs
on the live kernel, the same calls made in the emulated kernel otherwise.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from bpfmux import Emulator
from bpfmux.api import Kernel

BPF = Path(__file__).resolve().parents[1] / "bpf"
KERNELS = ("emulated", "live")


class Driver:
    """Makes things happen in a kernel the same way on both: system calls
    by this process, calls of user functions by this process."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        if isinstance(kernel, Emulator):
            from bpfmux.emu.vm.runtime import Task

            with open("/proc/self/comm", encoding="ascii") as f:
                comm = f.read().strip()
            kernel.vm.task = Task(pid=os.getpid(), tgid=os.getpid(), comm=comm)

    def getpid(self, n: int) -> None:
        """``n`` getpid() system calls of this process."""
        if isinstance(self.kernel, Emulator):
            for _ in range(n):
                self.kernel.syscall("getpid", ret=os.getpid())
            return
        libc = ctypes.CDLL(None, use_errno=True)
        for _ in range(n):
            libc.syscall(39)  # getpid without glibc's cache, like the real program would

    def strverscmp(self, n: int) -> None:
        """``n`` calls of libc's strverscmp by this process (a function the interpreter never calls)."""
        if isinstance(self.kernel, Emulator):
            for _ in range(n):
                self.kernel.user_call("libc.so.6:strverscmp", 0, 0, ret=0)
            return
        f = ctypes.CDLL("libc.so.6").strverscmp
        for _ in range(n):
            f(b"a1", b"a2")


def need(kernel: Kernel, *features: str) -> None:
    """Skip unless ``kernel`` has every feature (only the live kernel can lack one)."""
    missing = [f for f in features if not kernel.supports(f)]
    if "tracing_multi" in missing:
        pytest.skip("this kernel lacks tracing_multi links (the 2026 mainline uapi; no kernel available here or in "
                    "the VM tier has them)")
    if missing:
        guest = "" if os.environ.get("BPFMUX_VMTEST_GUEST") == "1" else "; the VM tier's guest runs it (tests/vm)"
        pytest.skip(f"this kernel lacks {', '.join(missing)}{guest}")
