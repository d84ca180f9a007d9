"""multi-attach.md §1 in the emulated kernel: program arrays per hook,
ownership by perf events and links, and the context each program type sees."""

from __future__ import annotations

import errno

import pytest
from emu_progs import counter_prog, ctx_dump_prog, words
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.abi.ptregs import PT_REGS_FIELDS, reg_offset
from bpfmux.abi.tpformat import load_format
from bpfmux.emu import Emulator
from bpfmux.errors import BpfError
from bpfmux.uapi import BPF_TRACE_MAX_PROGS, AttachType, MapType, ProgType

TP = "syscalls:sys_enter_getpid"


def counts_of(m, n):
    return [int.from_bytes(m[i], "little") for i in range(n)]


@pytest.fixture
def counts(emu):
    return emu.vm.create_map(MapType.ARRAY, 4, 8, 128, name="counts")


def test_seed_bug_closing_one_perf_event_keeps_the_other(emu, counts):
    """Seed 000: A via perf event 1, B via perf event 2 on one tracepoint; close 1."""
    a = counter_prog(emu, ProgType.TRACEPOINT, counts, 0, "A")
    b = counter_prog(emu, ProgType.TRACEPOINT, counts, 1, "B")
    pe1 = emu.perf_event_open(tracepoint=TP)
    pe2 = emu.perf_event_open(tracepoint=TP)
    pe1.set_bpf(a)
    pe2.set_bpf(b)
    a.close()  # closing the program fds does not detach anything
    b.close()
    emu.fire(TP)
    assert counts_of(counts, 2) == [1, 1]
    pe1.close()
    assert a.freed and not b.freed
    for _ in range(3):
        emu.fire(TP)
    assert counts_of(counts, 2) == [1, 4]  # B runs on every hit, A never again
    assert pe2.query() == [b.id]
    pe2.close()
    assert b.freed
    emu.fire(TP)
    assert counts_of(counts, 2) == [1, 4]


def test_link_holds_perf_event_and_owns_its_program(emu, counts):
    a = counter_prog(emu, ProgType.TRACEPOINT, counts, 0, "A")
    pe = emu.perf_event_open(tracepoint=TP)
    link = a.attach(TP)  # tracepoint program: its own perf event + BPF_PERF_EVENT link
    b = counter_prog(emu, ProgType.TRACEPOINT, counts, 1, "B")
    lb = b.attach(event=pe)
    pe.close()  # the link still holds the event: B keeps running
    emu.fire(TP)
    assert counts_of(counts, 2) == [1, 1]
    lb.close()
    emu.fire(TP)
    assert counts_of(counts, 2) == [2, 1]
    link.close()
    emu.fire(TP)
    assert counts_of(counts, 2) == [2, 1]


def test_one_program_per_perf_event_and_no_duplicates(emu, counts):
    a = counter_prog(emu, ProgType.TRACEPOINT, counts, 0, "A")
    b = counter_prog(emu, ProgType.TRACEPOINT, counts, 1, "B")
    pe = emu.perf_event_open(tracepoint=TP)
    pe.set_bpf(a)
    with pytest.raises(BpfError) as ei:
        pe.set_bpf(b)
    assert ei.value.errno == errno.EEXIST
    pe2 = emu.perf_event_open(tracepoint=TP)
    with pytest.raises(BpfError) as ei:
        pe2.set_bpf(a)  # the kernel's prog array refuses the same program twice
    assert ei.value.errno == errno.EEXIST


