"""The syntax tree of a bpftrace script.

Every node has a :class:`~bpfmux.bpftrace.errors.Loc`. Expressions are
slotted records (:mod:`bpfmux.record`); the semantic pass (:mod:`.semantic`)
records their types in a table keyed by the node's identity rather than on the node, because one
probe block may be compiled for several attach contexts (a tracepoint glob's
records differ per tracepoint).
"""

from __future__ import annotations

from ..record import Record
from .errors import Loc

__all__ = [
    "AssignMap",
    "AssignVar",
    "AttachPoint",
    "Binop",
    "Builtin",
    "Call",
    "Cast",
    "Expr",
    "ExprStmt",
    "FieldAccess",
    "Ident",
    "If",
    "Index",
    "Int",
    "Jump",
    "MapRef",
    "Param",
    "Probe",
    "Program",
    "Stmt",
    "Str",
    "Ternary",
    "Tuple",
    "TupleIndex",
    "Unop",
    "Unroll",
    "Var",
    "While",
    "walk",
]

#: names that are builtins when not called (bpftrace 0.17)
BUILTINS = frozenset({"args", "cgroup", "comm", "cpid", "numaid", "cpu", "ctx", "curtask", "elapsed", "func", "gid",
                      "nsecs", "pid", "probe", "rand", "retval", "tid", "uid", "username", "kstack", "ustack"}
                     | {f"arg{i}" for i in range(10)} | {f"sarg{i}" for i in range(10)})  # fmt: skip


class _Node(Record):
    """What every node shares: a :class:`~bpfmux.record.Record` (identity equality, a
    ``Name(field=value, …)`` repr, ``replace``), with no code generated per node class at import
    (start-up time a tool's user waits for)."""

    __slots__ = ()


class Expr(_Node):
    """Any expression."""

    __slots__ = ("loc",)

    loc: Loc

    def __init__(self, loc: Loc) -> None:
        self.loc = loc


class Int(Expr):
    """An integer literal (``-1`` included: the parser folds the sign)."""

    __slots__ = ("value",)

    value: int

    def __init__(self, loc: Loc, value: int) -> None:
        self.loc = loc
        self.value = value


class Str(Expr):
    """A string literal (its decoded value)."""

    __slots__ = ("value",)

    value: str

    def __init__(self, loc: Loc, value: str) -> None:
        self.loc = loc
        self.value = value


class Ident(Expr):
    """A bare name that is not a builtin: a stack mode (``perf``), an enum value, a type in ``sizeof``."""

    __slots__ = ("name",)

    name: str

    def __init__(self, loc: Loc, name: str) -> None:
        self.loc = loc
        self.name = name


class Builtin(Expr):
    """A builtin variable (``pid``, ``comm``, ``args``, ``arg0`` …)."""

    __slots__ = ("name",)

    name: str

    def __init__(self, loc: Loc, name: str) -> None:
        self.loc = loc
        self.name = name


class Var(Expr):
    """A scratch variable ``$name``."""

    __slots__ = ("name",)

    name: str

    def __init__(self, loc: Loc, name: str) -> None:
        self.loc = loc
        self.name = name


class MapRef(Expr):
    """A map ``@name`` or ``@name[k1, k2]`` (``keys`` is empty without a key)."""

    __slots__ = ("name", "keys")

    name: str
    keys: list[Expr]

    def __init__(self, loc: Loc, name: str, keys: list[Expr] | None = None) -> None:
        self.loc = loc
        self.name = name
        self.keys = [] if keys is None else keys


class Param(Expr):
    """A positional parameter ``$N`` (``n`` ≥ 1) or ``$#`` (``n`` = 0)."""

    __slots__ = ("n",)

    n: int

    def __init__(self, loc: Loc, n: int) -> None:
        self.loc = loc
        self.n = n


