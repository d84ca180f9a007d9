"""Program contexts: what ``r1`` points at, for each program type.

* :mod:`.ptregs` — x86-64 ``struct pt_regs`` (kprobe/uprobe) and
  ``struct bpf_perf_event_data`` (perf_event);
* :mod:`.tpformat` — tracepoint records, parsed from tracefs ``format`` files
  (with a bundled snapshot for machines without tracefs);
* :mod:`.rawtp` — raw tracepoint ``u64 args[]``;
* :mod:`.tracing` — trampoline frames (fentry/fexit/fmod_ret, tp_btf, seed and
  mainline multi programs);
* :mod:`.skbuff` — the ``__sk_buff`` subset socket filters see;
* :mod:`.context` — :class:`ContextLayout`, the common description the
  verifier checks accesses against.

:func:`context_for` picks the layout for a program type.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .context import ContextLayout, CtxAccess, CtxField
    from .contexts import SYSCALL_CTX_MAX, context_for, frame_view_for, syscall_layout
    from .ptregs import perf_event_layout, pt_regs_layout
    from .rawtp import raw_tp_layout
    from .skbuff import socket_filter_layout, tc_layout, xdp_layout
    from .tpformat import TracepointFormat, generic_tracepoint_layout, load_format, parse_format
    from .tracing import ArgInfo, FrameView, frame_layout

#: name → the submodule that holds it (loaded on first use: ``bpfmux.abi.syscalls`` alone stays cheap)
_WHERE = {
    "ArgInfo": "tracing",
    "FrameView": "tracing",
    "frame_layout": "tracing",
    "ContextLayout": "context",
    "CtxAccess": "context",
    "CtxField": "context",
    "TracepointFormat": "tpformat",
    "generic_tracepoint_layout": "tpformat",
    "load_format": "tpformat",
    "parse_format": "tpformat",
    "perf_event_layout": "ptregs",
    "pt_regs_layout": "ptregs",
    "raw_tp_layout": "rawtp",
    "socket_filter_layout": "skbuff",
    "tc_layout": "skbuff",
    "xdp_layout": "skbuff",
    "context_for": "contexts",
    "frame_view_for": "contexts",
    "syscall_layout": "contexts",
    "SYSCALL_CTX_MAX": "contexts",
}

__all__ = [
    "ArgInfo",
    "ContextLayout",
    "CtxAccess",
    "CtxField",
    "FrameView",
    "SYSCALL_CTX_MAX",
    "TracepointFormat",
    "context_for",
    "frame_layout",
    "frame_view_for",
    "generic_tracepoint_layout",
    "load_format",
    "parse_format",
    "perf_event_layout",
    "pt_regs_layout",
    "raw_tp_layout",
    "socket_filter_layout",
    "syscall_layout",
    "tc_layout",
    "xdp_layout",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value
