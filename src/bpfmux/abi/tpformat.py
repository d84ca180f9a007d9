"""Tracepoint record formats: the tracefs ``events/<system>/<event>/format`` files.

A format file describes the record a tracepoint program receives as its
context::

    name: sched_switch
    ID: 372
    format:
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
    ...
    \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;

    print fmt: "prev_comm=%s ...", REC->prev_comm, ...

:func:`parse_format` turns that text into a :class:`TracepointFormat`;
:func:`load_format` reads it from the running kernel's tracefs, falling back to
the snapshot bundled with bpfmux (``bpfmux/data/tracefs_formats.json.gz``,
taken from the project's reference kernel) on machines without tracefs.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
from pathlib import Path

from ..errors import NotFoundError, ParseError
from ..host.files import MiB, read_text
from ..record import Frozen
from ..record import set_field as _set
from .context import ContextLayout, CtxField

#: ``PERF_MAX_TRACE_SIZE`` of Linux 6.18: the end of what a tracepoint program may read.
PERF_MAX_TRACE_SIZE = 8192
#: The first 8 bytes of a record are hidden from tracepoint programs.
TP_HIDDEN_HEADER = 8
#: Where tracefs is usually mounted.
TRACEFS_ROOTS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")

_FIELD_RE = re.compile(
    r"^\s*field:(?P<decl>[^;]*);\s*offset:(?P<off>-?\d+);\s*size:(?P<size>-?\d+);(?:\s*signed:(?P<signed>-?\d+);)?"
)
_ARRAY_RE = re.compile(r"\[(\d*)\]\s*$")


class TpField(Frozen):
    """One field of a tracepoint record.

    :ivar decl: the C declaration as tracefs prints it (``char prev_comm[16]``).
    :ivar name: the field name (``prev_comm``).
    :ivar type: the C type without the name (``char[16]``, ``__data_loc char[]``).
    :ivar offset: byte offset in the record.
    :ivar size: size in bytes.
    :ivar signed: whether the field is a signed integer.
    :ivar array_len: element count for fixed arrays, ``None`` otherwise.
    :ivar data_loc: ``True`` for ``__data_loc``/``__rel_loc`` fields (a u32
        holding length << 16 | offset of dynamic data).
    :ivar common: ``True`` for the ``common_*`` header fields.
    """

    __slots__ = ("decl", "name", "type", "offset", "size", "signed", "array_len", "data_loc", "common")

    decl: str
    name: str
    type: str
    offset: int
    size: int
    signed: bool
    array_len: int | None
    data_loc: bool
    common: bool

    def __init__(
        self,
        decl: str,
        name: str,
        type: str,
        offset: int,
        size: int,
        signed: bool,
        array_len: int | None = None,
        data_loc: bool = False,
        common: bool = False,
    ) -> None:
        _set(self, "decl", decl)
        _set(self, "name", name)
        _set(self, "type", type)
        _set(self, "offset", offset)
        _set(self, "size", size)
        _set(self, "signed", signed)
        _set(self, "array_len", array_len)
        _set(self, "data_loc", data_loc)
        _set(self, "common", common)


class TracepointFormat(Frozen):
    """A parsed tracefs format file.

    :ivar system: the event's system (``sched``), empty when unknown.
    :ivar name: the event name (``sched_switch``).
    :ivar id: the event id (what ``perf_event_open`` takes as ``config``).
    :ivar fields: all fields, common ones first, in file order.
    :ivar print_fmt: the ``print fmt:`` line's text (may be empty).
    """

    __slots__ = ("system", "name", "id", "fields", "print_fmt")

    system: str
    name: str
    id: int
    fields: tuple[TpField, ...]
    print_fmt: str

    def __init__(self, system: str, name: str, id: int, fields: tuple[TpField, ...], print_fmt: str = "") -> None:
        _set(self, "system", system)
        _set(self, "name", name)
        _set(self, "id", id)
        _set(self, "fields", fields)
        _set(self, "print_fmt", print_fmt)

    @property
    def size(self) -> int:
        """Size of the fixed part of the record (end of the last field)."""
        return max((f.offset + f.size for f in self.fields), default=0)

    def field(self, name: str) -> TpField:
        """The field called ``name``.

        :raises NotFoundError: no such field.
        """
        for f in self.fields:
            if f.name == name:
                return f
        raise NotFoundError("tracepoint field", name, f"{self.system}/{self.name} has {', '.join(f.name for f in self.fields)}")

    def layout(self, strict: bool = False) -> ContextLayout:
        """The context layout of a tracepoint program attached to this event.

        With ``strict=False`` (the default) the rule is the kernel's: any
        aligned read in ``[8, PERF_MAX_TRACE_SIZE)``, because the kernel
        verifies tracepoint programs before knowing their event. With
        ``strict=True`` reads must also stay inside this record.
        """
        fields = tuple(
            CtxField(f.name, f.offset, f.size, signed=f.signed) for f in self.fields if not f.common
        )
        hi = max(self.size, TP_HIDDEN_HEADER) if strict else PERF_MAX_TRACE_SIZE
        name = f"tracepoint {self.system}/{self.name}" if self.system else f"tracepoint {self.name}"
        return ContextLayout(name, max(self.size, TP_HIDDEN_HEADER), "window", TP_HIDDEN_HEADER, hi, fields)


def generic_tracepoint_layout() -> ContextLayout:
    """The kernel's load-time view of any tracepoint context (``tp_prog_is_valid_access``)."""
    return ContextLayout("tracepoint record", PERF_MAX_TRACE_SIZE, "window", TP_HIDDEN_HEADER, PERF_MAX_TRACE_SIZE)


