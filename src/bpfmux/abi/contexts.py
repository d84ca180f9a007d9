"""Picking a program's context layout: :func:`context_for`, :func:`frame_view_for`."""


from __future__ import annotations

from collections.abc import Sequence

from ..errors import NotSupportedError
from ..uapi import AttachType, ProgType
from .context import ContextLayout
from .ptregs import perf_event_layout, pt_regs_layout
from .rawtp import raw_tp_layout
from .skbuff import socket_filter_layout, tc_layout, xdp_layout
from .tpformat import TracepointFormat, generic_tracepoint_layout
from .tracing import ArgInfo, FrameView, frame_layout

__all__ = ["SYSCALL_CTX_MAX", "context_for", "frame_view_for", "syscall_layout"]

_MAINLINE_MULTI = {AttachType.TRACE_FENTRY_MULTI, AttachType.TRACE_FEXIT_MULTI, AttachType.TRACE_FSESSION_MULTI}


def frame_view_for(attach_type: int | None, multi_func: bool = False) -> FrameView:
    """The frame view of a ``BPF_PROG_TYPE_TRACING`` program.

    :param multi_func: the program was loaded with the seed's ``BPF_F_MULTI_FUNC``.
    :raises NotSupportedError: an attach type without a trampoline frame.
    """
    if multi_func:
        return FrameView.SEED_MULTI
    if attach_type in _MAINLINE_MULTI:
        return FrameView.MAINLINE_MULTI
    table = {
        AttachType.TRACE_FENTRY: FrameView.FENTRY,
        AttachType.TRACE_FEXIT: FrameView.FEXIT,
        AttachType.MODIFY_RETURN: FrameView.FMOD_RET,
        AttachType.TRACE_RAW_TP: FrameView.TP_BTF,
    }
    try:
        view = table.get(AttachType(attach_type)) if attach_type is not None else None
    except (ValueError, TypeError):
        view = None
    if view is None:
        raise NotSupportedError("tracing attach type", f"no trampoline frame for attach type {attach_type!r}")
    return view


#: ``U16_MAX``: the size limit of a ``syscall`` program's context.
SYSCALL_CTX_MAX = 0xFFFF


def syscall_layout() -> ContextLayout:
    """Context of ``BPF_PROG_TYPE_SYSCALL`` programs: caller-supplied memory,
    any aligned read or write below 64 KiB (``syscall_prog_is_valid_access``)."""
    return ContextLayout("syscall ctx", SYSCALL_CTX_MAX, "window", 0, SYSCALL_CTX_MAX, writable=True)


def context_for(prog_type: int, attach_type: int | None = None, *, tracepoint: TracepointFormat | None = None,
                strict_tracepoint: bool = False, args: Sequence[ArgInfo] | None = None,
                ret: ArgInfo | None = None, func: str = "", multi_func: bool = False) -> ContextLayout:
    """The context layout of a program of type ``prog_type``.

    :param tracepoint: for tracepoint programs, the record format (only used
        with ``strict_tracepoint``, which bounds reads by the record).
    :param args: for tracing programs, the target's arguments (and ``ret``);
        without them an untyped 6-argument frame is used.
    :param multi_func: tracing program loaded with ``BPF_F_MULTI_FUNC``.
    :raises NotSupportedError: a program type without a context model here.
    """
    pt = ProgType(prog_type) if prog_type in ProgType._value2member_map_ else prog_type
    if pt == ProgType.KPROBE:
        return pt_regs_layout()
    if pt == ProgType.PERF_EVENT:
        return perf_event_layout()
    if pt == ProgType.TRACEPOINT:
        if tracepoint is not None:
            return tracepoint.layout(strict=strict_tracepoint)
        return generic_tracepoint_layout()
    if pt in (ProgType.RAW_TRACEPOINT, ProgType.RAW_TRACEPOINT_WRITABLE):
        return raw_tp_layout()
    if pt == ProgType.SOCKET_FILTER:
        return socket_filter_layout()
    if pt in (ProgType.SCHED_CLS, ProgType.SCHED_ACT):
        return tc_layout()
    if pt == ProgType.XDP:
        return xdp_layout()
    if pt == ProgType.SYSCALL:
        return syscall_layout()
    if pt in (ProgType.TRACING, ProgType.LSM):
        if pt == ProgType.LSM:
            return frame_layout(FrameView.FEXIT, args or [ArgInfo(f"arg{i}") for i in range(1, 7)], ret, func)
        view = frame_view_for(attach_type, multi_func)
        if args is None and view not in (FrameView.SEED_MULTI, FrameView.MAINLINE_MULTI):
            args = [ArgInfo(f"arg{i}") for i in range(1, 7)]
        return frame_layout(view, args or (), ret, func)
    raise NotSupportedError(f"context of program type {prog_type}",
                            f"bpfmux has no context model for program type {prog_type!r} yet")
