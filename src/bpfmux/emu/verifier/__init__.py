"""The emulated kernel's verifier: the kernel's algorithm (Linux 6.18), so
that it accepts and rejects what the kernel does, with its errno.

:mod:`.core` (the driver: path exploration, state pruning, ALU and jumps:
:func:`verify`), :mod:`.cfg` (load-time checks of every instruction, in the
kernel's order, and the control flow graph), :mod:`.encoding` (reserved
fields, checked on explored instructions only), :mod:`.reg` and
:mod:`.tnum` (one register's abstract value), :mod:`.bounds` (keeping its
bounds in step), :mod:`.alu` (value tracking of ALU operations),
:mod:`.branch` (what a comparison decides and teaches), :mod:`.state`
(frames, stacks, and when an explored state covers the current one),
:mod:`.precision` (which scalars must match for pruning), :mod:`.memory`
(loads, stores, atomics), :mod:`.calls` (helpers, kfuncs, subprograms,
callbacks), :mod:`.helpers` (helper prototypes and which program types may
call them) and :mod:`.objects` (the verifier's inputs from an ELF object).
"""

from .core import KfuncInfo, MapInfo, VerifierResult, verify

__all__ = ["KfuncInfo", "MapInfo", "VerifierResult", "verify"]
