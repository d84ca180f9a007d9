"""Python source of the fast tier: indented lines, joined without copying,
rendered into functions of bounded size.

The translator (:mod:`.translate`) emits each BPF function as a tree of
:class:`Lines`: a line is ``(indent, text, slot, tag)``; adding one set of
lines to another stores a reference with an indentation offset, so nesting
costs nothing however deep the code is. :func:`render` walks the tree once
(no recursion) and writes the final Python functions:

* a ``_nx = y`` line (tag :data:`JUMP`) is dropped when nothing ever tests
  ``_nx`` against ``y`` (the translator says which targets it tested);
* a function exit (tag :data:`RET`) stores the remaining run budget and
  returns;
* a compound statement whose body became empty gets ``pass``;
* a body longer than ``part_lines`` is cut, at statements of the outermost
  level, into *part* functions that take and give back the machine state
  (:data:`STATE`), so that no single Python function is large: CPython's
  compiler needs time and memory that grow faster than the function.

Every generated line keeps the slot it came from, for fault messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["CHARGE", "JUMP", "MAX_INDENT", "PART_ARGS", "RET", "STATE", "Lines", "Rendered", "TooDeep", "render"]

#: Tag of a function exit; the line's tag carries the returned expression.
RET = "ret"
#: Tag of ``_nx = y``; the tag carries ``y``.
JUMP = "jump"
#: Tag of a line whose text is decided when it is written: the tag carries
#: an object whose ``str()`` is the text (the run budget charge, which later
#: blocks may still add to).
CHARGE = "charge"
#: Deepest indentation :func:`render` writes (CPython's tokenizer stops at 100 levels).
MAX_INDENT = 90
#: What a part function takes, after the run state: frame, depth, budget, next block, registers.
PART_ARGS = "_rs, _S, r10, _d, _b, _nx, r0, r1, r2, r3, r4, r5, r6, r7, r8, r9"
#: What a part function gives back before its return value (``None``: it did not return).
STATE = "_b, _nx, r0, r1, r2, r3, r4, r5, r6, r7, r8, r9"

Line = tuple[int, str, int, object]


class TooDeep(Exception):
    """The code nests deeper than :data:`MAX_INDENT` levels."""


class Lines:
    """Generated lines (``(indent, text, slot, tag)``) and nested line sets
    (``(Lines, extra indent)``), in order, in :attr:`items`."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Line | tuple[Lines, int]] = []

    def add(self, indent: int, text: str, pc: int = -1, tag: object = None) -> None:
        """Append one line."""
        self.items.append((indent, text, pc, tag))

    def ret(self, indent: int, value: str, pc: int) -> None:
        """Append a function exit returning ``value``."""
        self.items.append((indent, "return " + value, pc, (RET, value)))

    def jump(self, indent: int, target: int, pc: int) -> None:
        """Append ``_nx = target``."""
        self.items.append((indent, f"_nx = {target}", pc, (JUMP, target)))

    def extend(self, other: Lines, extra: int = 0) -> None:
        """Append ``other`` (by reference), ``extra`` levels deeper."""
        if other.items:
            self.items.append((other, extra))

    @property
    def last(self) -> tuple[int, str] | None:
        """``(indent, text)`` of the last line, or ``None``."""
        extra = 0
        items = self.items
        while items:
            item = items[-1]
            if len(item) == 2:
                extra += item[1]
                items = item[0].items
                continue
            return item[0] + extra, item[1]
        return None

    def last_is_transfer(self, level: int) -> bool:
        """Whether the last line is a transfer statement at indentation ``level``."""
        last = self.last
        if last is None:
            return False
        ind, text = last
        return ind == level and text.startswith(("return", "continue", "break", "raise"))

    def walk(self) -> Iterator[Line]:
        """Every line in order, with its final indentation (iterative)."""
        stack: list[tuple[Iterator, int]] = [(iter(self.items), 0)]
        while stack:
            it, extra = stack[-1]
            for item in it:
                if len(item) == 2:
                    stack.append((iter(item[0].items), extra + item[1]))
                    break
                ind, text, pc, tag = item
                yield ind + extra, text, pc, tag
            else:
                stack.pop()


