"""bpfmux: a pure-Python eBPF toolkit built around multi-attach."""

from .errors import (
    ENOTSUPP,
    BpfError,
    BpfmuxError,
    EmulatorFault,
    InvalidArgumentError,
    NotFoundError,
    NotSupportedError,
    ParseError,
    VerifierError,
)

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # heavy backends load on first use, so ``import bpfmux`` stays cheap
    if name == "Emulator":
        from .emu.kernel.emulator import Emulator

        return Emulator
    if name == "LiveKernel":
        from .live.kernel import LiveKernel

        return LiveKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENOTSUPP",
    "BpfError",
    "BpfmuxError",
    "Emulator",
    "EmulatorFault",
    "InvalidArgumentError",
    "LiveKernel",
    "NotFoundError",
    "NotSupportedError",
    "ParseError",
    "VerifierError",
]
