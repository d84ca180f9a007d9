"""Tracing frames: the context of fentry/fexit/fmod_ret, tp_btf and multi programs.

The trampoline saves a frame of u64 slots (see ``multi-attach.md``). For a
function with ``n <= 6`` arguments:

====  ==  ==========  ===  ========  ===
slot  0   1 … n       n+1  n+2 … 6   7
====  ==  ==========  ===  ========  ===
      ip  arg1 … argn ret  0         ret
====  ==  ==========  ===  ========  ===

Views (:class:`FrameView`) over that frame:

* ``FENTRY``: ``ctx = &slot[1]``, n slots (the arguments);
* ``FEXIT`` / ``FMOD_RET``: ``ctx = &slot[1]``, n+1 slots (``ctx[n]`` is ret);
* ``SEED_MULTI``: programs loaded with ``BPF_F_MULTI_FUNC``: ``ctx = &slot[0]``,
  8 slots: ip, six arguments, ret — untyped (scalars), since one program
  serves many functions;
* ``MAINLINE_MULTI``: the 2026 mainline ``fentry.multi``/``fexit.multi``/
  ``fsession.multi`` programs: like fentry, ``ctx = &arg1``, six untyped slots
  (the return value and ip are read through helpers);
* ``TP_BTF``: the tracepoint's C prototype without its leading ``void *``.

Typed slots (fentry/fexit/tp_btf) load scalars for integer and enum
arguments and ``PTR_TO_BTF_ID`` for pointers to structs, as the kernel's
``btf_ctx_access`` does; all slot reads must be 8-byte aligned.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import BpfmuxError
from .context import ContextLayout, CtxField, LoadKind

#: Most arguments a traced function may have.
MAX_TRACE_ARGS = 6


class FrameView(enum.Enum):
    """Which view of the trampoline frame a program gets."""

    FENTRY = "fentry"
    FEXIT = "fexit"
    FMOD_RET = "fmod_ret"
    SEED_MULTI = "seed_multi"
    MAINLINE_MULTI = "mainline_multi"
    TP_BTF = "tp_btf"


@dataclass(frozen=True, slots=True)
class ArgInfo:
    """One argument (or the return value) of a traced function.

    :ivar name: argument name (may be empty).
    :ivar size: size of the C type in bytes (slots are always 8 bytes).
    :ivar pointer: whether the argument is a pointer.
    :ivar btf_type: for pointers to structs, the struct's name; ``None`` for
        ``void *``, pointers to scalars and non-pointers.
    :ivar signed: signed integer.
    """

    name: str = ""
    size: int = 8
    pointer: bool = False
    btf_type: str | None = None
    signed: bool = False


def frame_layout(view: FrameView, args: Sequence[ArgInfo] = (), ret: ArgInfo | None = None,
                 func: str = "") -> ContextLayout:
    """The context layout of ``view`` for a function with arguments ``args``.

    ``args`` and ``ret`` are ignored by the untyped multi views.

    :raises BpfmuxError: more than 6 arguments for a trampoline view.
    """
    if view in (FrameView.SEED_MULTI, FrameView.MAINLINE_MULTI):
        if view is FrameView.SEED_MULTI:
            names = ["ip"] + [f"arg{i}" for i in range(1, 7)] + ["ret"]
        else:
            names = [f"arg{i}" for i in range(1, 7)]
        fields = tuple(CtxField(n, 8 * i, 8) for i, n in enumerate(names))
        return ContextLayout(f"{view.value} frame", 8 * len(names), "btf", fields=fields,
                             func=func or f"{view.value} program")
    if view is not FrameView.TP_BTF and len(args) > MAX_TRACE_ARGS:
        raise BpfmuxError(f"{func or 'function'} has {len(args)} arguments; trampolines support at most {MAX_TRACE_ARGS}")
    slots = list(args)
    if view in (FrameView.FEXIT, FrameView.FMOD_RET):
        slots.append(ret if ret is not None else ArgInfo("ret"))
    slot_fields: list[CtxField] = []
    for i, a in enumerate(slots):
        load: LoadKind = "ptr_to_btf_id" if a.pointer and a.btf_type else "scalar"
        slot_fields.append(CtxField(a.name or f"arg{i + 1}", 8 * i, 8, load=load, btf_type=a.btf_type,
                                    signed=a.signed))
    return ContextLayout(f"{view.value} frame of {func or '?'}", 8 * len(slot_fields), "btf",
                         fields=tuple(slot_fields), func=func or "?")
