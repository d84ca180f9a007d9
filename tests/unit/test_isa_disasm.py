"""The disassembler against LLVM 14's ``llvm-objdump``, line by line.

Two sources of instructions: C programs compiled with clang (what real
objects contain) and every valid opcode with varied fields written with
``.quad`` into an object by ``llvm-mc`` (everything LLVM 14 can print).
Encodings newer than LLVM 14 are checked against hand-written text in
later LLVM releases' syntax.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from bpfmux.isa import Insn, decode, encode
from bpfmux.isa.analysis import is_atomic, is_signed_alu
from bpfmux.isa.disasm import disassemble, format_insn, format_kernel
from bpfmux.isa.opcodes import Alu, Atomic, Class, Jmp, Mode, Size, Source
from bpfmux.isa.strategies import VALID_OPCODES, repair_insn

TOOLS = ("clang", "llvm-mc", "llvm-objdump")
pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS), reason="needs clang, llvm-mc and llvm-objdump (LLVM 14) on PATH"
)

_LINE = re.compile(r"^\s*(\d+):\t(.*)$")
_LABEL = re.compile(r" <[^<>]*>$")


def objdump(obj: Path, alu32: bool) -> dict[str, dict[int, str]]:
    """Section name -> slot -> instruction text, from llvm-objdump -d."""
    args = ["llvm-objdump", "-d", "--no-show-raw-insn"] + (["--mattr=+alu32"] if alu32 else []) + [str(obj)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    sections: dict[str, dict[int, str]] = {}
    current: dict[int, str] | None = None
    for line in out.splitlines():
        if line.startswith("Disassembly of section "):
            current = sections.setdefault(line[len("Disassembly of section ") : -1], {})
            continue
        m = _LINE.match(line)
        if m and current is not None:
            current[int(m.group(1))] = _LABEL.sub("", m.group(2))
    return sections


def code_sections(obj: Path) -> dict[str, bytes]:
    with obj.open("rb") as f:
        elf = ELFFile(f)
        return {
            s.name: s.data()
            for s in elf.iter_sections()
            if s["sh_type"] == "SHT_PROGBITS" and s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR and s.data_size
        }


def compare(obj: Path, alu32: bool) -> int:
    """Compare every instruction LLVM 14 can print in every code section; returns how many were compared.

    LLVM 14 without ``--mattr=+alu32`` prints ``<unknown>`` for 32-bit fetch
    atomics, which clang emits for ``-mcpu=v3``; those are skipped there (the
    alu32 run compares them).
    """
    theirs = objdump(obj, alu32)
    count = 0
    for name, data in code_sections(obj).items():
        lines = theirs[name]
        slot = 0
        for insn in decode(data, source=name):
            if llvm14_prints(insn, alu32):
                assert format_insn(insn, alu32=alu32) == lines[slot], f"{name} slot {slot}: {insn!r}"
                count += 1
            else:
                assert lines[slot] == "<unknown>", f"{name} slot {slot}: {insn!r}"
            slot += insn.size
        assert slot == len(data) // 8
    return count


# --- C programs compiled by clang ------------------------------------------------------

PRELUDE = """
typedef unsigned long long u64; typedef unsigned int u32; typedef unsigned short u16; typedef unsigned char u8;
typedef long long s64; typedef int s32; typedef short s16; typedef signed char s8;
#define SEC(n) __attribute__((section(n), used))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, u64 flags) = (void *)2;
static u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static long (*bpf_probe_read_kernel)(void *dst, u32 size, const void *src) = (void *)113;
struct { __uint(type, 1); __uint(max_entries, 64); __type(key, u32); __type(value, u64); } counts SEC(".maps");
struct { __uint(type, 2); __uint(max_entries, 4); __type(key, u32); __type(value, u32); } arr SEC(".maps");
struct ctx { u64 a; u32 b; u16 c; u8 d; s8 e; s16 f; s32 g; };
char LICENSE[] SEC("license") = "GPL";
"""

# Atomics of every kind, byte swaps, globals (map-value loads), divisions, 32-bit ALU.
ATOMICS = """
u64 total; u32 small; s64 sdata[8]; volatile u16 half; u8 bytes[16];
static __attribute__((noinline)) u64 mix(u64 x, u32 y) { return (x << 7) ^ (x >> 3) ^ ((s64)x >> 60) ^ (y * 2654435761u); }
static __attribute__((noinline)) int clamp(int v) { return v < -100 ? -100 : v > 100 ? 100 : v; }
SEC("tracepoint/x") int prog(struct ctx *c) {
  u32 key = c->b & 63; u64 init = 1, *v;
  u64 t = bpf_ktime_get_ns();
  v = bpf_map_lookup_elem(&counts, &key);
  if (!v) { bpf_map_update_elem(&counts, &key, &init, 0); return 0; }
  __sync_fetch_and_add(v, 1);
  u64 old = __sync_fetch_and_add(v, t & 0xff);
  old |= __sync_fetch_and_or(v, 0x100);
  old ^= __sync_fetch_and_xor(v, c->a);
  old &= __sync_fetch_and_and(v, ~0xfULL);
  __sync_val_compare_and_swap(v, old, t);
  __sync_lock_test_and_set(v, 42);
  u32 *s = bpf_map_lookup_elem(&arr, &key);
  if (s) {
    __sync_fetch_and_add(s, 1); u32 o = __sync_fetch_and_or(s, 2); __sync_fetch_and_xor(s, o);
    o += __sync_fetch_and_and(s, 0xff); __sync_fetch_and_or(s, 4);
    __sync_val_compare_and_swap(s, o, 7); __sync_lock_test_and_set(s, c->b);
  }
  total += mix(t, c->b) + __builtin_bswap64(t) + __builtin_bswap32(c->b) + __builtin_bswap16(c->c);
  small = c->b / 7 + c->b % 10 + (u32)(c->a / (c->b | 1)) + (u32)(c->a % 1000);
  sdata[c->d & 7] = (s64)c->e * c->f + (u32)c->g / 3 - (c->g >> 2) + clamp(c->g);
  half = c->c >> 3;
  for (int i = 0; i < 16; i++) bytes[i] = (u8)(bytes[i] + i * c->d);
  char buf[24]; bpf_probe_read_kernel(buf, sizeof(buf), (void *)c->a);
  if ((s32)c->g > -5 && c->a != 0x123456789abcdefULL) return buf[3] + buf[17];
  switch (c->d) { case 1: return 11; case 2: return 22; case 3: return -33; case 7: return (int)(t >> 32); }
  return -(int)c->b;
}
"""

# Control flow: loops that stay loops, signed/unsigned compares of every kind, subprograms.
CONTROL = """
static __attribute__((noinline)) s64 walk(const s32 *p, u32 n) {
  s64 acc = 0;
  #pragma nounroll
  for (u32 i = 0; i < n && i < 64; i++) {
    if (p[i] < -7) acc -= p[i]; else if (p[i] >= 1000) acc += p[i] >> 1;
    else if ((u32)p[i] <= 12u) acc ^= i; else if (p[i] > 3) acc |= (s64)p[i] << 40;
    if (acc < 0) break;
  }
  return acc;
}
static __attribute__((noinline)) u64 cmp64(u64 a, u64 b, s64 x, s64 y) {
  u64 r = 0;
  if (a < b) r |= 1; if (a <= b) r |= 2; if (a > b + 9) r |= 4; if (a >= 77) r |= 8;
  if (x < y) r |= 16; if (x <= -3) r |= 32; if (x > y) r |= 64; if (x >= 5) r |= 128;
  if (a == 0xffffffff00000000ULL) r |= 256; if ((a & b) != 0) r |= 512;
  return r * 0x9e3779b97f4a7c15ULL;
}
SEC("kprobe/f") int entry(struct ctx *c) {
  s32 vals[16];
  #pragma nounroll
  for (int i = 0; i < 16; i++) vals[i] = (s32)(c->a >> i) - c->g;
  u64 r = walk(vals, c->b) + cmp64(c->a, c->b, c->g, c->f);
  u32 k = 0; u64 *v = bpf_map_lookup_elem(&counts, &k);
  if (v) *v = r;
  return (int)(r >> 3) & 0x7fff;
}
"""

CASES = [("atomics", ATOMICS, "v3"), ("control", CONTROL, "v1"), ("control", CONTROL, "v2"), ("control", CONTROL, "v3")]


@pytest.mark.parametrize(("name", "source", "cpu"), CASES, ids=[f"{n}-{c}" for n, _, c in CASES])
@pytest.mark.parametrize("alu32", [False, True], ids=["plain", "alu32"])
def test_matches_objdump_on_clang_output(tmp_path: Path, name: str, source: str, cpu: str, alu32: bool) -> None:
    src = tmp_path / f"{name}.c"
    src.write_text(PRELUDE + source)
    obj = tmp_path / f"{name}.o"
    subprocess.run(
        ["clang", "-O2", "-target", "bpf", f"-mcpu={cpu}", "-fno-crash-diagnostics", "-c", str(src), "-o", str(obj)],
        check=True,
        capture_output=True,
    )
    assert compare(obj, alu32) > 40


def test_clang_output_covers_the_atomics(tmp_path: Path) -> None:
    # the C above really produces 32- and 64-bit fetch, xchg and cmpxchg forms
    src = tmp_path / "a.c"
    src.write_text(PRELUDE + ATOMICS)
    obj = tmp_path / "a.o"
    subprocess.run(["clang", "-O2", "-target", "bpf", "-mcpu=v3", "-c", str(src), "-o", str(obj)], check=True)
    insns = [i for data in code_sections(obj).values() for i in decode(data)]
    kinds = {(i.opcode, i.imm) for i in insns if is_atomic(i)}
    fetch = Atomic.FETCH
    w, dw = Class.STX | Mode.ATOMIC | Size.W, Class.STX | Mode.ATOMIC | Size.DW
    assert kinds == {
        (w, Atomic.ADD), (w, Atomic.OR), (w, Atomic.XOR), (w, Atomic.OR | fetch), (w, Atomic.AND | fetch),
        (w, Atomic.XCHG), (w, Atomic.CMPXCHG),
        (dw, Atomic.ADD), (dw, Atomic.ADD | fetch), (dw, Atomic.OR | fetch), (dw, Atomic.XOR | fetch),
        (dw, Atomic.AND | fetch), (dw, Atomic.XCHG), (dw, Atomic.CMPXCHG),
    }  # fmt: skip


# --- every opcode through llvm-mc ---------------------------------------------------------


def llvm14_prints(insn: Insn, alu32: bool) -> bool:
    """Whether LLVM 14 disassembles this valid encoding (it predates ISA v4 and some older forms)."""
    op = insn.opcode
    cls = op & 0x07
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        if is_signed_alu(insn) or aop == Alu.MOD:  # v4 sdiv/smod; LLVM never emitted BPF_MOD
            return False
        if aop == Alu.MOV and op & Source.X and insn.off:  # movsx, addr_space_cast
            return False
        return not (aop == Alu.END and cls == Class.ALU64)  # bswap
    if cls in (Class.JMP, Class.JMP32):
        if op & 0xF0 == Jmp.JSET:
            return False
        return op not in (0x06, 0x8D, 0xE5)  # ja32, callx (LLVM puts the register in imm), may_goto
    if cls == Class.ST or (cls == Class.LDX and op & 0xE0 == Mode.MEMSX):
        return False
    if is_atomic(insn):
        if insn.imm in (Atomic.LOAD_ACQ, Atomic.STORE_REL):
            return False
        return alu32 or op & 0x18 == Size.DW or insn.imm == Atomic.ADD
    return True


def sample_valid(seed: int, per_opcode: int) -> list[Insn]:
    rng = random.Random(seed)
    imms = [0, 1, -1, 16, 32, 64, 255, 0x7FFFFFFF, -0x80000000, 0x1234, 0x40, 0x41, 0x50, 0x51, 0xA0, 0xA1, 0xE1, 0xF1]
    imms += [0x100, 0x110, 0x10000]
    offs = [0, 1, -1, 8, 16, 32, 0x7FFF, -0x8000, -8]
    out: list[Insn] = []
    for op in VALID_OPCODES:
        for _ in range(per_opcode):
            imm = rng.randrange(1 << 64) if op == 0x18 else rng.choice(imms + [rng.randrange(-(1 << 31), 1 << 31)])
            raw = Insn(op, rng.randrange(11), rng.randrange(11), rng.choice(offs), imm)
            insn = repair_insn(raw)
            if insn is not None:
                out.append(insn)
    return list(dict.fromkeys(out))


def test_sample_reaches_every_valid_opcode() -> None:
    assert {i.opcode for i in sample_valid(7, 24)} == set(VALID_OPCODES)


@pytest.mark.parametrize("alu32", [False, True], ids=["plain", "alu32"])
def test_matches_objdump_on_every_opcode(tmp_path: Path, alu32: bool) -> None:
    insns = [i for i in sample_valid(7, 24) if llvm14_prints(i, alu32)]
    # lddw with a pseudo source and helper/kfunc/local calls are included
    assert {0x18, 0x85, 0xDB, 0xC3, 0x20, 0x50} <= {i.opcode for i in insns}
    code = encode(insns)
    words = "".join(f".quad {int.from_bytes(code[i : i + 8], 'little'):#018x}\n" for i in range(0, len(code), 8))
    asm = tmp_path / "all.s"
    asm.write_text(".text\n.globl f\nf:\n" + words)
    obj = tmp_path / "all.o"
    subprocess.run(["llvm-mc", "-triple", "bpfel", "-filetype=obj", "-o", str(obj), str(asm)], check=True)
    assert compare(obj, alu32) == len(insns)


# --- encodings LLVM 14 does not know, in later LLVM syntax ------------------------------------

V4 = [
    (Insn(0x3F, 1, 2, 1, 0), "r1 s/= r2"),
    (Insn(0x34, 1, 0, 1, -7), "w1 s/= -7"),
    (Insn(0x9F, 1, 2, 0, 0), "r1 %= r2"),
    (Insn(0x97, 1, 0, 1, 3), "r1 s%= 3"),
    (Insn(0x9C, 1, 2, 1, 0), "w1 s%= w2"),
    (Insn(0xBF, 1, 2, 8, 0), "r1 = (s8)r2"),
    (Insn(0xBF, 1, 2, 32, 0), "r1 = (s32)r2"),
    (Insn(0xBC, 1, 2, 16, 0), "w1 = (s16)w2"),
    (Insn(0x91, 1, 2, -4, 0), "r1 = *(s8 *)(r2 - 4)"),
    (Insn(0x89, 1, 2, 2, 0), "r1 = *(s16 *)(r2 + 2)"),
    (Insn(0x81, 1, 2, 0, 0), "r1 = *(s32 *)(r2 + 0)"),
    (Insn(0xD7, 3, 0, 0, 16), "r3 = bswap16 r3"),
    (Insn(0xD7, 3, 0, 0, 64), "r3 = bswap64 r3"),
    (Insn(0x06, 0, 0, 0, 70000), "gotol +70000"),
    (Insn(0x06, 0, 0, 0, -2), "gotol -2"),
    (Insn(0x45, 1, 0, 3, 8), "if r1 & 8 goto +3"),
    (Insn(0x4E, 1, 2, -1, 0), "if w1 & w2 goto -1"),
    (Insn(0x62, 10, 0, -4, 5), "*(u32 *)(r10 - 4) = 5"),
    (Insn(0x7A, 10, 0, -8, -1), "*(u64 *)(r10 - 8) = -1"),
    (Insn(0xE5, 0, 0, 4, 0), "may_goto +4"),
    (Insn(0x8D, 3, 0, 0, 0), "callx r3"),
    (Insn(0xDB, 0, 1, 8, Atomic.LOAD_ACQ), "r0 = load_acquire((u64 *)(r1 + 8))"),
    (Insn(0xD3, 2, 3, 0, Atomic.STORE_REL), "store_release((u8 *)(r2 + 0), r3)"),
    (Insn(0xBF, 1, 2, 1, 0x10000), "r1 = addr_space_cast(r2, 1, 0)"),
]


@pytest.mark.parametrize(("insn", "text"), V4, ids=[t for _, t in V4])
def test_newer_forms(insn: Insn, text: str) -> None:
    assert format_insn(insn) == text


def test_alu32_names_w_registers_for_narrow_memory_ops() -> None:
    assert format_insn(Insn(0xD3, 2, 3, 0, Atomic.STORE_REL), alu32=True) == "store_release((u8 *)(r2 + 0), w3)"
    assert format_insn(Insn(0xC3, 1, 2, 0, Atomic.OR | Atomic.FETCH), alu32=True) == (
        "w2 = atomic_fetch_or((u32 *)(r1 + 0), w2)"
    )
    assert format_insn(Insn(0x71, 1, 2, 3, 0), alu32=True) == "w1 = *(u8 *)(r2 + 3)"
    assert format_insn(Insn(0x79, 1, 2, 3, 0), alu32=True) == "r1 = *(u64 *)(r2 + 3)"


@pytest.mark.parametrize(
    "insn",
    [Insn(0x95, imm=1), Insn(0xFF), Insn(0x8C, 1, 2), Insn(0x18, 1, 9, 0, 0), Insn(0x07, 11, 0, 0, 1)],
    ids=repr,
)
def test_invalid_prints_unknown(insn: Insn) -> None:
    assert format_insn(insn) == "<unknown>"
    assert format_kernel(insn).endswith("<unknown>")


def test_disassemble_numbers_slots() -> None:
    prog = [Insn(0x18, 1, 0, 0, 0x1234), Insn(0xB7, 0, 0, 0, 0), Insn(0x95)]
    assert disassemble(prog) == "       0:\tr1 = 4660 ll\n       2:\tr0 = 0\n       3:\texit\n"
    assert disassemble(encode(prog), addresses=False) == "r1 = 4660 ll\nr0 = 0\nexit\n"
    assert str(prog[0]) == "r1 = 4660 ll"


# --- kernel verifier-log style -------------------------------------------------------------

KERNEL = [
    (Insn(0xB7, 0, 0, 0, 0), "(b7) r0 = 0"),
    (Insn(0xBC, 1, 2, 0, 0), "(bc) w1 = w2"),
    (Insn(0x07, 2, 0, 0, -8), "(07) r2 += -8"),
    (Insn(0x79, 1, 1, 8, 0), "(79) r1 = *(u64 *)(r1 +8)"),
    (Insn(0x63, 10, 1, -4, 0), "(63) *(u32 *)(r10 -4) = r1"),
    (Insn(0x62, 10, 0, -4, 7), "(62) *(u32 *)(r10 -4) = 7"),
    (Insn(0x15, 1, 0, 3, 0), "(15) if r1 == 0x0 goto pc+3"),
    (Insn(0x2E, 1, 2, -2, 0), "(2e) if w1 > w2 goto pc-2"),
    (Insn(0x05, 0, 0, 5, 0), "(05) goto pc+5"),
    (Insn(0x85, 0, 0, 0, 1), "(85) call bpf_map_lookup_elem#1"),
    (Insn(0x85, 0, 0, 0, 0), "(85) call unknown#0"),
    (Insn(0x85, 0, 0, 0, 100000), "(85) call unknown#100000"),
    (Insn(0x85, 0, 2, 0, 77), "(85) call kfunc#77"),
    (Insn(0x06, 0, 0, 0, -3), "(06) gotol pc-3"),
    (Insn(0x18, 1, 2, 0, 3 | (8 << 32)), "(18) r1 = map[fd:3][0]+8"),
    (Insn(0x50, 0, 7, 0, -1), "(50) r0 = *(u8 *)skb[r7 + -1]"),
    (Insn(0xCB, 1, 2, 0, Atomic.STORE_REL), "(cb) store_release((u16 *)(r1 +0), r2)"),
    (Insn(0x85, 0, 1, 0, 4), "(85) call pc+4"),
    (Insn(0x95), "(95) exit"),
    (Insn(0x18, 1, 0, 0, 0x1234), "(18) r1 = 0x1234"),
    (Insn(0xDC, 1, 0, 0, 16), "(dc) r1 = be16 r1"),
    (Insn(0xDB, 1, 2, 0, Atomic.ADD), "(db) lock *(u64 *)(r1 +0) += r2"),
    (Insn(0xDB, 1, 2, 0, Atomic.ADD | Atomic.FETCH), "(db) r2 = atomic64_fetch_add((u64 *)(r1 +0), r2)"),
    (Insn(0xC3, 1, 2, 0, Atomic.CMPXCHG), "(c3) r0 = atomic_cmpxchg((u32 *)(r1 +0), r0, r2)"),
    (Insn(0x91, 1, 2, 0, 0), "(91) r1 = *(s8 *)(r2 +0)"),
    (Insn(0xBF, 1, 2, 16, 0), "(bf) r1 = (s16)r2"),
    (Insn(0x3F, 1, 2, 1, 0), "(3f) r1 s/= r2"),
]


@pytest.mark.parametrize(("insn", "text"), KERNEL, ids=[t for _, t in KERNEL])
def test_kernel_style(insn: Insn, text: str) -> None:
    assert format_kernel(insn) == text
