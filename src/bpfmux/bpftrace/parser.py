"""A recursive-descent parser for bpftrace's language (version 0.17's grammar).

``parse(text)`` → :class:`~bpfmux.bpftrace.ast.Program`. A script is
preprocessor lines, then probes::

    probe      := attach_point ("," attach_point)* ["/" expr "/"] "{" stmts "}"
    stmts      := (stmt ";" | if | unroll | while)* [stmt]
    stmt       := map "=" expr | var "=" expr | map OP= expr | var OP= expr
                | "break" | "continue" | "return" | expr
    expr       := C's precedence: ?: || && | ^ & == != < <= > >= << >> + - * / %,
                  casts "(type)", "(struct x *)", unary - ! ~ * ++ --,
                  postfix . -> [] .N ++ --, calls f(...), tuples (a, b),
                  maps @x[k, …], variables $x, parameters $1 $#, builtins.

Every error is a :class:`~bpfmux.bpftrace.errors.ScriptError` with the
place, what was found and what was expected.
"""

from __future__ import annotations

from . import ast as A
from .errors import Loc, ScriptError, Source
from .lexer import KEYWORDS, Lexer, Token
from .preprocess import preprocess

__all__ = ["Parser", "parse"]

_COMPOUND = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "&=": "&", "|=": "|", "^=": "^", "<<=": "<<",
             ">>=": ">>"}  # fmt: skip
_BINARY_LEVELS: list[tuple[str, ...]] = [
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"), ("+", "-"),
    ("*", "/", "%"),
]
_PRECEDENCE = {op: level for level, ops in enumerate(_BINARY_LEVELS) for op in ops}
_MAX_DEPTH = 100


def parse(text: str, name: str = "stdin", *, defines: dict[str, str] | None = None) -> A.Program:
    """Parse a whole script.

    :param name: what errors call the script (``stdin`` for ``-e``, as bpftrace does).
    :raises ScriptError: the script is not valid bpftrace.
    """
    return Parser(Source(text, name), defines=defines).program()


