"""What a tool's user space sets before load, on the object spec: globals typed
through BTF (ObjectSpec.set_global, obj.variables), map sizes (resize_map),
the map types created without BTF ids, twin programs (obj.twins), and
``bpfmux run``'s configuration of a spec (cli.run_setup.configure)."""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

import pytest

from bpfmux.errors import InvalidArgumentError, NotFoundError, ParseError
from bpfmux.obj import load_object
from bpfmux.obj.maptypes import NO_BTF_TYPES, takes_btf_ids
from bpfmux.obj.sections import parse_section
from bpfmux.obj.spec import ProgramSpec
from bpfmux.obj.twins import hook_of, twin_groups
from bpfmux.obj.variables import find_global, global_variables, parse_value
from bpfmux.uapi import MapType

BPF = Path(__file__).resolve().parents[1] / "bpf"


def _value(spec, name: str) -> bytes:
    var = find_global(spec, name)
    return spec.maps[var.section].value[var.offset : var.offset + var.size]


class TestGlobals:
    def test_every_section_and_typed_text(self) -> None:
        spec = load_object(BPF / "run_tool.bpf.o")
        names = {v.name: v.section for v in global_variables(spec)}
        assert names["target_tgid"] == ".rodata" and names["slot"] == ".data" and names["sent"] == ".bss"
        spec.set_global("target_tgid", "-1")  # C's conversion of -1 to __u32
        spec.set_global("slot", "0x3")
        spec.set_global("sent", 7)
        assert _value(spec, "target_tgid") == b"\xff" * 4
        assert struct.unpack("<I", _value(spec, "slot"))[0] == 3
        assert struct.unpack("<Q", _value(spec, "sent"))[0] == 7
        spec.set_global("global_hist", {"slots": [1, 2]})
        assert struct.unpack("<8I", _value(spec, "global_hist")) == (1, 2, 0, 0, 0, 0, 0, 0)

    def test_parse_value_kinds(self) -> None:
        spec = load_object(BPF / "btf_kinds.bpf.o", lenient=True)
        btf = spec.btf
        assert btf is not None
        u32 = next(t.id for t in btf.own_types() if t.kind.name == "INT" and t.name == "unsigned int")
        assert parse_value(btf, u32, "0b101") == 5 and parse_value(btf, u32, "-1") == 0xFFFFFFFF
        with pytest.raises(ParseError):
            parse_value(btf, u32, str(1 << 32))
        with pytest.raises(ParseError):
            parse_value(btf, u32, "twelve")

    def test_bool_array_and_char_array(self) -> None:
        spec = load_object(BPF / "globals.bpf.o")
        rodata = [v for v in global_variables(spec) if v.section.startswith(".rodata")]
        assert rodata
        with pytest.raises(NotFoundError, match="globals are"):
            spec.set_global("no_such_variable", 1)
        with pytest.raises(NotFoundError, match="read-only global"):
            spec.set_rodata("no_such_variable", 1)

    def test_resize_map(self) -> None:
        spec = load_object(BPF / "run_tool.bpf.o")
        spec.resize_map("hists", max_entries=4096)
        assert spec.map("hists").max_entries == 4096
        for bad in (0, -1, True, 1 << 32):
            with pytest.raises(InvalidArgumentError):
                spec.resize_map("hists", max_entries=bad)
        with pytest.raises(InvalidArgumentError, match="global data"):
            spec.resize_map(".bss", max_entries=2)
        with pytest.raises(NotFoundError):
            spec.resize_map("nope", 1)


