"""The value classes on a tracer's start-up path (converted from dataclasses to
:mod:`bpfmux.record`) keep the dataclasses' behaviour, and that path does not
import ``dataclasses``."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from bpfmux.abi.context import ContextLayout, CtxAccess, CtxField
from bpfmux.abi.tpformat import TpField, TracepointFormat
from bpfmux.api import TestRunResult
from bpfmux.btf.builder import BtfBuilder
from bpfmux.cli._common import Privileges
from bpfmux.host.elfsyms import ElfSymbol
from bpfmux.host.kallsyms import KernelSymbol
from bpfmux.host.targets import KprobeTarget, UprobeTarget
from bpfmux.isa.build import Program, Relocation, RelocKind
from bpfmux.isa.insn import Insn
from bpfmux.isa.validity import Family, Flaw, FlawKind
from bpfmux.live.features import Probe as FeatureProbe
from bpfmux.live.sys.commands import BatchResult, QueryResult, TaskFdInfo, TaskFdType
from bpfmux.live.sys.commands import TestRunResult as RawTestRunResult
from bpfmux.obj.sections import parse_section
from bpfmux.trace.plan import Group, Mechanism, Probe, TraceOptions
from bpfmux.trace.spec import ProbeSpec, parse_probe

SRC = Path(__file__).resolve().parents[2] / "src"


def test_insn_equality_hash_repr_and_replace() -> None:
    a = Insn(0x18, 1, 2, 3, 4)
    assert a == Insn(opcode=0x18, dst=1, src=2, off=3, imm=4)
    assert a != Insn(0x18, 1, 2, 3, 5) and a != (0x18, 1, 2, 3, 4)
    assert hash(a) == hash((0x18, 1, 2, 3, 4))
    assert {a: "x"}[Insn(0x18, 1, 2, 3, 4)] == "x"
    assert Insn(0x95) == Insn(0x95, 0, 0, 0, 0)
    assert repr(a) == "Insn(opcode=24, dst=1, src=2, off=3, imm=4)"
    assert a.replace(imm=9, dst=0) == Insn(0x18, 0, 2, 3, 9)
    assert a.replace() == a
    with pytest.raises(TypeError):
        a.replace(bogus=1)
    with pytest.raises(AttributeError):
        a.imm = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.extra = 5  # type: ignore[attr-defined]
    match a:
        case Insn(op, dst, src, off, imm):
            assert (op, dst, src, off, imm) == (0x18, 1, 2, 3, 4)
        case _:
            pytest.fail("Insn did not match its positional pattern")


@pytest.mark.parametrize(
    "value",
    [
        Insn(0x18, 1, 2, 3, 1 << 40),
        TestRunResult(1, data_out=b"x"),
        RawTestRunResult(1, 2, b"d", b"c"),
        Privileges(0, 1 << 21, lockdown="integrity"),
        ElfSymbol("getpid", 0x1000, 8, 0x1000, version="GLIBC_2.2.5", default=False),
        KernelSymbol("do_sys_open", 0xFFFF0000, "T", module="ext4"),
        UprobeTarget("libc.so.6", "getpid", 4),
        KprobeTarget("vfs_read", 4),
        Relocation(1, 2, RelocKind.MAP_FD, "m", 8),
        Flaw(Insn(0x07), FlawKind.RESERVED, Family.ALU64, "off", "reserved off"),
        FeatureProbe(True, "loads"),
        BatchResult(3, True),
        TaskFdInfo(1, TaskFdType.UPROBE, "/bin/sh", 0x10, 0),
        ProbeSpec("tracepoint", "t:sched:*", category="sched", name="*"),
        parse_section("uprobe.multi/libc.so.6:getpid"),
        ContextLayout("u64[2]", 16, "fields", fields=(CtxField("a", 0, 8), CtxField("b", 8, 8, load="ptr_to_btf_id"))),
        CtxAccess(True, field=CtxField("a", 0, 8)),
        TracepointFormat("sched", "x", 7, (TpField("int pid", "pid", "int", 8, 4, True),), "fmt"),
    ],
    ids=lambda v: type(v).__qualname__,
)
def test_frozen_values_are_hashable_immutable_and_survive_copy_and_pickle(value: object) -> None:
    twin = copy.copy(value)
    assert twin == value and hash(twin) == hash(value)
    assert copy.deepcopy(value) == value
    assert pickle.loads(pickle.dumps(value)) == value
    field = type(value).__match_args__[0]
    with pytest.raises(AttributeError):
        setattr(value, field, getattr(value, field))
    assert repr(value).startswith(f"{type(value).__qualname__}({field}=")


def test_defaults_and_keyword_calls_match_the_dataclasses() -> None:
    assert TestRunResult(retval=7) == TestRunResult(7, 0, b"", b"")
    assert Privileges(euid=0, caps=0) == Privileges(0, 0, None, None, 0)
    assert ElfSymbol("f", 1, 2, 3).replace(table=".symtab") == ElfSymbol(
        "f", 1, 2, 3, None, True, "global", "func", ".symtab"
    )
    assert KernelSymbol("f", 1, "t").module is None
    assert UprobeTarget("b", None).offset == 0
    assert KprobeTarget(None, address=5) == KprobeTarget(None, 0, 5)
    assert Relocation(1, 1, RelocKind.MAP_FD, "m").offset == 0
    assert ProbeSpec("software", "s:cs", name="cs") == ProbeSpec("software", "s:cs", "", "", "cs", 0)
    assert parse_probe("t:sched:sched_switch").replace(name="x").name == "x"
    assert FeatureProbe(False).as_dict() == {"supported": False, "detail": "", "method": "load"}
    assert FeatureProbe(**FeatureProbe(True, "d", "create").as_dict()) == FeatureProbe(True, "d", "create")
    assert QueryResult([1, 2], 0, 3).prog_ids == [1, 2]
    assert CtxField("a", 0, 8) == CtxField("a", 0, 8, True, (), False, "scalar", None, False)
    assert ContextLayout("c", 8) == ContextLayout("c", 8, "window", 0, 0, (), False, "")
    assert CtxAccess(False) == CtxAccess(False, "", "scalar", None)
    assert TpField("int x", "x", "int", 0, 4, True) == TpField("int x", "x", "int", 0, 4, True, None, False, False)
    assert TracepointFormat("s", "n", 1, ()).print_fmt == ""
    with pytest.raises(TypeError):
        hash(QueryResult([1], 0, 0))  # a list field: unhashable, as the dataclass was


def test_btf_records_keep_value_semantics() -> None:
    b = BtfBuilder()
    i32 = b.int("int", 4, signed=True)
    s = b.struct("pair", [("a", i32, 0), ("b", i32, 32)], size=8)
    b.func("f", b.func_proto(i32, [("p", s), ("n", i32)]))
    btf = b.btf
    fields = btf.fields("pair")
    assert [(f.name, f.bit_offset, f.bitfield_size) for f in fields] == [("a", 0, 0), ("b", 32, 0)]
    assert fields == btf.fields("pair") and hash(fields[0]) == hash(btf.fields("pair")[0])
    assert fields[1].replace(name="c").name == "c" and fields[1].replace(name="c").bit_offset == 32
    sig = btf.func("f")
    assert sig == btf.func("f") and sig.arg_names == ["p", "n"] and sig.args[0].by_value_struct
    assert pickle.loads(pickle.dumps(sig)) == sig and {sig: 1}[btf.func("f")] == 1
    with pytest.raises(AttributeError):
        sig.name = "g"  # type: ignore[misc]


def test_mutable_defaults_are_fresh_per_instance() -> None:
    p, q = Program([Insn(0x95)]), Program([Insn(0x95)])
    p.relocations.append(Relocation(0, 0, RelocKind.MAP_FD, "m"))
    p.labels["x"] = 0
    assert q.relocations == [] and q.labels == {}
    assert p != q and Program([Insn(0x95)]) == q
    a, b = Probe(0, "x"), Probe(0, "x")
    a.info["k"] = 1
    assert b.info == {} and a != b
    spec = parse_probe("t:sched:sched_switch")
    g = Group(spec, Mechanism.TRACEPOINT, [], [])
    assert (g.retprobe, g.role, g.extra) == (False, "main", {})
    assert Group(spec, Mechanism.TRACEPOINT, [], []).extra is not g.extra


def test_mutable_values_compare_by_field_and_are_unhashable() -> None:
    opts = TraceOptions(mode="latency", pid=3)
    assert opts == TraceOptions("latency", None, 3) and opts != TraceOptions()
    opts.skip_comm = "held"
    assert opts.skip_comm == "held"
    with pytest.raises(TypeError):
        hash(opts)
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_the_start_up_path_does_not_import_dataclasses() -> None:
    code = (
        "import sys\n"
        "import bpfmux.cli.main, bpfmux.cli.bpftrace, bpfmux.live.kernel, bpfmux.host.targets, bpfmux.attach\n"
        "import bpfmux.live.links.uprobe_multi, bpfmux.live.links, bpfmux.live.ringbuf, bpfmux.isa.build\n"
        "import bpfmux.trace.plan, bpfmux.live.features, bpfmux.obj.sections, bpfmux.abi.tpformat\n"
        "import bpfmux.btf.funcs, bpfmux.btf.layout\n"
        "print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stderr
