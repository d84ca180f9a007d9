"""Reader for bpf_conformance test-case files (``*.data``).

A case file is a list of sections, each started by a ``-- NAME`` line; ``#``
starts a comment::

    -- asm
    mov32 %r0, 1
    exit
    -- mem
    00 01 02 03
    -- result
    0x1

Sections: ``asm`` (the program in :mod:`bpfmux.isa.asm` syntax), ``raw``
(the same program as 64-bit hex words ``0x...95`` one per line, or as
bytes ``95 00 00 00 00 00 00 00``), ``mem`` (hex bytes of the memory ``r1``
points at; ``r2`` holds its length), ``result`` (expected ``r0``, hex),
``error`` (the expected failure of a negative case) and the informational
``c`` and ``no register offset``.

Use :func:`load_case` (or :func:`parse_case` for text) and then
:meth:`ConformanceCase.program`::

    case = load_case("tests/data/conformance/add.data")
    insns = case.program()          # assembled (or decoded from -- raw)
    expected = case.result          # int, or None
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ParseError
from .asm import assemble
from .insn import Insn, decode

__all__ = ["KNOWN_SECTIONS", "ConformanceCase", "load_case", "load_suite", "parse_case"]

#: Section names a case file may contain.
KNOWN_SECTIONS = frozenset({"asm", "raw", "mem", "result", "error", "c", "no register offset"})

_HEX_BYTE = re.compile(r"^[0-9a-fA-F]{2}$")
_HEX_WORD = re.compile(r"^0[xX][0-9a-fA-F]{1,16}$")


@dataclass(frozen=True)
class ConformanceCase:
    """One parsed case file.

    :ivar name: file name without ``.data``.
    :ivar path: where it was read from (``None`` for :func:`parse_case` text).
    :ivar asm: the ``-- asm`` text, or ``None``.
    :ivar raw: the ``-- raw`` program as bytes, or ``None``.
    :ivar mem: the initial memory (empty when there is no ``-- mem``).
    :ivar result: the expected ``r0`` (unsigned 64-bit), or ``None``.
    :ivar error: the ``-- error`` text (``""`` when the section is present but
        empty), or ``None`` when the section is absent.
    :ivar negative: the case is expected to fail (it has ``-- error`` or lives
        in a ``negative`` directory).
    :ivar extra: informational sections (``c``, ``no register offset``) by name.
    """

    name: str
    path: Path | None
    asm: str | None
    raw: bytes | None
    mem: bytes
    result: int | None
    error: str | None
    negative: bool
    extra: dict[str, str] = field(default_factory=dict)

    def program(self) -> list[Insn]:
        """The program: assembled from ``-- asm``, else decoded (strictly) from ``-- raw``.

        When both are present they must agree.

        :raises ParseError: the case has no program, the assembly or the raw
            words are invalid, or the two disagree.
        """
        src = str(self.path) if self.path else self.name
        if self.asm is not None:
            insns = assemble(self.asm, source=src)
            if self.raw is not None:
                decoded = decode(self.raw, source=src)
                if decoded != insns:
                    raise ParseError(f"-- asm and -- raw disagree: {_first_diff(insns, decoded)}", None, src)
            return insns
        if self.raw is not None:
            return decode(self.raw, source=src, strict=True)
        raise ParseError("the case has no program (no -- asm or -- raw section)", None, src)


def _first_diff(a: list[Insn], b: list[Insn]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"instruction {i}: asm gives {x!r}, raw gives {y!r}"
    return f"asm has {len(a)} instructions, raw has {len(b)}"


def parse_case(text: str, name: str = "<case>", path: Path | None = None, negative: bool = False) -> ConformanceCase:
    """Parse the text of a case file.

    :raises ParseError: an unknown ``-- section``, a repeated section, bad
        hex in ``raw``/``mem``/``result``, or a ``raw`` length that is not a
        multiple of 8 bytes.
    """
    src = str(path) if path else name
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, raw_line in enumerate(text.splitlines(), 1):
        stripped = raw_line.strip()
        if stripped.startswith("--"):
            title = stripped[2:].strip()
            if title not in KNOWN_SECTIONS:
                err = ParseError(
                    f"line {number}: unknown section '-- {title}' (known: {', '.join(sorted(KNOWN_SECTIONS))})",
                    None,
                    src,
                )
                err.offset = number
                raise err
            if title in sections:
                err = ParseError(f"line {number}: section '-- {title}' appears twice", None, src)
                err.offset = number
                raise err
            current = sections[title] = []
            continue
        if current is None:
            if stripped and not stripped.startswith("#"):
                err = ParseError(f"line {number}: text before the first '-- section' line", None, src)
                err.offset = number
                raise err
            continue
        current.append(raw_line)

    def body(key: str) -> str | None:
        lines = sections.get(key)
        return None if lines is None else "\n".join(lines).strip("\n") + "\n"

    def uncommented(key: str) -> list[str]:
        out = []
        for line in sections.get(key, []):
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line)
        return out

    raw = _parse_raw(uncommented("raw"), src) if "raw" in sections else None
    mem = _parse_hex_bytes(uncommented("mem"), "mem", src)
    result = None
    if "result" in sections:
        tokens = " ".join(uncommented("result")).split()
        if len(tokens) != 1:
            raise ParseError(f"-- result must hold one number, found {len(tokens)} tokens", None, src)
        try:
            result = int(tokens[0], 16) & 0xFFFFFFFFFFFFFFFF
        except ValueError:
            raise ParseError(f"-- result is not hex: {tokens[0]!r}", None, src) from None
    error = None
    if "error" in sections:
        error = "\n".join(uncommented("error"))
    extra: dict[str, str] = {k: (body(k) or "").strip() for k in ("c", "no register offset") if k in sections}
    return ConformanceCase(
        name=name,
        path=path,
        asm=body("asm"),
        raw=raw,
        mem=mem,
        result=result,
        error=error,
        negative=negative or error is not None,
        extra=extra,
    )


def _parse_hex_bytes(lines: list[str], what: str, src: str) -> bytes:
    out = bytearray()
    for line in lines:
        for tok in line.split():
            if not _HEX_BYTE.match(tok):
                raise ParseError(f"-- {what}: {tok!r} is not a two-digit hex byte", None, src)
            out.append(int(tok, 16))
    return bytes(out)


def _parse_raw(lines: list[str], src: str) -> bytes:
    out = bytearray()
    for line in lines:
        tokens = line.split()
        if len(tokens) == 1 and _HEX_WORD.match(tokens[0]):
            out += int(tokens[0], 16).to_bytes(8, "little")
        else:
            out += _parse_hex_bytes([line], "raw", src)
    if len(out) % 8:
        raise ParseError(f"-- raw holds {len(out)} bytes, not a multiple of 8", None, src)
    return bytes(out)


def load_case(path: str | os.PathLike[str]) -> ConformanceCase:
    """Read and parse one ``.data`` file; files under a ``negative`` directory are marked negative.

    :raises ParseError: the file is malformed (see :func:`parse_case`) or not UTF-8.
    :raises OSError: the file cannot be read.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(f"not UTF-8 text: {e}", None, str(p)) from None
    return parse_case(text, name=p.stem, path=p, negative=p.parent.name == "negative")


def load_suite(directory: str | os.PathLike[str]) -> list[Path]:
    """Sorted paths of the ``*.data`` files directly in ``directory`` (not recursive).

    Kept as paths (not parsed cases) so a runner can report a malformed file
    as that case's failure.

    :raises OSError: the directory cannot be read.
    """
    return sorted(Path(directory).glob("*.data"))
