"""What bpftrace 0.17 prints, byte for byte: map dumps (plain values,
aggregations, ``hist``/``lhist`` bars, ``stats``), ``printf`` with C's
formatting rules, ``time``, ``join``, ``print`` of values, and the JSON
forms of ``-f json``.

Values arrive as bytes in the layouts of :mod:`.types` (map keys and values
from the kernel, event records from the ring buffer); :class:`Printer`
decodes them with the script's types and resolves what needs user space
(kernel and user symbols, stack ids, probe names, user names).
"""

from __future__ import annotations

import os
import re
import struct
import time
from collections.abc import Callable
from typing import IO, Any

from .errors import Loc, Source
from .semantic import Action, MapInfo, printf_specifiers
from .types import K, T, slot_size, tuple_offsets

__all__ = ["Printer", "c_format", "format_printf", "hist_text", "lhist_text"]

_F32 = struct.Struct("<f")
_BAR = 52


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def _s64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _sign(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _cdiv(a: int, b: int) -> int:
    """C's integer division (toward zero)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_SPEC = re.compile(r"%(?P<flag>-?)(?P<width>[0-9]*)(?:\.(?P<prec>[0-9]+))?(?P<len>hh|h|ll|l|j|z|t)?(?P<conv>rx|rh|[a-zA-Z])")


def c_format(spec: str, value: Any) -> str:
    """One conversion as glibc's ``snprintf`` does it for the argument bpftrace
    passes (a 64-bit integer, or a string): ``%d`` reads an ``int``, ``%ld``
    a ``long`` …"""
    m = _SPEC.fullmatch(spec)
    if m is None:
        return spec
    flag, width, prec, length, conv = m.group("flag"), m.group("width"), m.group("prec"), m.group("len"), m.group("conv")
    bits = 64 if length in ("l", "ll", "j", "z", "t") else 16 if length == "h" else 8 if length == "hh" else 32
    pyspec = "%" + flag + width + (f".{prec}" if prec is not None else "")
    if conv in ("s", "r", "rx", "rh"):
        return (pyspec + "s") % value
    v = int(value) if not isinstance(value, str) else 0
    if conv in ("d", "i"):
        return (pyspec + "d") % _sign(v, bits)
    if conv == "u":
        return (pyspec + "d") % (v & ((1 << bits) - 1))
    if conv in ("x", "X", "o"):
        return (pyspec + conv) % (v & ((1 << bits) - 1))
    if conv == "c":
        return (pyspec + "s") % chr(v & 0xFF)
    if conv == "p":
        v &= (1 << 64) - 1
        return (pyspec + "s") % ("(nil)" if v == 0 else f"0x{v:x}")
    return spec


def format_printf(fmt: str, values: list[Any]) -> str:
    """A format with its values, as bpftrace splits and prints it: each piece up
    to a conversion goes through C's ``printf`` (so ``%%`` is ``%``), the text
    after the last conversion is printed as it is."""
    out: list[str] = []
    last = 0
    for m, v in zip(printf_specifiers(fmt), values, strict=False):
        out.append(fmt[last:m.start()].replace("%%", "%"))
        out.append(c_format(m.group(0), v))
        last = m.end()
    out.append(fmt[last:])
    return "".join(out)


def hist_label(power: int) -> str:
    """bpftrace's power-of-two label (``1K``, ``2M`` …)."""
    suffix = ""
    for p, s in ((40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if power >= p:
            suffix = s
            power -= p
            break
    return f"{1 << power}{suffix}"


def lhist_label(n: int) -> str:
    """bpftrace's linear label (``1K`` for multiples of 1024 …)."""
    if n == 0:
        return "0"
    if n % 1048576 == 0:
        return f"{n // 1048576}M"
    if n % 1024 == 0:
        return f"{n // 1024}K"
    return str(n)


def _bar_width(v: int, top: int) -> int:
    if top <= 0:
        return 0
    return int(_f32(_f32(_f32(float(v)) / _f32(float(top))) * 52.0))


def _row(header: str, count: int, bar: int) -> str:
    return f"{header:<16}{count:>8} |{'@' * bar:<{_BAR}}|\n"


def hist_text(values: list[int], div: int = 1) -> str:
    """A ``hist()`` value drawn as bpftrace draws it (``""`` when empty)."""
    nz = [i for i, v in enumerate(values) if v > 0]
    if not nz:
        return ""
    top = max(_sign(v, 32) for v in values)
    out = []
    for i in range(nz[0], nz[-1] + 1):
        if i == 0:
            header = "(..., 0)"
        elif i == 1:
            header = "[0]"
        elif i == 2:
            header = "[1]"
        else:
            header = f"[{hist_label(i - 2)}, {hist_label(i - 1)})"
        out.append(_row(header, values[i] // max(1, div), _bar_width(values[i], top)))
    return "".join(out)


def lhist_text(values: list[int], lo: int, hi: int, step: int) -> str:
    """An ``lhist()`` value drawn as bpftrace draws it (``""`` when empty)."""
    buckets = (hi - lo) // step
    if not any(values):
        return ""
    top = max(_sign(v, 32) for v in values)
    nz = [i for i in range(buckets + 2) if i < len(values) and values[i] > 0]
    start, end = (nz[0], nz[-1]) if nz else (0, 0)
    out = []
    for i in range(start, end + 1):
        if i == 0:
            header = f"(..., {lhist_label(lo)})"
        elif i == buckets + 1:
            header = f"[{lhist_label(hi)}, ...)"
        else:
            header = f"[{lhist_label((i - 1) * step + lo)}, {lhist_label(i * step + lo)})"
        out.append(_row(header, values[i], _bar_width(values[i], top)))
    return "".join(out)


def _hist_json(values: list[int], div: int = 1) -> str:
    nz = [i for i, v in enumerate(values) if v > 0]
    if not nz:
        return "[]"
    parts = []
    for i in range(nz[0], nz[-1] + 1):
        if i == 0:
            head = '"max": -1, '
        elif i == 1:
            head = '"min": 0, "max": 0, '
        elif i == 2:
            head = '"min": 1, "max": 1, '
        else:  # bpftrace computes these as C ints (32 bits, shifts by the count modulo 32)
            head = f'"min": {_sign(1 << ((i - 2) % 32), 32)}, "max": {_sign(_sign(1 << ((i - 1) % 32), 32) - 1, 32)}, '
        parts.append("{" + head + f'"count": {values[i] // max(1, div)}' + "}")
    return "[" + ", ".join(parts) + "]"


def _lhist_json(values: list[int], lo: int, hi: int, step: int) -> str:
    buckets = (hi - lo) // step
    nz = [i for i in range(buckets + 2) if i < len(values) and values[i] > 0]
    if not nz:
        return "[]"
    parts = []
    for i in range(nz[0], nz[-1] + 1):
        if i == 0:
            head = f'"max": {lo - 1}, '
        elif i == buckets + 1:
            head = f'"min": {hi}, '
        else:
            head = f'"min": {(i - 1) * step + lo}, "max": {i * step + lo - 1}, '
        parts.append("{" + head + f'"count": {values[i]}' + "}")
    return "[" + ", ".join(parts) + "]"


def json_escape(text: str) -> str:
    """bpftrace's JSON string escaping."""
    out = []
    for c in text:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) <= 0x1F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


_QUOTED = {K.KSTACK, K.USTACK, K.KSYM, K.USYM, K.INET, K.USERNAME, K.STR, K.BUF, K.PROBE, K.FUNC}


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


_STRUCT_NAME = re.compile(r"\bstruct\s+[A-Za-z_]\w*")


class Printer:
    """Turns the kernel's bytes into bpftrace's text (or JSON) on ``out``.

    :param names: probe index → probe name (``probe``).
    :param funcs: probe index → function name (``func``).
    :param stack: ``(stack ref, id) → instruction pointers``.
    :param json_mode: ``-f json``.
    """

    def __init__(self, out: IO[str], *, names: list[str], funcs: dict[int, str], json_mode: bool = False,
                 stack: Callable[[str, int], list[int]] | None = None, ncpus: int = 1) -> None:  # fmt: skip
        self.out = out
        self.names = names
        self.funcs = funcs
        self.json = json_mode
        self.stack_reader = stack
        self.ncpus = ncpus
        self._sym: Any = None
        self._users: dict[int, str] | None = None

    # -- symbols -----------------------------------------------------------------------------

    @property
    def symbolizer(self) -> Any:
        """The shared :class:`~bpfmux.trace.symbolize.Symbolizer`."""
        if self._sym is None:
            from ..trace.symbolize import Symbolizer

            self._sym = Symbolizer()
        return self._sym

    def ksym(self, addr: int, offset: bool = False) -> str:
        """``name`` (``name+off`` with ``offset``) of a kernel address, else ``0x…``."""
        hit = self.symbolizer.kernel_symbol(addr)
        if hit is None:
            return f"0x{addr:x}"
        return f"{hit[0]}+{hit[1]}" if offset else hit[0]

    def usym(self, addr: int, pid: int, offset: bool = False, module: bool = False) -> str:
        """A user address of process ``pid`` as bpftrace resolves it."""
        hit = self.symbolizer.user_symbol(pid, addr)
        if hit is None:
            return f"0x{addr:x}" + (" ([unknown])" if module else "")
        name, off, path = hit
        text = name + (f"+{off}" if offset else "")
        return text + (f" ({path})" if module else "")

    def remember(self, pid: int) -> None:
        """Keep ``/proc/PID/maps`` for later user symbols."""
        self.symbolizer.remember(pid)

    def username(self, uid: int) -> str:
        if self._users is None:
            self._users = {}
            try:
                with open("/etc/passwd", encoding="utf-8", errors="replace") as f:
                    for line in f:
                        parts = line.split(":")
                        if len(parts) > 2 and parts[2].isdigit():
                            self._users.setdefault(int(parts[2]), parts[0])
            except OSError:
                pass
        return self._users.get(uid, str(uid))

    def stack_text(self, t: T, raw: int, indent: int) -> str:
        stackid = _sign(raw & 0xFFFFFFFF, 32)
        pid = raw >> 32
        if stackid < 0 or self.stack_reader is None:
            return ""
        from .codegen import stack_ref

        ips = self.stack_reader(stack_ref(t), stackid)
        pad = " " * indent
        lines = ["\n"]
        user = t.kind == K.USTACK
        for ip in ips[: t.limit]:
            if t.mode == "perf":
                sym = self.usym(ip, pid, True, True) if user else self.ksym(ip, True)
                lines.append(f"\t{ip:x} {sym}\n")
            elif t.mode == "raw":
                lines.append(f"{ip:x}\n")
            else:
                sym = self.usym(ip, pid, True) if user else self.ksym(ip, True)
                lines.append(f"{pad}{sym}\n")
        return "".join(lines)

    # -- values ----------------------------------------------------------------------------

    def value(self, t: T, raw: bytes, *, key: bool = False, indent: int = 8) -> str:
        """A value's text (``key``: as a map key prints it)."""
        k = t.kind
        if k == K.INT:
            v = int.from_bytes(raw[:8], "little")
            if key:
                return str(_s64(v))
            return str(_s64(v) if t.signed else v & ((1 << 64) - 1))
        if k == K.PTR:
            v = int.from_bytes(raw[:8], "little")
            return f"0x{v:x}" if key else str(v)
        if k == K.STR:
            return _cstr(raw[: t.size])
        if k in (K.KSTACK, K.USTACK):
            return self.stack_text(t, int.from_bytes(raw[:8], "little"), 4 if key else indent)
        if k == K.KSYM:
            return self.ksym(int.from_bytes(raw[:8], "little"))
        if k == K.USYM:
            return self.usym(int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:16], "little"))
        if k == K.FUNC:
            return self.funcs.get(int.from_bytes(raw[:8], "little"), "")
        if k == K.PROBE:
            i = int.from_bytes(raw[:8], "little")
            return self.names[i] if 0 <= i < len(self.names) else ""
        if k == K.USERNAME:
            return self.username(int.from_bytes(raw[:8], "little"))
        if k == K.TUPLE:
            parts = [self.value(e, raw[o:o + slot_size(e)], key=key) for e, o in zip(t.elems, tuple_offsets(t),
                                                                                      strict=True)]  # fmt: skip
            if self.json:
                return "[" + ",".join(_json_value(e, p) for e, p in zip(t.elems, parts, strict=True)) + "]"
            return "(" + ", ".join(parts) + ")"
        if k == K.BUF:
            n = min(int.from_bytes(raw[:8], "little"), t.size)
            return _hex_buffer(raw[8:8 + n])
        if k == K.INET:
            import socket  # only scripts printing addresses pay for it

            af = int.from_bytes(raw[:8], "little")
            try:
                if af == 2:
                    return socket.inet_ntop(socket.AF_INET, raw[8:12])
                if af == 10:
                    return socket.inet_ntop(socket.AF_INET6, raw[8:24])
            except (OSError, ValueError):
                pass
            return ""
        if k == K.TIMESTAMP:
            ns = int.from_bytes(raw[8:16], "little")
            return _strftime(t.name, ns)
        if k == K.STRERROR:
            return os.strerror(int.from_bytes(raw[:8], "little") & 0xFFFFFFFF)
        if k == K.MACADDR:
            return ":".join(f"{b:02X}" for b in raw[:6])
        if k == K.ARRAY:
            e = t.elems[0]
            out = []
            for i in range(t.count):
                chunk = raw[i * e.size:(i + 1) * e.size]
                out.append(self.value(T.int(8, e.signed) if e.kind == K.INT else e,
                                      _widen(e, chunk), key=key))  # fmt: skip
            return "[" + ",".join(out) + "]"
        if k == K.RECORD:
            return "{ " + raw[: t.size].hex() + " }"
        return str(int.from_bytes(raw[:8], "little"))

    # -- maps ------------------------------------------------------------------------------

    def key_parts(self, info: MapInfo, raw: bytes) -> list[str]:
        parts, pos = [], 0
        for kt in info.keys:
            n = slot_size(kt)
            parts.append(self.value(kt, raw[pos:pos + n], key=True))
            pos += n
        return parts

    def key_text(self, info: MapInfo, raw: bytes) -> str:
        if not info.keyed:
            return info.name
        return info.name + "[" + ", ".join(self.key_parts(info, raw)) + "]"

    def _percpu(self, info: MapInfo, raw: bytes) -> list[bytes]:
        size = info.value_size
        if not info.percpu:
            return [raw[:size]]
        return [raw[i:i + size] for i in range(0, len(raw) - size + 1, size)] or [raw[:size]]

    def map_text(self, info: MapInfo, items: list[tuple[bytes, bytes]], top: int = 0, div: int = 0) -> str:
        """A map as bpftrace prints it (``print(@m)`` or at exit)."""
        div = div or 1
        v = info.value
        if v.kind in (K.HIST, K.LHIST):
            return self._hist_map(info, items, top, div)
        if v.kind in (K.AVG, K.STATS):
            return self._stats_map(info, items, top, div)
        rows: list[tuple[bytes, Any, str]] = []
        for k, raw in items:
            cpus = self._percpu(info, raw)
            if v.kind == K.COUNT:
                n = sum(int.from_bytes(c[:8], "little") for c in cpus) & ((1 << 64) - 1)
                rows.append((k, n, str(n // div)))
            elif v.kind == K.SUM:
                total = sum(int.from_bytes(c[:8], "little") for c in cpus) & ((1 << 64) - 1)
                n = _s64(total) if v.signed else total
                rows.append((k, n, str(_cdiv(n, div) if v.signed else n // div)))
            elif v.kind == K.MIN:
                n = _min_value(cpus)
                rows.append((k, n, str(_cdiv(n, div))))
            elif v.kind == K.MAX:
                n = max(int.from_bytes(c[:8], "little") for c in cpus)
                rows.append((k, n, str(n // div)))
            elif v.kind == K.INT:
                raw8 = cpus[0][:8]
                n = int.from_bytes(raw8, "little")
                n = _s64(n) if v.signed else n
                rows.append((k, n, str(_cdiv(n, div) if v.signed else n // div)))
            else:
                rows.append((k, None, self.value(v, cpus[0])))
        if v.kind in (K.COUNT, K.SUM, K.MIN, K.MAX, K.INT):
            rows.sort(key=lambda r: r[1])
        else:
            rows = _sort_by_key(info, rows)
        if top and len(rows) > top:
            rows = rows[len(rows) - top:]
        if self.json:
            return self._json_map("map", info, [(k, _json_value(v, text)) for k, _, text in rows])
        delim = "" if v.kind in (K.KSTACK, K.USTACK, K.KSYM, K.USYM, K.INET) else "\n"
        body = delim.join(f"{self.key_text(info, k)}: {text}" for k, _, text in rows)
        return body + "\n"

    def _hist_map(self, info: MapInfo, items: list[tuple[bytes, bytes]], top: int, div: int) -> str:
        v = info.value
        merged: dict[bytes, list[int]] = {}
        for k, raw in items:
            cpus = self._percpu(info, raw)
            vals = [0] * v.count
            for c in cpus:
                for i in range(v.count):
                    vals[i] += int.from_bytes(c[8 * i:8 * i + 8], "little")
            merged[k] = vals
        rows = sorted(merged.items(), key=lambda kv: (kv[0]))
        rows.sort(key=lambda kv: sum(kv[1]))
        if top and len(rows) > top:
            rows = rows[len(rows) - top:]
        if self.json:
            if v.kind == K.HIST:
                body = [(k, _hist_json(vals + [0] * (65 - len(vals)), div)) for k, vals in rows]
            else:
                body = [(k, _lhist_json(vals, *v.lhist)) for k, vals in rows]
            return self._json_map("hist", info, body)
        parts = []
        for k, vals in rows:
            text = hist_text(vals, div) if v.kind == K.HIST else lhist_text(vals, *v.lhist)
            parts.append(f"{self.key_text(info, k)}: \n{text}")
        return "\n".join(parts) + "\n"

    def _stats_map(self, info: MapInfo, items: list[tuple[bytes, bytes]], top: int, div: int) -> str:
        v = info.value
        rows = []
        for k, raw in sorted(items, key=lambda kv: kv[0]):
            cpus = self._percpu(info, raw)
            count = _s64(sum(int.from_bytes(c[:8], "little") for c in cpus))
            total = _s64(sum(int.from_bytes(c[8:16], "little") for c in cpus))
            avg = _cdiv(total, count) if count else 0
            rows.append((k, count, total, avg))
        rows.sort(key=lambda r: r[3])
        if v.kind == K.AVG and top and len(rows) > top:
            rows = rows[len(rows) - top:]
        if self.json:
            if v.kind == K.STATS:
                body = [(k, f'{{"count": {c}, "average": {a}, "total": {t}}}') for k, c, t, a in rows]
            else:
                body = [(k, str(_cdiv(a, div))) for k, c, t, a in rows]
            return self._json_map("stats", info, body)
        if v.kind == K.STATS:
            body_text = [f"{self.key_text(info, k)}: count {c}, average {a}, total {t}" for k, c, t, a in rows]
        else:
            body_text = [f"{self.key_text(info, k)}: {_cdiv(a, div)}" for k, c, t, a in rows]
        return "\n".join(body_text) + "\n\n"

    def _json_map(self, kind: str, info: MapInfo, rows: list[tuple[bytes, str]]) -> str:
        if not rows:
            return ""
        if info.keyed:
            inner = ", ".join(f'"{json_escape(",".join(self.key_parts(info, k)))}": {text}' for k, text in rows)
            data = "{" + inner + "}"
        else:
            data = ", ".join(text for _, text in rows)
        return f'{{"type": "{kind}", "data": {{"{json_escape(info.name)}": {data}}}}}\n'

    # -- events ----------------------------------------------------------------------------

    def message(self, kind: str, text: str, newline: bool = True) -> None:
        """A message as bpftrace's ``message()`` writes it (printf, time, join …)."""
        if self.json:
            self.out.write(f'{{"type": "{kind}", "data": "{json_escape(text)}"}}\n')
        else:
            self.out.write(text + ("\n" if newline else ""))

    def helper_error(self, source: Source, helper: str, loc: Loc, ret: int) -> None:
        """``-k``'s warning that a helper failed, as bpftrace 0.17 prints it: the place (bpftrace's lexer
        starts a token's span where the whitespace before it ended, so a span reaches back over adjacent
        text), the helper, the error, then the line with the span marked."""
        line = source.line(loc.line)
        start = min(max(loc.col, 1), len(line) + 1)
        while start > 1 and not line[start - 2].isspace():
            start -= 1
        end = max(loc.col + loc.length, start + 1)
        # and bpftrace's lexer counts one column more than there is for each ``struct NAME`` before it
        shift = len(_STRUCT_NAME.findall(line, 0, start - 1))
        start, end = start + shift, end + shift
        if self.json:
            self.out.write(f'{{"type": "helper_error", "helper": "{helper}", "retcode": {ret}, '
                           f'"line": {loc.line}, "col": {start}}}\n')  # fmt: skip
            return
        self.out.write(f"{source.name}:{loc.line}:{start}-{end}: WARNING: Failed to {helper}: {os.strerror(-ret)} ({ret})\n"
                       f"{line}\n{' ' * (start - 1)}{'~' * (end - start)}\n")  # fmt: skip

    def args(self, action: Action, record: bytes) -> list[Any]:
        """The values of an action's arguments, ready for :func:`format_printf`."""
        out: list[Any] = []
        pos = 8
        for t in action.args:
            n = slot_size(t)
            raw = record[pos:pos + n]
            pos += n
            if t.kind == K.INT:
                v = int.from_bytes(raw[:8], "little")
                out.append(_s64(v) if t.signed else v)
            elif t.kind in (K.PTR, K.COUNT, K.SUM, K.MIN, K.MAX):
                out.append(int.from_bytes(raw[:8], "little"))
            elif t.kind in (K.KSTACK, K.USTACK):
                out.append(self.stack_text(t, int.from_bytes(raw[:8], "little"), 8))
            else:
                out.append(self.value(t, raw))
        return out

    def printed_value(self, t: T, raw: bytes) -> str:
        """``print(value)``'s line."""
        text = self.value(t, raw)
        if self.json:
            return f'{{"type": "value", "data": {_json_value(t, text)}}}\n'
        return text + "\n"

    def now(self, fmt: str) -> str:
        """``time(fmt)``'s text."""
        return time.strftime(fmt, time.localtime())


def _json_value(t: T, text: str) -> str:
    if t.kind in _QUOTED:
        return f'"{json_escape(text)}"'
    return text


def _widen(e: T, chunk: bytes) -> bytes:
    v = int.from_bytes(chunk, "little", signed=e.signed)
    return (v & ((1 << 64) - 1)).to_bytes(8, "little")


def _min_value(cpus: list[bytes]) -> int:
    top = 0
    for c in cpus:
        v = _s64(int.from_bytes(c[:8], "little"))
        top = max(top, v)
    if top == 0:
        return 0
    if 0xFFFFFFFF - top <= 0:
        return 0 - (top - 0xFFFFFFFF)
    return 0xFFFFFFFF - top


def _int_at(pos: int) -> Callable[[tuple[bytes, Any, str]], int]:
    return lambda r: int.from_bytes(r[0][pos:pos + 8], "little")


def _str_at(pos: int, n: int) -> Callable[[tuple[bytes, Any, str]], bytes]:
    return lambda r: r[0][pos:pos + n].split(b"\0", 1)[0]


def _sort_by_key(info: MapInfo, rows: list[tuple[bytes, Any, str]]) -> list[tuple[bytes, Any, str]]:
    offsets = []
    pos = 0
    for kt in info.keys:
        offsets.append((pos, kt))
        pos += slot_size(kt)
    for pos, kt in reversed(offsets):
        if kt.kind in (K.INT, K.PTR):
            rows.sort(key=_int_at(pos))
        elif kt.kind == K.STR:
            rows.sort(key=_str_at(pos, kt.size))
    return rows


def _hex_buffer(data: bytes) -> str:
    return "".join(chr(b) if 32 <= b <= 126 else f"\\x{b:02x}" for b in data)


def _strftime(fmt: str, ns_since_boot: int) -> str:
    try:
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        boot = time.time() - time.monotonic()
    stamp = boot + ns_since_boot / 1e9
    us = int((stamp - int(stamp)) * 1_000_000)
    return time.strftime(fmt.replace("%f", f"{us:06d}"), time.localtime(stamp))

