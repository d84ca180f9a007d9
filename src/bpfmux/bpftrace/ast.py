"""The syntax tree of a bpftrace script.

Every node has a :class:`~bpfmux.bpftrace.errors.Loc`. Expressions are
plain dataclasses; the semantic pass (:mod:`.semantic`) records their types
in a table keyed by the node's identity rather than on the node, because one
probe block may be compiled for several attach contexts (a tracepoint glob's
records differ per tracepoint).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

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


class _Node:
    """What every node shares: the repr a dataclass would generate, written once (generating one per node
    class is start-up time a tool's user waits for)."""

    __slots__ = ()

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)  # type: ignore[arg-type]
        return f"{type(self).__qualname__}({shown})"


@dataclass(eq=False, repr=False)
class Expr(_Node):
    """Any expression."""

    loc: Loc


@dataclass(eq=False, repr=False)
class Int(Expr):
    """An integer literal (``-1`` included: the parser folds the sign)."""

    value: int


@dataclass(eq=False, repr=False)
class Str(Expr):
    """A string literal (its decoded value)."""

    value: str


@dataclass(eq=False, repr=False)
class Ident(Expr):
    """A bare name that is not a builtin: a stack mode (``perf``), an enum value, a type in ``sizeof``."""

    name: str


@dataclass(eq=False, repr=False)
class Builtin(Expr):
    """A builtin variable (``pid``, ``comm``, ``args``, ``arg0`` …)."""

    name: str


@dataclass(eq=False, repr=False)
class Var(Expr):
    """A scratch variable ``$name``."""

    name: str


@dataclass(eq=False, repr=False)
class MapRef(Expr):
    """A map ``@name`` or ``@name[k1, k2]`` (``keys`` is empty without a key)."""

    name: str
    keys: list[Expr] = field(default_factory=list)


@dataclass(eq=False, repr=False)
class Param(Expr):
    """A positional parameter ``$N`` (``n`` ≥ 1) or ``$#`` (``n`` = 0)."""

    n: int


@dataclass(eq=False, repr=False)
class Call(Expr):
    """A call of a builtin function."""

    name: str
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False, repr=False)
class Binop(Expr):
    """``left OP right``."""

    op: str
    left: Expr
    right: Expr


@dataclass(eq=False, repr=False)
class Unop(Expr):
    """``OP expr`` (``-``, ``!``, ``~``, ``*``, ``++``, ``--``) or ``expr++``/``expr--`` (``postfix``)."""

    op: str
    expr: Expr
    postfix: bool = False


@dataclass(eq=False, repr=False)
class Ternary(Expr):
    """``cond ? left : right``."""

    cond: Expr
    left: Expr
    right: Expr


@dataclass(eq=False, repr=False)
class FieldAccess(Expr):
    """``expr.field`` or ``expr->field`` (``arrow``)."""

    expr: Expr
    field: str
    arrow: bool = False


@dataclass(eq=False, repr=False)
class TupleIndex(Expr):
    """``tuple.N``."""

    expr: Expr
    index: int


@dataclass(eq=False, repr=False)
class Index(Expr):
    """``expr[index]`` on an array or a pointer."""

    expr: Expr
    index: Expr


@dataclass(eq=False, repr=False)
class Cast(Expr):
    """``(type)expr``, ``(type *)expr`` (``ptr`` levels of ``*``)."""

    type_name: str
    ptr: int
    expr: Expr


@dataclass(eq=False, repr=False)
class Tuple(Expr):
    """``(a, b, …)``."""

    elems: list[Expr]


@dataclass(eq=False, repr=False)
class Stmt(_Node):
    """Any statement."""

    loc: Loc


@dataclass(eq=False, repr=False)
class ExprStmt(Stmt):
    """An expression evaluated for its effect (a call, ``@x++``)."""

    expr: Expr


@dataclass(eq=False, repr=False)
class AssignMap(Stmt):
    """``@map[k] = expr`` (``op`` is ``"="`` or a compound operator such as ``"+="``)."""

    map: MapRef
    expr: Expr
    op: str = "="


@dataclass(eq=False, repr=False)
class AssignVar(Stmt):
    """``$var = expr`` (or a compound operator)."""

    var: Var
    expr: Expr
    op: str = "="


@dataclass(eq=False, repr=False)
class If(Stmt):
    """``if (cond) { … } else { … }``."""

    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt] | None = None


@dataclass(eq=False, repr=False)
class Unroll(Stmt):
    """``unroll (N) { … }``."""

    count: Expr
    body: list[Stmt]


@dataclass(eq=False, repr=False)
class While(Stmt):
    """``while (cond) { … }``."""

    cond: Expr
    body: list[Stmt]


@dataclass(eq=False, repr=False)
class Jump(Stmt):
    """``break``, ``continue`` or ``return``."""

    kind: str


@dataclass(eq=False, repr=False)
class AttachPoint(_Node):
    """One attach point as written (``kprobe:vfs_*``)."""

    text: str
    loc: Loc


@dataclass(eq=False, repr=False)
class Probe(_Node):
    """``attach_points /predicate/ { body }``."""

    attach_points: list[AttachPoint]
    predicate: Expr | None
    body: list[Stmt]
    loc: Loc


@dataclass(eq=False, repr=False)
class Program(_Node):
    """A whole script: its probes in order."""

    probes: list[Probe]


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
