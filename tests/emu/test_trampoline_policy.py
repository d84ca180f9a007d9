"""The trampoline policies against multi-attach.md §2, with Python programs.

The same scenarios run with eBPF programs in the emulated kernel elsewhere;
here programs are Python callables so every transition, order and frame can
be checked directly.
"""

from __future__ import annotations

import errno

import pytest

from bpfmux.emu.kernel.trampoline import Abi, Attachment, FunctionTable, ProgKind, make_policy
from bpfmux.emu.kernel.trampoline.frame import read_slots
from bpfmux.errors import BpfError
from bpfmux.uapi import BPF_MAX_TRAMP_LINKS

POLICIES = ["clone", "filter", "per-function"]


class Rec:
    """A program that records what it saw and returns a fixed value."""

    def __init__(self, name: str, log: list, rv: int = 0) -> None:
        self.name = name
        self.log = log
        self.rv = rv

    def run_tracing(self, frame: bytearray, info) -> int:
        self.log.append((self.name, read_slots(frame)[info.slot :], info.cookie, info.ip, info.nargs))
        return self.rv


@pytest.fixture
def table() -> FunctionTable:
    t = FunctionTable()
    t.define("f2", [4, 8], 8, lambda a, b: a + b)
    t.define("g1", [4], 8, lambda a: a * 10)
    t.define("h0", [], 8, lambda: 7)
    t.define("six", [8] * 6, 8, lambda *a: sum(a))
    t.define("seven", [8] * 7, 8, lambda *a: sum(a))
    return t


class World:
    def __init__(self, policy: str) -> None:
        self.p = make_policy(policy)
        self.log: list = []

    def own(self, func, kind: ProgKind, name: str, rv: int = 0, cookie: int = 0) -> Attachment:
        a = Attachment(Rec(name, self.log, rv), kind, self.p.next_seq(), cookie=cookie)
        self.p.attach(func, a)
        self.p.check_invariants()
        return a

    def multi(self, funcs, name: str, kind: ProgKind = ProgKind.MULTI_ENTRY, abi: Abi = Abi.SEED, cookies=None) -> Attachment:
        a = Attachment(Rec(name, self.log), kind, self.p.next_seq(), abi=abi, cookies=cookies or {})
        self.p.attach_multi(a, funcs)
        self.p.check_invariants()
        return a

    def kind(self, func) -> str | None:
        img = self.p.sites.get(func)
        return img.kind if img else None

    def call(self, func, *args) -> tuple[int, list]:
        self.log.clear()
        ret = self.p.call(func, args)
        return ret, [e[0] for e in self.log]


# -- transitions (clone policy: the seed's design) ------------------------


def test_transitions_table(table):
    w = World("clone")
    f, g = table["f2"], table["g1"]
    assert w.kind(f) is None
    e = w.own(f, ProgKind.FENTRY, "e")  # none -> standard(f)
    assert w.kind(f) == "standard"
    m = w.multi([f, g], "m")  # standard(f) -> clone(f, S); none -> multi(S)
    assert w.kind(f) == "clone" and w.kind(g) == "multi"
    x = w.own(g, ProgKind.FEXIT, "x")  # multi(S) -> clone(g, S)
    assert w.kind(g) == "clone"
    e2 = w.own(f, ProgKind.FENTRY, "e2")  # clone stays clone, one more program
    assert w.kind(f) == "clone" and len(w.p.sites[f].runs) == 3
    m2 = w.multi([f, g], "m2")  # clone(f,S) -> clone(f, S u {p})
    assert w.kind(f) == "clone" and len(w.p.sites[f].multi) == 2
    w.p.detach(g, x)  # release last own program: clone(g, S) -> multi(S)
    w.p.check_invariants()
    assert w.kind(g) == "multi"
    w.p.detach_multi(m)
    w.p.detach_multi(m2)  # release multi links until S empty: clone(f,S) -> standard(f)
    w.p.check_invariants()
    assert w.kind(f) == "standard" and w.kind(g) is None
    w.p.detach(f, e)
    w.p.detach(f, e2)  # last program of any kind -> none
    w.p.check_invariants()
    assert w.kind(f) is None and not w.p.images()


