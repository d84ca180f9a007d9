"""BPF functions translated to LLVM IR (text) for the native tier.

Each BPF function of a program (its entry, every bpf-to-bpf call target and
callback) becomes one LLVM function ``i64 @<prefix>f<slot>(ptr st, i64 r1,
…, i64 r5, i64 depth, i64 fp)`` (``fp``: r10, the top of its frame); one basic block per reachable instruction, the
registers in ``alloca`` slots (LLVM's ``mem2reg`` turns them into SSA
values). ``st`` points at the run's state (:mod:`.state`): word 0 the status
(0 running, 1 fault pending, 2 a tail call returned ``st[1]``, 3 the run
ends with ``r0 = 0``), word 2 the region table and word 3 its length.

Memory: every load and store checks its address inline against the region
table (slot ``addr >> 32``, offset ``addr & 0xffffffff``, readable and
writable lengths per slot); anything the table does not cover goes to the
``bpfmux_mem`` callback, which performs the access in Python (and installs
the region in the table) or records the fault the checked tier raises.
Helpers, kfuncs, frames, tail calls, ``callx``, ``may_goto`` and faults with
a message go through ``bpfmux_call``.

Run budget (``VM.run_budget``, shared by the whole run as on the fast tier):
state word 14 holds what is left of it while native code runs; each
function keeps it in a local, loaded on entry and stored back before every
call out of the function (helpers, kfuncs, ``callx``, bpf-to-bpf calls: a
callee charges the same budget) and on return. A block of straight-line
code charges its instruction count when it is entered; a call ends a block,
so the instructions after it are charged when the call returns (nothing is
counted before it ran). Function entries and back edges check the budget
first: a run stops with "run budget of N instructions exhausted" at the
first function entry or back edge after it executed more than N
instructions. (Handing the budget over in slices, so that Python could run
signal handlers during a loop without calls, cost 15-25 % on the ALU loop:
the refill path joins every loop header. A loop without calls runs at most
``VM.run_budget`` instructions, about a millisecond at the default.) Every cycle of the control-flow graph contains a back edge
(a jump to the same or an earlier slot), so every loop is bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..interp import INVALID, MIDDLE_OF_LDDW, s32
from ..runtime import MAX_CALL_FRAMES

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF
FIRST_SLOT = 0x8000_0000
_SIZE = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}

#: ``bpfmux_call`` kinds.
K_HELPER, K_KFUNC, K_CALLX, K_FRAME, K_FAULT, K_MAYGOTO, K_LDPKT, K_BUDGET = range(8)
#: State word holding what is left of the run budget (signed).
W_BUDGET = 14
#: ``bpfmux_mem`` access kinds (low byte of ``flags``; an atomic's imm in bits 8+).
A_READ, A_WRITE, A_ATOMIC = 0, 1, 2

ST_OK, ST_FAULT, ST_TAIL, ST_END = 0, 1, 2, 3

#: State words: 0 status, 1 tail-call r0, 2 table, 3 table length, 4… the
#: arguments of a callback (``bpfmux_call``: kind, id, pc, depth, r1-r5;
#: ``bpfmux_mem``: address, size, flags, pc, value, extra), and of an entry
#: (words 7-13: depth, r1-r5, fp), 14 the run budget left. One pointer crosses into Python: ``ctypes``
#: converts each argument, and one costs a fifth of eight.
DECLS = """\
declare i64 @bpfmux_cb_mem(ptr)
declare i64 @bpfmux_cb_call(ptr)
define internal i64 @bpfmux_mem(ptr %st, i64 %a, i64 %b, i64 %c, i64 %d, i64 %e, i64 %f) noinline {
  %p4 = getelementptr i64, ptr %st, i64 4
  store i64 %a, ptr %p4
  %p5 = getelementptr i64, ptr %st, i64 5
  store i64 %b, ptr %p5
  %p6 = getelementptr i64, ptr %st, i64 6
  store i64 %c, ptr %p6
  %p7 = getelementptr i64, ptr %st, i64 7
  store i64 %d, ptr %p7
  %p8 = getelementptr i64, ptr %st, i64 8
  store i64 %e, ptr %p8
  %p9 = getelementptr i64, ptr %st, i64 9
  store i64 %f, ptr %p9
  %r = call i64 @bpfmux_cb_mem(ptr %st)
  ret i64 %r
}
define internal i64 @bpfmux_call(ptr %st, i64 %a, i64 %b, i64 %c, i64 %d, i64 %r1, i64 %r2, i64 %r3, i64 %r4,
                                 i64 %r5) noinline {
  %p4 = getelementptr i64, ptr %st, i64 4
  store i64 %a, ptr %p4
  %p5 = getelementptr i64, ptr %st, i64 5
  store i64 %b, ptr %p5
  %p6 = getelementptr i64, ptr %st, i64 6
  store i64 %c, ptr %p6
  %p7 = getelementptr i64, ptr %st, i64 7
  store i64 %d, ptr %p7
  %p8 = getelementptr i64, ptr %st, i64 8
  store i64 %r1, ptr %p8
  %p9 = getelementptr i64, ptr %st, i64 9
  store i64 %r2, ptr %p9
  %p10 = getelementptr i64, ptr %st, i64 10
  store i64 %r3, ptr %p10
  %p11 = getelementptr i64, ptr %st, i64 11
  store i64 %r4, ptr %p11
  %p12 = getelementptr i64, ptr %st, i64 12
  store i64 %r5, ptr %p12
  %r = call i64 @bpfmux_cb_call(ptr %st)
  ret i64 %r
}
declare i64 @llvm.bswap.i64(i64)
declare i32 @llvm.bswap.i32(i32)
declare i16 @llvm.bswap.i16(i16)
"""


class Unsupported(Exception):
    """The program uses something the native tier does not translate."""


class Messages:
    """Fault messages of generated code, by index (``bpfmux_call`` kind
    ``K_FAULT`` carries the index)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, int | None]] = []
        self._index: dict[tuple[str, int | None], int] = {}

    def add(self, text: str, pc: int | None) -> int:
        key = (text, pc)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.items)
            self.items.append(key)
        return i


