"""Kprobe link kinds of the live backend on a real kernel (the VM tier's guest; the host has no kprobes).

Programs come from ``tests/bpf/kprobes.bpf.o``: each records, per function ip
(``bpf_get_func_ip``), its calls, first two arguments, return value and attach
cookie. The kernel calls the probed functions itself, through
BPF_PROG_TEST_RUN (see ``vmguest_expect``), so every argument and return value
is known exactly.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator

import pytest
from vmguest_expect import BPF_DIR, FENTRY_TESTS, run_fentry_tests

from bpfmux.api import MultiLink
from bpfmux.errors import BpfError
from bpfmux.host import tracefs
from bpfmux.host.kallsyms import KernelSymbols
from bpfmux.live import LiveKernel, links, perf
from bpfmux.live import sys as lsys
from bpfmux.live.kernel import LiveCollection
from bpfmux.live.links import KprobeLink, KprobeMultiLink
from bpfmux.uapi import BPF_TRACE_MAX_PROGS, ProgType

ALL = sorted(FENTRY_TESTS)


@pytest.fixture
def kp() -> Iterator[LiveCollection]:
    with LiveKernel().load(BPF_DIR / "kprobes.bpf.o") as coll:
        yield coll


@pytest.fixture(scope="module")
def addr() -> dict[str, int]:
    ks = KernelSymbols.load()
    assert ks.addresses_visible
    return {name: ks.address(name) for name in ALL}


def hits(coll: LiveCollection, map_name: str, addr: dict[str, int]) -> dict[str, tuple[int, ...]]:
    """A hits map as {function name: (calls, arg1, arg2, ret, cookie)}; an ip of no test function fails."""
    by_ip = {v: k for k, v in addr.items()}
    out = {}
    for ip, h in coll.maps[map_name].items():
        assert ip in by_ip, f"{map_name}: a hit at {ip:#x}, which is none of the probed functions"
        out[by_ip[ip]] = (h.calls, h.arg1, h.arg2, h.ret, h.cookie)
    return out


def entry(func: str, cookie: int = 0, calls: int = 1) -> tuple[int, ...]:
    """The expected entry record of one call of ``func``: its first two integer arguments."""
    args = [a if a is not None else -1 for a in FENTRY_TESTS[func][0]] + [-1]
    return (calls, args[0], args[1], 0, cookie)


def same(got: dict[str, tuple[int, ...]], want: dict[str, tuple[int, ...]]) -> bool:
    """Compare records; -1 in ``want`` matches anything (a pointer the kernel chose, or a register that is no argument)."""
    if got.keys() != want.keys():
        return False
    return all(all(w == -1 or g == w for g, w in zip(got[k], want[k], strict=True)) for k in want)


def exit_(func: str, cookie: int = 0, calls: int = 1) -> tuple[int, ...]:
    return (calls, 0, 0, FENTRY_TESTS[func][1], cookie)


# --------------------------------------------------------------------------- kprobe / kretprobe


def test_kprobe_and_kretprobe_with_cookies(kp: LiveCollection, addr: dict[str, int]) -> None:
    with kp.programs["kp_entry"].attach(cookie=11) as k1, kp.programs["kp_exit"].attach(cookie=12) as k2:
        assert isinstance(k1, KprobeLink) and (k1.kind, k2.kind) == ("kprobe", "kretprobe")
        run_fentry_tests()
        assert hits(kp, "kprobe_hits", addr) == {"bpf_fentry_test2": (1, 2, 3, 0, 11)}
        assert hits(kp, "kretprobe_hits", addr) == {"bpf_fentry_test2": (1, 0, 0, 5, 12)}
    run_fentry_tests()  # detached: nothing more is counted
    assert hits(kp, "kprobe_hits", addr)["bpf_fentry_test2"][0] == 1
    assert hits(kp, "kretprobe_hits", addr)["bpf_fentry_test2"][0] == 1


def test_kprobe_on_an_explicit_target_and_on_an_address(kp: LiveCollection, addr: dict[str, int]) -> None:
    prog = kp.programs["kp_entry"]  # its section says bpf_fentry_test2; the target given wins
    with prog.attach("bpf_fentry_test3", cookie=31), prog.attach(f"{addr['bpf_fentry_test4']:#x}", cookie=41):
        run_fentry_tests()
    assert hits(kp, "kprobe_hits", addr) == {
        "bpf_fentry_test3": (1, 4, 5, 0, 31),
        "bpf_fentry_test4": (1, 7, 8, 0, 41),
    }


def test_kprobe_on_a_missing_function_fails_and_leaks_nothing(kp: LiveCollection) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(BpfError) as ei:
        kp.programs["kp_entry"].attach("bpfmux_no_such_function")
    assert ei.value.errno in (errno.ENOENT, errno.EINVAL)
    assert len(os.listdir("/proc/self/fd")) == before


# --------------------------------------------------------------------------- kprobe_multi


def test_kprobe_multi_symbols_and_globs_with_cookies(kp: LiveCollection, addr: dict[str, int]) -> None:
    prog = kp.programs["multi_entry"]
    with prog.attach_many(["bpf_fentry_test1", "bpf_fentry_test[23]"], cookies=[21, 22]) as link:
        assert isinstance(link, KprobeMultiLink) and isinstance(link, MultiLink)
        assert (link.kind, link.mechanism) == ("kprobe_multi", "kprobe_multi")
        assert link.functions == ["bpf_fentry_test1", "bpf_fentry_test2", "bpf_fentry_test3"]
        assert link.cookies == [21, 22, 22]  # a glob's cookie goes to every function it matches
        run_fentry_tests()
    got = hits(kp, "multi_entry_hits", addr)
    want = {"bpf_fentry_test1": entry("bpf_fentry_test1", 21)}
    want |= {f: entry(f, 22) for f in ("bpf_fentry_test2", "bpf_fentry_test3")}
    assert same(got, want), got


def test_kprobe_multi_by_address(kp: LiveCollection, addr: dict[str, int]) -> None:
    """kprobe_multi by address goes through the syscall layer: the link API takes names and globs."""
    prog = kp.programs["multi_entry"]
    targets = ["bpf_fentry_test5", "bpf_fentry_test6"]
    with lsys.link_create_kprobe_multi(prog.fd, addrs=[addr[f] for f in targets], cookies=[51, 52]):
        run_fentry_tests()
    assert hits(kp, "multi_entry_hits", addr) == {
        "bpf_fentry_test5": (1, 11, 12, 0, 51),
        "bpf_fentry_test6": (1, 16, 17, 0, 52),
    }


def test_kretprobe_multi_sees_every_return_value(kp: LiveCollection, addr: dict[str, int]) -> None:
    with kp.programs["multi_exit"].attach() as link:  # section: kretprobe.multi/bpf_fentry_test*
        assert link.retprobe and link.mechanism == "kprobe_multi"
        assert set(ALL) <= set(link.functions)
        run_fentry_tests()
    assert hits(kp, "multi_exit_hits", addr) == {f: exit_(f) for f in ALL}


def test_kprobe_multi_unknown_function_is_refused_whole(kp: LiveCollection, addr: dict[str, int]) -> None:
    with pytest.raises(BpfError):
        kp.programs["multi_entry"].attach_many(["bpf_fentry_test1", "bpfmux_no_such_function"])
    run_fentry_tests()  # all or nothing: bpf_fentry_test1 is not probed either
    assert hits(kp, "multi_entry_hits", addr) == {}


# --------------------------------------------------------------------------- kprobe sessions


def test_kprobe_session_entry_return_and_session_cookie(kp: LiveCollection, addr: dict[str, int]) -> None:
    with kp.programs["session"].attach_many(["bpf_fentry_test*"], cookies=[61]) as link:
        assert link.kind == "kprobe_session" and link.mechanism == "kprobe_multi"
        run_fentry_tests()
    entries = hits(kp, "session_entry_hits", addr)
    assert same(entries, {f: entry(f, 61) for f in ALL}), entries
    exits = hits(kp, "session_exit_hits", addr)
    # The entry half returned 1 for bpf_fentry_test2 (arg1 == 2): no return half there.
    assert set(exits) == set(ALL) - {"bpf_fentry_test2"}
    for f, (calls, arg1, _arg2, ret, cookie) in exits.items():
        # The return half reads back what the entry half stored in the session cookie.
        assert (calls, arg1, ret, cookie) == (1, (entries[f][1] * 1000 + 7) % 2**64, FENTRY_TESTS[f][1], 61), f


# --------------------------------------------------------------------------- MultiLink


def test_multilink_picks_kprobe_multi_for_a_multi_program_and_perf_events_for_a_plain_kprobe(
    kp: LiveCollection, addr: dict[str, int]
) -> None:
    targets = ["bpf_fentry_test1", "bpf_fentry_test4", "bpf_fentry_test6"]
    with kp.programs["multi_entry"].attach_many(targets, cookies=[1, 4, 6]) as fast:
        assert isinstance(fast, MultiLink) and fast.mechanism == "kprobe_multi"
        with kp.programs["kp_entry"].attach_many(targets, cookies=[1, 4, 6]) as slow:
            assert isinstance(slow, MultiLink) and slow.mechanism == "perf_event"
            assert list(slow.targets) == targets
            run_fentry_tests()
    # Both mechanisms saw the same calls with the same arguments and cookies.
    want = {f: entry(f, c) for f, c in zip(targets, [1, 4, 6], strict=True)}
    fast_hits, slow_hits = hits(kp, "multi_entry_hits", addr), hits(kp, "kprobe_hits", addr)
    assert same(fast_hits, want) and same(slow_hits, want), (fast_hits, slow_hits)
    assert fast_hits == slow_hits


# --------------------------------------------------------------------------- ownership (seed 000)


def _kprobe_events(line: str) -> None:
    # Not open(..., "a"): Python seeks to the end of a file opened for appending, and tracefs refuses that.
    fd = os.open(os.path.join(tracefs.tracefs_root(), "kprobe_events"), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)


@pytest.fixture
def kprobe_event() -> Iterator[int]:
    """A tracefs kprobe event on bpf_fentry_test1 (one trace_event_call shared by every perf event on it)."""
    group, name = "bpfmux_vmtest", f"own_{os.getpid()}"
    _kprobe_events(f"p:{group}/{name} bpf_fentry_test1")
    try:
        yield tracefs.tracepoint_id(group, name)
    finally:
        _kprobe_events(f"-:{group}/{name}")


@pytest.mark.parametrize("via", ["link", "ioctl"])
def test_closing_one_owner_leaves_the_other_program_running_on_a_kprobe_event(
    kp: LiveCollection, kprobe_event: int, via: str
) -> None:
    bss = kp.maps[".bss"]
    a, b = kp.programs["own_prog_a"], kp.programs["own_prog_b"]
    ids = [a.id, b.id]
    la = links.attach_perf_event(a, perf.open_tracepoint(kprobe_event), via=via)
    lb = links.attach_perf_event(b, perf.open_tracepoint(kprobe_event), via=via)
    try:
        assert la.query() == ids == lb.query()  # one program array, in attach order
        a.close()  # the attachments own the programs now
        b.close()
        run_fentry_tests()
        assert (bss["own_a"], bss["own_b"]) == (1, 1)
        la.close()
        assert lb.query() == ids[1:]
        run_fentry_tests()
        assert (bss["own_a"], bss["own_b"]) == (1, 2)  # B still runs, A never again
        lb.close()
        run_fentry_tests()
        assert (bss["own_a"], bss["own_b"]) == (1, 2)
    finally:
        la.close()
        lb.close()


def test_a_kprobe_event_runs_at_most_64_programs(kprobe_event: int) -> None:
    k = LiveKernel()
    ret0 = bytes.fromhex("b700000000000000" "9500000000000000")
    attached = []
    try:
        for i in range(BPF_TRACE_MAX_PROGS):
            with k.load_program(ret0, ProgType.KPROBE, name=f"own{i}") as prog:
                attached.append(links.attach_perf_event(prog, perf.open_tracepoint(kprobe_event)))
        assert len(attached[0].query(capacity=BPF_TRACE_MAX_PROGS)) == BPF_TRACE_MAX_PROGS
        with k.load_program(ret0, ProgType.KPROBE, name="own64") as prog, pytest.raises(BpfError) as ei:
            links.attach_perf_event(prog, perf.open_tracepoint(kprobe_event))
        assert ei.value.errno == errno.E2BIG
    finally:
        for link in attached:
            link.close()