def test_65th_program_fails_e2big_and_query_is_in_attach_order(emu, counts):
    progs, events = [], []
    for i in range(BPF_TRACE_MAX_PROGS):
        p = counter_prog(emu, ProgType.TRACEPOINT, counts, i, f"p{i}")
        pe = emu.perf_event_open(tracepoint=TP)
        pe.set_bpf(p)
        progs.append(p)
        events.append(pe)
    extra = counter_prog(emu, ProgType.TRACEPOINT, counts, 64, "p64")
    pe = emu.perf_event_open(tracepoint=TP)
    with pytest.raises(BpfError) as ei:
        pe.set_bpf(extra)
    assert ei.value.errno == errno.E2BIG
    assert events[0].query() == [p.id for p in progs]
    with pytest.raises(BpfError) as ei:
        events[0].query(max_ids=10)
    assert ei.value.errno == errno.ENOSPC
    emu.fire(TP)
    assert counts_of(counts, 65) == [1] * 64 + [0]


def test_wrong_program_type_for_hook(emu, counts):
    k = counter_prog(emu, ProgType.KPROBE, counts, 0, "K")
    pe = emu.perf_event_open(tracepoint=TP)
    with pytest.raises(BpfError) as ei:
        pe.set_bpf(k)
    assert ei.value.errno == errno.EINVAL


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), data=st.data())
def test_any_close_order_leaves_exactly_the_others(n, data):
    """Property: the programs that run are exactly the live owners', in attach order."""
    with Emulator(btf=None) as emu:  # one per hypothesis example (a fixture would live across examples)
        counts = emu.vm.create_map(MapType.ARRAY, 4, 8, 8, name="counts")
        owners = []
        for i in range(n):
            p = counter_prog(emu, ProgType.TRACEPOINT, counts, i, f"p{i}")
            if data.draw(st.booleans()):
                pe = emu.perf_event_open(tracepoint=TP)
                pe.set_bpf(p)
                owners.append((i, pe, p))
            else:
                owners.append((i, p.attach(TP), p))
            p.close()
        live = list(owners)
        order = data.draw(st.permutations(range(n)))
        expect = [0] * n
        for k in order:
            emu.fire(TP)
            for i, _, _ in live:
                expect[i] += 1
            assert counts_of(counts, n) == expect
            first = live[0][1]
            q = first.query() if hasattr(first, "query") else None
            if q is not None:
                assert q == [p.id for _, _, p in live]
            victim = next(x for x in live if x[0] == k)
            victim[1].close()
            live.remove(victim)
            assert victim[2].freed
            assert all(not p.freed for _, _, p in live)


# -- the context each program type sees (seed 000: "such things are an abi") ----


def test_kprobe_sees_full_pt_regs_and_kprobe_multi_partial(emu):
    f = emu.define("six_args", [8] * 6, 8, lambda *a: 99)
    names = ["di", "si", "dx", "cx", "r8", "r9", "ip", "sp", "ax"]
    offs = [reg_offset(n) for n in names]
    single, m1 = ctx_dump_prog(emu, ProgType.KPROBE, offs, "single", section="kprobe/six_args", attach_target="six_args")
    multi, m2 = ctx_dump_prog(emu, ProgType.KPROBE, offs, "multi", section="kprobe.multi/six_args",
                              attach_target="six_args", attach_type=AttachType.TRACE_KPROBE_MULTI)
    ret, m3 = ctx_dump_prog(emu, ProgType.KPROBE, offs, "ret", section="kretprobe/six_args", attach_target="six_args")
    single.attach()
    multi.attach()
    ret.attach()
    assert emu.call("six_args", 1, 2, 3, 4, 5, 6) == 99
    w = dict(zip(names, words(m1, len(names)), strict=True))
    assert [w[n] for n in ["di", "si", "dx", "cx", "r8", "r9"]] == [1, 2, 3, 4, 5, 6]
    assert w["ip"] == f.addr and w["sp"] != 0
    w = dict(zip(names, words(m2, len(names)), strict=True))
    assert [w[n] for n in ["di", "si", "dx", "cx"]] == [1, 2, 3, 4]
    assert w["r8"] == 0 and w["r9"] == 0 and w["ax"] == 0  # only di, si, dx, cx, sp, ip populated
    assert w["ip"] == f.addr and w["sp"] != 0
    w = dict(zip(names, words(m3, len(names)), strict=True))
    assert w["ax"] == 99


