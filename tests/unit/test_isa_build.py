"""The Python program builder: every method against the assembler, labels, relocations, errors."""

from __future__ import annotations

import pytest

from bpfmux.errors import NotFoundError, ParseError
from bpfmux.isa import Insn, decode
from bpfmux.isa.asm import assemble
from bpfmux.isa.build import R0, R1, R2, R3, R6, R10, Asm, Program, Reg, Relocation, RelocKind
from bpfmux.isa.disasm import disassemble
from bpfmux.uapi import HelperId


def test_docstring_example() -> None:
    a = Asm()
    a.call(HelperId.get_smp_processor_id)
    a.stxw(R10, -4, R0)
    a.ld_map_fd(R1, "counts")
    a.mov(R2, R10).add(R2, -4)
    a.call(HelperId.map_lookup_elem)
    a.jeq(R0, 0, "out")
    a.mov(R1, 1)
    a.atomic_add(R0, 0, R1)
    a.label("out")
    a.mov(R0, 0).exit()
    prog = a.assemble()
    assert prog.relocations == [Relocation(index=2, slot=2, kind=RelocKind.MAP_FD, ref="counts")]
    assert prog.labels == {"out": 9}
    assert prog.insns[2] == Insn(0x18, 1, 1, 0, 0)
    insns = prog.resolve({"counts": 7})
    assert insns[2] == Insn(0x18, 1, 1, 0, 7)
    assert insns == assemble(
        """
        call 8
        stxw [%r10-4], %r0
        lddw %r1, map_fd(7)
        mov %r2, %r10
        add %r2, -4
        call 1
        jeq %r0, 0, +2
        mov %r1, 1
        lock add [%r0+0], %r1
        mov %r0, 0
        exit
        """
    )
    assert decode(prog.encode({"counts": 7})) == insns
    assert "lock *(u64 *)(r0 + 0) += r1" in disassemble(insns)


def build_everything() -> Asm:
    a = Asm()
    for name in ("add", "sub", "mul", "div", "sdiv", "mod", "smod", "or_", "and_", "xor", "lsh", "rsh", "arsh", "mov"):
        getattr(a, name)(R1, R2)
        getattr(a, name)(R1, -5)
        getattr(a, name.rstrip("_") + "32")(R1, R2)
        getattr(a, name.rstrip("_") + "32")(R1, 0xFFFFFFFF)
    a.neg(R1).neg32(R1).movsx(R1, R2, 8).movsx(R1, R2, 32).movsx32(R1, R2, 16)
    a.le(R1, 16).be(R1, 32).bswap(R1, 64).addr_space_cast(R1, R2, 1, 0)
    a.ldxb(R1, R2, 1).ldxh(R1, R2, -2).ldxw(R1, R2, 4).ldxdw(R1, R2, 8).ldxs(1, R1, R2).ldxs(4, R1, R2, 4)
    a.stb(R10, -1, 1).sth(R10, -2, 2).stw(R10, -4, 3).stdw(R10, -8, -4)
    a.stxb(R10, -1, R1).stxh(R10, -2, R1).stxw(R10, -4, R1).stxdw(R10, -8, R1)
    a.atomic_add(R10, -8, R1).atomic_or(R10, -8, R1, fetch=True).atomic_and(R10, -4, R1, size=4)
    a.atomic_xor(R10, -4, R1, size=4, fetch=True).xchg(R10, -8, R1).cmpxchg(R10, -4, R1, size=4)
    a.load_acquire(R1, R10, -8).store_release(R10, -2, R1, size=2)
    a.ld_imm64(R1, -1).ld_imm64(R1, 0x1122334455667788).ld_abs(2, 12).ld_ind(4, R3, 2)
    a.label("top")
    for cond in ("jeq", "jne", "jgt", "jge", "jlt", "jle", "jsgt", "jsge", "jslt", "jsle", "jset"):
        getattr(a, cond)(R1, R2, "top")
        getattr(a, cond + "32")(R1, -1, "end")
    a.ja("end").ja32("top").may_goto(+1).call(5).call_local("sub").callx(R3).exit()
    a.label("sub")
    a.ld_func(R2, "sub").mov(R0, 0)
    a.label("end")
    a.exit()
    return a


# The same program in conformance syntax, written independently.
EVERYTHING_ASM = (
    "".join(
        f"{op} %r1, %r2\n{op} %r1, -5\n{op}32 %r1, %r2\n{op}32 %r1, 0xffffffff\n"
        for op in ("add", "sub", "mul", "div", "sdiv", "mod", "smod", "or", "and", "xor", "lsh", "rsh", "arsh", "mov")
    )
    + """
    neg %r1
    neg32 %r1
    movsx864 %r1, %r2
    movsx3264 %r1, %r2
    movsx1632 %r1, %r2
    le16 %r1
    be32 %r1
    bswap64 %r1
    addr_space_cast %r1, %r2, 1, 0
    ldxb %r1, [%r2+1]
    ldxh %r1, [%r2-2]
    ldxw %r1, [%r2+4]
    ldxdw %r1, [%r2+8]
    ldxsb %r1, [%r2]
    ldxsw %r1, [%r2+4]
    stb [%r10-1], 1
    sth [%r10-2], 2
    stw [%r10-4], 3
    stdw [%r10-8], -4
    stxb [%r10-1], %r1
    stxh [%r10-2], %r1
    stxw [%r10-4], %r1
    stxdw [%r10-8], %r1
    lock add [%r10-8], %r1
    lock fetch or [%r10-8], %r1
    lock and32 [%r10-4], %r1
    lock fetch xor32 [%r10-4], %r1
    lock xchg [%r10-8], %r1
    lock cmpxchg32 [%r10-4], %r1
    ldacqdw %r1, [%r10-8]
    strelh [%r10-2], %r1
    lddw %r1, -1
    lddw %r1, 0x1122334455667788
    ldabsh 12
    ldindw %r3, 2
    top:
    """
    + "".join(
        f"{c} %r1, %r2, top\n{c}32 %r1, -1, end\n"
        for c in ("jeq", "jne", "jgt", "jge", "jlt", "jle", "jsgt", "jsge", "jslt", "jsle", "jset")
    )
    + """
    ja end
    ja32 top
    may_goto +1
    call 5
    call local sub
    call %r3
    exit
    sub:
    lddw %r2, func(sub)
    mov %r0, 0
    end:
    exit
    """
)


