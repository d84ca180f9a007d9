"""The eBPF virtual machine of the emulated kernel.

:mod:`.machine` (the :class:`VM`: programs, maps, helpers, tiers),
:mod:`.interp` (the checked tier), :mod:`.translate` and :mod:`.cfg` (the fast
tier), :mod:`.memory` (the address space), :mod:`.runtime` (run state, tasks,
clock), :mod:`.helpers` and :mod:`.maps` (the kernel's helpers and map types),
:mod:`.conformance` (the ISA suite runner) and :mod:`.progen` (random programs
for differential tests). Nothing here knows about hooks, links or trampolines:
that is :mod:`bpfmux.emu.kernel`.
"""

from .machine import TIERS, VM, EmuProgram, RunResult

__all__ = ["TIERS", "VM", "EmuProgram", "RunResult"]
