"""bpftrace's language: tokens, the preprocessor lines, the grammar, and the
errors a script that does not parse gets (line, column, caret, what was expected)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpfmux.bpftrace import ast as A
from bpfmux.bpftrace.errors import ScriptError, Source
from bpfmux.bpftrace.lexer import Lexer
from bpfmux.bpftrace.parser import parse
from bpfmux.bpftrace.preprocess import preprocess


def tokens(text: str) -> list[tuple[str, str, int]]:
    lex = Lexer(Source(text))
    out = []
    while True:
        t = lex.next()
        if t.kind == "eof":
            return out
        out.append((t.kind, t.text, t.value))


def test_numbers_as_bpftrace_reads_them() -> None:
    assert [v for _, _, v in tokens("1e6 1_000_000 0x10 10u 5ull 42")] == [1000000, 1000000, 16, 10, 5, 42]


def test_strings_with_every_escape() -> None:
    assert tokens(r'"a\n\t\r\"\\\101\x41"') == [("string", 'a\n\t\r"\\AA', 0)]


def test_a_slash_before_a_brace_ends_a_predicate_and_other_slashes_divide() -> None:
    kinds = [k for k, _, _ in tokens("a / b / {")]
    assert kinds == ["ident", "op", "ident", "endpred", "op"]


def test_comments_and_the_shebang_are_blanks() -> None:
    assert tokens("#!/usr/bin/env bpftrace\n// x\n/* y\n z */ pid") == [("ident", "pid", 0)]


def test_maps_variables_and_parameters() -> None:
    assert tokens("@ @x $y $1 $#") == [("map", "@", 0), ("map", "@x", 0), ("var", "$y", 0), ("param", "$1", 1),
                                       ("paramcount", "$#", 0)]  # fmt: skip


def test_preprocessor_keeps_the_btf_branch_and_line_numbers() -> None:
    text = "#ifndef BPFTRACE_HAVE_BTF\n#include <linux/sched.h>\nstruct x { int a; };\n#else\n#include <sys/socket.h>\n#endif\nBEGIN {}"
    pre = preprocess(Source(text))
    assert pre.source.text.count("\n") == text.count("\n")
    assert "struct x" not in pre.source.text and pre.macros["AF_INET"] == "2"


def test_define_makes_a_macro_the_lexer_expands() -> None:
    prog = parse('#define LIMIT 5\nBEGIN { if (LIMIT > 4) { exit(); } }')
    cond = prog.probes[0].body[0].cond  # type: ignore[attr-defined]
    assert isinstance(cond, A.Binop) and isinstance(cond.left, A.Int) and cond.left.value == 5


def test_attach_points_with_paths_globs_and_lists() -> None:
    prog = parse("uretprobe:/bin/bash:readline,\n kprobe:vfs_* , tracepoint:syscalls:sys_enter_exec* /pid/ { }")
    assert [ap.text for ap in prog.probes[0].attach_points] == ["uretprobe:/bin/bash:readline", "kprobe:vfs_*",
                                                                "tracepoint:syscalls:sys_enter_exec*"]  # fmt: skip
    assert isinstance(prog.probes[0].predicate, A.Builtin)


def test_precedence_and_casts_as_in_c() -> None:
    prog = parse("BEGIN { $x = 1 + 2 * 3 << 1 == 14 && !0 ? (uint8)-1 : ((struct task_struct *)curtask)->pid; }")
    e = prog.probes[0].body[0].expr  # type: ignore[attr-defined]
    assert isinstance(e, A.Ternary) and isinstance(e.cond, A.Binop) and e.cond.op == "&&"
    assert isinstance(e.left, A.Cast) and e.left.type_name == "uint8"
    assert isinstance(e.right, A.FieldAccess) and e.right.arrow and isinstance(e.right.expr, A.Cast)


def test_statements_of_every_kind() -> None:
    prog = parse("BEGIN { @a[1, \"x\"] = count(); @b += 2; $v++; --@c; if (1) { } else if (2) { } else { }"
                 " unroll(3) { @d = 1 } while ($v < 10) { $v++; if ($v == 5) { break } continue } delete(@a[1, \"x\"]);"
                 " $t = (1, \"two\"); print($t.1); }")  # fmt: skip
    kinds = [type(s).__name__ for s in prog.probes[0].body]
    assert kinds == ["AssignMap", "AssignMap", "ExprStmt", "ExprStmt", "If", "Unroll", "While", "ExprStmt",
                     "AssignVar", "ExprStmt"]  # fmt: skip


def test_every_corpus_tool_parses(bpftrace_tools: Path) -> None:
    for path in sorted((bpftrace_tools / "tools").glob("*.bt")):
        prog = parse(path.read_text(), path.name)
        assert prog.probes, path.name


@pytest.mark.parametrize(("script", "where", "message"), [
    ("BEGIN { printf(\"x\" }", (1, 20), "unexpected '}' after an argument of printf(); expected ',' or ')'"),
    ("BEGIN { @x = ; }", (1, 14), "unexpected ';' in an expression"),
    ("BEGIN\n{\n  $x = 1 +\n}", (4, 1), "unexpected '}' in an expression"),
    ("kprobe:f { @x = 1 ", (1, 19), "unexpected end of file after a statement; expected ';' or '}'"),
    ("kprobe:f { @x = 1;", (1, 19), "unexpected end of file in a block; expected '}'"),
    ("kprobe:f @x", (1, 10), "unexpected '@x' after the attach point; expected ',' and another attach point"),
    ("BEGIN { \"abc }", (1, 9), "unterminated string"),
    ("BEGIN { @x = 1 @y = 2 }", (1, 16), "unexpected '@y' after a statement; expected ';' or '}'"),
    ("BEGIN { 1 = 2; }", (1, 9), "cannot assign to a literal"),
    ("BEGIN { $t = (1, 2); $t.0 = 3; }", (1, 22), "tuples are immutable"),
    ("BEGIN { for ($i = 0;;) {} }", (1, 9), "'for' loops are not part of bpftrace 0.17's language"),
    ("BEGIN { x ~ }", (1, 11), "unexpected '~' after a statement; expected ';' or '}'"),
    ("BEGIN { $x = ~ }", (1, 16), "unexpected '}' in an expression"),
    ("BEGIN { \"\\q\" }", (1, 10), "invalid escape character '\\q'"),
    ("BEGIN { 12abc }", (1, 9), "malformed number '12abc'"),
    ("BEGIN { ` }", (1, 9), "invalid character '`'"),
    ("/* never closed", (1, 1), "end of file during comment"),
    ("#if 1\nBEGIN {}", (1, 1), "#if without #endif"),
    ("", (1, 1), "the script has no probes"),
])  # fmt: skip
def test_syntax_errors_say_where_and_what_was_expected(script: str, where: tuple[int, int], message: str) -> None:
    with pytest.raises(ScriptError) as info:
        parse(script)
    e = info.value
    assert e.loc is not None and (e.loc.line, e.loc.col) == where, e.render()
    assert message in str(e)
    assert str(e).startswith(f"stdin:{where[0]}:{where[1]}: ")


def test_the_excerpt_puts_a_caret_under_the_construct() -> None:
    with pytest.raises(ScriptError) as info:
        parse("BEGIN\n{\n\t@x = foo +;\n}", "t.bt")
    lines = info.value.render().splitlines()
    assert lines[0].startswith("t.bt:3:12: unexpected ';' in an expression")
    assert lines[1] == " @x = foo +;"
    assert lines[2] == "           ^"


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ScriptError, match="nested more than"):
        parse("BEGIN { $x = " + "(" * 500 + "1" + ")" * 500 + "; }")
