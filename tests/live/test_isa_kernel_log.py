"""The ISA package against the running kernel.

1. ``format_kernel``: a program using every form a socket filter may use is
   loaded with ``log_level=2``; the log's "Live regs before insn" block
   prints each instruction in the kernel's own words, which must equal
   :func:`bpfmux.isa.disasm.format_kernel` line by line.
2. The assembler's semantics: the conformance programs the kernel can run
   (no "-- mem", no suite-specific helper calls) are assembled, loaded and
   run with ``BPF_PROG_TEST_RUN``; the kernel's result must be the case's
   expected ``r0`` (low half from the program, high half from a copy whose
   exits shift ``r0`` right by 32).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpfmux.errors import VerifierError
from bpfmux.isa import Insn
from bpfmux.isa.analysis import is_callx, is_exit, is_helper_call, is_pseudo_call
from bpfmux.isa.asm import assemble
from bpfmux.isa.conformance import load_case, load_suite
from bpfmux.isa.disasm import format_kernel
from bpfmux.live.program import load_insns
from bpfmux.uapi import ProgType

pytestmark = pytest.mark.usefixtures("root_required")

# Every instruction form a socket filter may use (no maps, no kfuncs).
PROGRAM = """
mov %r6, %r1
mov %r0, 0
mov32 %r1, -5
add %r0, 7
sub32 %r1, %r0
mov %r2, %r10
add %r2, -8
stdw [%r10-8], 100
stw [%r10-12], -3
sth [%r10-14], 3
stb [%r10-15], 1
stxdw [%r10-24], %r1
stxw [%r10-28], %r1
stxh [%r10-30], %r1
stxb [%r10-31], %r1
ldxdw %r3, [%r10-8]
ldxw %r4, [%r10-12]
ldxh %r5, [%r10-14]
ldxb %r7, [%r10-15]
ldxsb %r8, [%r10-15]
ldxsh %r8, [%r10-14]
ldxsw %r8, [%r10-12]
lock add [%r10-8], %r3
lock fetch add [%r10-8], %r3
lock or32 [%r10-12], %r4
lock and [%r10-8], %r3
lock xor32 [%r10-12], %r4
lock fetch or [%r10-8], %r3
lock fetch and32 [%r10-12], %r4
lock fetch xor32 [%r10-12], %r4
lock xchg [%r10-8], %r3
lock xchg32 [%r10-12], %r4
mov %r0, 0
lock cmpxchg [%r10-8], %r3
lock cmpxchg32 [%r10-12], %r4
ldacqdw %r2, [%r10-8]
ldacqw %r2, [%r10-8]
ldacqh %r2, [%r10-8]
ldacqb %r2, [%r10-8]
streldw [%r10-8], %r2
strelw [%r10-8], %r2
strelh [%r10-8], %r2
strelb [%r10-8], %r2
be16 %r3
be64 %r3
le32 %r3
bswap16 %r3
bswap64 %r3
neg %r3
neg32 %r4
movsx864 %r5, %r3
movsx1664 %r5, %r3
movsx3264 %r5, %r3
movsx832 %r5, %r4
movsx1632 %r5, %r4
sdiv %r3, 3
sdiv32 %r4, -3
smod %r3, 7
smod32 %r4, -7
div %r3, 5
div32 %r4, 5
mod %r3, 9
mod32 %r4, 9
mul %r3, -2
mul32 %r4, %r7
arsh %r3, 2
arsh32 %r4, %r7
lsh %r3, %r7
lsh32 %r4, 3
rsh %r3, 1
rsh32 %r4, 3
xor %r3, %r4
xor32 %r4, 0x55
and %r3, -16
and32 %r4, 0xff
or %r3, 0x10
or32 %r4, %r7
jeq %r3, 0, +1
jeq32 %r3, %r4, +1
jne %r3, -1, +1
jne32 %r4, %r3, +1
jgt %r3, 0xffffffff, +1
jgt32 %r3, %r4, +1
jge %r3, %r4, +1
jge32 %r3, 7, +1
jlt %r3, 3, +1
jlt32 %r3, %r4, +1
jle %r3, %r4, +1
jle32 %r3, 9, +1
jsgt %r3, -5, +1
jsgt32 %r3, %r4, +1
jsge %r3, %r4, +1
jsge32 %r3, -9, +1
jslt %r3, %r4, +1
jslt32 %r3, 0, +1
jsle %r3, 6, +1
jsle32 %r4, -1, +1
jset %r3, %r4, +1
jset32 %r3, 0x80, +1
ja +0
ja32 +0
lddw %r8, 0x1122334455667788
lddw %r8, -7
ldabsb 3
ldabsh 4
ldabsw 8
mov %r7, 2
ldindb %r7, 1
ldindh %r7, -1
ldindw %r7, 4
call 5
call 7
may_goto +1
mov %r0, 1
mov %r0, 0
call local +1
exit
mov %r0, 0
exit
"""

_LIVE_LINE = re.compile(r"^\s*(\d+): [.0-9]{10} (\(.*)$")


def test_format_kernel_matches_verifier_log() -> None:
    insns = assemble(PROGRAM)
    prog = load_insns(insns, ProgType.SOCKET_FILTER, name="isa_log", log_level=2)
    try:
        log = prog.log
    finally:
        prog.close()
    kernel = {}
    for line in log.split("Live regs before insn:\n", 1)[1].splitlines():
        m = _LIVE_LINE.match(line)
        if not m:
            break
        kernel[int(m.group(1))] = m.group(2).rstrip()
    slot = 0
    for insn in insns:
        assert format_kernel(insn) == kernel[slot], f"slot {slot}"
        slot += insn.size
    assert len(kernel) == len(insns)


# --- the conformance suite's programs, run by the kernel ----------------------------------

SUITE = Path(__file__).resolve().parents[1] / "data" / "conformance"
# The verifier refuses shifts by an immediate outside 0..width-1 ("invalid shift").
KERNEL_REJECTS = {
    f"{op}{bits}-imm-{kind}" for op in ("arsh", "lsh", "rsh") for bits in ("32", "64") for kind in ("high", "neg")
}


def _kernel_cases() -> list[Path]:
    """Cases the kernel can run: no "-- mem" (a socket filter's r1 is its skb, not a buffer) and no
    helper calls or callx (the suite's helper numbers are not the kernel's)."""
    out = []
    for path in load_suite(SUITE):
        case = load_case(path)
        if case.mem or any(is_helper_call(i) or is_callx(i) for i in case.program()):
            continue
        out.append(path)
    return out


KERNEL_CASES = _kernel_cases()


def _high_half(insns: list[Insn]) -> list[Insn] | None:
    """The program returning r0 >> 32: every exit jumps to an appended ``rsh r0, 32; exit``.

    ``None`` for programs with bpf-to-bpf calls (their exits return from subprograms).
    """
    if any(is_pseudo_call(i) for i in insns):
        return None
    end = sum(i.size for i in insns)
    out, slot = [], 0
    for insn in insns:
        out.append(Insn(0x05, 0, 0, end - slot - 1, 0) if is_exit(insn) else insn)
        slot += insn.size
    return out + [Insn(0x77, 0, 0, 0, 32), Insn(0x95)]


def _run(insns: list[Insn]) -> int:
    prog = load_insns(insns, ProgType.SOCKET_FILTER, name="isa_conf")
    try:
        return prog.test_run(data_in=bytes(64)).retval
    finally:
        prog.close()


def test_kernel_cases_cover_most_of_the_suite() -> None:
    assert len(KERNEL_CASES) == 271


@pytest.mark.parametrize("path", KERNEL_CASES, ids=[p.stem for p in KERNEL_CASES])
def test_conformance_program_computes_expected_result_in_kernel(path: Path) -> None:
    case = load_case(path)
    insns = case.program()
    assert case.result is not None
    if path.stem in KERNEL_REJECTS:
        with pytest.raises(VerifierError, match="invalid shift"):
            load_insns(insns, ProgType.SOCKET_FILTER, name="isa_conf", log_level=1)
        return
    assert _run(insns) == case.result & 0xFFFFFFFF
    high = _high_half(insns)
    if high is not None:
        assert _run(high) == case.result >> 32