class Parser:
    """One script's parser (see the module docstring for the grammar)."""

    def __init__(self, source: Source, *, defines: dict[str, str] | None = None) -> None:
        self.original = source
        pre = preprocess(source, defines)
        self.macros = pre.macros
        self.includes = pre.includes
        self.lex = Lexer(Source(pre.source.text, source.name), pre.macros)
        self.depth = 0

    # -- helpers ---------------------------------------------------------------------------

    def error(self, message: str, loc: Loc, expected: str | None = None, construct: str | None = None) -> ScriptError:
        """A :class:`ScriptError` at ``loc`` in this script."""
        return ScriptError(message, loc, self.original, expected=expected, construct=construct)

    def peek(self) -> Token:
        return self.lex.peek()

    def next(self) -> Token:
        return self.lex.next()

    def is_op(self, *ops: str) -> bool:
        t = self.peek()
        return t.kind == "op" and t.text in ops

    def is_word(self, *words: str) -> bool:
        t = self.peek()
        return t.kind == "ident" and t.text in words

    def expect_op(self, op: str, context: str) -> Token:
        t = self.peek()
        if t.kind == "op" and t.text == op:
            return self.next()
        raise self.error(f"unexpected {t.describe()} {context}", t.loc, expected=f"'{op}'")

    def _peek_n(self, n: int) -> list[Token]:
        toks = []
        try:
            for _ in range(n):
                tok = self.lex.next()
                toks.append(tok)
                if tok.kind == "eof" or (tok.kind == "op" and tok.text in (")", "}", ";", "{")):
                    break
        finally:
            for tok in reversed(toks):
                self.lex.unread(tok)
        return toks

    def _enter(self, loc: Loc) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"expression nested more than {_MAX_DEPTH} levels deep", loc)

    # -- program and probes -------------------------------------------------------------------

    def program(self) -> A.Program:
        """The whole script.

        :raises ScriptError: a syntax error.
        """
        probes = []
        while not self.lex.at_end():
            probes.append(self.probe())
        if not probes:
            raise self.error("the script has no probes", Loc(1, 1),
                             expected="a probe such as 'BEGIN { printf(\"hello\\n\"); }'")  # fmt: skip
        return A.Program(probes)

    def probe(self) -> A.Probe:
        """One probe: attach points, an optional predicate and a block.

        :raises ScriptError: a syntax error.
        """
        points = [self.attach_point()]
        while True:
            t = self.peek()
            if t.kind == "op" and t.text == ",":
                self.next()
                points.append(self.attach_point())
                continue
            break
        pred = None
        t = self.peek()
        if t.kind == "op" and t.text == "/":
            self.next()
            pred = self.expr()
            end = self.peek()
            if end.kind != "endpred":
                if end.kind == "op" and end.text == "/":
                    raise self.error("a predicate's closing '/' must be followed by '{'", end.loc, expected="'{'")
                raise self.error(f"unexpected {end.describe()} in the predicate", end.loc,
                                 expected="an operator or '/' to end the predicate")  # fmt: skip
            self.next()
            t = self.peek()
        if not (t.kind == "op" and t.text == "{"):
            if t.kind == "eof":
                raise self.error("unexpected end of file after the attach point", t.loc, expected="'{'")
            raise self.error(f"unexpected {t.describe()} after the attach point{'s' * (len(points) > 1)}", t.loc,
                             expected="',' and another attach point, '/predicate/' or '{'")  # fmt: skip
        body = self.block()
        return A.Probe(points, pred, body, points[0].loc)

    def attach_point(self) -> A.AttachPoint:
        """One attach point word.

        :raises ScriptError: nothing that can be an attach point here.
        """
        tok = self.lex.attach_point()
        if tok is None:
            t = self.peek()
            raise self.error(f"unexpected {t.describe()} where a probe should start", t.loc,
                             expected="an attach point such as 'kprobe:vfs_read', 'tracepoint:sched:*' or 'BEGIN'")  # fmt: skip
        return A.AttachPoint(tok.text, tok.loc)

    def block(self) -> list[A.Stmt]:
        """``{ statements }``.

        :raises ScriptError: a syntax error.
        """
        self.expect_op("{", "where a block should start")
        stmts: list[A.Stmt] = []
        while True:
            t = self.peek()
            if t.kind == "op" and t.text == "}":
                self.next()
                return stmts
            if t.kind == "op" and t.text == ";":
                self.next()
                continue
            if t.kind == "eof":
                raise self.error("unexpected end of file in a block", t.loc, expected="'}'")
            if t.kind == "ident" and t.text in ("if", "unroll", "while", "for"):
                stmts.append(self.block_statement())
                continue
            stmts.append(self.statement())
            t = self.peek()
            if t.kind == "op" and t.text in (";", "}"):
                continue
            raise self.error(f"unexpected {t.describe()} after a statement", t.loc, expected="';' or '}'")

    def block_statement(self) -> A.Stmt:
        """``if``, ``unroll``, ``while`` (``for`` is not in bpftrace 0.17).

        :raises ScriptError: a syntax error.
        """
        t = self.next()
        if t.text == "if":
            self.expect_op("(", "after 'if'")
            cond = self.expr()
            self.expect_op(")", "after the condition of 'if'")
            then = self.block()
            orelse = None
            if self.is_word("else"):
                self.next()
                if self.is_word("if"):
                    orelse = [self.block_statement()]
                else:
                    orelse = self.block()
            return A.If(t.loc, cond, then, orelse)
        if t.text == "unroll":
            self.expect_op("(", "after 'unroll'")
            count = self.expr()
            self.expect_op(")", "after the count of 'unroll'")
            return A.Unroll(t.loc, count, self.block())
        if t.text == "while":
            self.expect_op("(", "after 'while'")
            cond = self.expr()
            self.expect_op(")", "after the condition of 'while'")
            return A.While(t.loc, cond, self.block())
        raise self.error("'for' loops are not part of bpftrace 0.17's language", t.loc,
                         expected="'while (cond) { … }' or 'unroll (N) { … }'", construct="for")  # fmt: skip

    def statement(self) -> A.Stmt:
        """One statement that needs a ``;`` (or the block's ``}``) after it.

        :raises ScriptError: a syntax error.
        """
        t = self.peek()
        if t.kind == "ident" and t.text in ("break", "continue", "return"):
            self.next()
            return A.Jump(t.loc, t.text)
        if t.kind == "ident" and t.text == "else":
            raise self.error("'else' without 'if'", t.loc)
        target = self.expr()
        op = self.peek()
        if op.kind == "op" and (op.text == "=" or op.text in _COMPOUND):
            self.next()
            value = self.expr()
            if op.text != "=":
                value = A.Binop(op.loc, _COMPOUND[op.text], target, value)
            if isinstance(target, A.MapRef):
                return A.AssignMap(op.loc, target, value, op.text)
            if isinstance(target, A.Var):
                return A.AssignVar(op.loc, target, value, op.text)
            if isinstance(target, A.TupleIndex):
                raise self.error("tuples are immutable once created; create a new tuple and assign it instead",
                                 target.loc)  # fmt: skip
            raise self.error(f"cannot assign to {_describe(target)}", target.loc,
                             expected="a map (@name) or a variable ($name) on the left of '='")  # fmt: skip
        return A.ExprStmt(target.loc, target)

    # -- expressions ------------------------------------------------------------------------

    def expr(self) -> A.Expr:
        """A full expression (the ternary level).

        :raises ScriptError: a syntax error.
        """
        t = self.peek()
        self._enter(t.loc)
        try:
            cond = self.binary(0)
            if self.is_op("?"):
                self.next()
                left = self.expr()
                colon = self.peek()
                if not (colon.kind == "op" and colon.text == ":"):
                    raise self.error(f"unexpected {colon.describe()} in a ternary expression", colon.loc,
                                     expected="':'")  # fmt: skip
                self.next()
                right = self.expr()
                return A.Ternary(t.loc, cond, left, right)
            return cond
        finally:
            self.depth -= 1

    def binary(self, level: int) -> A.Expr:
        """Binary operators by precedence climbing (``level`` 0 is ``||``, the loosest)."""
        left = self.cast()
        while True:
            t = self.peek()
            prec = _PRECEDENCE.get(t.text) if t.kind == "op" else None
            if prec is None or prec < level:
                return left
            self.next()
            right = self.binary(prec + 1)
            left = A.Binop(t.loc, t.text, left, right)

    def _type_ahead(self) -> tuple[str, int, int] | None:
        """A cast's ``(type)`` ahead: (type name, pointer levels, tokens it spans), else ``None``."""
        first = self.peek()
        if first.kind != "op" or first.text != "(":
            return None
        toks = self._peek_n(6)
        if len(toks) < 3 or toks[0].kind != "op" or toks[0].text != "(":
            return None
        i = 1
        if toks[1].kind == "ident" and toks[1].text in ("struct", "union", "enum"):
            if len(toks) < 4 or toks[2].kind != "ident":
                return None
            name = f"{toks[1].text} {toks[2].text}"
            i = 3
        elif toks[1].kind == "ident" and toks[1].text not in A.BUILTINS and toks[1].text not in KEYWORDS:
            name = toks[1].text
            i = 2
        else:
            return None
        ptr = 0
        while i < len(toks) and toks[i].kind == "op" and toks[i].text == "*":
            ptr += 1
            i += 1
        if i < len(toks) and toks[i].kind == "op" and toks[i].text == ")":
            if ptr == 0 and i + 1 < len(toks) and toks[i + 1].kind == "op" and toks[i + 1].text in ("(",):
                return None  # "(f)(x)" is not a cast in bpftrace
            return name, ptr, i + 1
        return None

    def cast(self) -> A.Expr:
        t = self.peek()
        ahead = self._type_ahead()
        if ahead is not None:
            name, ptr, n = ahead
            for _ in range(n):
                self.next()
            self._enter(t.loc)
            try:
                inner = self.cast()
            finally:
                self.depth -= 1
            return A.Cast(t.loc, name, ptr, inner)
        return self.unary()

    def unary(self) -> A.Expr:
        t = self.peek()
        if t.kind == "op" and t.text in ("-", "!", "~", "*"):
            self.next()
            if t.text == "-":
                n = self.peek()
                if n.kind == "int":
                    self.next()
                    lit: A.Expr = A.Int(t.loc.to(n.loc), -n.value)
                    return self.postfix(lit)
            self._enter(t.loc)
            try:
                inner = self.cast()
            finally:
                self.depth -= 1
            return A.Unop(t.loc, t.text, inner)
        if t.kind == "op" and t.text in ("++", "--"):
            self.next()
            target = self.postfix(self.primary())
            if not isinstance(target, A.MapRef | A.Var):
                raise self.error(f"the {t.text} operator must be applied to a map or variable", t.loc)
            return A.Unop(t.loc, t.text, target)
        return self.postfix(self.primary())

    def postfix(self, e: A.Expr) -> A.Expr:
        while True:
            t = self.peek()
            if t.kind != "op":
                return e
            if t.text in (".", "->"):
                self.next()
                f = self.peek()
                if t.text == "." and f.kind == "int":
                    self.next()
                    e = A.TupleIndex(e.loc.to(f.loc), e, f.value)
                    continue
                if f.kind != "ident":
                    raise self.error(f"unexpected {f.describe()} after '{t.text}'", f.loc,
                                     expected="a field name" + (" or a tuple index" if t.text == "." else ""))  # fmt: skip
                self.next()
                e = A.FieldAccess(e.loc.to(f.loc), e, f.text, t.text == "->")
            elif t.text == "[":
                if isinstance(e, A.MapRef) and not e.keys:
                    return e
                self.next()
                idx = self.expr()
                self.expect_op("]", "after an array index")
                e = A.Index(t.loc, e, idx)
            elif t.text in ("++", "--"):
                if not isinstance(e, A.MapRef | A.Var):
                    raise self.error(f"the {t.text} operator must be applied to a map or variable", t.loc)
                self.next()
                e = A.Unop(t.loc, t.text, e, postfix=True)
            else:
                return e

    def primary(self) -> A.Expr:
        t = self.next()
        if t.kind == "int":
            return A.Int(t.loc, t.value)
        if t.kind == "string":
            return A.Str(t.loc, t.text)
        if t.kind == "var":
            return A.Var(t.loc, t.text)
        if t.kind == "param":
            return A.Param(t.loc, t.value)
        if t.kind == "paramcount":
            return A.Param(t.loc, 0)
        if t.kind == "map":
            keys: list[A.Expr] = []
            if self.is_op("["):
                self.next()
                keys = self.args("]", "map key")
                if not keys:
                    raise self.error("a map key cannot be empty", t.loc, expected="an expression between '[' and ']'")
            return A.MapRef(t.loc, t.text, keys)
        if t.kind == "ident":
            if t.text in KEYWORDS:
                raise self.error(f"unexpected '{t.text}' in an expression", t.loc, expected="an expression")
            if self.is_op("("):
                self.next()
                if t.text in ("sizeof", "offsetof"):
                    return self.type_call(t)
                return A.Call(t.loc, t.text, self.args(")", f"argument of {t.text}()"))
            if t.text in A.BUILTINS:
                return A.Builtin(t.loc, t.text)
            return A.Ident(t.loc, t.text)
        if t.kind == "op" and t.text == "(":
            first = self.expr()
            if self.is_op(","):
                self.next()
                rest = self.args(")", "tuple element")
                return A.Tuple(t.loc, [first, *rest])
            self.expect_op(")", "after a parenthesized expression")
            return first
        if t.kind == "eof":
            raise self.error("unexpected end of file in an expression", t.loc, expected="an expression")
        if t.kind == "endpred":
            raise self.error("unexpected '/' in an expression", t.loc, expected="an expression")
        raise self.error(f"unexpected {t.describe()} in an expression", t.loc,
                         expected="an expression (a number, string, @map, $variable, builtin or call)")  # fmt: skip

    def type_call(self, name_tok: Token) -> A.Expr:
        """``sizeof(type or expr)`` (the type as an :class:`~bpfmux.bpftrace.ast.Ident`)."""
        t = self.peek()
        if t.kind == "ident" and t.text in ("struct", "union", "enum"):
            self.next()
            n = self.next()
            if n.kind != "ident":
                raise self.error(f"unexpected {n.describe()} after '{t.text}'", n.loc, expected="a type name")
            arg: A.Expr = A.Ident(t.loc.to(n.loc), f"{t.text} {n.text}")
            while self.is_op("*"):
                self.next()
                arg = A.Ident(arg.loc, arg.name + " *") if isinstance(arg, A.Ident) else arg
            self.expect_op(")", f"after the type in {name_tok.text}()")
            return A.Call(name_tok.loc, name_tok.text, [arg])
        return A.Call(name_tok.loc, name_tok.text, self.args(")", f"argument of {name_tok.text}()"))

    def args(self, close: str, what: str) -> list[A.Expr]:
        """Comma-separated expressions up to ``close`` (consumed)."""
        out: list[A.Expr] = []
        if self.is_op(close):
            self.next()
            return out
        while True:
            out.append(self.expr())
            t = self.peek()
            if t.kind == "op" and t.text == ",":
                self.next()
                continue
            if t.kind == "op" and t.text == close:
                self.next()
                return out
            article = "an" if what[0] in "aeiou" else "a"
            raise self.error(f"unexpected {t.describe()} after {article} {what}", t.loc, expected=f"',' or '{close}'")


def _describe(e: A.Expr) -> str:
    if isinstance(e, A.Builtin):
        return f"the builtin '{e.name}'"
    if isinstance(e, A.Call):
        return f"a call of {e.name}()"
    if isinstance(e, A.Int | A.Str):
        return "a literal"
    return "this expression"
