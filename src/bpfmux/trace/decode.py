"""Decoding ``--args`` events: each hit's arguments, named and typed through
the tracepoint's tracefs format or the function's BTF prototype.

:func:`decode_event` turns one ring buffer record into an :class:`ArgEvent`;
:meth:`ArgEvent.line` is the one-line text form, :meth:`ArgEvent.as_dict`
the JSON form.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..abi.ptregs import reg_offset
from ..errors import BpfmuxError, ParseError
from . import progs as P
from .plan import Mechanism, Probe

if TYPE_CHECKING:
    from ..abi.tpformat import TpField, TracepointFormat
    from ..btf import Btf, Type
    from ..btf.funcs import FuncSignature

__all__ = ["ArgEvent", "decode_event", "syscall_fields"]

_SYSCALL_REGS = ("di", "si", "dx", "r10", "r8", "r9")
_CALL_REGS = ("di", "si", "dx", "cx", "r8", "r9")
_SIGNED_TYPES = ("int", "long", "short", "char", "s8", "s16", "s32", "s64", "pid_t", "ssize_t", "loff_t", "off_t",
                 "clockid_t", "key_serial_t", "timer_t", "mqd_t", "qid_t", "rwf_t")  # fmt: skip


class Ptr(int):
    """An address: printed in hex."""

    def __str__(self) -> str:
        return hex(self)

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return hex(self) if not spec else int.__format__(self, spec)


class Ret(int):
    """A return value of unknown type (uretprobe/kretprobe without BTF): when
    it fits 32 bits with the sign bit set it is shown both as a negative int
    and in hex (``-1 (0xffffffff)``), since most such functions return int."""

    def __str__(self) -> str:
        if 0x80000000 <= self <= 0xFFFFFFFF:
            return f"{self - (1 << 32)} ({hex(self)})"
        return int.__repr__(self)

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else int.__format__(self, spec)


@dataclass
class ArgEvent:
    """One decoded hit.

    :ivar ns: ``ktime_get_ns()`` at the hit.
    :ivar probe: probe name.
    :ivar args: (name, value) pairs; value is an int, a str, or bytes.
    """

    ns: int
    pid: int
    tid: int
    cpu: int
    comm: str
    probe: str
    args: list[tuple[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        """``NS COMM PID/TID PROBE name=value ...``."""
        parts = []
        for name, v in self.args:
            if isinstance(v, str):
                parts.append(f"{name}={_quote(v)}")
            elif isinstance(v, bytes):
                parts.append(f"{name}={v.hex()}")
            else:
                parts.append(f"{name}={v}")
        return f"{self.ns / 1e9:.6f} {self.comm} {self.pid}/{self.tid} {self.probe} {' '.join(parts)}".rstrip()

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {"ns": self.ns, "pid": self.pid, "tid": self.tid, "cpu": self.cpu, "comm": self.comm,
                "probe": self.probe, "args": {n: _json(v) for n, v in self.args}}


def _json(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, Ptr):
        return hex(v)
    if isinstance(v, Ret):
        return int(v) - (1 << 32) if 0x80000000 <= v <= 0xFFFFFFFF else int(v)
    return v


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode(errors="replace")


_WIDTHS = {"umode_t": 2, "pid_t": 4, "uid_t": 4, "gid_t": 4, "mode_t": 4, "key_serial_t": 4, "clockid_t": 4,
           "timer_t": 4, "mqd_t": 4, "qid_t": 4, "rwf_t": 4, "u32": 4, "__u32": 4, "s32": 4, "__s32": 4, "u16": 2,
           "__u16": 2, "u8": 1, "__u8": 1}


def _width(ctype: str) -> int:
    """Bytes of a C scalar type as a syscall register carries it."""
    t = ctype.replace("const ", "").replace("volatile ", "").replace("unsigned ", "").replace("signed ", "").strip()
    if "*" in t or "long" in t:
        return 8
    if t in _WIDTHS:
        return _WIDTHS[t]
    return {"int": 4, "short": 2, "char": 1}.get(t, 8)


def _is_signed(ctype: str) -> bool:
    t = ctype.replace("const ", "").replace("volatile ", "").strip()
    if "*" in t or t.startswith("unsigned") or t.startswith(("u8", "u16", "u32", "u64", "__u", "size_t")):
        return False
    return t.split()[0] in _SIGNED_TYPES if t else False


def _int(raw: bytes, size: int, signed: bool) -> int:
    return int.from_bytes(raw[:size], "little", signed=signed)


@lru_cache(maxsize=1024)
def syscall_fields(tracepoint: str) -> tuple[TpField, ...]:
    """The argument fields of ``sys_enter_NAME`` (tracefs format, without
    the common header and ``__syscall_nr``); empty when unknown."""
    from ..abi.tpformat import load_format

    try:
        fmt = load_format("syscalls", tracepoint)
    except (BpfmuxError, OSError):
        return ()
    return tuple(f for f in fmt.fields if not f.common and f.name != "__syscall_nr")


@lru_cache(maxsize=1024)
def _tp_format(cat: str, name: str) -> TracepointFormat | None:
    from ..abi.tpformat import load_format

    try:
        return load_format(cat, name)
    except (BpfmuxError, OSError):
        return None


@lru_cache(maxsize=1024)
def _raw_tp_params(name: str) -> tuple[tuple[str, int, bool, bool], ...]:
    """(name, size, signed, pointer) of a raw tracepoint's arguments from
    ``btf_trace_<name>`` (without the leading ``void *``)."""
    try:
        from ..btf import Btf, FuncProto
        from ..btf import Ptr as BtfPtr

        btf = Btf.vmlinux()
        td = btf.find(f"btf_trace_{name}", "typedef")
        ptr = btf.resolve(td)
        if not isinstance(ptr, BtfPtr):
            return ()
        proto = btf.resolve(ptr.type)
        if not isinstance(proto, FuncProto):
            return ()
        from ..btf.funcs import prototype

        sig = prototype(btf, proto)
        return tuple((a.name or f"arg{i}", a.size, a.signed, _is_ptr(btf, a.type)) for i, a in
                     enumerate(sig.args[1:]))  # fmt: skip
    except (BpfmuxError, OSError, AttributeError, TypeError):
        return ()


def _is_ptr(btf: Btf, t: Type) -> bool:
    try:
        return btf.resolve(t).kind.name == "PTR"
    except (BpfmuxError, AttributeError):
        return False


def _btf_args(sig: FuncSignature, values: list[int]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for i, a in enumerate(sig.args):
        if i >= len(values):
            break
        v = values[i]
        ptr = a.size == 8 and not a.signed and "Ptr" in type(a.type).__name__
        if ptr:
            out.append((a.name or f"arg{i}", Ptr(v)))
        else:
            v &= (1 << (8 * a.size)) - 1 if a.size < 8 else (1 << 64) - 1
            if a.signed and v >= 1 << (8 * a.size - 1):
                v -= 1 << (8 * a.size)
            out.append((a.name or f"arg{i}", v))
    return out


def _regs(payload: bytes, names: tuple[str, ...]) -> list[int]:
    return [int.from_bytes(payload[reg_offset(r):reg_offset(r) + 8], "little") for r in names]


def decode_event(raw: bytes, probes: list[Probe], kind_of: dict[int, tuple[Mechanism, bool]]) -> ArgEvent:
    """Decode one ``events`` record.

    :param kind_of: probe index → (the :class:`~bpfmux.trace.plan.Mechanism`
        its group attached with, whether it is a return probe).
    :raises ParseError: a record shorter than the event layout or with an
        unknown probe index.
    """
    if len(raw) < P.EVENT_SIZE:
        raise ParseError(f"event of {len(raw)} bytes, expected {P.EVENT_SIZE}")
    ns, idx, pid, tid, cpu, comm = P.EVENT.unpack_from(raw, 0)
    if idx >= len(probes):
        raise ParseError(f"event for unknown probe index {idx}")
    probe = probes[idx]
    payload = bytes(raw[P.EVENT.size:P.EVENT.size + P.PAYLOAD_SIZE])
    string = _cstr(bytes(raw[P.EVENT.size + P.PAYLOAD_SIZE:P.EVENT_SIZE]))
    ev = ArgEvent(ns, pid, tid, cpu, _cstr(comm), probe.name)
    how, ret = kind_of.get(idx, (None, False))
    if how is Mechanism.SYS_ENTER:
        fields = probe.info.get("fields") or syscall_fields(probe.info["tracepoint"][1])
        values = _regs(payload, _SYSCALL_REGS)
        str_done = False
        for f, v in zip(fields, values, strict=False):
            if not str_done and "char" in f.type and "*" in f.type:
                ev.args.append((f.name, string))
                str_done = True
            elif "*" in f.type:
                ev.args.append((f.name, Ptr(v)))
            else:
                ev.args.append((f.name, _int(v.to_bytes(8, "little"), _width(f.type), _is_signed(f.type))))
    elif how is Mechanism.SYS_EXIT:
        ev.args.append(("ret", struct.unpack_from("<q", payload, 0)[0]))
    elif how is Mechanism.TRACEPOINT:
        fmt = _tp_format(*probe.info["tracepoint"])
        if fmt is not None:
            ev.args.extend(_record_fields(fmt, payload))
    elif how is Mechanism.RAW_TP:
        name = probe.info.get("raw_tp") or probe.info["tracepoint"][1]
        params = _raw_tp_params(name)
        vals = [int.from_bytes(payload[8 * i:8 * i + 8], "little") for i in range(12)]
        if params:
            for (n, size, signed, ptr), v in zip(params, vals, strict=False):
                ev.args.append((n, Ptr(v) if ptr else _int(v.to_bytes(8, "little"), size, signed)))
        else:
            ev.args.extend((f"arg{i}", Ptr(v)) for i, v in enumerate(vals[:6]))
    elif how in (Mechanism.FENTRY, Mechanism.FEXIT):
        sig = probe.info.get("signature")
        vals = [int.from_bytes(payload[8 * i:8 * i + 8], "little") for i in range(P.PAYLOAD_SIZE // 8)]
        if sig is not None:
            ev.args.extend(_btf_args(sig, vals[:sig.nregs]))
            if how is Mechanism.FEXIT:
                rv = vals[sig.nregs]
                if sig.return_size and sig.return_size < 8:
                    rv &= (1 << (8 * sig.return_size)) - 1
                ev.args.append(("ret", Ret(rv)))
    else:  # kprobe/uprobe families: pt_regs
        if ret:
            ax = int.from_bytes(payload[reg_offset("ax"):reg_offset("ax") + 8], "little")
            ev.args.append(("ret", Ret(ax) if ax < 1 << 63 else ax - (1 << 64)))
        else:
            values = _regs(payload, _CALL_REGS)
            sig = probe.info.get("signature")
            if sig is None and how in (Mechanism.KPROBE, Mechanism.KPROBE_MULTI):
                sig = _kernel_signature(probe.info.get("function", ""))
            if sig is not None:
                ev.args.extend(_btf_args(sig, values[:sig.nregs]))
            else:
                ev.args.extend((f"arg{i}", Ptr(v)) for i, v in enumerate(values))
    return ev


@lru_cache(maxsize=4096)
def _kernel_signature(name: str) -> FuncSignature | None:
    try:
        from ..btf import Btf

        return Btf.vmlinux().func(name)
    except (BpfmuxError, OSError):
        return None


def _record_fields(fmt: TracepointFormat, payload: bytes) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for f in fmt.fields:
        if f.common:
            continue
        end = f.offset + f.size
        if end > len(payload):
            out.append((f.name, "?"))
            continue
        raw = payload[f.offset:end]
        if f.data_loc:
            loc = int.from_bytes(raw[:4], "little")
            off, ln = loc & 0xFFFF, loc >> 16
            if "rel_loc" in f.type:
                off += end
            data = payload[off:off + ln] if off + ln <= len(payload) else b""
            out.append((f.name, _cstr(data) if "char" in f.type else data))
        elif f.array_len is not None:
            out.append((f.name, _cstr(raw) if f.type.startswith("char") else raw))
        elif f.size in (1, 2, 4, 8):
            v = _int(raw, f.size, f.signed)
            out.append((f.name, Ptr(v) if "*" in f.type else v))
        else:
            out.append((f.name, raw))
    return out
