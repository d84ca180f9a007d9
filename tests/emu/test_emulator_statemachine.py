"""Random loads, attaches (single, multi, overlapping multi, fmod_ret), updates,
detaches and calls of real eBPF programs, on all three trampoline policies at
once. After every step: the spec's invariants; after every call: identical
program-visible results across policies (return value and everything the
programs wrote), and each attached program run exactly once, in the specified
order (fmod_ret: up to the first non-zero)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bpfmux.emu.kernel.emulator import Emulator
from bpfmux.emu.kernel.trampoline import ProgKind
from bpfmux.isa.build import R0, R6, R7, R8, Asm
from bpfmux.uapi import AttachType, MapType, ProgFlags, ProgType

POLICIES = ["clone", "filter", "per-function"]
NARGS = [1, 2, 3, 6, 2]
SLOTS = 3  # per program: run count, sequence number of its last run, ctx[0] it saw
MAXP = 200
OWN = {ProgKind.FENTRY: AttachType.TRACE_FENTRY, ProgKind.FEXIT: AttachType.TRACE_FEXIT,
       ProgKind.FMOD_RET: AttachType.MODIFY_RETURN}
MULTI = [("seed_entry", AttachType.TRACE_FENTRY, ProgFlags.MULTI_FUNC, ProgKind.MULTI_ENTRY),
         ("seed_exit", AttachType.TRACE_FEXIT, ProgFlags.MULTI_FUNC, ProgKind.MULTI_EXIT),
         ("mainline_entry", AttachType.TRACE_FENTRY_MULTI, 0, ProgKind.MULTI_ENTRY),
         ("mainline_exit", AttachType.TRACE_FEXIT_MULTI, 0, ProgKind.MULTI_EXIT)]


def recorder(pid: int, rv: int) -> list:
    """log[0] += 1 (global sequence); per program: count += 1, seq = log[0], saw = ctx[0]; return rv."""
    base = 8 * (1 + SLOTS * pid)
    a = Asm()
    a.ldxdw(R6, 1, 0)  # r6 = ctx[0]  (r1 is the context)
    a.ld_map_value(R8, "log", 0)
    a.ldxdw(R7, R8, 0).add(R7, 1).stxdw(R8, 0, R7)
    a.ldxdw(R0, R8, base).add(R0, 1).stxdw(R8, base, R0)
    a.stxdw(R8, base + 8, R7).stxdw(R8, base + 16, R6)
    a.mov(R0, rv).exit()
    return a.assemble()


class World:
    def __init__(self, policy: str) -> None:
        self.emu = Emulator(btf=None, policy=policy)
        self.log = self.emu.vm.create_map(MapType.ARRAY, 4, 8 * (1 + SLOTS * MAXP), 1, name="log")
        self.funcs = [self.emu.define(f"fn{i}", [8] * n, 8, lambda *a, i=i: (sum(a) * 7 + i) & 0xFFFF)
                      for i, n in enumerate(NARGS)]
        self.links: dict[int, object] = {}

    def load(self, pid: int, rv: int, attach_type: int, flags: int = 0, attach_target: str | None = None):
        insns = recorder(pid, rv).resolve({"log": self.log.fd})
        return self.emu.load_program(insns, ProgType.TRACING, name=f"p{pid}", attach_type=attach_type,
                                     flags=flags, attach_target=attach_target)

    def words(self) -> list[int]:
        raw = bytes(self.log[0])
        return [int.from_bytes(raw[i : i + 8], "little") for i in range(0, len(raw), 8)]


class EmulatedTrampolines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.worlds = [World(p) for p in POLICIES]
        self.next_pid = 0
        self.own: list[tuple[int, int]] = []  # (pid, func index)
        self.multis: list[int] = []
        # model: pid -> (kind, seq, rv, funcs, abi-seed?)
        self.model: dict[int, dict] = {}
        self.seq = 0

    def teardown(self) -> None:
        for w in self.worlds:
            w.emu.close()

    def _pid(self) -> int:
        self.next_pid += 1
        assert self.next_pid < MAXP
        return self.next_pid

    @precondition(lambda self: self.next_pid < MAXP - 2)
    @rule(fi=st.integers(0, len(NARGS) - 1), kind=st.sampled_from(list(OWN)), rv=st.sampled_from([0, 0, 5]))
    def attach_own(self, fi, kind, rv):
        pid = self._pid()
        rv = rv if kind is ProgKind.FMOD_RET else 0
        for w in self.worlds:
            f = w.funcs[fi]
            prog = w.load(pid, rv, OWN[kind], attach_target=f.name)
            w.links[pid] = prog.attach()
            prog.close()  # the link keeps it
        self.seq += 1
        self.model[pid] = {"kind": kind, "seq": self.seq, "rv": rv, "funcs": {fi}, "seed": False}
        self.own.append((pid, fi))

    @precondition(lambda self: self.next_pid < MAXP - 2)
    @rule(fis=st.sets(st.integers(0, len(NARGS) - 1), min_size=1), which=st.sampled_from(MULTI))
    def attach_multi(self, fis, which):
        pid = self._pid()
        _, at, flags, kind = which
        order = sorted(fis)
        for w in self.worlds:
            prog = w.load(pid, 0, at, flags)
            w.links[pid] = w.emu.link_tracing_multi(prog, [w.funcs[i] for i in order], cookies=[pid] * len(order))
            prog.close()
        self.seq += 1
        self.model[pid] = {"kind": kind, "seq": self.seq, "rv": 0, "funcs": set(fis), "seed": bool(flags)}
        self.multis.append(pid)

    @precondition(lambda self: self.own)
    @rule(data=st.data())
    def detach_own(self, data):
        pid, _ = self.own.pop(data.draw(st.integers(0, len(self.own) - 1)))
        for w in self.worlds:
            w.links.pop(pid).close()
        del self.model[pid]

    @precondition(lambda self: self.multis)
    @rule(data=st.data())
    def detach_multi(self, data):
        pid = self.multis.pop(data.draw(st.integers(0, len(self.multis) - 1)))
        for w in self.worlds:
            w.links.pop(pid).close()
        del self.model[pid]

    @precondition(lambda self: self.multis and self.next_pid < MAXP - 2)
    @rule(data=st.data())
    def update_multi(self, data):
        k = data.draw(st.integers(0, len(self.multis) - 1))
        old = self.multis[k]
        new = self._pid()
        for w in self.worlds:
            link = w.links.pop(old)
            p = link.program
            prog = w.load(new, 0, p.attach_type, int(p.flags))
            link.update(prog, old=p)
            prog.close()
            w.links[new] = link
        self.model[new] = dict(self.model.pop(old))
        self.multis[k] = new

    @rule(fi=st.integers(0, len(NARGS) - 1), args=st.lists(st.integers(0, 2**64 - 1), min_size=6, max_size=6))
    def call(self, fi, args):
        a = tuple(args[: NARGS[fi]])
        before = [w.words() for w in self.worlds]
        rets = [w.emu.call(w.funcs[fi], *a) for w in self.worlds]
        after = [w.words() for w in self.worlds]
        assert rets.count(rets[0]) == len(rets), f"return values differ across policies: {rets}"
        assert after.count(after[0]) == len(after), "programs saw or wrote different things across policies"
        b, t = before[0], after[0]
        ran = []
        for pid in self.model:
            base = 1 + SLOTS * pid
            runs = t[base] - b[base]
            assert runs in (0, 1), f"p{pid} ran {runs} times in one call"
            if runs:
                ran.append((t[base + 1], pid))
        got = [pid for _, pid in sorted(ran)]
        mine = sorted((m["kind"], -m["seq"], pid) for pid, m in self.model.items() if fi in m["funcs"])
        expect, stopped = [], False
        for kind, _, pid in mine:
            if kind == ProgKind.FMOD_RET and stopped:
                continue
            expect.append(pid)
            if kind == ProgKind.FMOD_RET and self.model[pid]["rv"]:
                stopped = True
        assert got == expect, f"ran {got}, expected {expect}"
        w = self.worlds[0]
        for pid in got:  # what ctx[0] was: ip for seed multi programs, else the first argument
            m = self.model[pid]
            saw = t[1 + SLOTS * pid + 2]
            assert saw == (w.funcs[fi].addr if m["seed"] else a[0])
        if stopped:
            assert rets[0] == 5

    @invariant()
    def invariants(self):
        for w in self.worlds:
            w.emu.policy.check_invariants()


TestEmulatedTrampolines = EmulatedTrampolines.TestCase
TestEmulatedTrampolines.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
