"""Random sequences of attaches, updates, detaches and calls on all three
policies at once: invariants after every step, identical program-visible
results across policies, each program run exactly once per call in order."""

from __future__ import annotations

import errno

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bpfmux.emu.kernel.trampoline import Abi, Attachment, FunctionTable, ProgKind, make_policy
from bpfmux.emu.kernel.trampoline.frame import read_slots
from bpfmux.errors import BpfError

POLICIES = ["clone", "filter", "per-function"]
OWN_KINDS = [ProgKind.FENTRY, ProgKind.FEXIT, ProgKind.FMOD_RET]
MULTI_KINDS = [ProgKind.MULTI_ENTRY, ProgKind.MULTI_EXIT]


class Prog:
    def __init__(self, name: str, log: list, rv: int) -> None:
        self.name, self.log, self.rv = name, log, rv

    def run_tracing(self, frame: bytearray, info) -> int:
        self.log.append((self.name, read_slots(frame)[info.slot :], info.cookie, info.ip, info.nargs, int(info.kind)))
        return self.rv


def make_table() -> FunctionTable:
    t = FunctionTable()
    for i, n in enumerate([0, 1, 2, 3, 6, 2]):
        t.define(f"fn{i}", [8] * n, 8, lambda *a, i=i: sum(a) * 3 + i)
    return t


class Trampolines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.table = make_table()
        self.funcs = list(self.table)
        self.worlds = [(make_policy(p), []) for p in POLICIES]
        self.own: list[tuple[int, int, str]] = []  # (func index, kind, name)
        self.multis: list[tuple[tuple[int, ...], str]] = []
        self.atts: dict[str, list[Attachment]] = {}  # name -> per-world attachment
        self.n = 0
        # reference model: func index -> list of (kind, seq, name)
        self.model: dict[int, list[tuple[int, int, str]]] = {i: [] for i in range(len(self.funcs))}

    def _name(self) -> str:
        self.n += 1
        return f"p{self.n}"

    @rule(fi=st.integers(0, 5), kind=st.sampled_from(OWN_KINDS), rv=st.sampled_from([0, 0, 1, 77]), cookie=st.integers(0, 3))
    def attach_own(self, fi, kind, rv, cookie):
        name = self._name()
        f = self.funcs[fi]
        atts = []
        for p, log in self.worlds:
            a = Attachment(Prog(name, log, rv if kind is ProgKind.FMOD_RET else 0), kind, p.next_seq(), cookie=cookie)
            p.attach(f, a)
            atts.append(a)
        self.atts[name] = atts
        self.own.append((fi, kind, name))
        self.model[fi].append((int(kind), atts[0].seq, name))

    @precondition(lambda self: self.own)
    @rule(data=st.data())
    def detach_own(self, data):
        fi, kind, name = self.own.pop(data.draw(st.integers(0, len(self.own) - 1)))
        for (p, _), a in zip(self.worlds, self.atts.pop(name), strict=True):
            p.detach(self.funcs[fi], a)
        self.model[fi] = [m for m in self.model[fi] if m[2] != name]

    @rule(fis=st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True), kind=st.sampled_from(MULTI_KINDS), abi=st.sampled_from(list(Abi)))
    def attach_multi(self, fis, kind, abi):
        name = self._name()
        funcs = [self.funcs[i] for i in fis]
        cookies = {f.addr: 100 + i for i, f in zip(fis, funcs, strict=True)}
        atts, errs = [], []
        for p, log in self.worlds:
            a = Attachment(Prog(name, log, 0), kind, p.next_seq(), abi=abi, cookies=cookies)
            try:
                p.attach_multi(a, funcs)
                atts.append(a)
            except BpfError as e:
                errs.append(e.errno)
        assert len(errs) in (0, len(self.worlds)), "policies disagree on whether the attach works"
        if errs:
            assert set(errs) <= {errno.E2BIG}
            return
        self.atts[name] = atts
        self.multis.append((tuple(fis), name))
        for i in fis:
            self.model[i].append((int(kind), atts[0].seq, name))

    @precondition(lambda self: self.multis)
    @rule(data=st.data())
    def detach_multi(self, data):
        fis, name = self.multis.pop(data.draw(st.integers(0, len(self.multis) - 1)))
        for (p, _), a in zip(self.worlds, self.atts.pop(name), strict=True):
            p.detach_multi(a)
        for i in fis:
            self.model[i] = [m for m in self.model[i] if m[2] != name]

    @precondition(lambda self: self.multis)
    @rule(data=st.data())
    def update_multi(self, data):
        k = data.draw(st.integers(0, len(self.multis) - 1))
        fis, name = self.multis[k]
        new = self._name()
        for (p, log), a in zip(self.worlds, self.atts[name], strict=True):
            p.replace_program(a, Prog(new, log, 0))
        self.atts[new] = self.atts.pop(name)
        self.multis[k] = (fis, new)
        for i in fis:
            self.model[i] = [(m[0], m[1], new if m[2] == name else m[2]) for m in self.model[i]]

    @rule(fi=st.integers(0, 5), args=st.lists(st.integers(0, 2**64 - 1), min_size=6, max_size=6))
    def call(self, fi, args):
        f = self.funcs[fi]
        a = tuple(args[: f.nargs])
        results = []
        for p, log in self.worlds:
            log.clear()
            results.append((p.call(f, a), list(log)))
        first = results[0]
        for r in results[1:]:
            assert r == first, "policies differ in what programs see"
        ret, log = first
        # each attached program exactly once, in the specified order
        expect = [m[2] for m in sorted(self.model[fi], key=lambda m: (m[0], -m[1]))]
        ran = [e[0] for e in log]
        modrets = [m for m in sorted(self.model[fi], key=lambda m: (m[0], -m[1])) if m[0] == ProgKind.FMOD_RET]
        # fmod_ret: the first non-zero stops the remaining fmod_ret programs
        skipped = []
        for i, m in enumerate(modrets):
            if self.atts[m[2]][0].prog.rv:
                skipped = [x[2] for x in modrets[i + 1 :]]
                break
        assert ran == [n for n in expect if n not in skipped]
        for e in log:
            assert e[3] == f.addr and e[4] == f.nargs

    @invariant()
    def spec_invariants(self):
        for p, _ in self.worlds:
            p.check_invariants()


TestTrampolines = Trampolines.TestCase
TestTrampolines.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
