"""bpfmux: a pure-Python eBPF toolkit built around multi-attach."""

from .errors import BpfError, BpfmuxError, EmulatorFault, NotFoundError, NotSupportedError, ParseError, VerifierError

__version__ = "0.1.0"

__all__ = [
    "BpfError",
    "BpfmuxError",
    "EmulatorFault",
    "NotFoundError",
    "NotSupportedError",
    "ParseError",
    "VerifierError",
]