@dataclass
class Rendered:
    """One BPF function as Python functions: the main one first, then its parts.

    :ivar functions: ``(name, lines)``; each line is ``(text, slot)``.
    """

    functions: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)

    @property
    def size(self) -> int:
        """Lines in all functions."""
        return sum(len(lines) for _, lines in self.functions)


def _main_ret(value: str) -> list[str]:
    # the budget is stored before the value is computed: a tail call's callee goes on with it
    return ["_rs.left = _b", f"return {value}"]


def _part_ret(value: str) -> list[str]:
    return ["_rs.left = _b", f"return {STATE}, {value}"]


def render(name: str, head: list[tuple[str, int]], body: Lines, tested: set[int], part_lines: int, *,
           base: int = 1, state: bool = False) -> Rendered:
    """Write function ``name``: its ``def`` line and prologue ``head``
    (already indented), then ``body``, cut into parts of about
    ``part_lines`` lines.

    :param tested: the ``_nx`` targets some line tests; other ``_nx = y``
        lines are dropped.
    :param base: indentation of the body's outermost statements.
    :param state: the function is itself a part (it returns :data:`STATE`
        and its return value).
    :raises TooDeep: the body nests deeper than :data:`MAX_INDENT`.
    """
    out = Rendered()
    main: list[tuple[str, int]] = list(head)
    out.functions.append((name, main))
    cur = main
    ret = _part_ret if state else _main_ret
    parts: list[str] = []
    since = 0
    prev_pc = -2
    open_header = -1  # indentation of a compound statement whose body is still empty
    prefix = ["    " * i for i in range(MAX_INDENT + 2)]

    stack: list[tuple[Iterator, int]] = [(iter(body.items), 0)]
    while stack:
        it, extra = stack[-1]
        for item in it:
            if len(item) == 2:
                stack.append((iter(item[0].items), extra + item[1]))
                break
            ind, text, pc, tag = item
            ind += extra
            if tag is not None:
                kind, value = tag
                if kind == JUMP and value not in tested:
                    continue
            if open_header >= 0:
                if ind <= open_header:
                    cur.append((prefix[open_header + 1] + "pass", pc))
                open_header = -1
            if ind > MAX_INDENT:
                raise TooDeep(f"{name}: code nests {ind} levels deep")
            if (ind == base and since >= part_lines and pc != prev_pc
                    and not text.startswith(("else", "elif"))):
                if cur is not main:
                    cur.append((prefix[base] + f"return {STATE}, None", pc))
                part = f"{name}_p{len(parts) + 1}"
                parts.append(part)
                cur = [(f"def {part}({PART_ARGS}):", pc)]
                out.functions.append((part, cur))
                ret = _part_ret
                since = 0
            if tag is None:
                cur.append((prefix[ind] + text, pc))
                if text[-1] == ":":
                    open_header = ind
            elif tag[0] == RET:
                for t in ret(tag[1]):
                    cur.append((prefix[ind] + t, pc))
            elif tag[0] == CHARGE:
                cur.append((prefix[ind] + str(tag[1]), pc))
            else:
                cur.append((prefix[ind] + text, pc))
            since += 1
            prev_pc = pc
        else:
            stack.pop()
    if open_header >= 0:
        cur.append((prefix[open_header + 1] + "pass", prev_pc))
    if parts:
        if state:  # pragma: no cover - parts are never cut again
            raise TooDeep(f"{name}: a part cannot have parts")
        cur.append((prefix[base] + f"return {STATE}, None", prev_pc))
        main.insert(len(head), (prefix[base] + "_nx = -1", -1))
        for part in parts:
            main.append((prefix[base] + f"{STATE}, _ret = {part}({PART_ARGS})", -1))
            main.append((prefix[base] + "if _ret is not None:", -1))
            main.append((prefix[base + 1] + "return _ret", -1))
        main.append((prefix[base] + "raise _E('internal error: fell off the end of a function')", -1))
    return out
