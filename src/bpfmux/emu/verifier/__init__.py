"""The emulated kernel's verifier.

:mod:`.core` (abstract interpretation: :func:`verify`), :mod:`.state`
(registers, stack, tnums), :mod:`.alu` (value tracking of ALU operations),
:mod:`.cfg` (load-time checks of the control flow graph), :mod:`.helpers`
(which helpers each program type may call, and their argument types) and
:mod:`.objects` (building the verifier's inputs from an ELF object).
"""

from .core import KfuncInfo, MapInfo, VerifierResult, verify

__all__ = ["KfuncInfo", "MapInfo", "VerifierResult", "verify"]