class Call(Expr):
    """A call of a builtin function."""

    __slots__ = ("name", "args")

    name: str
    args: list[Expr]

    def __init__(self, loc: Loc, name: str, args: list[Expr] | None = None) -> None:
        self.loc = loc
        self.name = name
        self.args = [] if args is None else args


class Binop(Expr):
    """``left OP right``."""

    __slots__ = ("op", "left", "right")

    op: str
    left: Expr
    right: Expr

    def __init__(self, loc: Loc, op: str, left: Expr, right: Expr) -> None:
        self.loc = loc
        self.op = op
        self.left = left
        self.right = right


class Unop(Expr):
    """``OP expr`` (``-``, ``!``, ``~``, ``*``, ``++``, ``--``) or ``expr++``/``expr--`` (``postfix``)."""

    __slots__ = ("op", "expr", "postfix")

    op: str
    expr: Expr
    postfix: bool

    def __init__(self, loc: Loc, op: str, expr: Expr, postfix: bool = False) -> None:
        self.loc = loc
        self.op = op
        self.expr = expr
        self.postfix = postfix


class Ternary(Expr):
    """``cond ? left : right``."""

    __slots__ = ("cond", "left", "right")

    cond: Expr
    left: Expr
    right: Expr

    def __init__(self, loc: Loc, cond: Expr, left: Expr, right: Expr) -> None:
        self.loc = loc
        self.cond = cond
        self.left = left
        self.right = right


class FieldAccess(Expr):
    """``expr.field`` or ``expr->field`` (``arrow``)."""

    __slots__ = ("expr", "field", "arrow")

    expr: Expr
    field: str
    arrow: bool

    def __init__(self, loc: Loc, expr: Expr, field: str, arrow: bool = False) -> None:
        self.loc = loc
        self.expr = expr
        self.field = field
        self.arrow = arrow


class TupleIndex(Expr):
    """``tuple.N``."""

    __slots__ = ("expr", "index")

    expr: Expr
    index: int

    def __init__(self, loc: Loc, expr: Expr, index: int) -> None:
        self.loc = loc
        self.expr = expr
        self.index = index


class Index(Expr):
    """``expr[index]`` on an array or a pointer."""

    __slots__ = ("expr", "index")

    expr: Expr
    index: Expr

    def __init__(self, loc: Loc, expr: Expr, index: Expr) -> None:
        self.loc = loc
        self.expr = expr
        self.index = index


class Cast(Expr):
    """``(type)expr``, ``(type *)expr`` (``ptr`` levels of ``*``)."""

    __slots__ = ("type_name", "ptr", "expr")

    type_name: str
    ptr: int
    expr: Expr

    def __init__(self, loc: Loc, type_name: str, ptr: int, expr: Expr) -> None:
        self.loc = loc
        self.type_name = type_name
        self.ptr = ptr
        self.expr = expr


class Tuple(Expr):
    """``(a, b, …)``."""

    __slots__ = ("elems",)

    elems: list[Expr]

    def __init__(self, loc: Loc, elems: list[Expr]) -> None:
        self.loc = loc
        self.elems = elems


class Stmt(_Node):
    """Any statement."""

    __slots__ = ("loc",)

    loc: Loc

    def __init__(self, loc: Loc) -> None:
        self.loc = loc


class ExprStmt(Stmt):
    """An expression evaluated for its effect (a call, ``@x++``)."""

    __slots__ = ("expr",)

    expr: Expr

    def __init__(self, loc: Loc, expr: Expr) -> None:
        self.loc = loc
        self.expr = expr


class AssignMap(Stmt):
    """``@map[k] = expr`` (``op`` is ``"="`` or a compound operator such as ``"+="``)."""

    __slots__ = ("map", "expr", "op")

    map: MapRef
    expr: Expr
    op: str

    def __init__(self, loc: Loc, map: MapRef, expr: Expr, op: str = "=") -> None:
        self.loc = loc
        self.map = map
        self.expr = expr
        self.op = op


