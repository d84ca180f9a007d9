"""The emulated kernel built on the VM and the verifier.

:mod:`.emulator` (:class:`Emulator`, the backend), :mod:`.hooks`
(tracepoints, kprobes and perf events with their program arrays),
:mod:`.links` (one class per link kind), :mod:`.objects` (loaded programs and
collections), :mod:`.trampoline` (function table, frames, images and the three
trampoline policies) and :mod:`.replay` (call streams for ``bpfmux emulate``).
"""

from .emulator import Emulator, SiteInfo

__all__ = ["Emulator", "SiteInfo"]
