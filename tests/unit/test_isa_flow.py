"""Register use in both views, the control-flow graph and liveness (:mod:`bpfmux.isa.flow`)."""

from __future__ import annotations

import pytest

from bpfmux.isa import Insn
from bpfmux.isa.asm import assemble
from bpfmux.isa.flow import (
    CFG,
    COND,
    EXIT,
    FALL,
    FAULT,
    GOTO,
    OUTSIDE,
    by_slot,
    live_in,
    live_out,
    regs_read,
    regs_written,
)


@pytest.mark.parametrize(
    ("text", "read", "written"),
    [
        ("call 1", {1, 2, 3, 4, 5}, {0}),
        ("call 12", {1, 2, 3, 4, 5}, set()),  # a failed tail call leaves r0 alone
        ("call %r7", {1, 2, 3, 4, 5, 7}, {0}),
        ("ldabsb 3", set(), {0}),
        ("ldindh %r7, 3", {7}, {0}),
        ("add %r1, 5", {1}, {1}),
    ],
)
def test_executor_view(text: str, read: set[int], written: set[int]) -> None:
    insn = assemble(text + "\nexit")[0]
    assert regs_read(insn, abi=False) == read
    assert regs_written(insn, abi=False) == written


def test_call_args() -> None:
    call = Insn(0x85, 0, 0, 0, 1)
    assert regs_read(call, call_args=2) == {1, 2}
    assert regs_read(call, call_args=0) == set()


def _rw(insn: Insn | None) -> tuple[frozenset[int], frozenset[int]]:
    if insn is None:
        return frozenset(), frozenset()
    return regs_read(insn), regs_written(insn)


def test_cfg_blocks_loops_and_liveness() -> None:
    insns = assemble(
        """
        mov %r0, 0           # 0
        lddw %r2, 5          # 1-2
        loop:
        add %r0, %r2         # 3
        sub %r2, 1           # 4
        jne %r2, 0, loop     # 5
        mov %r3, 7           # 6
        exit                 # 7
        """
    )
    code = by_slot(insns)
    assert code[2] is None and len(code) == 8
    cfg = CFG(code, 0)
    assert sorted(cfg.blocks) == [0, 3, 6]
    assert cfg.blocks[0].term == FALL and cfg.blocks[3].term == COND and cfg.blocks[6].term == EXIT
    assert cfg.blocks[3].succs == (3, 6) and cfg.headers == {3: {3}} and cfg.reducible
    assert cfg.rpo == [0, 3, 6] and cfg.dominates(0, 6) and cfg.is_back_edge(3, 3)
    assert live_out(cfg, _rw) == {0: {0, 2}, 3: {0, 2}, 6: set()}
    live = live_in(cfg, _rw)
    assert live[0] == set() and live[3] == {0, 2} and live[6] == {0} and live[7] == {0}


def test_cfg_faults_and_outside_targets() -> None:
    code = by_slot([Insn(0x05, 0, 0, 1, 0), Insn(0x18, 0, 0, 0, 5), Insn(0x05, 0, 0, 5, 0)])
    cfg = CFG(code, 0)
    assert cfg.blocks[2].term == FAULT  # the middle of the lddw
    assert cfg.blocks[0].term == GOTO
    cfg = CFG(code, 1)
    assert cfg.blocks[9].term == OUTSIDE and cfg.blocks[9].pcs == []
