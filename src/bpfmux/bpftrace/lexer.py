"""Tokens of bpftrace's language (the version 0.17 spelling).

:class:`Lexer` turns script text into :class:`Token` values on demand. The
parser drives it, because one place of the grammar reads text differently:
a probe's attach point (``uprobe:/bin/bash:readline``, ``kprobe:vfs_*``,
``profile:hz:99``) is one word of path characters, read by
:meth:`Lexer.attach_point`, while everything else is tokens.

As in bpftrace, a ``/`` followed (after blanks) by ``{`` or ``/`` ends a
predicate (an ``endpred`` token), any other ``/`` divides. Integers may
carry ``_`` separators, C suffixes (``u``, ``l``, ``ull``) and an exponent
(``1e6`` is the integer one million). Strings know the escapes ``\\n \\t \\r
\\" \\\\``, octal ``\\NNN`` and hex ``\\xNN``. Object-like macros
(``#define NAME VALUE``, see :mod:`.preprocess`) are expanded here.
"""

from __future__ import annotations

from ..record import Frozen
from ..record import set_field as _set
from .errors import Loc, ScriptError, Source

__all__ = ["KEYWORDS", "OPERATORS", "Lexer", "Token"]

#: words that are statements, never names
KEYWORDS = frozenset({"if", "else", "unroll", "while", "for", "return", "continue", "break"})

#: operators, longest first so that the lexer takes the longest match
OPERATORS = ("<<=", ">>=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "==", "!=", "<=", ">=", "<<", ">>",
             "&&", "||", "++", "--", "->", ":", ";", "{", "}", "[", "]", "(", ")", ",", "=", "<", ">", "+", "-",
             "*", "/", "%", "&", "|", "^", "!", "~", ".", "?")  # fmt: skip

