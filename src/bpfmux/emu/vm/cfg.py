"""Control-flow graph of one BPF function: basic blocks, dominators, loops.

Used by the fast tier (:mod:`bpfmux.emu.vm.translate`) to turn a function into
structured Python (loops → ``for`` loops, forward branches → ``if``).
Offsets and block ids are slots.
"""

from __future__ import annotations

from collections.abc import Sequence

from .interp import INVALID, MIDDLE_OF_LDDW

Code = Sequence[tuple[int, int, int, int, int]]

#: Block terminators.
FALL, GOTO, COND, EXIT, FAULT, OUTSIDE = "fall", "goto", "cond", "exit", "fault", "outside"


def _s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def insn_targets(code: Code, pc: int) -> tuple[str, tuple[int, ...]]:
    """Kind of control transfer of the instruction at ``pc`` and its successors.

    Kinds: ``"next"`` (falls to the next instruction), ``"goto"``,
    ``"cond"`` (taken, fallthrough), ``"exit"``, ``"fault"`` (never
    continues).
    """
    op, dst, src, off, imm = code[pc]
    if op in (INVALID, MIDDLE_OF_LDDW):
        return "fault", ()
    cls = op & 0x07
    if cls in (0x05, 0x06):
        o = op & 0xF0
        if o == 0x00:
            return "goto", (pc + 1 + (off if cls == 0x05 else _s32(imm)),)
        if o == 0x90:
            return "exit", ()
        if o == 0x80:
            return "next", (pc + 1,)
        return "cond", (pc + 1 + off, pc + 1)
    return "next", (pc + (2 if op == 0x18 else 1),)


class Block:
    """A basic block: slots ``pcs``, ending in ``term`` with successors ``succs``."""

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
    """Blocks reachable from ``entry`` (not following calls).

    :ivar blocks: id (first slot) → :class:`Block`; targets outside the
        program are blocks of kind ``OUTSIDE`` with no slots.
    :ivar rpo: block ids in reverse post-order.
    :ivar idom: immediate dominator of each block (entry: itself).
    :ivar headers: loop header → set of blocks in its natural loop.
    :ivar reducible: False when some loop has more than one entry.
    """

    def __init__(self, code: Code, entry: int) -> None:
        self.code = code
        self.entry = entry
        n = len(code)
        # 1. leaders
        leaders = {entry}
        seen: set[int] = set()
        work = [entry]
        while work:
            pc = work.pop()
            while 0 <= pc < n and pc not in seen:
                seen.add(pc)
                kind, targets = insn_targets(code, pc)
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
        for lead in leaders:
            if not 0 <= lead < n:
                self.blocks[lead] = Block(lead, [], OUTSIDE, ())
                continue
            pcs = []
            pc = lead
            succs: tuple[int, ...]
            while True:
                pcs.append(pc)
                kind, targets = insn_targets(code, pc)
                if kind == "next":
                    nxt = targets[0]
                    if nxt in leaders or not 0 <= nxt < n:
                        if not 0 <= nxt < n:
                            self.blocks.setdefault(nxt, Block(nxt, [], OUTSIDE, ()))
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
        for blk in self.blocks.values():
            for s in dict.fromkeys(blk.succs):
                self.blocks[s].preds.append(blk.id)
        # 3. RPO (iterative DFS)
        order: list[int] = []
        visited = {entry}
        stack = [(entry, iter(dict.fromkeys(self.blocks[entry].succs)))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in visited:
                    visited.add(s)
                    stack.append((s, iter(dict.fromkeys(self.blocks[s].succs))))
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
                for p in self.blocks[b].preds:
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
        for b in order[1:]:
            self.children[idom[b]].append(b)
        for kids in self.children.values():
            kids.sort(key=idx.__getitem__)
        # 5. back edges, loops, reducibility
        self.reducible = True
        latches: dict[int, list[int]] = {}
        self.forward_preds: dict[int, int] = dict.fromkeys(order, 0)
        for b in order:
            for s in dict.fromkeys(self.blocks[b].succs):
                if idx[s] <= idx[b]:
                    if not self.dominates(s, b):
                        self.reducible = False
                    latches.setdefault(s, []).append(b)
                else:
                    self.forward_preds[s] += 1
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


_ARGS = frozenset((1, 2, 3, 4, 5))
_NONE: frozenset[int] = frozenset()


def insn_rw(code: Code, pc: int) -> tuple[frozenset[int], frozenset[int]]:
    """Registers the instruction at ``pc`` reads and writes (r10 left out:
    it is never written). Calls read r1-r5 and write r0 (a tail call writes
    nothing: a failed one leaves r0 alone)."""
    op, dst, src, off, imm = code[pc]
    if op in (INVALID, MIDDLE_OF_LDDW):
        return _NONE, _NONE
    cls = op & 0x07
    x = bool(op & 0x08)
    if cls in (0x04, 0x07):
        o = op & 0xF0
        if o == 0xB0:
            reads = {src} if x else set()
        elif o in (0xD0, 0x80):
            reads = {dst}
        else:
            reads = {dst, src} if x else {dst}
        return frozenset(reads) - {10}, frozenset((dst,))
    if cls == 0x01:
        return frozenset((src,)) - {10}, frozenset((dst,))
    if cls == 0x02:
        return frozenset((dst,)) - {10}, _NONE
    if cls == 0x03:
        if op & 0xE0 != 0xC0:
            return frozenset((dst, src)) - {10}, _NONE
        if imm == 0x100:
            return frozenset((src,)) - {10}, frozenset((dst,))
        if imm == 0xF1:
            return frozenset((dst, src, 0)) - {10}, frozenset((0,))
        if imm & 0x01:
            return frozenset((dst, src)) - {10}, frozenset((src,))
        return frozenset((dst, src)) - {10}, _NONE
    if cls == 0x00:
        if op == 0x18:
            return _NONE, frozenset((dst,))
        return (frozenset((src,)) - {10} if op & 0xE0 == 0x40 else _NONE), frozenset((0,))
    o = op & 0xF0
    if o == 0x00 or o == 0xE0:
        return _NONE, _NONE
    if o == 0x90:
        return frozenset((0,)), _NONE
    if o == 0x80:
        if x:
            reg = dst or imm
            return _ARGS | ({reg} - {10} if 0 <= reg <= 10 else set()), frozenset((0,))
        if src == 0 and imm == 12:
            return _ARGS, _NONE
        return _ARGS, frozenset((0,))
    return (frozenset((dst, src)) if x else frozenset((dst,))) - {10}, _NONE


def liveness(cfg: CFG) -> dict[int, frozenset[int]]:
    """Registers live on exit of each block (backward dataflow)."""
    use: dict[int, frozenset[int]] = {}
    defs: dict[int, frozenset[int]] = {}
    for bid, blk in cfg.blocks.items():
        u: set[int] = set()
        d: set[int] = set()
        for pc in blk.pcs:
            r, w = insn_rw(cfg.code, pc)
            u |= r - d
            d |= w
        use[bid], defs[bid] = frozenset(u), frozenset(d)
    live_in = {b: use[b] for b in cfg.blocks}
    live_out: dict[int, frozenset[int]] = dict.fromkeys(cfg.blocks, _NONE)
    changed = True
    order = list(reversed(cfg.rpo))
    while changed:
        changed = False
        for b in order:
            out = frozenset().union(*(live_in[s] for s in cfg.blocks[b].succs)) if cfg.blocks[b].succs else _NONE
            if out != live_out[b]:
                live_out[b] = out
                live_in[b] = use[b] | (out - defs[b])
                changed = True
    return live_out
