"""Output helpers: ``trace_printk``/``trace_vprintk``/``snprintf``, ring
buffer, perf event output and stack ids.

``bpf_trace_printk`` output is captured in ``VM.trace_log`` (one string per
call) instead of the kernel's trace pipe; ``VM.on_trace`` (if set) is called
with each message too.
"""

from __future__ import annotations

import errno
import re
import struct

from ....uapi import HelperId as H
from ..maps.fdarray import PerfEventArrayMap
from ..maps.ringbuf import RingBufMap
from ..maps.stacktrace import StackTraceMap
from ..runtime import RunState
from .maps import map_arg
from .table import helper

#: ``BPF_TRACE_PRINTK`` output buffer size (the message is cut there).
PRINTK_SIZE = 1024
#: ``MAX_BPRINTF_VARARGS``.
MAX_VARARGS = 12

_SPEC = re.compile(rb"%([-+ #0]*)(\d*)(?:\.(\d+))?(hh|h|ll|l|z)?([diuxXcsp%])")
_PTR_EXT = re.compile(rb"[KxSsBbIiku]")


class FormatError(ValueError):
    """The format string is not one the kernel accepts (the helper returns -EINVAL)."""


def bpf_format(rs: RunState, fmt: bytes, args: list[int]) -> bytes:
    """Format like the kernel's ``bpf_bprintf_prepare`` + ``bstr_printf``.

    :raises FormatError: unknown conversion or more conversions than args.
    """
    out = bytearray()
    i = 0
    argi = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c != 0x25:  # '%'
            out.append(c)
            i += 1
            continue
        m = _SPEC.match(fmt, i)
        if m is None:
            raise FormatError(f"invalid conversion at {fmt[i:i + 4]!r}")
        flags, width, prec, length, conv = m.groups()
        i = m.end()
        if conv == b"%":
            out += b"%"
            continue
        if argi >= len(args):
            raise FormatError("more conversions than arguments")
        arg = args[argi] & 0xFFFFFFFFFFFFFFFF
        argi += 1
        spec = "%" + flags.decode() + width.decode() + (f".{prec.decode()}" if prec is not None else "")
        long = length in (b"l", b"ll", b"z")
        if conv in b"di":
            v = arg if long else arg & 0xFFFFFFFF
            bits = 64 if long else 32
            if length == b"h":
                v, bits = arg & 0xFFFF, 16
            elif length == b"hh":
                v, bits = arg & 0xFF, 8
            if v >> (bits - 1):
                v -= 1 << bits
            out += (spec + "d").__mod__(v).encode()
        elif conv in b"uxX":
            v = arg if long else arg & 0xFFFFFFFF
            if length == b"h":
                v = arg & 0xFFFF
            elif length == b"hh":
                v = arg & 0xFF
            out += (spec + ("d" if conv == b"u" else conv.decode())).__mod__(v).encode()
        elif conv == b"c":
            out += (spec + "c").__mod__(chr(arg & 0xFF)).encode("latin-1")
        elif conv == b"s":
            s = rs.space.try_read_str(arg, PRINTK_SIZE)
            text = (s or b"\0")[:-1].decode("latin-1")
            out += (spec + "s").__mod__(text).encode("latin-1")
        else:  # %p and its extensions
            ext = _PTR_EXT.match(fmt, i)
            kind = b""
            if ext is not None:
                kind = ext.group(0)
                i = ext.end()
                if kind in (b"I", b"i") and i < n and fmt[i] in b"46":
                    kind += fmt[i : i + 1]
                    i += 1
                elif kind in (b"k", b"u") and i < n and fmt[i] == ord("s"):
                    kind += b"s"
                    i += 1
                elif kind in (b"k", b"u", b"I", b"i"):
                    raise FormatError(f"invalid pointer conversion %p{kind.decode()}")
            out += _format_pointer(rs, kind, arg, spec).encode("latin-1")
    return bytes(out)