def test_perf_event_sees_bpf_perf_event_data(emu):
    prog, m = ctx_dump_prog(emu, ProgType.PERF_EVENT, [reg_offset("ip"), 168, 176], "sample")
    pe = emu.perf_event_open(software="cpu-clock", sample_period=1000)
    prog.attach(event=pe)
    emu.perf_sample(pe, regs={"ip": 0xFFFFFFFF81234567}, addr=0x1234)
    assert words(m, 3) == [0xFFFFFFFF81234567, 1000, 0x1234]


def test_tracepoint_sees_its_record_and_raw_tp_its_args(emu):
    fmt = load_format("sched", "sched_switch")
    prev_pid = fmt.field("prev_pid")
    next_pid = fmt.field("next_pid")
    tp, m1 = ctx_dump_prog(emu, ProgType.TRACEPOINT, [prev_pid.offset & ~7], "tp", section="tracepoint/sched/sched_switch",
                           attach_target="sched/sched_switch")
    raw, m2 = ctx_dump_prog(emu, ProgType.RAW_TRACEPOINT, [0, 8, 16, 24], "raw", section="raw_tp/sched_switch",
                            attach_target="sched_switch")
    tp.attach()
    raw.attach()
    assert emu.fire("sched_switch", 0, 11, 22, 33, prev_pid=1234, next_pid=5678) == 2
    word = words(m1, 1)[0]
    shift = 8 * (prev_pid.offset & 7)
    assert (word >> shift) & 0xFFFFFFFF == 1234
    rec_word_next = next_pid.offset
    assert rec_word_next > prev_pid.offset
    assert words(m2, 4) == [0, 11, 22, 33]


def test_pt_regs_layout_is_x86_64():
    assert len(PT_REGS_FIELDS) == 21 and PT_REGS_FIELDS.index("di") == 14 and PT_REGS_FIELDS.index("ip") == 16


def test_reads_past_the_record_are_refused_at_attach(emu):
    """Tracepoint programs are verified before their event is known; attaching
    checks the highest context offset against the end of the record's last
    field (EACCES), as the kernel does."""
    tp = "syscalls:sys_enter_openat"
    fmt = load_format("syscalls", "sys_enter_openat")
    last = max(f.offset + f.size for f in fmt.fields)
    inside, _ = ctx_dump_prog(emu, ProgType.TRACEPOINT, [last - 8], "inside")
    past, _ = ctx_dump_prog(emu, ProgType.TRACEPOINT, [(last + 7) & ~7], "past")
    assert inside.max_ctx_offset == last and past.max_ctx_offset > last
    inside.attach(tp).close()
    with pytest.raises(BpfError) as ei:
        past.attach(tp)
    assert ei.value.errno == errno.EACCES
    small = load_format("syscalls", "sys_enter_getpid")  # 12 bytes: even the u64 at 8 is past it
    with pytest.raises(BpfError):
        inside.attach("syscalls:sys_enter_getpid")
    assert max(f.offset + f.size for f in small.fields) < inside.max_ctx_offset


def test_raw_tp_reading_past_its_arguments_is_refused(emulator_factory):
    with emulator_factory(btf="auto") as emu:
        if emu.btf is None:
            pytest.skip("needs kernel BTF for raw tracepoint prototypes (/sys/kernel/btf/vmlinux)")
        assert emu.raw_tp_nargs("sched_switch") == 4
        ok, _ = ctx_dump_prog(emu, ProgType.RAW_TRACEPOINT, [24], "ok")
        bad, _ = ctx_dump_prog(emu, ProgType.RAW_TRACEPOINT, [32], "bad")
        ok.attach("sched_switch").close()
        with pytest.raises(BpfError) as ei:
            bad.attach("sched_switch")
        assert ei.value.errno == errno.EINVAL