def test_only_two_trampolines_per_ip(table):
    """Seed 003: for every IP there are only two possible trampolines (multi or its clone)."""
    w = World("clone")
    f = table["f2"]
    m = w.multi([f], "m")
    seen = {w.kind(f)}
    a = w.own(f, ProgKind.FENTRY, "a")
    seen.add(w.kind(f))
    b = w.own(f, ProgKind.FEXIT, "b")
    seen.add(w.kind(f))
    w.p.detach(f, a)
    w.p.detach(f, b)
    seen.add(w.kind(f))
    assert seen == {"multi", "clone"}
    assert w.p.sites[f].multi == (m,)


def test_shared_multi_image_per_set(table):
    w = World("clone")
    f, g, h = table["f2"], table["g1"], table["h0"]
    m1 = w.multi([f, g, h], "m1")
    assert w.p.sites[f] is w.p.sites[g] is w.p.sites[h]
    w.multi([g, h], "m2")  # overlapping multi links: a second shared image for {m1, m2}
    assert w.p.sites[g] is w.p.sites[h] is not w.p.sites[f]
    assert len(w.p.images()) == 2
    assert w.p.sites[f].multi == (m1,)


# -- frames (seed ABI) ---------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_seed_frame_layout(table, policy):
    """ctx = &ip into multi progs; ip, arg1, arg2, ret, 0, 0, 0, ret; ctx = &arg1 for fexit."""
    w = World(policy)
    f = table["f2"]
    w.multi([f], "mx", kind=ProgKind.MULTI_EXIT)
    w.own(f, ProgKind.FEXIT, "fx")
    w.own(f, ProgKind.FENTRY, "fe")
    w.multi([f], "me")
    ret, order = w.call(f, 3, 4)
    assert ret == 7
    assert order == ["me", "fe", "fx", "mx"]
    by = {e[0]: e for e in w.log}
    assert by["me"][1] == (f.addr, 3, 4, 0, 0, 0, 0, 0)  # before the call ret slots hold 0
    assert by["fe"][1][:2] == (3, 4)
    assert by["fx"][1][:3] == (3, 4, 7)  # fexit: ctx[n] is ret
    assert by["mx"][1] == (f.addr, 3, 4, 7, 0, 0, 0, 7)  # ret as the 7th arg too
    assert all(e[3] == f.addr and e[4] == 2 for e in w.log)


@pytest.mark.parametrize("policy", POLICIES)
def test_six_args_ret_slots_coincide(table, policy):
    w = World(policy)
    f = table["six"]
    w.multi([f], "mx", kind=ProgKind.MULTI_EXIT)
    ret, _ = w.call(f, 1, 2, 3, 4, 5, 6)
    assert ret == 21
    assert w.log[0][1] == (f.addr, 1, 2, 3, 4, 5, 6, 21)


@pytest.mark.parametrize("policy", POLICIES)
def test_mainline_abi_multi_sees_arg1(table, policy):
    w = World(policy)
    f = table["f2"]
    w.multi([f], "mm", abi=Abi.MAINLINE, kind=ProgKind.MULTI_EXIT)
    w.call(f, 5, 6)
    assert w.log[0][1][:3] == (5, 6, 11)


# -- order and fmod_ret ------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_order_newest_first_within_kind(table, policy):
    w = World(policy)
    f = table["f2"]
    w.own(f, ProgKind.FEXIT, "x1")
    w.multi([f], "m1")
    w.own(f, ProgKind.FENTRY, "e1")
    w.own(f, ProgKind.FMOD_RET, "r1")
    w.own(f, ProgKind.FENTRY, "e2")
    w.multi([f], "m2")
    w.own(f, ProgKind.FEXIT, "x2")
    w.multi([f], "mx1", kind=ProgKind.MULTI_EXIT)
    w.own(f, ProgKind.FMOD_RET, "r2")
    _, order = w.call(f, 1, 1)
    assert order == ["m2", "m1", "e2", "e1", "r2", "r1", "x2", "x1", "mx1"]


@pytest.mark.parametrize("policy", POLICIES)
def test_fmod_ret_first_nonzero_wins_and_skips_function(table, policy):
    calls = []
    t = FunctionTable()
    f = t.define("f", [4], 4, lambda a: calls.append(a) or a + 1)
    w = World(policy)
    w.own(f, ProgKind.FMOD_RET, "r_old", rv=5)
    w.own(f, ProgKind.FMOD_RET, "r_new", rv=0)
    w.own(f, ProgKind.FEXIT, "x")
    w.multi([f], "mx", kind=ProgKind.MULTI_EXIT)
    ret, order = w.call(f, 41)
    assert ret == 5 and calls == []
    assert order == ["r_new", "r_old", "x", "mx"]
    by = {e[0]: e for e in w.log}
    assert by["r_new"][1][:2] == (41, 0) and by["r_old"][1][:2] == (41, 0)
    assert by["x"][1][:2] == (41, 5) and by["mx"][1][7] == 5