def _format_pointer(rs: RunState, kind: bytes, arg: int, spec: str) -> str:
    if kind in (b"I4", b"i4"):
        raw = rs.space.try_read(arg, 4)
        if raw is None:
            return "(efault)"
        sep = "." if kind == b"I4" else "."
        return sep.join(str(b) if kind == b"I4" else f"{b:03d}" for b in raw)
    if kind in (b"I6", b"i6"):
        raw = rs.space.try_read(arg, 16)
        if raw is None:
            return "(efault)"
        groups = [raw[j : j + 2].hex() for j in range(0, 16, 2)]
        return ":".join(groups) if kind == b"I6" else "".join(groups)
    if kind in (b"ks", b"us"):
        space = rs.space if kind == b"ks" else rs.task.memory
        s = space.try_read_str(arg, PRINTK_SIZE) if space is not None else None
        return (spec + "s") % ((s or b"\0")[:-1].decode("latin-1"))
    if kind in (b"S", b"s", b"B", b"b"):
        sym = rs.vm.symbolize(arg) if rs.vm.symbolize is not None else None
        if sym:
            return sym
    return f"0x{arg:016x}" if kind == b"x" or not kind else f"0x{arg:x}"


def _emit(rs: RunState, text: bytes) -> int:
    text = text[: PRINTK_SIZE - 1]
    msg = text.decode("utf-8", "replace")
    rs.vm.trace_log.append(msg)
    if rs.vm.on_trace is not None:
        rs.vm.on_trace(msg)
    return len(text)


def _fmt_arg(rs: RunState, fmt: int, fmt_size: int) -> bytes | None:
    fmt_size &= 0xFFFFFFFF
    raw = rs.read(fmt, fmt_size)
    nul = raw.find(0)
    if nul < 0:
        return None
    return raw[:nul]


@helper(H.trace_printk, "trace_printk")
def trace_printk(rs: RunState, fmt: int, fmt_size: int, a1: int, a2: int, a3: int) -> int:
    """``long bpf_trace_printk(fmt, fmt_size, ...)``: up to three arguments."""
    text = _fmt_arg(rs, fmt, fmt_size)
    if text is None:
        return -errno.EINVAL
    try:
        return _emit(rs, bpf_format(rs, text, [a1, a2, a3]))
    except FormatError:
        return -errno.EINVAL


def _varargs(rs: RunState, data: int, data_len: int) -> list[int] | None:
    data_len &= 0xFFFFFFFF
    if data_len % 8 or data_len > 8 * MAX_VARARGS or (data_len and not data):
        return None
    if not data_len:
        return []
    return list(struct.unpack(f"<{data_len // 8}Q", rs.read(data, data_len)))


@helper(H.trace_vprintk, "trace_vprintk")
def trace_vprintk(rs: RunState, fmt: int, fmt_size: int, data: int, data_len: int, *_: int) -> int:
    """``long bpf_trace_vprintk(fmt, fmt_size, data, data_len)``."""
    text = _fmt_arg(rs, fmt, fmt_size)
    args = _varargs(rs, data, data_len)
    if text is None or args is None:
        return -errno.EINVAL
    try:
        return _emit(rs, bpf_format(rs, text, args))
    except FormatError:
        return -errno.EINVAL


@helper(H.snprintf, "snprintf")
def snprintf(rs: RunState, out: int, out_size: int, fmt: int, data: int, data_len: int) -> int:
    """``long bpf_snprintf(str, str_size, fmt, data, data_len)``: returns the
    length of the whole formatted string including its NUL."""
    out_size &= 0xFFFFFFFF
    text = rs.space.try_read_str(fmt, PRINTK_SIZE)
    args = _varargs(rs, data, data_len)
    if text is None or args is None:
        return -errno.EINVAL
    try:
        s = bpf_format(rs, text[:-1], args)
    except FormatError:
        return -errno.EINVAL
    if out_size:
        rs.write(out, s[: out_size - 1] + b"\0")
    return len(s) + 1


# -- ring buffer -------------------------------------------------------------


def _ringbuf(rs: RunState, addr: int) -> RingBufMap:
    mp = map_arg(rs, addr)
    if not isinstance(mp, RingBufMap):
        raise rs.fault(f"map {mp.name!r} is not a ring buffer", addr)
    return mp


@helper(H.ringbuf_output, "ringbuf_output")
def ringbuf_output(rs: RunState, rb: int, data: int, size: int, flags: int, *_: int) -> int:
    """``long bpf_ringbuf_output(ringbuf, data, size, flags)``."""
    return _ringbuf(rs, rb).output(rs, rs.read(data, size & 0xFFFFFFFF), flags)