def test_every_method_matches_the_assembler() -> None:
    prog = build_everything().assemble()
    assert prog.relocations == []
    assert prog.insns == assemble(EVERYTHING_ASM)
    assert set(prog.labels) == {"top", "sub", "end"}


def test_relocations_resolve() -> None:
    a = Asm()
    a.ld_map_value(R1, "data", 16).ld_btf_id(R2, ("vmlinux", "bpf_prog_active")).call_kfunc("bpf_rcu_read_lock")
    a.ld_map_fd(R3, "data").exit()
    prog = a.assemble()
    assert [(r.index, r.slot, r.kind, r.offset) for r in prog.relocations] == [
        (0, 0, RelocKind.MAP_VALUE, 16),
        (1, 2, RelocKind.BTF_ID, 0),
        (2, 4, RelocKind.KFUNC, 0),
        (3, 5, RelocKind.MAP_FD, 0),
    ]
    insns = prog.resolve({"data": 5, ("vmlinux", "bpf_prog_active"): 1234, "bpf_rcu_read_lock": 0x80000001})
    assert insns[0] == Insn(0x18, 1, 2, 0, 5 | (16 << 32))
    assert insns[1] == Insn(0x18, 2, 3, 0, 1234)
    assert insns[2] == Insn(0x85, 0, 2, 0, -0x7FFFFFFF)
    assert insns[3] == Insn(0x18, 3, 1, 0, 5)
    assert prog.insns[0].imm == 16 << 32  # the unresolved program keeps fd 0
    with pytest.raises(NotFoundError, match="no map_value named 'data'"):
        prog.resolve({})
    with pytest.raises(ParseError, match="does not fit 32 bits"):
        prog.resolve({"data": -1, ("vmlinux", "bpf_prog_active"): 1, "bpf_rcu_read_lock": 1})


def test_program_is_plain_data() -> None:
    prog = Asm().mov(R0, 0).exit().assemble()
    assert prog == Program([Insn(0xB7), Insn(0x95)], [], {})
    assert prog.encode() == bytes.fromhex("b7000000000000009500000000000000")


def test_labels_across_lddw_and_backwards() -> None:
    a = Asm()
    a.label("loop").ld_imm64(R1, 1).jne(R1, 0, "loop").ja("done").ld_imm64(R2, 2).label("done").exit()
    insns = a.assemble().insns
    assert insns[1].off == -3  # slot 2 back to slot 0
    assert insns[2].off == 2  # slot 3 over the lddw to slot 6
    assert len(a) == 5 and a.slot == 7


def test_relative_int_targets() -> None:
    assert Asm().ja(+1).exit().exit().assemble().insns[0] == Insn(0x05, 0, 0, 1, 0)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda a: a.ja("nowhere").exit(), "undefined label 'nowhere'"),
        (lambda a: a.ja("end").exit().label("end"), "label 'end' is at the end of the program"),
        (lambda a: a.label("x").label("x"), "label 'x' is defined twice"),
        (lambda a: a.mov(R0, 1 << 32), "immediate 4294967296 does not fit 32 bits"),
        (lambda a: a.mov(R0, "1"), "immediate must be an int"),
        (lambda a: a.mov(11, R0), "11 is not a register"),
        (lambda a: a.ldx(3, R0, R1), "size must be 1, 2, 4 or 8 bytes"),
        (lambda a: a.ldxs(8, R0, R1), "no sign-extending 8-byte load"),
        (lambda a: a.movsx(R0, R1, 4), "bits must be 8, 16 or 32"),
        (lambda a: a.movsx32(R0, R1, 32), "bits must be 8 or 16"),
        (lambda a: a.bswap(R0, 8), "bits must be 16, 32 or 64"),
        (lambda a: a.ja(1 << 15), "does not fit 16 bits"),
        (lambda a: a.ja(None), "label name or an int offset"),
        (lambda a: a.ld_imm64(R0, 1 << 64), "does not fit 64 bits"),
        (lambda a: a.ld_map_value(R0, "m", -1), "offset -1 must be"),
        (lambda a: a.ld_abs(8, 0), "size must be 1, 2 or 4"),
        (lambda a: a.atomic_add(R1, 0, R2, size=2).exit(), "instruction 0: lock add32? .*only for 4 and 8 bytes"),
        (lambda a: a.raw(Insn(0x95, 1)).exit(), "instruction 0: exit .* reserved field dst=1"),
    ],
)
def test_errors(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError, match=message):
        build(Asm()).assemble()


def test_far_label_needs_ja32() -> None:
    a = Asm().ja("far")
    for _ in range(40000):
        a.mov(R0, 0)
    a.label("far").exit()
    with pytest.raises(ParseError, match="40000 slots away; use ja32"):
        a.assemble()
    b = Asm().ja32("far")
    for _ in range(40000):
        b.mov(R0, 0)
    b.label("far").exit()
    assert b.assemble().insns[0].imm == 40000


def test_registers() -> None:
    assert repr(R6) == "r6" and int(R10) == 10 and Reg(3) is R3