# -- limits and errors -------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_limit_38_per_function_and_atomic_multi(table, policy):
    w = World(policy)
    f, g = table["f2"], table["g1"]
    for i in range(BPF_MAX_TRAMP_LINKS - 1):
        w.own(f, ProgKind.FENTRY, f"e{i}")
    w.multi([f, g], "m")  # 38th program on f
    before = {fn: img for fn, img in w.p.sites.items()}
    with pytest.raises(BpfError) as ei:
        w.multi([g, f], "m2")
    assert ei.value.errno == errno.E2BIG and "f2" in str(ei.value)
    assert w.p.sites == before  # nothing changed, g included
    with pytest.raises(BpfError) as ei:
        w.own(f, ProgKind.FEXIT, "one-too-many")
    assert ei.value.errno == errno.E2BIG
    w.p.check_invariants()


@pytest.mark.parametrize("policy", POLICIES)
def test_untraceable_function_fails_whole_multi_attach(table, policy):
    w = World(policy)
    f, seven = table["f2"], table["seven"]
    with pytest.raises(BpfError) as ei:
        w.multi([f, seven], "m")
    assert ei.value.errno == errno.EINVAL and "seven" in str(ei.value)
    assert not w.p.sites and not w.p.states
    w.own(seven, ProgKind.FEXIT, "x")  # own programs may take up to 12 arguments
    ret, _ = w.call(seven, 1, 2, 3, 4, 5, 6, 7)
    assert ret == 28 and w.log[0][1] == (1, 2, 3, 4, 5, 6, 7, 28)


# -- cookies and update ----------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_cookies_per_function_and_update(table, policy):
    w = World(policy)
    f, g = table["f2"], table["g1"]
    m = w.multi([f, g], "m", cookies={f.addr: 11, g.addr: 22})
    w.own(f, ProgKind.FENTRY, "e", cookie=7)
    w.call(f, 1, 2)
    assert [e[2] for e in w.log] == [11, 7]
    w.call(g, 1)
    assert [e[2] for e in w.log] == [22]
    new = Rec("m_new", w.log)
    w.p.replace_program(m, new)
    w.p.check_invariants()
    _, order = w.call(f, 1, 2)
    assert order == ["m_new", "e"]
    _, order = w.call(g, 1)
    assert order == ["m_new"] and w.log[0][2] == 22


# -- costs: where each policy pays -------------------------------------------


def test_costs_show_the_designs(table):
    funcs = [table.define(f"fn{i}", [8], 8) for i in range(100)]
    costs = {}
    for policy in POLICIES:
        w = World(policy)
        w.multi(funcs, "m")
        for f in funcs[:10]:
            w.own(f, ProgKind.FENTRY, "e")
        w.p.costs.dispatch_steps = 0
        w.call(funcs[-1], 1)
        costs[policy] = dict(w.p.costs.as_dict())
    # clone: one shared image + ten clones; per-function: one image per function per change
    assert costs["clone"]["images_built"] == 11
    assert costs["per-function"]["images_built"] == 110
    # filter: the call of a function without own programs walks the whole chain
    assert costs["filter"]["dispatch_steps"] == 11
    assert costs["clone"]["dispatch_steps"] == 1 == costs["per-function"]["dispatch_steps"]


def test_function_table_refuses_duplicates_with_parse_error(table) -> None:
    from bpfmux.emu.kernel.trampoline.functions import KernelFunction, Param
    from bpfmux.errors import ParseError

    f2 = table["f2"]
    with pytest.raises(ParseError, match="already exists"):
        table.define("f2", [4])
    with pytest.raises(ParseError, match="already used by f2"):
        table.define("fresh", [4], addr=f2.addr)
    table.define("with_id", [4], btf_id=77)
    with pytest.raises(ParseError, match="BTF id 77 already used by with_id"):
        table.add(KernelFunction("other", 77, table.define("tmp", []).addr + 0x1000, (Param("a", 4),), Param("ret", 8)))
    assert "fresh" not in table and "other" not in table
    with pytest.raises(ParseError, match="unknown trampoline policy"):
        make_policy("round-robin")