@helper(H.ringbuf_reserve, "ringbuf_reserve")
def ringbuf_reserve(rs: RunState, rb: int, size: int, flags: int, *_: int) -> int:
    """``void *bpf_ringbuf_reserve(ringbuf, size, flags)``: record or NULL."""
    return _ringbuf(rs, rb).reserve(rs, size, flags)


def _release(rs: RunState, data: int, discard: bool) -> int:
    res = rs.reservations.pop(data, None)
    if res is None:
        raise rs.fault(f"ringbuf {'discard' if discard else 'submit'} of {data:#x}, which is not a reserved "
                       "record of this run", data)
    res.commit(discard)
    return 0


@helper(H.ringbuf_submit, "ringbuf_submit")
def ringbuf_submit(rs: RunState, data: int, flags: int, *_: int) -> int:
    """``void bpf_ringbuf_submit(data, flags)``."""
    return _release(rs, data, False)


@helper(H.ringbuf_discard, "ringbuf_discard")
def ringbuf_discard(rs: RunState, data: int, flags: int, *_: int) -> int:
    """``void bpf_ringbuf_discard(data, flags)``."""
    return _release(rs, data, True)


@helper(H.ringbuf_query, "ringbuf_query")
def ringbuf_query(rs: RunState, rb: int, flags: int, *_: int) -> int:
    """``u64 bpf_ringbuf_query(ringbuf, flags)``."""
    return _ringbuf(rs, rb).query(flags)


# -- perf events and stacks ------------------------------------------------------


@helper(H.perf_event_output, "perf_event_output")
def perf_event_output(rs: RunState, ctx: int, m: int, flags: int, data: int, size: int) -> int:
    """``long bpf_perf_event_output(ctx, map, flags, data, size)``."""
    mp = map_arg(rs, m)
    if not isinstance(mp, PerfEventArrayMap):
        raise rs.fault(f"map {mp.name!r} is not a perf event array", m)
    return mp.output(rs, flags, rs.read(data, size))


@helper(H.get_stackid, "get_stackid")
def get_stackid(rs: RunState, ctx: int, m: int, flags: int, *_: int) -> int:
    """``long bpf_get_stackid(ctx, map, flags)``."""
    mp = map_arg(rs, m)
    if not isinstance(mp, StackTraceMap):
        raise rs.fault(f"map {mp.name!r} is not a stack trace map", m)
    return mp.get_stackid(rs, flags)


@helper(H.get_stack, "get_stack")
def get_stack(rs: RunState, ctx: int, buf: int, size: int, flags: int, *_: int) -> int:
    """``long bpf_get_stack(ctx, buf, size, flags)``: the call's kernel (or, with ``BPF_F_USER_STACK``, user)
    stack of the run context, innermost first, as 8-byte instruction pointers; the bytes copied, the rest of
    ``buf`` zeroed. ``-EINVAL`` for unknown flags or a size not a multiple of 8, ``-EFAULT`` (``buf``
    zeroed) when the context has no such stack. Build-id records are not modelled (a fault says so)."""
    from ....uapi import StackFlags

    size &= 0xFFFFFFFF
    if flags & ~(StackFlags.SKIP_MASK | StackFlags.USER_STACK | StackFlags.USER_BUILD_ID) or (
            flags & StackFlags.USER_BUILD_ID and not flags & StackFlags.USER_STACK) or size % 8:
        rs.write(buf, bytes(size))
        return -errno.EINVAL
    if flags & StackFlags.USER_BUILD_ID:
        raise rs.fault("bpf_get_stack with BPF_F_USER_BUILD_ID: build-id records are not modelled", flags)
    stack = rs.context.user_stack if flags & StackFlags.USER_STACK else rs.context.kernel_stack
    ips = [ip & 0xFFFFFFFFFFFFFFFF for ip in list(stack)[flags & StackFlags.SKIP_MASK:]][: size // 8]
    if not ips:
        rs.write(buf, bytes(size))
        return -errno.EFAULT
    data = struct.pack(f"<{len(ips)}Q", *ips)
    rs.write(buf, data.ljust(size, b"\0"))
    return len(data)
