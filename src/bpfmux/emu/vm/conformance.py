"""Run the bpf_conformance suite on the emulator's tiers.

Each case's program (``-- asm`` assembled by :mod:`bpfmux.isa.asm`, or
``-- raw``) runs with ``r1`` pointing at a writable copy of its ``-- mem``
and ``r2`` holding that memory's length; the case passes on a tier when
``r0`` equals ``-- result``. A case passes when it passes on every tier asked
for (and the tiers agree).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import BpfmuxError
from ...isa.conformance import ConformanceCase, load_case, load_suite
from .machine import TIERS, VM


@dataclass
class CaseResult:
    """The outcome of one case.

    :ivar name: the case name; :ivar path: its file.
    :ivar expected: the expected ``r0`` (``None`` when the case has none).
    :ivar got: tier → ``r0``, for the tiers that ran to the end.
    :ivar errors: tier → error text, for the tiers that failed to run
        (and ``"case"`` for a case that could not be read or assembled).
    """

    name: str
    path: Path
    expected: int | None = None
    got: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def passed_on(self, tier: str) -> bool:
        """Whether the case passed on ``tier``."""
        return self.expected is not None and tier not in self.errors and self.got.get(tier) == self.expected

    @property
    def passed(self) -> bool:
        """Whether it passed on every tier it ran on."""
        return bool(self.got) and not self.errors and all(self.passed_on(t) for t in self.got)

    def reason(self) -> str:
        """Why it failed (empty when it passed)."""
        if "case" in self.errors:
            return self.errors["case"]
        parts = []
        for tier in TIERS:
            if tier in self.errors:
                parts.append(f"{tier}: {self.errors[tier]}")
            elif tier in self.got and not self.passed_on(tier):
                exp = "none" if self.expected is None else f"{self.expected:#x}"
                parts.append(f"{tier}: r0 = {self.got[tier]:#x}, expected {exp}")
        return "; ".join(parts)


def run_case(case: ConformanceCase, tiers: Iterable[str] = TIERS, vm: VM | None = None) -> CaseResult:
    """Run one parsed case on ``tiers``.

    :raises BpfmuxError: an unknown tier name.
    """
    tiers = list(tiers)
    for t in tiers:
        if t not in TIERS:
            raise BpfmuxError(f"unknown tier {t!r}; use one of {', '.join(TIERS)}")
    res = CaseResult(case.name, case.path or Path(case.name), case.result)
    try:
        insns = case.program()
    except BpfmuxError as e:
        res.errors["case"] = f"cannot assemble: {e}"
        return res
    if case.result is None:
        res.errors["case"] = "the case has no -- result"
        return res
    own = vm is None
    vm = vm or VM()
    try:
        prog = vm.load(insns, name=case.name)
        try:
            for tier in tiers:
                mem = bytearray(case.mem)
                try:
                    out = prog.run(mem, tier=tier, regs={2: len(case.mem)})
                except BpfmuxError as e:
                    res.errors[tier] = f"{type(e).__name__}: {e}"
                else:
                    res.got[tier] = out.r0
        finally:
            prog.close()
    finally:
        if own:
            vm.close()
    return res


def run_suite(directory: str | os.PathLike[str], tiers: Iterable[str] = TIERS) -> Generator[CaseResult, None, None]:
    """Run every ``*.data`` case directly in ``directory`` (sorted by name).

    A file that cannot be read or parsed yields a failed result.

    :raises OSError: the directory cannot be read.
    """
    tiers = list(tiers)
    vm = VM()
    try:
        for path in load_suite(directory):
            try:
                case = load_case(path)
            except (BpfmuxError, OSError) as e:
                yield CaseResult(path.stem, path, errors={"case": f"cannot read: {e}"})
                continue
            yield run_case(case, tiers, vm)
    finally:
        vm.close()


__all__ = ["CaseResult", "run_case", "run_suite"]
