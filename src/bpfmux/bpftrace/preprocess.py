"""The C preprocessor lines bpftrace scripts use, without a C compiler.

bpftrace runs clang's preprocessor over a script's first lines. Types come
from the kernel's BTF here, so ``#include`` only brings the constants tools
take from headers (``AF_INET``, ``TASK_RUNNING``, …: :data:`HEADER_MACROS`);
``#define NAME VALUE`` makes an object-like macro; ``#if``, ``#ifdef``,
``#ifndef``, ``#elif``, ``#else``, ``#endif`` select lines, with
``BPFTRACE_HAVE_BTF`` defined as bpftrace defines it when the kernel has BTF.
Directive lines (and the lines they drop) become blank lines so that line
numbers in errors stay the script's own.
"""

from __future__ import annotations

import re

from ..record import Value
from .errors import Loc, ScriptError, Source

__all__ = ["HEADER_MACROS", "Preprocessed", "preprocess"]

#: constants scripts take from the headers they include (Linux uapi/libc facts)
HEADER_MACROS: dict[str, str] = {
    "AF_UNSPEC": "0", "AF_UNIX": "1", "AF_LOCAL": "1", "AF_INET": "2", "AF_INET6": "10", "AF_NETLINK": "16",
    "AF_PACKET": "17",
    "TASK_RUNNING": "0", "TASK_INTERRUPTIBLE": "1", "TASK_UNINTERRUPTIBLE": "2",
    "TCP_ESTABLISHED": "1", "TCP_SYN_SENT": "2", "TCP_SYN_RECV": "3", "TCP_FIN_WAIT1": "4", "TCP_FIN_WAIT2": "5",
    "TCP_TIME_WAIT": "6", "TCP_CLOSE": "7", "TCP_CLOSE_WAIT": "8", "TCP_LAST_ACK": "9", "TCP_LISTEN": "10",
    "TCP_CLOSING": "11", "TCP_NEW_SYN_RECV": "12",
    "O_RDONLY": "0", "O_WRONLY": "1", "O_RDWR": "2", "O_CREAT": "64", "O_TRUNC": "512", "O_APPEND": "1024",
    "SIGKILL": "9", "SIGTERM": "15", "SIGINT": "2", "SIGUSR1": "10", "SIGUSR2": "12", "SIGSTOP": "19",
    "SIGCONT": "18",
    "NULL": "0", "true": "1", "false": "0",
}  # fmt: skip

_DIRECTIVE = re.compile(r"^\s*#\s*(?P<name>\w*)\s*(?P<rest>.*?)\s*$")
_DEFINE = re.compile(r"^(?P<name>[A-Za-z_]\w*)(?P<args>\([^)]*\))?\s*(?P<body>.*)$")
_DEFINED = re.compile(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)")


class Preprocessed(Value):
    """The script with directive lines blanked, and what they defined.

    :ivar source: the text the lexer reads (same lines as the original).
    :ivar macros: object-like macros (name → replacement).
    :ivar includes: the headers ``#include`` named.
    """

    __slots__ = ("source", "macros", "includes")

    source: Source
    macros: dict[str, str]
    includes: list[str]

    def __init__(self, source: Source, macros: dict[str, str] | None = None, includes: list[str] | None = None) -> None:
        self.source = source
        self.macros = {} if macros is None else macros
        self.includes = [] if includes is None else includes


