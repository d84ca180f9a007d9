"""The native tier: verified programs compiled to machine code with LLVM.

Needs the ``native`` extra (``pip install bpfmux[native]``: llvmlite).
:mod:`.codegen` translates a program's functions to LLVM IR, :mod:`.engine`
compiles them (one MCJIT engine per process, identical IR compiled once) and
:mod:`.runner` runs them: the region table behind the inline memory checks,
and the callbacks for helpers, kfuncs, frames, tail calls and faults.
Without llvmlite, or for a program it cannot translate, ``tier="native"``
runs the fast tier and reports ``"fast"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .engine import available

if TYPE_CHECKING:
    from ..machine import EmuProgram
    from .runner import Compiled


def native_code(prog: EmuProgram) -> Compiled | None:
    """The compiled native code of ``prog`` (compiled on first use and
    cached), or ``None`` when it runs on the fast tier instead (see
    :func:`fallback_reason`)."""
    from .runner import Compiled, compiled

    c = compiled(prog)
    return c if isinstance(c, Compiled) else None


def fallback_reason(prog: EmuProgram) -> str | None:
    """Why ``prog`` does not run natively (``None``: it does)."""
    from .runner import Fallback, compiled

    c = compiled(prog)
    return c.reason if isinstance(c, Fallback) else None


__all__ = ["available", "fallback_reason", "native_code"]
