"""Raw and C dumps of BTF, checked against bpftool (raw: line for line; C: same named types) and clang."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bpfmux.btf import Btf
from bpfmux.btf.builder import BtfBuilder
from bpfmux.btf.cdump import CDumper, declaration, dump_c
from bpfmux.btf.rawdump import raw_lines
from bpfmux.btf.types import Composite, Typedef
from bpfmux.cli.main import main
from bpfmux.uapi import BtfKind

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = sorted((ROOT / "tests" / "bpf").glob("*.bpf.o"))
VMLINUX = "/sys/kernel/btf/vmlinux"
needs_vmlinux = pytest.mark.skipif(not os.path.exists(VMLINUX), reason="kernel without BTF: /sys/kernel/btf/vmlinux missing")
needs_bpftool = pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed (.ci/install installs it)")
needs_clang = pytest.mark.skipif(shutil.which("clang") is None, reason="clang not installed (.ci/install installs it)")


def bpftool(*args: str) -> str:
    return subprocess.run(["bpftool", "btf", "dump", "file", *args], check=True, capture_output=True, text=True).stdout


def ours_raw(btf: Btf) -> str:
    return "".join(e + "\n" for e in raw_lines(btf))


@needs_bpftool
@pytest.mark.parametrize("obj", OBJECTS, ids=lambda p: p.name)
def test_raw_dump_of_test_objects_matches_bpftool(obj: Path) -> None:
    assert ours_raw(Btf.load(obj)) == bpftool(str(obj), "format", "raw")


@needs_vmlinux
@needs_bpftool
def test_raw_dump_of_vmlinux_matches_bpftool_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    ref = bpftool(VMLINUX, "format", "raw")
    assert main(["btf", "dump", VMLINUX, "--format", "raw"]) == 0
    assert capsys.readouterr().out == ref


def test_raw_dump_of_split_btf_lists_only_its_own_types() -> None:
    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    base = Btf.parse(b.write())
    sb = BtfBuilder(base)
    sb.struct("s", [("a", i32)])
    split = Btf.parse(sb.write(), base=base)
    assert ours_raw(split) == "[2] STRUCT 's' size=4 vlen=1\n\t'a' type_id=1 bits_offset=0\n"


def _names(text: str) -> collections.Counter:
    """(kind, name) of every top-level definition in a C header, ___N suffixes removed."""
    out: collections.Counter = collections.Counter()
    pending = False
    strip = lambda n: re.sub(r"___\d+$", "", n)  # noqa: E731
    for ln in text.split("\n"):
        m = re.match(r"^(struct|union|enum) (\w+) \{", ln)
        if m:
            out[(m.group(1), strip(m.group(2)))] += 1
            continue
        m = re.match(r"^(struct|union) (\w+);$", ln)
        if m:
            out[("fwd " + m.group(1), strip(m.group(2)))] += 1
            continue
        if ln.startswith("typedef "):
            if ln.endswith("{"):
                pending = True
                continue
            m = re.search(r"\(\* ?(?:const )?(\w+)\)", ln) or re.search(r"(\w+)\(.*\);$", ln) or re.search(r"(\w+)(\[\d+\])*;$", ln)
            assert m, ln
            out[("typedef", strip(m.group(1)))] += 1
            continue
        if pending:
            m = re.match(r"^\}(?: __attribute__\(\(packed\)\))? (\w+);$", ln)
            if m:
                out[("typedef", strip(m.group(1)))] += 1
                pending = False
    return out


def _definitions(c: collections.Counter) -> collections.Counter:
    return collections.Counter({k: v for k, v in c.items() if not k[0].startswith("fwd")})


def _declared_only(c: collections.Counter) -> set:
    return {k[1] for k in c if k[0].startswith("fwd") and (k[0][4:], k[1]) not in c}


def _uses_va_list(btf: Btf, t: Composite, seen: set[int] | None = None) -> bool:
    """True when the struct holds a ``__builtin_va_list`` by value (its size is target-specific: 8 on BPF, 24 on x86)."""
    seen = seen if seen is not None else set()
    for m in t.members:
        mt = btf[m.type_id]
        while mt.kind in (BtfKind.TYPEDEF, BtfKind.CONST, BtfKind.VOLATILE, BtfKind.ARRAY):
            if isinstance(mt, Typedef) and mt.name == "__builtin_va_list":
                return True
            mt = btf[mt.type_id]  # type: ignore[attr-defined]
        if isinstance(mt, Composite) and mt.id not in seen:
            seen.add(mt.id)
            if _uses_va_list(btf, mt, seen):
                return True
    return False


def _compile_with_layout_asserts(btf: Btf, tmp_path: Path) -> int:
    d = CDumper(btf)
    (tmp_path / "types.h").write_text(d.dump())
    lines = ['#include "types.h"']
    checked = 0
    for t in btf:
        if not isinstance(t, Composite) or not t.name or _uses_va_list(btf, t):
            continue
        tag = "struct" if t.kind == BtfKind.STRUCT else "union"
        cname = f"{tag} {d.name_of(t)}"
        lines.append(f'_Static_assert(sizeof({cname}) == {t.size}, "sizeof {cname}");')
        for f in btf.fields(t):
            if f.name and not f.bitfield_size:
                lines.append(f'_Static_assert(__builtin_offsetof({cname}, {f.name}) == {f.offset}, "{cname}.{f.name}");')
                checked += 1
    (tmp_path / "check.c").write_text("\n".join(lines) + "\n")
    res = subprocess.run(
        ["clang", "-target", "bpf", "-O2", "-Werror", "-Wno-duplicate-decl-specifier", "-c", "check.c", "-o", "check.o"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return checked


@needs_vmlinux
@needs_bpftool
@needs_clang
def test_c_dump_of_vmlinux_has_bpftools_types_and_compiles_with_exact_layouts(tmp_path: Path) -> None:
    btf = Btf.vmlinux()
    ours = _names(dump_c(btf))
    ref = _names(bpftool(VMLINUX, "format", "c"))
    assert _definitions(ours) == _definitions(ref)
    assert _declared_only(ours) == _declared_only(ref)
    assert sum(_definitions(ours).values()) > 1000
    assert _compile_with_layout_asserts(btf, tmp_path) > 10_000


@needs_clang
@needs_bpftool
@pytest.mark.parametrize("obj", [p for p in OBJECTS if p.name in ("btf_kinds.bpf.o", "core.bpf.o", "maps.bpf.o")], ids=lambda p: p.name)
def test_c_dump_of_test_objects(obj: Path, tmp_path: Path) -> None:
    btf = Btf.load(obj)
    assert _definitions(_names(dump_c(btf))) == _definitions(_names(bpftool(str(obj), "format", "c")))
    _compile_with_layout_asserts(btf, tmp_path)


def test_declarations() -> None:
    btf = Btf.load(ROOT / "tests" / "bpf" / "btf_kinds.bpf.o")
    kinds = btf.find("kinds", "struct")
    decl = {m.name: declaration(btf, m.type_id, m.name) for m in kinds.members}
    assert decl["cb"] == "int (*cb)(int, char *)"
    assert decl["cbs"] == "void (*cbs[4])(void)"
    assert decl["mat"] == "int mat[2][3]"
    assert decl["p"] == "const volatile int *restrict p"
    assert decl["up"] == "int *up"
    assert decl["flex"] == "int flex[0]"
    assert declaration(btf, btf.func("use_kinds").proto_id, "use_kinds") == "int use_kinds(struct kinds *s, int n)"


def test_cli_show_prints_a_layout(capsys: pytest.CaptureFixture[str]) -> None:
    obj = str(ROOT / "tests" / "bpf" / "btf_kinds.bpf.o")
    assert main(["btf", "show", "struct bits", "--file", obj]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[") and " STRUCT bits size=8 " in out
    assert re.search(r"^\s+1 \(bit\s+15\)\s+unsigned long long d:40$", out, re.M), out
    assert main(["btf", "show", "use_kinds", "--file", obj]) == 0
    assert "arg0: s: struct kinds * size=8" in capsys.readouterr().out
    assert main(["btf", "show", "no_such_type", "--file", obj]) == 1
    assert "no BTF type named 'no_such_type'" in capsys.readouterr().err