_IDENT_START = frozenset("_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_IDENT = _IDENT_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
#: characters of an attach point word (bpftrace's path characters, globs, offsets, parameters)
_AP_CHARS = _IDENT | frozenset("-./*#:+[]?$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
U64 = (1 << 64) - 1


class Token(Frozen):
    """One token.

    :ivar kind: ``ident``, ``int``, ``string``, ``map``, ``var``, ``param``,
        ``paramcount``, ``op``, ``endpred``, ``attach`` or ``eof``.
    :ivar text: the text as written (a string's decoded value for ``string``).
    :ivar value: an ``int`` token's value; a ``param`` token's number.
    :ivar loc: where it starts (and how long it is).
    """

    __slots__ = ("kind", "text", "loc", "value")

    kind: str
    text: str
    loc: Loc
    value: int

    def __init__(self, kind: str, text: str, loc: Loc, value: int = 0) -> None:
        _set(self, "kind", kind)
        _set(self, "text", text)
        _set(self, "loc", loc)
        _set(self, "value", value)

    def describe(self) -> str:
        """How an error names this token: ``'foo'``, ``end of file``, ``string "x"``."""
        if self.kind == "eof":
            return "end of file"
        if self.kind == "string":
            return f'string "{self.text}"'
        return f"'{self.text}'"


class Lexer:
    """Tokens of ``source`` on demand.

    :param macros: object-like macros to expand (name → replacement text).
    """

    def __init__(self, source: Source, macros: dict[str, str] | None = None) -> None:
        self.source = source
        self.text = source.text
        self.pos = 0
        self.line = 1
        self.col = 1
        self.macros = dict(macros or {})
        self._pending: list[Token] = []
        self._expanding = 0

    # -- positions -------------------------------------------------------------------

    def _loc(self, length: int = 1) -> Loc:
        return Loc(self.line, self.col, max(1, length))

    def _advance(self, n: int) -> None:
        for ch in self.text[self.pos:self.pos + n]:
            if ch == "\n":
                self.line += 1
                self.col = 1
            else:
                self.col += 1
        self.pos += n

    def _error(self, message: str, loc: Loc | None = None, expected: str | None = None) -> ScriptError:
        return ScriptError(message, loc or self._loc(), self.source, expected=expected)

    # -- blanks and comments ------------------------------------------------------------

    def skip_blanks(self) -> None:
        """Skip whitespace, ``//`` and ``/* */`` comments and a first-line ``#!``.

        :raises ScriptError: a comment that never ends.
        """
        t = self.text
        while self.pos < len(t):
            ch = t[self.pos]
            if ch in " \t\r\n\f\v":
                self._advance(1)
            elif t.startswith("//", self.pos):
                end = t.find("\n", self.pos)
                self._advance((end if end >= 0 else len(t)) - self.pos)
            elif t.startswith("/*", self.pos):
                start = self._loc(2)
                end = t.find("*/", self.pos + 2)
                if end < 0:
                    raise self._error("end of file during comment", start, expected="'*/' to close the comment")
                self._advance(end + 2 - self.pos)
            elif t.startswith("#!", self.pos) and self.pos == 0:
                end = t.find("\n")
                self._advance((end if end >= 0 else len(t)) - self.pos)
            else:
                return

    def at_end(self) -> bool:
        """Whether only blanks and comments are left (no token is buffered).

        :raises ScriptError: a comment that never ends.
        """
        if self._pending:
            return False
        self.skip_blanks()
        return self.pos >= len(self.text)

    # -- attach points -------------------------------------------------------------------

    def attach_point(self) -> Token | None:
        """Read one attach point word (``kprobe:vfs_*``, ``uprobe:"/a b":f``,
        ``BEGIN``) at the current position, or ``None`` when none starts here.

        A ``/`` belongs to the word only after a ``:`` (a path); blanks end it.

        :raises ScriptError: an unterminated quoted part.
        """
        assert not self._pending, "attach_point() needs an empty lookahead"
        self.skip_blanks()
        t = self.text
        start = self.pos
        loc = self._loc()
        seen_colon = False
        out: list[str] = []
        while self.pos < len(t):
            ch = t[self.pos]
            if ch == '"':
                end = self.pos + 1
                while end < len(t) and t[end] not in '"\n':
                    end += 2 if t[end] == "\\" else 1
                if end >= len(t) or t[end] != '"':
                    raise self._error("unterminated string in an attach point", self._loc(), expected="'\"'")
                out.append(t[self.pos:end + 1])
                self._advance(end + 1 - self.pos)
                continue
            if ch not in _AP_CHARS or (ch == "/" and not seen_colon):
                break
            if ch == ":":
                seen_colon = True
            out.append(ch)
            self._advance(1)
        if self.pos == start:
            return None
        text = "".join(out)
        return Token("attach", text, Loc(loc.line, loc.col, len(text)))

    # -- tokens --------------------------------------------------------------------------

    def peek(self) -> Token:
        """The next token without consuming it.

        :raises ScriptError: a malformed token.
        """
        if not self._pending:
            self._pending.append(self._lex())
        return self._pending[0]

    def next(self) -> Token:
        """Consume and return the next token.

        :raises ScriptError: a malformed token.
        """
        tok = self.peek()
        self._pending.pop(0)
        return tok

    def unread(self, tok: Token) -> None:
        """Put ``tok`` back in front of the lookahead."""
        self._pending.insert(0, tok)

    def _lex(self) -> Token:
        self.skip_blanks()
        t = self.text
        if self.pos >= len(t):
            return Token("eof", "", self._loc())
        ch = t[self.pos]
        loc = self._loc()
        if ch in _DIGITS:
            return self._number(loc)
        if ch in _IDENT_START:
            end = self.pos
            while end < len(t) and t[end] in _IDENT:
                end += 1
            word = t[self.pos:end]
            self._advance(end - self.pos)
            if word in self.macros and self._expanding < 64:
                return self._expand(word, loc)
            return Token("ident", word, Loc(loc.line, loc.col, len(word)))
        if ch == "@":
            end = self.pos + 1
            if end < len(t) and t[end] in _IDENT_START:
                while end < len(t) and t[end] in _IDENT:
                    end += 1
            word = t[self.pos:end]
            self._advance(end - self.pos)
            return Token("map", word, Loc(loc.line, loc.col, len(word)))
        if ch == "$":
            end = self.pos + 1
            if end < len(t) and t[end] == "#":
                self._advance(2)
                return Token("paramcount", "$#", Loc(loc.line, loc.col, 2))
            if end < len(t) and t[end] in _DIGITS:
                while end < len(t) and t[end] in _DIGITS:
                    end += 1
                word = t[self.pos:end]
                self._advance(end - self.pos)
                n = int(word[1:])
                if n == 0:
                    raise self._error("param $0 is out of range; positional parameters start at $1",
                                      Loc(loc.line, loc.col, len(word)))  # fmt: skip
                return Token("param", word, Loc(loc.line, loc.col, len(word)), n)
            if end < len(t) and t[end] in _IDENT_START:
                while end < len(t) and t[end] in _IDENT:
                    end += 1
                word = t[self.pos:end]
                self._advance(end - self.pos)
                return Token("var", word, Loc(loc.line, loc.col, len(word)))
            raise self._error("'$' must start a variable ($name) or a positional parameter ($1, $#)", loc)
        if ch == '"':
            return self._string(loc)
        if ch == "#":
            raise self._error("preprocessor directives are only allowed before the first probe", loc)
        if ch == "/":
            j = self.pos + 1
            while j < len(t) and t[j] in " \t\r\n":
                j += 1
            if j < len(t) and t[j] in "{/" and not t.startswith("/=", self.pos):
                self._advance(1)
                return Token("endpred", "/", loc)
        for op in OPERATORS:
            if t.startswith(op, self.pos):
                self._advance(len(op))
                return Token("op", op, Loc(loc.line, loc.col, len(op)))
        shown = ch if ch.isprintable() else repr(ch)
        raise self._error(f"invalid character '{shown}'", loc)

    def _expand(self, word: str, loc: Loc) -> Token:
        """The tokens of macro ``word``'s replacement, at ``word``'s place."""
        body = Lexer(Source(self.macros[word], self.source.name), self.macros)
        body._expanding = self._expanding + 1
        toks = []
        try:
            while True:
                tok = body._lex()
                if tok.kind == "eof":
                    break
                toks.append(Token(tok.kind, tok.text, Loc(loc.line, loc.col, len(word)), tok.value))
        except ScriptError as e:
            raise self._error(f"in the expansion of macro {word}: {e.message}", Loc(loc.line, loc.col, len(word))) from None
        if not toks:
            return self._lex()
        self._pending[0:0] = toks[1:]
        return toks[0]

    def _number(self, loc: Loc) -> Token:
        t = self.text
        start = self.pos
        if t.startswith(("0x", "0X"), start):
            end = start + 2
            while end < len(t) and t[end] in _HEX:
                end += 1
            if end == start + 2:
                raise self._error("hex number without digits", loc, expected="hex digits after 0x")
            value = int(t[start + 2:end], 16)
        else:
            end = start
            while end < len(t) and (t[end] in _DIGITS or t[end] == "_"):
                end += 1
            while t[end - 1] == "_":
                end -= 1
            mantissa = t[start:end].replace("_", "")
            value = int(mantissa)
            if end < len(t) and t[end] in "eE" and end + 1 < len(t) and t[end + 1] in _DIGITS:
                e_end = end + 1
                while e_end < len(t) and (t[e_end] in _DIGITS or t[e_end] == "_"):
                    e_end += 1
                value *= 10 ** int(t[end + 1:e_end].replace("_", ""))
                end = e_end
            else:
                low = t[end:end + 3].lower()
                for suffix in ("ull", "llu", "ul", "lu", "ll", "u", "l"):
                    if low.startswith(suffix):
                        end += len(suffix)
                        break
        if end < len(t) and t[end] in _IDENT:
            bad_end = end
            while bad_end < len(t) and t[bad_end] in _IDENT:
                bad_end += 1
            raise self._error(f"malformed number '{t[start:bad_end]}'", Loc(loc.line, loc.col, bad_end - start))
        text = t[start:end]
        self._advance(end - start)
        if value > U64:
            raise self._error(f"number {text} does not fit in 64 bits", Loc(loc.line, loc.col, len(text)))
        return Token("int", text, Loc(loc.line, loc.col, len(text)), value)

    def _string(self, loc: Loc) -> Token:
        t = self.text
        i = self.pos + 1
        out: list[str] = []
        while True:
            if i >= len(t) or t[i] == "\n":
                raise self._error("unterminated string", loc, expected="'\"' to end the string")
            ch = t[i]
            if ch == '"':
                break
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            nxt = t[i + 1] if i + 1 < len(t) else ""
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
            elif nxt in "xX" and i + 2 < len(t) and t[i + 2] in _HEX:
                j = i + 2
                while j < len(t) and j < i + 4 and t[j] in _HEX:
                    j += 1
                out.append(chr(int(t[i + 2:j], 16)))
                i = j
            elif nxt and nxt in "01234567":
                j = i + 1
                while j < len(t) and j < i + 4 and t[j] in "01234567":
                    j += 1
                v = int(t[i + 1:j], 8)
                if v > 255:
                    raise self._error(f"octal escape sequence out of range '{t[i:j]}'",
                                      Loc(self.line, self.col + (i - self.pos), j - i))  # fmt: skip
                out.append(chr(v))
                i = j
            else:
                shown = nxt if nxt.isprintable() and nxt else repr(nxt)
                raise self._error(f"invalid escape character '\\{shown}'", Loc(self.line, self.col + (i - self.pos), 2),
                                  expected="one of \\n \\t \\r \\\" \\\\ \\NNN \\xNN")  # fmt: skip
        length = i + 1 - self.pos
        self._advance(length)
        return Token("string", "".join(out), Loc(loc.line, loc.col, length))