def _i64(v: int) -> str:
    v &= M64
    return str(v - (1 << 64) if v >> 63 else v)


def _imm64(imm: int) -> int:
    imm &= M32
    return (imm | 0xFFFFFFFF00000000) if imm & 0x80000000 else imm


def successors(code: Sequence[tuple[int, int, int, int, int]], pc: int) -> list[int]:
    """Slots control can reach from slot ``pc`` (may lie outside the program)."""
    op, _dst, src, off, imm = code[pc]
    if op in (INVALID, MIDDLE_OF_LDDW):
        return []
    cls = op & 0x07
    if op == 0x18:
        return [pc + 2]
    if cls in (0x05, 0x06):
        o = op & 0xF0
        if o == 0x00:
            return [pc + 1 + (off if cls == 0x05 else s32(imm))]
        if o == 0x90:
            return []
        if o == 0x80:
            return [pc + 1]
        return [pc + 1, pc + 1 + off]
    return [pc + 1]


class FunctionGen:
    """Emits one BPF function as an LLVM function."""

    def __init__(self, mod: ModuleGen, entry: int) -> None:
        self.mod = mod
        self.code = mod.code
        self.entry = entry
        self.lines: list[str] = []
        self.n = 0

    def t(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def lbl(self) -> str:
        self.n += 1
        return f"b{self.n}"

    def e(self, s: str) -> None:
        self.lines.append("  " + s)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    # -- registers ------------------------------------------------------------

    def get(self, r: int) -> str:
        v = self.t()
        self.e(f"{v} = load i64, ptr %r{r}")
        return v

    def put(self, r: int, v: str) -> None:
        self.e(f"store i64 {v}, ptr %r{r}")

    # -- control ----------------------------------------------------------------

    def fault(self, text: str, pc: int | None) -> None:
        """Raise a fault with ``text`` (terminates the block)."""
        idx = self.mod.messages.add(text, pc)
        self.e(f"call i64 @bpfmux_call(ptr %st, i64 {K_FAULT}, i64 {idx}, i64 {-1 if pc is None else pc}, "
               "i64 %depth, i64 0, i64 0, i64 0, i64 0, i64 0)")
        self.e("ret i64 0")


    def save_budget(self) -> None:
        """Hand the budget left to a callee (state word 14)."""
        b = self.t()
        self.e(f"{b} = load i64, ptr %budget")
        self.e(f"store i64 {b}, ptr %bw")

    def load_budget(self) -> None:
        """Take back what a callee left of the budget."""
        b = self.t()
        self.e(f"{b} = load i64, ptr %bw")
        self.e(f"store i64 {b}, ptr %budget")

    def charge(self, count: int) -> None:
        b = self.t()
        self.e(f"{b} = load i64, ptr %budget")
        b2 = self.t()
        self.e(f"{b2} = sub i64 {b}, {count}")
        self.e(f"store i64 {b2}, ptr %budget")

    def check_budget(self, pc: int, dest: str) -> None:
        """Branch to ``dest`` when budget is left, else fault at ``pc`` (``K_BUDGET``)."""
        b = self.t()
        self.e(f"{b} = load i64, ptr %budget")
        c = self.t()
        self.e(f"{c} = icmp slt i64 {b}, 0")
        over = self.lbl()
        self.e(f"br i1 {c}, label %{over}, label %{dest}")
        self.label(over)
        self.e(f"call i64 @bpfmux_call(ptr %st, i64 {K_BUDGET}, i64 0, i64 {pc}, i64 %depth, "
               "i64 0, i64 0, i64 0, i64 0, i64 0)")
        self.e("ret i64 0")

    def check_status(self) -> None:
        """After a callback: leave the function when the status is not 0."""
        s = self.t()
        self.e(f"{s} = load i64, ptr %st")
        c = self.t()
        self.e(f"{c} = icmp ne i64 {s}, 0")
        ok = self.lbl()
        self.e(f"br i1 {c}, label %bail, label %{ok}")
        self.label(ok)

    def cb(self, kind: int, ident: str, pc: int, args: Sequence[str], budget: bool = False) -> str:
        """A ``bpfmux_call``; with ``budget``, the callee may run program code
        or charge the run budget: it gets the budget and gives it back."""
        a = list(args) + ["0"] * (5 - len(args))
        if budget:
            self.save_budget()
        v = self.t()
        self.e(f"{v} = call i64 @bpfmux_call(ptr %st, i64 {kind}, i64 {ident}, i64 {pc}, i64 %depth, "
               + ", ".join(f"i64 {x}" for x in a) + ")")
        if budget:
            self.load_budget()
        return v

    def goto(self, pc: int, target: int) -> None:
        """Branch to slot ``target`` (a back edge checks the run budget first)."""
        dest = self.mod.target_label(self, target)
        if target <= pc and 0 <= target < len(self.code):
            self.check_budget(target, dest)
        else:
            self.e(f"br label %{dest}")

    # -- memory -----------------------------------------------------------------

    def load(self, addr: str, size: int, pc: int) -> str:
        """The zero-extended value of ``size`` bytes at ``addr`` (checked by ``@ld<size>``)."""
        v = self.t()
        self.e(f"{v} = call i64 @{self.mod.prefix}ld{size}(ptr %st, i64 {addr}, i64 {pc})")
        self.check_status()
        return v

    def store(self, addr: str, size: int, value: str, pc: int) -> None:
        self.e(f"call void @{self.mod.prefix}st{size}(ptr %st, i64 {addr}, i64 {value}, i64 {pc})")
        self.check_status()

    # -- instructions -------------------------------------------------------------

    def emit(self) -> list[str]:
        code = self.code
        n = len(code)
        reach: list[int] = []
        seen: set[int] = set()
        work = [self.entry]
        while work:
            pc = work.pop()
            if pc in seen or not 0 <= pc < n:
                continue
            seen.add(pc)
            reach.append(pc)
            work.extend(successors(code, pc))
        self.reach = seen
        charges = self.block_charges(seen)
        self.outside: dict[int, str] = {}
        name = self.mod.fname(self.entry)
        self.lines.append(f"define internal i64 @{name}(ptr %st, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, "
                          "i64 %depth, i64 %fp) {")
        self.label("entry")
        for r in range(11):
            self.e(f"%r{r} = alloca i64")
        self.e("%budget = alloca i64")
        self.e(f"%bw = getelementptr i64, ptr %st, i64 {W_BUDGET}")
        b0 = self.t()
        self.e(f"{b0} = load i64, ptr %bw")
        self.e(f"store i64 {b0}, ptr %budget")
        for r in (0, 6, 7, 8, 9):
            self.put(r, "0")
        for r in range(1, 6):
            self.put(r, f"%a{r}")
        self.put(10, "%fp")
        self.check_budget(self.entry, f"L{self.entry}")
        for pc in sorted(reach):
            self.label(f"L{pc}")
            count = charges.get(pc)
            if count:
                self.charge(count)
            self.insn(pc)
        for target, lab in self.outside.items():
            self.label(lab)
            self.fault(f"insn {target}: jump outside the program (0..{n - 1})", target)
        self.label("bail")
        self.save_budget()
        self.e("ret i64 0")
        self.lines.append("}")
        return self.lines

    def block_charges(self, reach: set[int]) -> dict[int, int]:
        """Slot → instructions charged when control reaches it: the block of
        straight-line code it starts (jumps, exits and calls end blocks; the
        slot after a call starts one)."""
        code = self.code
        leaders = {self.entry}
        for pc in reach:
            op = code[pc][0]
            if op & 0x07 in (0x05, 0x06) and op not in (INVALID, MIDDLE_OF_LDDW):
                leaders.update(successors(code, pc))
        charges: dict[int, int] = {}
        for start in leaders & reach:
            n = 0
            pc = start
            while True:
                n += 1
                op = code[pc][0]
                nxt = successors(code, pc)
                if op & 0x07 in (0x05, 0x06) or len(nxt) != 1 or nxt[0] in leaders or nxt[0] not in reach:
                    break
                pc = nxt[0]
            charges[start] = n
        return charges

    def insn(self, pc: int) -> None:
        op, dst, src, off, imm = self.code[pc]
        cls = op & 0x07
        if op == INVALID:
            self.fault(f"insn {pc}: invalid instruction: {self.mod.prog.invalid.get(pc, 'malformed')}", pc)
        elif op == MIDDLE_OF_LDDW:
            self.fault(f"insn {pc}: jump into the middle of an lddw", pc)
        elif op == 0x18:
            self.put(dst, _i64(imm))
            self.goto(pc, pc + 2)
        elif cls in (0x04, 0x07):
            if self.alu(pc, op, dst, src, off, imm):
                self.goto(pc, pc + 1)
        elif cls in (0x05, 0x06):
            self.jmp(pc, op, dst, src, off, imm)
        elif cls == 0x01:
            size = _SIZE[op & 0x18]
            a = self.get(src)
            addr = self.t()
            self.e(f"{addr} = add i64 {a}, {_i64(off)}")
            v = self.load(addr, size, pc)
            if op & 0xE0 != 0x60 and size < 8:
                tr = self.t()
                self.e(f"{tr} = trunc i64 {v} to i{8 * size}")
                v2 = self.t()
                self.e(f"{v2} = sext i{8 * size} {tr} to i64")
                v = v2
            self.put(dst, v)
            self.goto(pc, pc + 1)
        elif cls in (0x02, 0x03):
            size = _SIZE[op & 0x18]
            if op & 0xE0 == 0x60:
                value = self.get(src) if cls == 0x03 else _i64(_imm64(imm))
                a = self.get(dst)
                addr = self.t()
                self.e(f"{addr} = add i64 {a}, {_i64(off)}")
                self.store(addr, size, value, pc)
            else:
                self.atomic(pc, dst, src, off, imm, size)
            self.goto(pc, pc + 1)
        elif cls == 0x00 and op & 0xE0 in (0x20, 0x40):
            size = _SIZE[op & 0x18]
            base = self.get(src) if op & 0xE0 == 0x40 else "0"
            v = self.cb(K_LDPKT, str(size), pc, [base, _i64(imm), "1" if op & 0xE0 == 0x40 else "0"])
            self.check_status()
            self.put(0, v)
            self.goto(pc, pc + 1)
        else:
            self.fault(f"insn {pc}: invalid instruction: unknown opcode {op:#04x}", pc)

    def alu(self, pc: int, op: int, dst: int, src: int, off: int, imm: int) -> bool:
        """Emit an ALU instruction; False when it faulted (block ended)."""
        is64 = op & 0x07 == 0x07
        o = op & 0xF0
        a = self.get(dst)
        if o == 0xD0:
            if imm not in (16, 32, 64):
                self.fault(f"insn {pc}: invalid instruction: byte swap with invalid width {imm}", pc)
                return False
            if imm == 64:
                tr = a
            else:
                tr = self.t()
                self.e(f"{tr} = trunc i64 {a} to i{imm}")
            if op & 0x07 == 0x07 or op & 0x08:
                sw = self.t()
                self.e(f"{sw} = call i{imm} @llvm.bswap.i{imm}(i{imm} {tr})")
                tr = sw
            if imm < 64:
                z = self.t()
                self.e(f"{z} = zext i{imm} {tr} to i64")
                tr = z
            self.put(dst, tr)
            return True
        if op & 0x08:
            b = self.get(src)
        else:
            b = _i64(_imm64(imm)) if is64 else str(imm & M32)
        w = 64 if is64 else 32
        ty = f"i{w}"
        if not is64:
            a32 = self.t()
            self.e(f"{a32} = trunc i64 {a} to i32")
            b32 = self.t()
            self.e(f"{b32} = trunc i64 {b} to i32")
            a, b = a32, b32
        suffix = "" if is64 else "32"
        r = self.t()
        simple = {0x00: "add", 0x10: "sub", 0x20: "mul", 0x40: "or", 0x50: "and", 0xA0: "xor"}
        if o in simple:
            self.e(f"{r} = {simple[o]} {ty} {a}, {b}")
        elif o in (0x60, 0x70, 0xC0):
            m = self.t()
            self.e(f"{m} = and {ty} {b}, {w - 1}")
            self.e(f"{r} = {({0x60: 'shl', 0x70: 'lshr', 0xC0: 'ashr'})[o]} {ty} {a}, {m}")
        elif o == 0x80:
            self.e(f"{r} = sub {ty} 0, {a}")
        elif o in (0x30, 0x90):
            what = "div" if o == 0x30 else "mod"
            if off not in (0, 1):
                self.fault(f"insn {pc}: invalid instruction: {what}{suffix} with invalid offset {off}", pc)
                return False
            z = self.t()
            self.e(f"{z} = icmp eq {ty} {b}, 0")
            if off == 0:
                d = self.t()
                self.e(f"{d} = select i1 {z}, {ty} 1, {ty} {b}")
                q = self.t()
                self.e(f"{q} = {'udiv' if o == 0x30 else 'urem'} {ty} {a}, {d}")
                self.e(f"{r} = select i1 {z}, {ty} {'0' if o == 0x30 else a}, {ty} {q}")
            else:
                m1 = self.t()
                self.e(f"{m1} = icmp eq {ty} {b}, -1")
                zz = self.t()
                self.e(f"{zz} = or i1 {z}, {m1}")
                d = self.t()
                self.e(f"{d} = select i1 {zz}, {ty} 1, {ty} {b}")
                q = self.t()
                self.e(f"{q} = {'sdiv' if o == 0x30 else 'srem'} {ty} {a}, {d}")
                special = self.t()
                if o == 0x30:
                    self.e(f"{special} = sub {ty} 0, {a}")
                    q2 = self.t()
                    self.e(f"{q2} = select i1 {m1}, {ty} {special}, {ty} {q}")
                    self.e(f"{r} = select i1 {z}, {ty} 0, {ty} {q2}")
                else:
                    self.e(f"{special} = select i1 {m1}, {ty} 0, {ty} {q}")
                    self.e(f"{r} = select i1 {z}, {ty} {a}, {ty} {special}")
        elif o == 0xB0:
            valid = (0, 8, 16, 32) if is64 else (0, 8, 16)
            if off not in valid:
                self.fault(f"insn {pc}: invalid instruction: mov{suffix} with invalid offset {off}", pc)
                return False
            if off == 0:
                self.e(f"{r} = or {ty} {b}, 0")
            else:
                tr = self.t()
                self.e(f"{tr} = trunc {ty} {b} to i{off}")
                self.e(f"{r} = sext i{off} {tr} to {ty}")
        else:
            self.fault(f"insn {pc}: invalid instruction: unknown ALU{'64' if is64 else ''} operation {o:#x}", pc)
            return False
        if not is64:
            z = self.t()
            self.e(f"{z} = zext i32 {r} to i64")
            r = z
        self.put(dst, r)
        return True

    def jmp(self, pc: int, op: int, dst: int, src: int, off: int, imm: int) -> None:
        cls = op & 0x07
        o = op & 0xF0
        if o == 0x00:
            self.goto(pc, pc + 1 + (off if cls == 0x05 else s32(imm)))
            return
        if o == 0x90:
            r0 = self.get(0)
            self.save_budget()
            self.e(f"ret i64 {r0}")
            return
        if o == 0x80:
            self.call(pc, op, dst, src, imm)
            return
        if o == 0xE0:
            v = self.cb(K_MAYGOTO, "0", pc, [])
            self.check_status()
            c = self.t()
            self.e(f"{c} = icmp ne i64 {v}, 0")
            self.cond_branch(pc, c, pc + 1 + off, pc + 1)
            return
        preds = {0x10: "eq", 0x50: "ne", 0x20: "ugt", 0x30: "uge", 0xA0: "ult", 0xB0: "ule",
                 0x60: "sgt", 0x70: "sge", 0xC0: "slt", 0xD0: "sle"}
        if o not in preds and o != 0x40:
            self.fault(f"insn {pc}: invalid instruction: unknown jump operation {o:#x}", pc)
            return
        a = self.get(dst)
        b = self.get(src) if op & 0x08 else _i64(_imm64(imm) if cls == 0x05 else imm & M32)
        ty = "i64"
        if cls == 0x06:
            a32 = self.t()
            self.e(f"{a32} = trunc i64 {a} to i32")
            b32 = self.t()
            self.e(f"{b32} = trunc i64 {b} to i32")
            a, b, ty = a32, b32, "i32"
        c = self.t()
        if o == 0x40:
            x = self.t()
            self.e(f"{x} = and {ty} {a}, {b}")
            self.e(f"{c} = icmp ne {ty} {x}, 0")
        else:
            self.e(f"{c} = icmp {preds[o]} {ty} {a}, {b}")
        self.cond_branch(pc, c, pc + 1 + off, pc + 1)

    def cond_branch(self, pc: int, c: str, taken: int, fall: int) -> None:
        lt, lf = self.lbl(), self.lbl()
        self.e(f"br i1 {c}, label %{lt}, label %{lf}")
        self.label(lt)
        self.goto(pc, taken)
        self.label(lf)
        self.goto(pc, fall)

    def call(self, pc: int, op: int, dst: int, src: int, imm: int) -> None:
        args = [self.get(r) for r in (1, 2, 3, 4, 5)]
        if op & 0x08:  # callx
            where = self.get(dst)
            v = self.cb(K_CALLX, where, pc, args, budget=True)
            self.check_status()
        elif src == 0:
            v = self.cb(K_HELPER, str(imm & M32), pc, args, budget=True)
            if imm == 12:  # tail call: status 2 returns the target's r0
                s = self.t()
                self.e(f"{s} = load i64, ptr %st")
                c = self.t()
                self.e(f"{c} = icmp eq i64 {s}, {ST_TAIL}")
                tail, rest = self.lbl(), self.lbl()
                self.e(f"br i1 {c}, label %{tail}, label %{rest}")
                self.label(tail)
                self.e("store i64 0, ptr %st")
                rp = self.t()
                self.e(f"{rp} = getelementptr i64, ptr %st, i64 1")
                rv = self.t()
                self.e(f"{rv} = load i64, ptr {rp}")
                self.e(f"ret i64 {rv}")
                self.label(rest)
            self.check_status()
            if imm == 12:  # a failed tail call leaves r0 as it was
                self.goto(pc, pc + 1)
                return
        elif src == 1:
            target = pc + 1 + imm
            deep = self.t()
            self.e(f"{deep} = icmp sge i64 %depth, {MAX_CALL_FRAMES - 1}")
            bad, ok = self.lbl(), self.lbl()
            self.e(f"br i1 {deep}, label %{bad}, label %{ok}")
            self.label(bad)
            self.fault(f"insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames", pc)
            self.label(ok)
            if not 0 <= target < len(self.code):
                self.fault(f"insn {target}: jump outside the program (0..{len(self.code) - 1})", target)
                return
            self.mod.want(target)
            d1 = self.t()
            self.e(f"{d1} = add i64 %depth, 1")
            frame = self.cb(K_FRAME, d1, pc, [])
            self.check_status()
            fp = self.t()
            self.e(f"{fp} = add i64 {frame}, 512")
            self.save_budget()
            v = self.t()
            self.e(f"{v} = call i64 @{self.mod.fname(target)}(ptr %st, "
                   + ", ".join(f"i64 {x}" for x in args) + f", i64 {d1}, i64 {fp})")
            self.load_budget()
            self.check_status()
        elif src == 2:
            v = self.cb(K_KFUNC, str(imm & M32), pc, args, budget=True)
            self.check_status()
        else:
            raise Unsupported(f"insn {pc}: call with source {src}")
        self.put(0, v)
        self.goto(pc, pc + 1)

    def atomic(self, pc: int, dst: int, src: int, off: int, imm: int, size: int) -> None:
        bits = 8 * size
        if imm == 0x100:  # load-acquire
            a = self.get(src)
            addr = self.t()
            self.e(f"{addr} = add i64 {a}, {_i64(off)}")
            self.put(dst, self.load(addr, size, pc))
            return
        if imm == 0x110:  # store-release
            v = self.get(src)
            a = self.get(dst)
            addr = self.t()
            self.e(f"{addr} = add i64 {a}, {_i64(off)}")
            self.store(addr, size, v, pc)
            return
        base = imm & ~0x01
        a = self.get(dst)
        addr = self.t()
        self.e(f"{addr} = add i64 {a}, {_i64(off)}")
        ptr = self.t()
        self.e(f"{ptr} = call ptr @{self.mod.prefix}wp{size}(ptr %st, i64 {addr}, i64 {pc})")
        self.check_status()
        if imm not in (0xF1, 0xE1) and base not in (0x00, 0x40, 0x50, 0xA0):
            # the checked tier checks the access first, then refuses the operation
            self.fault(f"insn {pc}: invalid instruction: unknown atomic operation {imm:#x}", pc)
            return
        sv = self.get(src)
        r0 = self.get(0)
        isnull = self.t()
        self.e(f"{isnull} = icmp eq ptr {ptr}, null")
        fast, slow, join = self.lbl(), self.lbl(), self.lbl()
        self.e(f"br i1 {isnull}, label %{slow}, label %{fast}")
        self.label(fast)
        v = sv
        c0 = r0
        if size < 8:
            v = self.t()
            self.e(f"{v} = trunc i64 {sv} to i{bits}")
            c0 = self.t()
            self.e(f"{c0} = trunc i64 {r0} to i{bits}")
        old = self.t()
        if imm == 0xF1:
            pair = self.t()
            self.e(f"{pair} = cmpxchg ptr {ptr}, i{bits} {c0}, i{bits} {v} seq_cst seq_cst, align {size}")
            self.e(f"{old} = extractvalue {{i{bits}, i1}} {pair}, 0")
        else:
            rmw = "xchg" if imm == 0xE1 else {0x00: "add", 0x40: "or", 0x50: "and", 0xA0: "xor"}[base]
            self.e(f"{old} = atomicrmw {rmw} ptr {ptr}, i{bits} {v} seq_cst, align {size}")
        oldx = old
        if size < 8:
            oldx = self.t()
            self.e(f"{oldx} = zext i{bits} {old} to i64")
        self.e(f"br label %{join}")
        self.label(slow)  # memory the table does not cover (read-only buffers): the callback does it
        so = self.t()
        self.e(f"{so} = call i64 @bpfmux_mem(ptr %st, i64 {addr}, i64 {size}, i64 {A_ATOMIC | (imm << 8)}, "
               f"i64 {pc}, i64 {sv}, i64 {r0})")
        self.check_status()
        after = self.lines[-1][:-1]
        self.e(f"br label %{join}")
        self.label(join)
        res = self.t()
        self.e(f"{res} = phi i64 [{oldx}, %{fast}], [{so}, %{after}]")
        if imm == 0xF1:
            self.put(0, res)
        elif imm == 0xE1 or imm & 0x01:
            self.put(src, res)


def _access_functions(prefix: str) -> str:
    """``@ld<n>``/``@st<n>`` (checked loads and stores) and ``@wp<n>`` (the
    host pointer of a writable access, null when only the callback can do
    it) for n = 1, 2, 4, 8: the inline table check, the callback on a miss."""
    out = []
    for size in (1, 2, 4, 8):
        bits = 8 * size
        for kind in ("ld", "st", "wp"):
            write = kind != "ld"
            ret = {"ld": "i64", "st": "void", "wp": "ptr"}[kind]
            params = "ptr %st, i64 %a, i64 %v, i64 %pc" if kind == "st" else "ptr %st, i64 %a, i64 %pc"
            out.append(f"define internal {ret} @{prefix}{kind}{size}({params}) noinline {{")
            out.append("entry:")
            out.append("  %slot = lshr i64 %a, 32")
            out.append(f"  %idx = sub i64 %slot, {FIRST_SLOT}")
            out.append("  %tlp = getelementptr i64, ptr %st, i64 3")
            out.append("  %tl = load i64, ptr %tlp")
            out.append("  %inb = icmp ult i64 %idx, %tl")
            out.append("  br i1 %inb, label %chk, label %slow")
            out.append("chk:")
            out.append("  %tp = getelementptr i64, ptr %st, i64 2")
            out.append("  %tab = load ptr, ptr %tp")
            out.append("  %i3 = mul i64 %idx, 3")
            out.append("  %ep = getelementptr i64, ptr %tab, i64 %i3")
            out.append(f"  %lenp = getelementptr i64, ptr %ep, i64 {2 if write else 1}")
            out.append("  %len = load i64, ptr %lenp")
            out.append(f"  %off = and i64 %a, {M32}")
            out.append(f"  %end = add i64 %off, {size}")
            out.append("  %ok = icmp ule i64 %end, %len")
            out.append("  br i1 %ok, label %fast, label %slow")
            out.append("fast:")
            out.append("  %base = load i64, ptr %ep")
            out.append("  %hp = add i64 %base, %off")
            out.append("  %p = inttoptr i64 %hp to ptr")
            if kind == "ld":
                out.append(f"  %x = load i{bits}, ptr %p, align 1")
                out.append(f"  %z = zext i{bits} %x to i64" if size < 8 else "  %z = or i64 %x, 0")
                out.append("  ret i64 %z")
                out.append("slow:")
                out.append(f"  %s = call i64 @bpfmux_mem(ptr %st, i64 %a, i64 {size}, i64 {A_READ}, i64 %pc, i64 0, "
                           "i64 0)")
                out.append("  ret i64 %s")
            elif kind == "st":
                if size < 8:
                    out.append(f"  %t = trunc i64 %v to i{bits}")
                    out.append(f"  store i{bits} %t, ptr %p, align 1")
                else:
                    out.append("  store i64 %v, ptr %p, align 1")
                out.append("  ret void")
                out.append("slow:")
                out.append(f"  call i64 @bpfmux_mem(ptr %st, i64 %a, i64 {size}, i64 {A_WRITE}, i64 %pc, i64 %v, "
                           "i64 0)")
                out.append("  ret void")
            else:
                out.append("  ret ptr %p")
                out.append("slow:")  # checks the access (faults), installs the region when it can
                out.append(f"  call i64 @bpfmux_mem(ptr %st, i64 %a, i64 {size}, i64 {A_WRITE | 4}, i64 %pc, "
                           "i64 0, i64 0)")
                out.append("  ret ptr null")
            out.append("}")
    return "\n".join(out) + "\n"


class ModuleGen:
    """Emits every function of a program reachable from its entries."""

    def __init__(self, prog: Any, prefix: str, messages: Messages) -> None:
        self.prog = prog
        self.code: list[tuple[int, int, int, int, int]] = prog.code
        self.prefix = prefix
        self.messages = messages
        self._todo: list[int] = []
        self._done: set[int] = set()

    def fname(self, entry: int) -> str:
        return f"{self.prefix}f{entry}"

    def want(self, entry: int) -> None:
        if entry not in self._done and entry not in self._todo:
            self._todo.append(entry)

    def target_label(self, fn: FunctionGen, target: int) -> str:
        if 0 <= target < len(self.code):
            return f"L{target}"
        lab = fn.outside.get(target)
        if lab is None:
            lab = fn.outside[target] = f"out{len(fn.outside)}"
        return lab

    def build(self, entries: Sequence[int]) -> tuple[str, list[int]]:
        """The module's IR and the entries it defines (with an exported
        wrapper ``<prefix>e<slot>`` each)."""
        for e in sorted(entries):
            self.want(e)
        out = [DECLS, _access_functions(self.prefix)]
        while self._todo:
            e = self._todo.pop(0)
            self._done.add(e)
            out.extend(FunctionGen(self, e).emit())
        done = sorted(self._done)
        for e in done:
            out.append(f"define i64 @{self.prefix}e{e}(ptr %st) {{")
            for w, name in enumerate(("depth", "a1", "a2", "a3", "a4", "a5", "fp"), 7):
                out.append(f"  %p{w} = getelementptr i64, ptr %st, i64 {w}")
                out.append(f"  %{name} = load i64, ptr %p{w}")
            out.append(f"  %r = call i64 @{self.fname(e)}(ptr %st, i64 %a1, i64 %a2, i64 %a3, i64 %a4, i64 %a5, "
                       "i64 %depth, i64 %fp)")
            out.append("  ret i64 %r")
            out.append("}")
        return "\n".join(out) + "\n", done
