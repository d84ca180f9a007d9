"""Kernel symbol addresses by BTF id (``&func``, typed ``__ksym`` variables)
and trampolines on functions of 7 to 12 arguments in the emulated kernel."""

from __future__ import annotations

import pytest

from bpfmux.btf import Btf
from bpfmux.errors import NotSupportedError
from bpfmux.isa.build import R0, R1, R2, R6, R10, Asm
from bpfmux.isa.insn import Insn
from bpfmux.isa.opcodes import Pseudo
from bpfmux.uapi import AttachType, BtfKind, ProgType


@pytest.fixture(scope="module")
def vmlinux():
    try:
        return Btf.vmlinux()
    except OSError as err:
        pytest.skip(f"these tests need the machine's kernel BTF ({err})")


def _ld_btf_id(btf_id: int) -> list[Insn]:
    """``r0 = <address of BTF id>`` as libbpf emits it (``lddw`` with ``BPF_PSEUDO_BTF_ID``)."""
    return [Insn(0x18, 0, int(Pseudo.BTF_ID), 0, btf_id)]


def test_function_address_by_btf_id(emulator_factory, vmlinux):
    emu = emulator_factory(btf=vmlinux)
    fid = emu.btf_id("bpf_fentry_test1")
    insns = [*_ld_btf_id(fid), Insn(0x95, 0, 0, 0, 0)]
    prog = emu.vm.load(insns, name="addr")
    assert prog.run().r0 == emu.functions["bpf_fentry_test1"].addr


def test_typed_ksym_variable_gets_memory(emulator_factory, vmlinux):
    emu = emulator_factory(btf=vmlinux)
    vid = next(i for i in vmlinux.find_ids("bpf_prog_active") if vmlinux.kind_of(i) == BtfKind.VAR)
    insns = [*_ld_btf_id(vid), Insn(0x95, 0, 0, 0, 0)]
    first = emu.vm.load(insns, name="var").run().r0
    again = emu.vm.load(insns, name="var2").run().r0
    assert first == again and emu.read(first, 4) == bytes(4)  # one zeroed variable, allocated once


def test_per_cpu_variable_has_one_copy_per_cpu(emulator_factory, vmlinux):
    """``bpf_this_cpu_ptr``/``bpf_per_cpu_ptr`` of a typed per-CPU ``__ksym`` (bpf_prog_active): CPU n's copy,
    NULL past the last CPU. (The guest compares the value read with its kernel's:
    tests/guest/test_vmguest_emulated_defects.py.)"""
    emu = emulator_factory(btf=vmlinux, ncpus=2)
    vid = next(i for i in vmlinux.find_ids("bpf_prog_active") if vmlinux.kind_of(i) == BtfKind.VAR)

    def ptr(cpu: int | None) -> int:
        insns = [Insn(0x18, 1, int(Pseudo.BTF_ID), 0, vid)]
        if cpu is None:
            insns += [Insn(0x85, 0, 0, 0, 154)]  # bpf_this_cpu_ptr
        else:
            insns += [Insn(0xB7, 2, 0, 0, cpu), Insn(0x85, 0, 0, 0, 153)]  # bpf_per_cpu_ptr
        return emu.vm.load([*insns, Insn(0x95, 0, 0, 0, 0)], name="pcpu").run().r0

    base = emu.vm.ksym_address(vid)
    size = emu.vm.percpu_vars[base]
    assert size >= 4 and ptr(None) == ptr(0) == base and ptr(1) == base + size and ptr(2) == 0
    assert emu.read(base, 2 * size) == bytes(2 * size)


def test_unknown_btf_id_still_says_how(emulator_factory):
    emu = emulator_factory(btf=None)
    with pytest.raises(NotSupportedError, match="VM.ksyms"):
        emu.vm.load([*_ld_btf_id(999_999), Insn(0x95, 0, 0, 0, 0)], name="nope")


@pytest.mark.parametrize("attach_type,slot", [(AttachType.TRACE_FENTRY, 6), (AttachType.TRACE_FEXIT, 7)])
def test_seven_argument_function(emulator_factory, attach_type, slot):
    """fentry sees the 7th argument of bpf_modify_return_test2 at ctx[6]; fexit its return value at ctx[7]."""
    emu = emulator_factory(btf=None)
    f = emu.functions["bpf_modify_return_test2"]
    assert f.nargs == 7
    seen = emu.vm.create_map(2, 4, 8, 1, name="seen")  # an array
    a = Asm()
    a.ldxdw(R6, R1, 8 * slot).mov(R1, 0).stxw(R10, -4, R1)
    a.ld_map_fd(R1, "seen").mov(R2, R10).add(R2, -4).call(1)
    a.jeq(R0, 0, "out").stxdw(R0, 0, R6)
    a.label("out").mov(R0, 0).exit()
    prog = emu.load_program(a.assemble().resolve({"seen": seen.fd}), ProgType.TRACING, name="seven",
                            attach_type=attach_type, attach_target="bpf_modify_return_test2")
    with prog.attach():
        b = emu.alloc(4)
        e = emu.alloc(4)
        ret = emu.call("bpf_modify_return_test2", 1, b, 3, 4, e, 6, 77)
    got = int.from_bytes(bytes(seen.storage[0][:8]), "little")
    if attach_type == AttachType.TRACE_FENTRY:
        assert got == 77
    else:  # an int return: the low 32 bits of the return register (the sum includes pointer e)
        assert got & 0xFFFFFFFF == ret & 0xFFFFFFFF
