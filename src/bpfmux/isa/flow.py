"""Register use, control flow and liveness of eBPF code.

Three layers, each built on the one before:

* per instruction: the registers it reads and writes (:func:`regs_read`,
  :func:`regs_written`) and where control goes next (:func:`transfer`);
* per function: its control-flow graph (:class:`CFG`): basic blocks reachable
  from an entry without following calls, reverse post-order, dominators,
  natural loops, reducibility;
* per function: register liveness (:func:`live_out`, :func:`live_in`).

Code is given *by slot*: a sequence with the instruction starting at each
8-byte slot, and ``None`` where no instruction can run (the second slot of
an ``lddw``, or an instruction its executor refuses). :func:`by_slot` makes
one from an instruction list. Block ids and offsets are slots.

Register use comes in two views. ``abi=True`` (the default) is the kernel's
calling convention, what a verifier needs: calls and the legacy packet loads
clobber r0-r5 and the packet loads read the context in r6. ``abi=False`` is
what an executor changes: a call writes r0 (a helper tail call writes
nothing: a failed one falls through with r0 unchanged) and a packet load
writes r0 only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..uapi import HelperId
from .analysis import is_cond_jump, is_jump, jump_target
from .insn import Insn
from .opcodes import CALL, CALLX, JA, JA32, LDDW, Alu, Atomic, Class, Mode, Source
from .opcodes import EXIT as EXIT_OPCODE

__all__ = [
    "COND",
    "EXIT",
    "FALL",
    "FAULT",
    "GOTO",
    "OUTSIDE",
    "CFG",
    "Block",
    "ReadsWrites",
    "by_slot",
    "live_in",
    "live_out",
    "regs_read",
    "regs_written",
    "transfer",
]

_NONE: frozenset[int] = frozenset()
_LDDW = int(LDDW)
_R0 = frozenset({0})
_CALLER_SAVED = frozenset({0, 1, 2, 3, 4, 5})
_ARGS = [frozenset(range(1, n + 1)) for n in range(6)]  # r1..rn


# --------------------------------------------------------------------------- registers


def regs_read(insn: Insn, *, abi: bool = True, call_args: int = 5) -> frozenset[int]:
    """Registers an instruction reads (``exit``: r0; calls: r1 to r``call_args``).

    :param abi: the calling-convention view (see the module docstring); with
        ``abi=False`` the legacy packet loads do not read r6.
    :param call_args: arguments a call passes (5 unless the callee is known).

    Only meaningful for valid instructions.
    """
    op = insn.opcode
    cls = op & 0x07
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        if aop == Alu.MOV:
            return frozenset({insn.src}) if op & Source.X else _NONE
        if aop in (Alu.NEG, Alu.END) or not op & Source.X:
            return frozenset({insn.dst})
        return frozenset({insn.dst, insn.src})
    if cls in (Class.JMP, Class.JMP32):
        if op == EXIT_OPCODE:
            return _R0
        if op == CALL:
            return _ARGS[call_args]
        if op == CALLX:
            return _ARGS[call_args] | {insn.dst}
        if is_cond_jump(insn):
            return frozenset({insn.dst, insn.src}) if op & Source.X else frozenset({insn.dst})
        return _NONE
    if cls == Class.LD:
        if op == LDDW:
            return _NONE
        regs = {insn.src} if op & 0xE0 == Mode.IND else set()
        if abi:
            regs.add(6)
        return frozenset(regs)
    if cls == Class.LDX:
        return frozenset({insn.src})
    if cls == Class.ST:
        return frozenset({insn.dst})
    # STX
    if op & 0xE0 == Mode.ATOMIC:
        if insn.imm == Atomic.LOAD_ACQ:
            return frozenset({insn.src})
        if insn.imm == Atomic.CMPXCHG:
            return frozenset({insn.dst, insn.src, 0})
    return frozenset({insn.dst, insn.src})


def regs_written(insn: Insn, *, abi: bool = True) -> frozenset[int]:
    """Registers an instruction writes.

    :param abi: the calling-convention view: calls and legacy packet loads
        write r0-r5. With ``abi=False`` they write r0, and a helper tail call
        writes nothing (see the module docstring).

    Only meaningful for valid instructions.
    """
    op = insn.opcode
    cls = op & 0x07
    if cls in (Class.ALU, Class.ALU64, Class.LDX):
        return frozenset({insn.dst})
    if cls == Class.LD:
        if op == LDDW:
            return frozenset({insn.dst})
        return _CALLER_SAVED if abi else _R0
    if op in (CALL, CALLX):
        if abi:
            return _CALLER_SAVED
        return _NONE if op == CALL and insn.src == 0 and insn.imm == HelperId.tail_call else _R0
    if cls == Class.STX and op & 0xE0 == Mode.ATOMIC:
        if insn.imm == Atomic.LOAD_ACQ:
            return frozenset({insn.dst})
        if insn.imm == Atomic.CMPXCHG:
            return _R0
        if insn.imm & Atomic.FETCH and insn.imm != Atomic.STORE_REL:
            return frozenset({insn.src})
    return _NONE


# --------------------------------------------------------------------------- control flow

#: Kinds of block ends: falls into the next block, unconditional jump,
#: conditional jump (taken, fall-through), ``exit``, an instruction that
#: cannot run, and a target outside the code (a block without slots).
FALL, GOTO, COND, EXIT, FAULT, OUTSIDE = "fall", "goto", "cond", "exit", "fault", "outside"

#: What a liveness computation needs of each slot: registers read and written.
ReadsWrites = Callable[[Insn | None], tuple[frozenset[int], frozenset[int]]]


def by_slot(insns: Sequence[Insn]) -> list[Insn | None]:
    """The instructions indexed by slot: ``None`` in the second slot of each ``lddw``."""
    out: list[Insn | None] = []
    for insn in insns:
        out.append(insn)
        if insn.opcode == LDDW:
            out.append(None)
    return out


def transfer(insn: Insn | None, slot: int) -> tuple[str, tuple[int, ...]]:
    """Where control goes after the instruction at ``slot`` (calls return: they continue).

    :returns: ``("next", (following slot,))``, ``("goto", (target,))``,
        ``("cond", (taken target, following slot))`` (conditional jumps and
        ``may_goto``), ``("exit", ())``, or ``("fault", ())`` for ``None``.
    """
    if insn is None:
        return "fault", ()
    op = insn.opcode
    cls = op & 0x07
    if cls != 0x05 and cls != 0x06:  # not JMP or JMP32: falls through
        return "next", (slot + (2 if op == _LDDW else 1),)
    if op in (JA, JA32):
        return "goto", (jump_target(insn, slot),)
    if op == EXIT_OPCODE:
        return "exit", ()
    if is_jump(insn):
        return "cond", (jump_target(insn, slot), slot + 1)
    return "next", (slot + insn.size,)


class Block:
    """A basic block: slots ``pcs``, ending in ``term`` with successors ``succs``.

    :ivar id: its first slot.
    :ivar preds: ids of the blocks that lead here.
    """

    __slots__ = ("id", "pcs", "preds", "succs", "term")

    def __init__(self, bid: int, pcs: list[int], term: str, succs: tuple[int, ...]) -> None:
        self.id = bid
        self.pcs = pcs
        self.term = term
        self.succs = succs
        self.preds: list[int] = []

    def __repr__(self) -> str:
        return f"<Block {self.id} {self.pcs[:1]}..{self.pcs[-1:]} {self.term} -> {self.succs}>"


class CFG:
    """Blocks of the code ``code`` (by slot) reachable from ``entry``, not following calls.

    :ivar code: the code it was built from.
    :ivar blocks: id (first slot) → :class:`Block`; targets outside the
        code are blocks of kind ``OUTSIDE`` with no slots.
    :ivar rpo: block ids in reverse post-order.
    :ivar idom: immediate dominator of each block (entry: itself).
    :ivar children: the dominator tree: block → the blocks it immediately
        dominates, in reverse post-order.
    :ivar headers: loop header → set of blocks in its natural loop.
    :ivar reducible: False when some loop has more than one entry.

    :param max_block: cut straight runs longer than this many instructions
        into blocks that fall into each other (an executor that emits code
        per block keeps its blocks small this way); ``None``: no limit.
    """

    def __init__(self, code: Sequence[Insn | None], entry: int, max_block: int | None = None) -> None:
        self.code = code
        self.entry = entry
        n = len(code)
        # 1. leaders
        leaders = {entry}
        seen: dict[int, tuple[str, tuple[int, ...]]] = {}  # slot → its transfer
        work = [entry]
        while work:
            pc = work.pop()
            while 0 <= pc < n and pc not in seen:
                seen[pc] = kind_targets = transfer(code[pc], pc)
                kind, targets = kind_targets
                if kind == "next":
                    pc = targets[0]
                    continue
                for t in targets:
                    leaders.add(t)
                    work.append(t)
                break
            else:
                if not 0 <= pc < n:
                    leaders.add(pc)
        # 2. blocks
        self.blocks: dict[int, Block] = {}
        todo = list(leaders)[::-1]  # the leaders' own order first (pop takes from the end)
        while todo:
            lead = todo.pop()
            if lead in self.blocks:
                continue
            if not 0 <= lead < n:
                self.blocks[lead] = Block(lead, [], OUTSIDE, ())
                continue
            pcs = []
            pc = lead
            term: str
            succs: tuple[int, ...]
            while True:
                pcs.append(pc)
                kind, targets = seen.get(pc) or transfer(code[pc], pc)
                if kind == "next":
                    nxt = targets[0]
                    if nxt in leaders or not 0 <= nxt < n:
                        if not 0 <= nxt < n:
                            self.blocks.setdefault(nxt, Block(nxt, [], OUTSIDE, ()))
                        term, succs = FALL, (nxt,)
                        break
                    if max_block is not None and len(pcs) >= max_block:
                        leaders.add(nxt)
                        todo.append(nxt)
                        term, succs = FALL, (nxt,)
                        break
                    pc = nxt
                    continue
                term, succs = {"goto": GOTO, "cond": COND, "exit": EXIT, "fault": FAULT}[kind], targets
                break
            if term == COND and succs[0] == succs[1]:
                term, succs = GOTO, (succs[0],)  # both edges go to the same block; condition has no effect
            self.blocks[lead] = Block(lead, pcs, term, succs)
        for blk in list(self.blocks.values()):
            for s in blk.succs:
                if s not in self.blocks:  # out of range targets
                    self.blocks[s] = Block(s, [], OUTSIDE, ())
        blocks = self.blocks
        for blk in blocks.values():
            for s in blk.succs:  # distinct: a conditional jump whose edges agree became a goto above
                blocks[s].preds.append(blk.id)
        # 3. RPO (iterative DFS)
        order: list[int] = []
        visited = {entry}
        stack = [(entry, iter(blocks[entry].succs))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in visited:
                    visited.add(s)
                    stack.append((s, iter(blocks[s].succs)))
                    break
            else:
                stack.pop()
                order.append(node)
        order.reverse()
        self.rpo = order
        self.rpo_index = {b: i for i, b in enumerate(order)}
        # 4. dominators (Cooper, Harvey, Kennedy)
        idx = self.rpo_index
        idom: dict[int, int] = {entry: entry}
        changed = True
        while changed:
            changed = False
            for b in order[1:]:
                new = None
                for p in blocks[b].preds:
                    if p in idom:
                        if new is None:
                            new = p
                        else:
                            a, c = p, new
                            while a != c:
                                while idx[a] > idx[c]:
                                    a = idom[a]
                                while idx[c] > idx[a]:
                                    c = idom[c]
                            new = a
                if new is not None and idom.get(b) != new:
                    idom[b] = new
                    changed = True
        self.idom = idom
        self.children: dict[int, list[int]] = {b: [] for b in order}
        for b in order[1:]:  # in reverse post-order, so each list of children is too
            self.children[idom[b]].append(b)
        # 5. back edges, loops, reducibility
        self.reducible = True
        latches: dict[int, list[int]] = {}
        self.forward_preds: dict[int, int] = dict.fromkeys(order, 0)
        forward = self.forward_preds
        for b in order:
            ib = idx[b]
            for s in blocks[b].succs:
                if idx[s] <= ib:
                    if not self.dominates(s, b):
                        self.reducible = False
                    latches.setdefault(s, []).append(b)
                else:
                    forward[s] += 1
        self.headers: dict[int, set[int]] = {}
        for h, ls in latches.items():
            body = {h}
            work = [x for x in ls if x != h]
            body.update(work)
            while work:
                x = work.pop()
                for p in self.blocks[x].preds:
                    if p not in body and p in idx:
                        body.add(p)
                        work.append(p)
            self.headers[h] = body

    def dominates(self, a: int, b: int) -> bool:
        """Whether block ``a`` dominates block ``b``."""
        idom = self.idom
        while True:
            if a == b:
                return True
            parent = idom.get(b)
            if parent is None or parent == b:
                return False
            b = parent

    def is_back_edge(self, src: int, dst: int) -> bool:
        """Whether ``src → dst`` goes back (to a block not later in RPO)."""
        return self.rpo_index[dst] <= self.rpo_index[src]

    def is_merge(self, b: int) -> bool:
        """Whether ``b`` has two or more forward in-edges."""
        return self.forward_preds.get(b, 0) >= 2


# --------------------------------------------------------------------------- liveness


def live_out(cfg: CFG, rw: ReadsWrites) -> dict[int, frozenset[int]]:
    """Registers live on exit of each block of ``cfg`` (backward dataflow).

    :param rw: the registers each slot's instruction reads and writes
        (e.g. :func:`regs_read` and :func:`regs_written` in the view the
        caller needs; ``None`` slots usually neither).
    """
    # registers as bits of an int inside; sets only at the edges
    masks: dict[frozenset[int], int] = {}
    sets: dict[int, frozenset[int]] = {0: _NONE}

    def mask(regs: frozenset[int]) -> int:
        m = masks.get(regs)
        if m is None:
            m = masks[regs] = sum(1 << r for r in regs)
            sets.setdefault(m, frozenset(regs))
        return m

    code = cfg.code
    use: dict[int, int] = {}
    defs: dict[int, int] = {}
    for bid, blk in cfg.blocks.items():
        u = d = 0
        for pc in blk.pcs:
            r, w = rw(code[pc])
            u |= mask(r) & ~d
            d |= mask(w)
        use[bid], defs[bid] = u, d
    live_in_ = dict(use)
    out_of: dict[int, int] = dict.fromkeys(cfg.blocks, 0)
    blocks = cfg.blocks
    changed = True
    order = list(reversed(cfg.rpo))
    while changed:
        changed = False
        for b in order:
            out = 0
            for s in blocks[b].succs:
                out |= live_in_[s]
            if out != out_of[b]:
                out_of[b] = out
                live_in_[b] = use[b] | (out & ~defs[b])
                changed = True
    result: dict[int, frozenset[int]] = {}
    for b, m in out_of.items():
        regs = sets.get(m)
        if regs is None:
            regs = sets[m] = frozenset(r for r in range(16) if m >> r & 1)
        result[b] = regs
    return result


def live_in(cfg: CFG, rw: ReadsWrites) -> dict[int, frozenset[int]]:
    """Registers live before each instruction of ``cfg`` (slot → registers).

    :param rw: as for :func:`live_out`.
    """
    out: dict[int, frozenset[int]] = {}
    for bid, live in live_out(cfg, rw).items():
        regs = set(live)
        for pc in reversed(cfg.blocks[bid].pcs):
            r, w = rw(cfg.code[pc])
            regs -= w
            regs |= r
            out[pc] = frozenset(regs)
    return out