def _split_decl(decl: str) -> tuple[str, str, int | None]:
    decl = decl.strip()
    m = _ARRAY_RE.search(decl)
    array_len: int | None = None
    base = decl
    if m:
        base = decl[: m.start()].rstrip()
        array_len = int(m.group(1)) if m.group(1) else None
    # the name is the last identifier of what is left
    nm = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*$", base)
    if not nm:
        raise ValueError(decl)
    name = nm.group(1)
    ctype = base[: nm.start()].strip()
    if m:
        ctype = f"{ctype}[{m.group(1)}]"
    return name, ctype, array_len


def parse_format(text: str, system: str = "", source: str | None = None) -> TracepointFormat:
    """Parse the text of a tracefs ``format`` file.

    :param system: the event's system, when the caller knows it (the file
        itself does not say).
    :raises ParseError: the text is not a format file (no name, no ID, a
        malformed field line).
    """
    if not isinstance(text, str):
        raise ParseError("format text must be str", source=source)
    name: str | None = None
    ev_id: int | None = None
    fields: list[TpField] = []
    print_fmt = ""
    in_common = True
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped:
            if fields:
                in_common = False
            continue
        if stripped.startswith("name:"):
            name = stripped[5:].strip()
        elif stripped.startswith("ID:"):
            try:
                ev_id = int(stripped[3:].strip())
            except ValueError:
                raise ParseError(f"bad ID line {stripped!r}", lineno, source) from None
        elif stripped == "format:":
            continue
        elif stripped.startswith("field:") or stripped.startswith("field "):
            m = _FIELD_RE.match(line)
            if not m:
                raise ParseError(f"malformed field line {stripped!r}", lineno, source)
            decl = m.group("decl")
            try:
                fname, ftype, array_len = _split_decl(decl)
            except ValueError:
                raise ParseError(f"no field name in {decl!r}", lineno, source) from None
            off, size = int(m.group("off")), int(m.group("size"))
            if off < 0 or size < 0:
                raise ParseError(f"negative offset or size in {stripped!r}", lineno, source)
            signed = m.group("signed") not in (None, "0")
            loc = "__data_loc" in decl or "__rel_loc" in decl
            fields.append(
                TpField(decl.strip(), fname, ftype, off, size, signed, array_len, loc,
                        in_common and fname.startswith("common_"))
            )
        elif stripped.startswith("print fmt:"):
            # the format may span lines: everything after "print fmt:" is it
            rest = "\n".join([line.split("print fmt:", 1)[1], *lines[lineno:]])
            print_fmt = rest.strip()
            break
        else:
            raise ParseError(f"unexpected line {stripped[:60]!r}", lineno, source)
    if name is None:
        raise ParseError("no 'name:' line; is this a tracefs format file?", source=source)
    if ev_id is None:
        raise ParseError("no 'ID:' line; is this a tracefs format file?", source=source)
    return TracepointFormat(system, name, ev_id, tuple(fields), print_fmt)


def tracefs_root() -> Path | None:
    """The mounted tracefs directory, or ``None``."""
    for root in TRACEFS_ROOTS:
        if os.path.isdir(os.path.join(root, "events")):
            return Path(root)
    return None


@functools.lru_cache(maxsize=1)
def bundled_formats() -> dict[str, str]:
    """The bundled snapshot: ``{"system/event": format text}``.

    :raises ParseError: the bundled file is damaged (reinstall bpfmux).
    """
    try:
        from importlib import resources  # only when the bundled formats are read

        data = resources.files("bpfmux").joinpath("data/tracefs_formats.json.gz").read_bytes()
        table = json.loads(gzip.decompress(data))
    except (OSError, ValueError, EOFError) as exc:
        raise ParseError(f"bundled tracefs snapshot unreadable ({exc}); reinstall bpfmux") from exc
    if not isinstance(table, dict):
        raise ParseError("bundled tracefs snapshot is not a table; reinstall bpfmux")
    return table


def load_format(system: str, event: str, *, use_tracefs: bool = True) -> TracepointFormat:
    """The format of tracepoint ``system/event``: from tracefs when mounted
    (and ``use_tracefs``), else from the bundled snapshot.

    :raises NotFoundError: neither knows the event.
    :raises ParseError: the format text is malformed.
    """
    if "/" in system or "/" in event or system in ("", ".", "..") or event in ("", ".", ".."):
        raise NotFoundError("tracepoint", f"{system}/{event}", "give the system and event names separately")
    root = tracefs_root() if use_tracefs else None
    if root is not None:
        path = root / "events" / system / event / "format"
        try:
            text = read_text(path, 1 * MiB, "tracepoint format")
        except FileNotFoundError:
            text = None
        except OSError:
            text = None
        if text is not None:
            return parse_format(text, system, str(path))
    text = bundled_formats().get(f"{system}/{event}")
    if text is None:
        raise NotFoundError(
            "tracepoint", f"{system}/{event}", "see /sys/kernel/tracing/available_events for what this kernel has"
        )
    return parse_format(text, system, f"bundled:{system}/{event}")


def bundled_events() -> list[str]:
    """Names (``system/event``) of every tracepoint in the bundled snapshot."""
    return sorted(bundled_formats())
