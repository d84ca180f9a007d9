"""``struct pt_regs`` of x86-64 and ``struct bpf_perf_event_data``.

Facts of the x86-64 uapi (``arch/x86/include/uapi/asm/ptrace.h``): 21
unsigned 64-bit registers in the order the entry code pushes them. kprobe and
uprobe programs get ``struct pt_regs *``; perf_event programs get
``struct bpf_perf_event_data *``, which is the registers followed by
``sample_period`` and ``addr``.
"""

from __future__ import annotations

import struct

from ..errors import NotFoundError, ParseError
from .context import ContextLayout, CtxField

#: Register names in memory order.
PT_REGS_FIELDS: tuple[str, ...] = (
    "r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8",
    "ax", "cx", "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss",
)
#: ``sizeof(struct pt_regs)`` on x86-64.
PT_REGS_SIZE = 8 * len(PT_REGS_FIELDS)
#: Function arguments 1-6 in the x86-64 calling convention.
ARG_REGS: tuple[str, ...] = ("di", "si", "dx", "cx", "r8", "r9")
#: Precompiled codec for a whole ``pt_regs``.
PT_REGS_STRUCT = struct.Struct("<21Q")

#: ``sizeof(struct bpf_perf_event_data)``.
PERF_EVENT_DATA_SIZE = PT_REGS_SIZE + 16
SAMPLE_PERIOD_OFFSET = PT_REGS_SIZE
ADDR_OFFSET = PT_REGS_SIZE + 8


def reg_offset(name: str) -> int:
    """Byte offset of register ``name`` (``"di"``, ``"ip"``, …) in ``pt_regs``.

    :raises NotFoundError: no such register.
    """
    try:
        return 8 * PT_REGS_FIELDS.index(name)
    except ValueError:
        raise NotFoundError("pt_regs register", name, f"use one of {', '.join(PT_REGS_FIELDS)}") from None


def arg_offset(n: int) -> int:
    """Byte offset of the register holding function argument ``n`` (1-6).

    :raises NotFoundError: ``n`` is not in 1..6.
    """
    if not 1 <= n <= len(ARG_REGS):
        raise NotFoundError("argument register", str(n), "x86-64 passes arguments 1 to 6 in registers")
    return reg_offset(ARG_REGS[n - 1])


def pack_pt_regs(values: dict[str, int] | None = None) -> bytes:
    """Build the bytes of a ``pt_regs`` from register values (others 0).

    :raises NotFoundError: an unknown register name.
    """
    regs = [0] * len(PT_REGS_FIELDS)
    for name, value in (values or {}).items():
        regs[reg_offset(name) // 8] = value & 0xFFFFFFFFFFFFFFFF
    return PT_REGS_STRUCT.pack(*regs)


def unpack_pt_regs(data: bytes) -> dict[str, int]:
    """Decode the bytes of a ``pt_regs``.

    :raises ParseError: fewer than 168 bytes.
    """
    if len(data) < PT_REGS_SIZE:
        raise ParseError(f"pt_regs needs {PT_REGS_SIZE} bytes, got {len(data)}")
    return dict(zip(PT_REGS_FIELDS, PT_REGS_STRUCT.unpack_from(data), strict=True))


def pt_regs_layout() -> ContextLayout:
    """Context of kprobe/uprobe programs: any aligned read inside ``pt_regs``,
    no writes (the kernel's ``kprobe_prog_is_valid_access``)."""
    fields = tuple(CtxField(n, 8 * i, 8) for i, n in enumerate(PT_REGS_FIELDS))
    return ContextLayout("struct pt_regs", PT_REGS_SIZE, "window", 0, PT_REGS_SIZE, fields)


def perf_event_layout() -> ContextLayout:
    """Context of perf_event programs (``pe_prog_is_valid_access``): the
    registers are read whole (8 bytes), ``sample_period`` and ``addr`` also
    narrower, nothing is writable."""
    regs = tuple(CtxField(f"regs.{n}", 8 * i, 8, narrow=False) for i, n in enumerate(PT_REGS_FIELDS))
    extra = (
        CtxField("sample_period", SAMPLE_PERIOD_OFFSET, 8),
        CtxField("addr", ADDR_OFFSET, 8),
    )
    return ContextLayout("struct bpf_perf_event_data", PERF_EVENT_DATA_SIZE, "fields", fields=regs + extra)