def test_map_types_created_without_btf_ids() -> None:
    for t in (MapType.CGROUP_ARRAY, MapType.DEVMAP, MapType.DEVMAP_HASH, MapType.CPUMAP, MapType.XSKMAP,
              MapType.SOCKMAP, MapType.SOCKHASH, MapType.QUEUE, MapType.STACK, MapType.PERF_EVENT_ARRAY,
              MapType.STACK_TRACE, MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
        assert t in NO_BTF_TYPES and not takes_btf_ids(int(t))
    assert takes_btf_ids(MapType.HASH) and takes_btf_ids(MapType.LPM_TRIE)


def _prog(name: str, section: str) -> ProgramSpec:
    info = parse_section(section)
    return ProgramSpec(name, section, info, info.prog_type, info.expected_attach_type, info.target, info.prog_flags,
                       info.autoload, info.auto_attach, [])


class TestTwins:
    def test_hooks(self) -> None:
        assert hook_of(_prog("a", "tp_btf/sched_switch")) == ("tracepoint", "sched_switch")
        assert hook_of(_prog("b", "raw_tp/sched_switch")) == ("tracepoint", "sched_switch")
        assert hook_of(_prog("c", "tracepoint/sched/sched_switch")) == ("tracepoint", "sched_switch")
        assert hook_of(_prog("d", "kretprobe/vfs_read")) == ("exit", "vfs_read")
        assert hook_of(_prog("e", "fexit/vfs_read")) == ("exit", "vfs_read")
        assert hook_of(_prog("f", "kprobe/vfs_read")) == ("entry", "vfs_read")
        assert hook_of(_prog("g", "xdp")) is None

    def test_groups_best_first(self) -> None:
        progs = [_prog("raw", "raw_tp/sched_wakeup"), _prog("btf", "tp_btf/sched_wakeup"),
                 _prog("kp", "kprobe/vfs_read"), _prog("fe", "fentry/vfs_read"), _prog("kret", "kretprobe/vfs_read"),
                 _prog("one", "raw_tp/sched_switch"), _prog("two", "raw_tp/sched_switch")]
        groups = [[p.name for p in g] for g in twin_groups(progs)]
        assert groups == [["btf", "raw"], ["fe", "kp"]]  # same-kind programs on one hook are not twins


def _args(**kw: object) -> argparse.Namespace:
    base = {"set": [], "map_size": [], "map_value_size": [], "skip": [], "attach": []}
    base.update(kw)
    return argparse.Namespace(**base)


class TestRunConfigure:
    def test_sets_sizes_skips_and_targets(self) -> None:
        from bpfmux.cli.run_setup import configure

        spec = load_object(BPF / "run_tool.bpf.o")
        notes: list[str] = []
        configure(spec, _args(set=["slot=5"], map_size=["hists=8"], skip=["enter_raw"],
                              attach=["enter_btf=sys_exit"]), notes.append)
        assert struct.unpack("<I", _value(spec, "slot"))[0] == 5 and spec.map("hists").max_entries == 8
        assert not spec.program("enter_raw").autoload and spec.program("enter_btf").attach_target == "sys_exit"
        assert notes == []

    def test_zero_sized_maps_get_a_default_with_a_note(self) -> None:
        from bpfmux.cli.run_setup import DEFAULT_SIZE, configure

        spec = load_object(BPF / "maps.bpf.o")
        stack = next(m for m in spec.maps.values() if int(m.type) == MapType.STACK_TRACE)
        stack.max_entries, stack.value_size = 0, 0
        notes: list[str] = []
        configure(spec, _args(), notes.append)
        assert stack.max_entries == 1024 and stack.value_size == 127 * 8 and DEFAULT_SIZE == 10240
        assert len(notes) == 2 and all(stack.name in n for n in notes)

    def test_errors_name_what_the_object_has(self) -> None:
        from bpfmux.cli._common import CliError, UsageError
        from bpfmux.cli.run_setup import configure

        spec = load_object(BPF / "run_tool.bpf.o")
        with pytest.raises(CliError, match="globals are: .*target_tgid"):
            configure(spec, _args(set=["nope=1"]), print)
        with pytest.raises(CliError, match="target_tgid=x"):
            configure(spec, _args(set=["target_tgid=x"]), print)
        with pytest.raises(CliError, match="no map 'nope'"):
            configure(spec, _args(map_size=["nope=1"]), print)
        with pytest.raises(UsageError, match="positive integer"):
            configure(spec, _args(map_size=["hists=0"]), print)
        with pytest.raises(CliError, match="no program 'nope'"):
            configure(spec, _args(skip=["nope"]), print)


class TestRunAttachTwins:
    """cli.run_setup.attach_all: one twin per hook, best first, the next when the best did not load or attach."""

    class FakeProg:
        def __init__(self, spec: ProgramSpec, fails: bool = False) -> None:
            self.spec, self.name, self.section, self.fails = spec, spec.name, spec.section, fails
            self.attach_target = spec.attach_target

        def attach(self, target: str | None = None, **opts: object) -> str:
            if self.fails:
                from bpfmux.errors import BpfError

                raise BpfError(22, "refused")
            return f"link:{self.name}"

    def _run(self, loaded: dict, specs: list[ProgramSpec]) -> object:
        from bpfmux.cli.run_setup import attach_all

        coll = argparse.Namespace(programs=loaded, spec=argparse.Namespace(programs={p.name: p for p in specs}))
        args = argparse.Namespace(all_twins=False, program=None, attach=[], pid=None, period=None, freq=99,
                                  binary=None, verbose=False)
        said: list[str] = []
        report = attach_all(coll, args, said.append)
        return report, said

    def test_best_twin_runs_the_other_is_idle(self) -> None:
        btf, raw = _prog("btf", "tp_btf/sched_switch"), _prog("raw", "raw_tp/sched_switch")
        report, said = self._run({"btf": self.FakeProg(btf), "raw": self.FakeProg(raw)}, [btf, raw])
        assert report.links == ["link:btf"] and report.idle == {"raw": "twin of btf"} and not report.failed
        assert any("btf: attached; its twin raw" in s for s in said)

    def test_next_twin_when_the_best_did_not_load_or_attach(self) -> None:
        btf, raw = _prog("btf", "tp_btf/sched_switch"), _prog("raw", "raw_tp/sched_switch")
        report, _ = self._run({"raw": self.FakeProg(raw)}, [btf, raw])  # btf did not load
        assert report.links == ["link:raw"] and "btf" in report.idle
        report, _ = self._run({"btf": self.FakeProg(btf, fails=True), "raw": self.FakeProg(raw)}, [btf, raw])
        assert report.links == ["link:raw"] and not report.failed and "btf" in report.idle
