"""Random eBPF programs for differential testing.

:func:`random_program` builds a program the kernel's verifier accepts as a
``BPF_PROG_TYPE_SYSCALL`` program run through ``BPF_PROG_TEST_RUN`` with a
:data:`CTX_SIZE`-byte context: every register it reads is initialised, the
stack it uses is zeroed first, context accesses are aligned and at constant
offsets from the unmodified context pointer, loops are bounded by a counter,
branches only skip forward. It exercises ALU64/ALU32 (including signed
division, ``movsx``, byte swaps, shifts by registers), conditional jumps of
every kind (JMP and JMP32, immediate and register), loads/stores of every
size on the stack and the context, sign-extending loads and atomics on the
stack, bpf-to-bpf calls and bounded loops.

The program ends by storing r0-r8 and its 64 stack bytes into the context
(:data:`REGS_OFF`, :data:`STACK_OFF`), so comparing the context after the
run compares every register and all memory, not only the 32-bit ``retval``
the kernel reports.

With ``wild=True`` the generator also makes programs no verifier would
accept — unchecked pointer arithmetic, accesses out of bounds, backward
jumps — to check that both emulator tiers fault at the same instruction and
address.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ...isa.insn import Insn

#: Context size of generated programs; data the program plays with comes first.
CTX_SIZE = 256
DATA_SIZE = 120
REGS_OFF = 120  # r0..r8, 8 bytes each
STACK_OFF = 192  # the 64 stack bytes [r10-64, r10)
STACK_BYTES = 64

_ALU_OPS = [0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0]
_JMP_OPS = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0xA0, 0xB0, 0xC0, 0xD0]
_SIZES = {1: 0x10, 2: 0x08, 4: 0x00, 8: 0x18}
_DATA_REGS = [0, 1, 2, 3, 4, 5, 6, 7, 8]
CTX_REG = 9


@dataclass
class GeneratedProgram:
    """A generated program and the context to run it with."""

    insns: list[Insn]
    ctx: bytes
    seed: int | None = None


def _imm(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.3:
        return rng.randint(-16, 16)
    if r < 0.5:
        return rng.choice([0, 1, -1, 0x7FFFFFFF, -0x80000000, 0xFF, 0xFFFF, 31, 32, 63, 64])
    return rng.randint(-(1 << 31), (1 << 31) - 1)


def _imm64(rng: random.Random) -> int:
    return rng.choice([rng.getrandbits(64), rng.getrandbits(32), (1 << 63), (1 << 64) - 1, 0x8000_0000,
                       rng.getrandbits(64) | (1 << 63)])


class _Gen:
    def __init__(self, rng: random.Random, wild: bool, size: int, allow_calls: bool) -> None:
        self.rng = rng
        self.wild = wild
        self.size = size
        self.allow_calls = allow_calls
        self.branches = 0
        self.loops = 0
        self.subprogs: list[list[Insn]] = []

    # -- single instructions --------------------------------------------------

    def alu(self, reserved: set[int]) -> list[Insn]:
        rng = self.rng
        dst = rng.choice([r for r in _DATA_REGS if r not in reserved])
        is64 = rng.random() < 0.6
        cls = 0x07 if is64 else 0x04
        r = rng.random()
        if r < 0.07:  # byte swaps
            width = rng.choice([16, 32, 64])
            if is64:
                return [Insn(0xD7, dst, 0, 0, width)]
            return [Insn(0xD4 | rng.choice([0, 0x08]), dst, 0, 0, width)]
        if r < 0.12:  # movsx
            src = rng.choice(_DATA_REGS)
            bits = rng.choice([8, 16, 32] if is64 else [8, 16])
            return [Insn(cls | 0xB0 | 0x08, dst, src, bits, 0)]
        if r < 0.2:  # signed div / mod
            op = rng.choice([0x30, 0x90])
            if rng.random() < 0.5:
                return [Insn(cls | op | 0x08, dst, rng.choice(_DATA_REGS), 1, 0)]
            return [Insn(cls | op, dst, 0, 1, _imm(rng) or 3)]  # the verifier rejects division by imm 0
        op = rng.choice(_ALU_OPS)
        if op == 0x80:
            return [Insn(cls | 0x80, dst, 0, 0, 0)]
        if rng.random() < 0.5:
            return [Insn(cls | op | 0x08, dst, rng.choice(_DATA_REGS), 0, 0)]
        imm = _imm(rng)
        if op in (0x30, 0x90) and imm == 0:
            imm = 7
        if op in (0x60, 0x70, 0xC0):
            imm = rng.randrange(64 if is64 else 32)
        return [Insn(cls | op, dst, 0, 0, imm)]

    def mov_imm(self, dst: int) -> list[Insn]:
        rng = self.rng
        if rng.random() < 0.3:
            return [Insn(0x18, dst, 0, 0, _imm64(rng))]
        return [Insn(rng.choice([0xB7, 0xB4]), dst, 0, 0, _imm(rng))]

    def stack_off(self, size: int) -> int:
        # the kernel requires aligned stack accesses
        return -self.rng.randrange(size, STACK_BYTES + 1, size)

    def ctx_off(self, size: int) -> int:
        return self.rng.randrange(0, DATA_SIZE - size + 1, size)

    def mem(self, reserved: set[int]) -> list[Insn]:
        rng = self.rng
        size = rng.choice([1, 2, 4, 8])
        sz = _SIZES[size]
        dst = rng.choice([r for r in _DATA_REGS if r not in reserved])
        src = rng.choice(_DATA_REGS)
        on_stack = rng.random() < 0.55
        base, off = (10, self.stack_off(size)) if on_stack else (CTX_REG, self.ctx_off(size))
        if self.wild and rng.random() < 0.1:
            off = rng.randint(-600, 600)
        r = rng.random()
        if r < 0.4:
            if on_stack and size != 8 and rng.random() < 0.3:
                return [Insn(0x81 | sz, dst, base, off, 0)]  # ldsx
            return [Insn(0x61 | sz, dst, base, off, 0)]
        if r < 0.75:
            return [Insn(0x63 | sz, base, src, off, 0)]
        if on_stack and r < 0.85:
            return [Insn(0x62 | sz, base, 0, off, _imm(rng))]
        if on_stack:  # atomic on an aligned stack slot
            size = rng.choice([4, 8])
            off = -rng.randrange(size, STACK_BYTES + 1, size)
            op = rng.choice([0x00, 0x01, 0x40, 0x41, 0x50, 0x51, 0xA0, 0xA1, 0xE1, 0xF1])
            if op & 0x01 and src in reserved and op != 0xF1:
                src = dst
            if op == 0xF1 and 0 in reserved:
                op = 0x00
            return [Insn(0xC3 | _SIZES[size], 10, src, off, op)]
        return [Insn(0x63 | sz, base, src, off, 0)]

    def cond(self, skip: int) -> Insn:
        rng = self.rng
        op = rng.choice(_JMP_OPS)
        cls = rng.choice([0x05, 0x06])
        if rng.random() < 0.5:
            return Insn(cls | op | 0x08, rng.choice(_DATA_REGS), rng.choice(_DATA_REGS), skip, 0)
        return Insn(cls | op, rng.choice(_DATA_REGS), 0, skip, _imm(rng))

    # -- structure ---------------------------------------------------------------

    def items(self, n: int, reserved: set[int], depth: int) -> list[Insn]:
        out: list[Insn] = []
        rng = self.rng
        while len(out) < n:
            r = rng.random()
            if r < 0.45:
                out += self.alu(reserved)
            elif r < 0.75:
                out += self.mem(reserved)
            elif r < 0.85 and depth < 3 and self.branches < 10:
                self.branches += 1
                inner = self.items(rng.randint(1, 6), reserved, depth + 1)
                skip = sum(i.size for i in inner)
                out.append(self.cond(skip))
                out += inner
            elif r < 0.9 and depth < 2 and self.loops < 2 and 8 not in reserved and self.branches < 6:
                self.loops += 1
                out += self.loop(reserved, depth)
            elif r < 0.94 and self.allow_calls and depth < 2 and len(self.subprogs) < 2:
                out += self.call()
            elif r < 0.97:
                out.append(Insn(0x05, 0, 0, 0, 0) if rng.random() < 0.5 else Insn(0x06, 0, 0, 0, 0))  # ja +0
            else:
                out += self.mov_imm(rng.choice([r for r in _DATA_REGS if r not in reserved]))
        return out

    def loop(self, reserved: set[int], depth: int) -> list[Insn]:
        rng = self.rng
        bound = rng.randint(1, 4)
        body = self.items(rng.randint(2, 8), reserved | {8}, depth + 1)
        head = [Insn(0xB7, 8, 0, 0, 0)]
        tail = [Insn(0x07, 8, 0, 0, 1)]
        back = -(sum(i.size for i in body) + len(tail) + 1)
        jmp = Insn(0xA5, 8, 0, back, bound) if rng.random() < 0.5 else Insn(0xA6, 8, 0, back, bound)
        return head + body + tail + [jmp]

    def call(self) -> list[Insn]:
        """A call to a new subprogram that computes on r1-r5 and its own stack."""
        rng = self.rng
        sub = [Insn(0x7A, 10, 0, -8, 0), Insn(0xB7, 0, 0, 0, 0)]  # zero its stack slot and r0
        for _ in range(rng.randint(2, 8)):
            dst = rng.choice([0, 1, 2, 3, 4, 5])
            r = rng.random()
            if r < 0.6:
                op = rng.choice([0x00, 0x10, 0x20, 0x40, 0x50, 0xA0, 0xB0])
                sub.append(Insn(rng.choice([0x07, 0x04]) | op | 0x08, dst, rng.choice([1, 2, 3, 4, 5]), 0, 0))
            elif r < 0.8:
                sub.append(Insn(0x7B, 10, rng.choice([1, 2, 3, 4, 5]), -8, 0))
            else:
                sub.append(Insn(0x79, dst, 10, -8, 0))
        sub += [Insn(0xBF, 0, rng.choice([1, 2, 3, 4, 5]), 0, 0)]
        sub.append(Insn(0x0F, 0, rng.choice([1, 2, 3, 4, 5]), 0, 0))
        sub.append(Insn(0x95, 0, 0, 0, 0))
        self.subprogs.append(sub)
        # imm is patched once the subprogram's position is known; r1-r5 are
        # unreadable after a call (for the verifier), so set them again
        after = [Insn(0xB7, r, 0, 0, _imm(rng)) for r in (1, 2, 3, 4, 5)]
        return [Insn(0x85, 0, 1, 0, -(len(self.subprogs)))] + after

    def build(self) -> list[Insn]:
        rng = self.rng
        pro = [Insn(0xBF, CTX_REG, 1, 0, 0)]
        pro += [Insn(0x7A, 10, 0, -off, 0) for off in range(8, STACK_BYTES + 1, 8)]
        for r in _DATA_REGS:
            if rng.random() < 0.6:
                pro.append(Insn(0x79, r, CTX_REG, rng.randrange(0, DATA_SIZE - 7, 8), 0))
            else:
                pro += self.mov_imm(r)
        body = self.items(self.size, set(), 0)
        epi = [Insn(0x7B, CTX_REG, r, REGS_OFF + 8 * r, 0) for r in _DATA_REGS]
        for i in range(STACK_BYTES // 8):
            epi.append(Insn(0x79, 1, 10, -STACK_BYTES + 8 * i, 0))
            epi.append(Insn(0x7B, CTX_REG, 1, STACK_OFF + 8 * i, 0))
        epi.append(Insn(0x95, 0, 0, 0, 0))
        main = pro + body + epi
        if self.wild and rng.random() < 0.3:
            main = self.wildify(main)
        # lay out subprograms after main and patch the calls
        out = list(main)
        starts = []
        pos = sum(i.size for i in out)
        for sub in self.subprogs:
            starts.append(pos)
            out += sub
            pos += sum(i.size for i in sub)
        slot = 0
        for i, insn in enumerate(out):
            if insn.opcode == 0x85 and insn.src == 1 and insn.imm < 0 and -insn.imm <= len(starts):
                target = starts[-insn.imm - 1]
                out[i] = Insn(0x85, 0, 1, 0, target - slot - 1)
            slot += insn.size
        return out

    def wildify(self, insns: list[Insn]) -> list[Insn]:
        """Insert an unchecked pointer use or a backward jump."""
        rng = self.rng
        pos = rng.randrange(1, len(insns))
        reg = rng.choice(_DATA_REGS)
        kind = rng.random()
        if kind < 0.5:
            extra = [Insn(0xBF, reg, rng.choice([10, CTX_REG]), 0, 0), Insn(0x07, reg, 0, 0, rng.randint(-700, 700)),
                     rng.choice([Insn(0x79, 0, reg, 0, 0), Insn(0x7B, reg, 0, 0, 0), Insn(0x71, 0, reg, 3, 0)])]
        else:
            extra = [Insn(0x79, reg, rng.choice([10, CTX_REG]), -8 if rng.random() < 0.5 else 8, 0),
                     Insn(0x79, 0, reg, 0, 0)]
        return insns[:pos] + extra + insns[pos:]


def random_program(rng: random.Random | int, size: int = 40, *, wild: bool = False,
                   calls: bool = True) -> GeneratedProgram:
    """A random program (see the module docstring) and a random context.

    :param rng: a ``random.Random`` or a seed.
    :param size: about how many body instructions to generate.
    :param wild: also produce programs no verifier accepts (faults).
    :param calls: allow bpf-to-bpf calls.
    """
    seed = None
    if isinstance(rng, int):
        seed = rng
        rng = random.Random(rng)
    gen = _Gen(rng, wild, size, calls)
    insns = gen.build()
    ctx = bytes(rng.getrandbits(8) for _ in range(DATA_SIZE)) + bytes(CTX_SIZE - DATA_SIZE)
    return GeneratedProgram(insns, ctx, seed)




@dataclass
class MapProgram:
    """A generated program using maps.

    :ivar insns: the program; ``lddw`` map loads carry the *index* of their
        map in :attr:`maps` as fd — :meth:`with_fds` substitutes real fds.
    :ivar maps: ``(map type, key size, value size, max entries)`` per map.
    """

    insns: list[Insn]
    ctx: bytes
    maps: list[tuple[int, int, int, int]]

    def with_fds(self, fds: list[int]) -> list[Insn]:
        """The instructions with map index ``i`` replaced by ``fds[i]``."""
        return [Insn(i.opcode, i.dst, i.src, i.off, fds[i.imm]) if i.opcode == 0x18 and i.src == 1 else i
                for i in self.insns]


def random_map_program(rng: random.Random | int, ops: int = 12) -> MapProgram:
    """A program doing ``ops`` random map operations on a 4-entry hash map
    and a 4-entry array map: updates with random flags (and keys past the
    array's end), lookups that write through the value pointer, deletes. The
    helpers' return codes are folded into r6-r8, which end up in the context
    (at :data:`REGS_OFF`) with r0. Accepted by the kernel's verifier as a
    ``BPF_PROG_TYPE_SYSCALL`` program.
    """
    if isinstance(rng, int):
        rng = random.Random(rng)
    from ...uapi import MapType

    maps = [(int(MapType.HASH), 4, 8, 4), (int(MapType.ARRAY), 4, 8, 4)]
    out = [Insn(0xBF, CTX_REG, 1, 0, 0)]
    out += [Insn(0x7A, 10, 0, -off, 0) for off in range(8, 25, 8)]
    for r in (6, 7, 8):
        out.append(Insn(0x79, r, CTX_REG, 8 * (r - 6), 0))

    def args(m: int, key: int) -> list[Insn]:
        return [Insn(0x62, 10, 0, -4, key), Insn(0x18, 1, 1, 0, m), Insn(0xBF, 2, 10, 0, 0),
                Insn(0x07, 2, 0, 0, -4)]

    for _ in range(ops):
        m = rng.randrange(2)
        key = rng.randrange(6)
        draw = rng.random()
        acc = rng.choice([6, 7, 8])
        if draw < 0.4:  # update
            out.append(Insn(0x7B, 10, rng.choice([6, 7, 8]), -16, 0))
            out += args(m, key)
            out += [Insn(0xBF, 3, 10, 0, 0), Insn(0x07, 3, 0, 0, -16),
                    Insn(0xB7, 4, 0, 0, rng.choice([0, 0, 1, 2]))]
            out += [Insn(0x85, 0, 0, 0, 2), Insn(0xAF, acc, 0, 0, 0), Insn(0x07, acc, 0, 0, 3)]
        elif draw < 0.8:  # lookup and write through the pointer
            out += args(m, key)
            body = [Insn(0x79, 1, 0, 0, 0), Insn(0x0F, acc, 1, 0, 0), Insn(0x07, 1, 0, 0, rng.randint(1, 99)),
                    Insn(0x7B, 0, 1, 0, 0)]
            out += [Insn(0x85, 0, 0, 0, 1), Insn(0x15, 0, 0, len(body), 0)] + body
            out.append(Insn(0x27, acc, 0, 0, 3))
        else:  # delete
            out += args(m, key)
            out += [Insn(0x85, 0, 0, 0, 3), Insn(0xAF, acc, 0, 0, 0)]
    out += [Insn(0x7B, CTX_REG, r, REGS_OFF + 8 * r, 0) for r in (6, 7, 8)]
    out += [Insn(0xBF, 0, 6, 0, 0), Insn(0x95, 0, 0, 0, 0)]
    ctx = bytes(rng.getrandbits(8) for _ in range(DATA_SIZE)) + bytes(CTX_SIZE - DATA_SIZE)
    return MapProgram(out, ctx, maps)


__all__ = ["CTX_SIZE", "REGS_OFF", "STACK_OFF", "GeneratedProgram", "MapProgram", "random_map_program", "random_program"]
