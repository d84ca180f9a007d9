"""Context of raw tracepoint programs: ``u64 args[]`` of the tracepoint's C prototype.

``BPF_PROG_TYPE_RAW_TRACEPOINT`` programs are loaded without knowing their
tracepoint, so the kernel lets them read any of ``MAX_BPF_FUNC_ARGS`` (12) u64
slots (aligned reads, narrow allowed) and checks, when attaching, that the
highest slot read exists (``EINVAL`` otherwise). The verifier reports that
highest offset as ``VerifierResult.max_ctx_offset``.
"""

from __future__ import annotations

from .context import ContextLayout, CtxField

#: ``MAX_BPF_FUNC_ARGS``: the most arguments a raw tracepoint passes.
MAX_BPF_FUNC_ARGS = 12


def raw_tp_layout(nr_args: int = MAX_BPF_FUNC_ARGS) -> ContextLayout:
    """Layout of ``u64 args[nr_args]`` (``nr_args`` defaults to the kernel's
    load-time view, 12 slots)."""
    nr = max(0, min(nr_args, MAX_BPF_FUNC_ARGS))
    fields = tuple(CtxField(f"args[{i}]", 8 * i, 8) for i in range(nr))
    return ContextLayout(f"u64[{nr}]", 8 * nr, "window", 0, 8 * nr, fields)