def preprocess(source: Source, defines: dict[str, str] | None = None, *, btf: bool = True) -> Preprocessed:
    """Run the preprocessor lines of ``source`` (module docstring).

    :param defines: macros defined before the script (``-D``-like).
    :param btf: whether ``BPFTRACE_HAVE_BTF`` is defined.
    :raises ScriptError: an unbalanced ``#if``/``#endif``, a function-like
        macro, an unknown directive, or an ``#error``.
    """
    macros: dict[str, str] = dict(defines or {})
    if btf:
        macros.setdefault("BPFTRACE_HAVE_BTF", "1")
    includes: list[str] = []
    out: list[str] = []
    # stack of (taking lines now, some branch already taken, saw #else, line of the #if)
    stack: list[tuple[bool, bool, bool, int]] = []
    lines = source.text.split("\n")
    in_comment = False
    for n, line in enumerate(lines, 1):
        active = all(s[0] for s in stack)
        starts_comment = in_comment
        in_comment = _comment_state(line, in_comment)
        m = None if starts_comment or (n == 1 and line.startswith("#!")) else _DIRECTIVE.match(line)
        if m is None:
            out.append(line if active else "")
            continue
        name, rest = m.group("name"), _strip_comment(m.group("rest"))
        loc = Loc(n, line.index("#") + 1, len(line.strip()))
        if name in ("if", "ifdef", "ifndef"):
            if not active:
                stack.append((False, True, False, n))
            else:
                if name == "if":
                    taken = _eval(rest, macros, source, loc)
                else:
                    word = rest.split()[0] if rest.split() else ""
                    if not word:
                        raise ScriptError(f"#{name} needs a macro name", loc, source)
                    taken = (word in macros) == (name == "ifdef")
                stack.append((taken, taken, False, n))
        elif name in ("elif", "else"):
            if not stack:
                raise ScriptError(f"#{name} without #if", loc, source)
            _, done, saw_else, start = stack.pop()
            if saw_else:
                raise ScriptError(f"#{name} after #else", loc, source)
            outer = all(s[0] for s in stack)
            if name == "else":
                stack.append((outer and not done, True, True, start))
            else:
                taken = outer and not done and _eval(rest, macros, source, loc)
                stack.append((taken, done or taken, False, start))
        elif name == "endif":
            if not stack:
                raise ScriptError("#endif without #if", loc, source)
            stack.pop()
        elif not active:
            pass
        elif name == "include":
            includes.append(rest.strip("<>\" "))
            for k, v in HEADER_MACROS.items():
                macros.setdefault(k, v)
        elif name == "define":
            d = _DEFINE.match(rest)
            if d is None:
                raise ScriptError("#define needs a macro name", loc, source)
            if d.group("args") is not None and not rest[len(d.group("name")):].startswith(" "):
                raise ScriptError(f"function-like macro {d.group('name')} is not supported (only #define NAME VALUE)",
                                  loc, source, construct="#define")  # fmt: skip
            macros[d.group("name")] = ((d.group("args") or "") + " " + d.group("body")).strip()
        elif name == "undef":
            macros.pop(rest.split()[0] if rest.split() else "", None)
        elif name == "error":
            raise ScriptError(f"#error {rest}", loc, source)
        elif name in ("pragma", "line", "warning", ""):
            pass
        else:
            raise ScriptError(f"unknown preprocessor directive #{name}", loc, source,
                              expected="#include, #define, #if, #ifdef, #ifndef, #else, #endif")  # fmt: skip
        out.append("")
    if stack:
        raise ScriptError("#if without #endif", Loc(stack[-1][3], 1), source, expected="#endif")
    return Preprocessed(Source("\n".join(out), source.name), macros, includes)


def _strip_comment(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text)
    i = text.find("//")
    return (text[:i] if i >= 0 else text).strip()


def _comment_state(line: str, inside: bool) -> bool:
    """Whether a ``/* */`` comment is open at the end of ``line``."""
    i = 0
    while i < len(line):
        if inside:
            j = line.find("*/", i)
            if j < 0:
                return True
            inside, i = False, j + 2
        else:
            j = line.find("/*", i)
            k = line.find("//", i)
            q = line.find('"', i)
            first = min(x for x in (j, k, q, len(line)) if x >= 0)
            if first == len(line) or first == k:
                return False
            if first == q:
                end = line.find('"', q + 1)
                if end < 0:
                    return False
                i = end + 1
                continue
            inside, i = True, j + 2
    return inside


def _eval(expr: str, macros: dict[str, str], source: Source, loc: Loc) -> bool:
    """An ``#if`` condition: ``defined``, integers, macros, ``! && || == != < > <= >=`` and parentheses."""
    text = _DEFINED.sub(lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", expr)
    for _ in range(16):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: macros.get(m.group(0), "0"), text)
        if new == text:
            break
        text = new
    py = text.replace("&&", " and ").replace("||", " or ")
    py = re.sub(r"!(?!=)", " not ", py)
    if not re.fullmatch(r"[\d\s()<>=!+\-*/%a-z]*", py) or re.search(r"[a-z]+", py.replace("and", "").replace(
            "or", "").replace("not", "")):  # fmt: skip
        raise ScriptError(f"cannot evaluate #if {expr}", loc, source, expected="defined(NAME) or integer comparisons")
    try:
        return bool(eval(py.replace("/", "//"), {"__builtins__": {}}, {}))
    except Exception:
        raise ScriptError(f"cannot evaluate #if {expr}", loc, source) from None
