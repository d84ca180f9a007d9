"""What the parts of the verifier share, declared for the type checker.

The verifier is one class, :class:`~.core._Verifier`, assembled from mixins
(:class:`~.memory.MemoryMixin`, :class:`~.calls.CallsMixin`). The attributes
and methods the core provides and the mixins use are declared here, only while
type checking: at run time this class is empty, so nothing it declares can
shadow the real definitions in the method resolution order.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...abi import ContextLayout
    from ...isa.insn import Insn
    from .cfg import Cfg, Reject
    from .core import KfuncInfo
    from .reg import Reg
    from .state import Frame, VState

__all__ = ["VerifierParts"]


class VerifierParts:
    """The core's attributes and methods the mixins rely on (type checking only)."""

    if TYPE_CHECKING:
        insns: list[Insn]
        cfg: Cfg
        cur: VState
        ctx: ContextLayout
        depth: dict[int, int]
        max_ctx_off: int
        allowed: frozenset[int]
        kfuncs: dict[int, KfuncInfo]
        gpl: bool
        prog_type: int
        attach_type: int | None
        sleepable: bool
        helpers_used: set[int]
        call_edges: set[tuple[int, int]]

        def _reject(self, msg: str, err: int = errno.EACCES) -> Reject: ...
        def _read(self, fr: Frame, r: int) -> Reg: ...
        def _check_dst(self, r: int) -> None: ...
        def _push_hist(self, flags: int, linked: list[tuple[int, int, bool]] | None = None) -> None: ...
        def _mark_precise(self, regno: int) -> None: ...
        def _new_id(self) -> int: ...
        def _find_prev_entry(self, ref: VState, idx: int) -> VState | None: ...
        def _widen(self, old: VState, cur: VState) -> None: ...
        def _push_branch(self, idx: int, prev_idx: int) -> VState: ...
        def _assign_id(self, fr: Frame, s: int, src: Reg) -> Reg: ...