class AssignVar(Stmt):
    """``$var = expr`` (or a compound operator)."""

    __slots__ = ("var", "expr", "op")

    var: Var
    expr: Expr
    op: str

    def __init__(self, loc: Loc, var: Var, expr: Expr, op: str = "=") -> None:
        self.loc = loc
        self.var = var
        self.expr = expr
        self.op = op


class If(Stmt):
    """``if (cond) { … } else { … }``."""

    __slots__ = ("cond", "then", "orelse")

    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt] | None

    def __init__(self, loc: Loc, cond: Expr, then: list[Stmt], orelse: list[Stmt] | None = None) -> None:
        self.loc = loc
        self.cond = cond
        self.then = then
        self.orelse = orelse


class Unroll(Stmt):
    """``unroll (N) { … }``."""

    __slots__ = ("count", "body")

    count: Expr
    body: list[Stmt]

    def __init__(self, loc: Loc, count: Expr, body: list[Stmt]) -> None:
        self.loc = loc
        self.count = count
        self.body = body


class While(Stmt):
    """``while (cond) { … }``."""

    __slots__ = ("cond", "body")

    cond: Expr
    body: list[Stmt]

    def __init__(self, loc: Loc, cond: Expr, body: list[Stmt]) -> None:
        self.loc = loc
        self.cond = cond
        self.body = body


class Jump(Stmt):
    """``break``, ``continue`` or ``return``."""

    __slots__ = ("kind",)

    kind: str

    def __init__(self, loc: Loc, kind: str) -> None:
        self.loc = loc
        self.kind = kind


class AttachPoint(_Node):
    """One attach point as written (``kprobe:vfs_*``)."""

    __slots__ = ("text", "loc")

    text: str
    loc: Loc

    def __init__(self, text: str, loc: Loc) -> None:
        self.text = text
        self.loc = loc


class Probe(_Node):
    """``attach_points /predicate/ { body }``."""

    __slots__ = ("attach_points", "predicate", "body", "loc")

    attach_points: list[AttachPoint]
    predicate: Expr | None
    body: list[Stmt]
    loc: Loc

    def __init__(self, attach_points: list[AttachPoint], predicate: Expr | None, body: list[Stmt], loc: Loc) -> None:
        self.attach_points = attach_points
        self.predicate = predicate
        self.body = body
        self.loc = loc


class Program(_Node):
    """A whole script: its probes in order."""

    __slots__ = ("probes",)

    probes: list[Probe]

    def __init__(self, probes: list[Probe]) -> None:
        self.probes = probes


def walk(node: object) -> list[object]:
    """Every node under (and including) ``node``, parents before children."""
    out: list[object] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        children: list[object] = []
        if isinstance(n, Program):
            children = list(n.probes)
        elif isinstance(n, Probe):
            children = ([n.predicate] if n.predicate is not None else []) + list(n.body)
        elif isinstance(n, ExprStmt):
            children = [n.expr]
        elif isinstance(n, AssignMap):
            children = [n.map, n.expr]
        elif isinstance(n, AssignVar):
            children = [n.var, n.expr]
        elif isinstance(n, If):
            children = [n.cond, *n.then, *(n.orelse or [])]
        elif isinstance(n, Unroll):
            children = [n.count, *n.body]
        elif isinstance(n, While):
            children = [n.cond, *n.body]
        elif isinstance(n, MapRef):
            children = list(n.keys)
        elif isinstance(n, Call):
            children = list(n.args)
        elif isinstance(n, Binop):
            children = [n.left, n.right]
        elif isinstance(n, Unop | FieldAccess | TupleIndex | Cast):
            children = [n.expr]
        elif isinstance(n, Ternary):
            children = [n.cond, n.left, n.right]
        elif isinstance(n, Index):
            children = [n.expr, n.index]
        elif isinstance(n, Tuple):
            children = list(n.elems)
        stack.extend(reversed(children))
    return out
