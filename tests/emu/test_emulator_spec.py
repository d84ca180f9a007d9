"""The remaining rows of multi-attach.md, one scenario each: link errors,
context views the verifier enforces, tp_btf, addresses from kallsyms."""

from __future__ import annotations

import errno
import os

import pytest
from emu_progs import ctx_dump_prog, words

from bpfmux.emu.kernel.emulator import Emulator
from bpfmux.emu.kernel.trampoline import Param
from bpfmux.errors import BpfError, NotFoundError, VerifierError
from bpfmux.isa.build import R0, Asm
from bpfmux.uapi import MAX_MULTI_FUNCS, AttachType, ProgFlags, ProgType

RET0 = Asm().mov(R0, 0).exit().assemble().insns


def seed_multi(emu: Emulator, attach_type: AttachType = AttachType.TRACE_FENTRY):
    return emu.load_program(RET0, ProgType.TRACING, name="m", attach_type=attach_type, flags=ProgFlags.MULTI_FUNC)


def test_link_errors_e2big_and_not_a_function(emu):
    p = seed_multi(emu)
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(p, list(range(1, MAX_MULTI_FUNCS + 2)))
    assert ei.value.errno == errno.E2BIG
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(p, [987654321])
    assert ei.value.errno == errno.EINVAL and "987654321" in str(ei.value)
    f = emu.function("bpf_fentry_test1")
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(p, [f, f, f], cookies=[1, 2])
    assert ei.value.errno == errno.EINVAL
    assert emu.sites() == []


def test_struct_by_value_argument_is_refused_by_name(emu):
    emu.define("takes_struct", [Param("s", 16, by_value_struct=True)], 8)
    p = seed_multi(emu)
    with pytest.raises(BpfError) as ei:
        p.attach("takes_struct")
    assert ei.value.errno == errno.EINVAL and "takes_struct" in str(ei.value) and "'s'" in str(ei.value)


def test_non_multi_program_cannot_make_a_multi_link(emu):
    single = emu.load_program(RET0, ProgType.TRACING, name="s", attach_type=AttachType.TRACE_FENTRY,
                              attach_target="bpf_fentry_test1")
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(single, [emu.function("bpf_fentry_test1")])
    assert ei.value.errno == errno.EINVAL


@pytest.mark.parametrize("kind,flags,target,ok,bad", [
    # seed multi: 8 slots (ip, 6 args, ret)
    (AttachType.TRACE_FENTRY, ProgFlags.MULTI_FUNC, None, 56, 64),
    (AttachType.TRACE_FEXIT, ProgFlags.MULTI_FUNC, None, 56, 64),
    # fentry on a 2-argument function: n slots; fexit/fmod_ret: n + 1
    (AttachType.TRACE_FENTRY, 0, "bpf_fentry_test2", 8, 16),
    (AttachType.TRACE_FEXIT, 0, "bpf_fentry_test2", 16, 24),
    (AttachType.MODIFY_RETURN, 0, "bpf_modify_return_test", 16, 24),
])
def test_a_program_reads_only_inside_its_view(emu, kind, flags, target, ok, bad):
    ctx_dump_prog(emu, ProgType.TRACING, [ok], "inside", attach_type=kind, flags=flags, attach_target=target)
    with pytest.raises(VerifierError) as ei:
        ctx_dump_prog(emu, ProgType.TRACING, [bad], "outside", attach_type=kind, flags=flags, attach_target=target)
    assert ei.value.log


def test_tp_btf_sees_the_prototype_arguments(emulator_factory):
    with emulator_factory(btf="auto") as emu:
        if emu.btf is None:
            pytest.skip("tp_btf needs kernel BTF (/sys/kernel/btf/vmlinux)")
        prog, m = ctx_dump_prog(emu, ProgType.TRACING, [0, 8, 16, 24], "tpbtf", attach_type=AttachType.TRACE_RAW_TP,
                                attach_target="sched_switch", section="tp_btf/sched_switch")
        link = prog.attach()
        assert link.kind == "raw_tracepoint"
        emu.fire("sched_switch", 1, 0xFFFF888000001000, 0xFFFF888000002000, 7)
        assert words(m, 4) == [1, 0xFFFF888000001000, 0xFFFF888000002000, 7]


def test_addresses_come_from_kallsyms_when_readable(emulator_factory):
    if os.geteuid() != 0:
        pytest.skip("/proc/kallsyms shows addresses to root only; run the suite as root")
    from bpfmux.host.kallsyms import KernelSymbols

    syms = {s.name: s.address for s in KernelSymbols.load().symbols}
    with emulator_factory(btf="auto", kallsyms=True) as emu:
        if emu.btf is None:
            pytest.skip("needs kernel BTF for the kernel's function table")
        f = emu.function("bpf_fentry_test1")
        assert f.addr == syms["bpf_fentry_test1"] != 0
    with emulator_factory(btf="auto") as emu:  # default: deterministic
        assert emu.function("bpf_fentry_test1").addr != syms["bpf_fentry_test1"]


def test_statically_initialised_prog_array_slots_are_filled(emu):
    coll = emu.load(os.path.join(os.path.dirname(__file__), "..", "bpf", "tailcall.bpf.o"))
    table = coll.maps["jump_table"]
    assert [table.get(i) for i in range(4)] == [coll.programs["tail_a"].vmprog, None, coll.programs["tail_b"].vmprog,
                                                None]  # fmt: skip
    entry = coll.programs["tail_entry"]
    assert [entry.test_run(i.to_bytes(8, "little")).retval for i in (0, 1, 2)] == [10, 1, 20]  # slot 1 empty: falls through
    assert coll.maps[".bss"]["tail_trace"] == [3, 10, 11, 0xFA11]


def test_load_selects_programs_by_name_and_refuses_unknown_names(emu):
    path = os.path.join(os.path.dirname(__file__), "..", "bpf", "tailcall.bpf.o")
    coll = emu.load(path, programs=["tail_a"])
    assert list(coll.programs) == ["tail_a"]
    assert coll.skipped == {"tail_b": "not selected", "tail_entry": "not selected"}
    coll.close()
    with pytest.raises(NotFoundError, match="tail_c"):
        emu.load(path, programs=["tail_a", "tail_c"])  # was: silently not loaded
