"""User-level scenarios of the kernel contract (:mod:`bpfmux.api`), each run
on the emulated kernel and on the live one with the same code and the same
expected results: objects loaded, maps of every type both kernels have read
and written, programs of every attach kind attached and run, test runs, and
objects closed in any order."""

from __future__ import annotations

import errno
import itertools
import os
import struct

import pytest
from api_kernels import BPF, Driver, need

from bpfmux import api
from bpfmux.errors import BpfError, InvalidArgumentError, NotSupportedError
from bpfmux.host.cpus import possible_cpus
from bpfmux.host.kconfig import kernel_version
from bpfmux.isa.asm import assemble
from bpfmux.uapi import MapType, ProgFlags, ProgType

KCONFIG = {"CONFIG_HZ": 250, "CONFIG_BPF_SYSCALL": "y"}
POSSIBLE_CPUS = possible_cpus()  # both kernels keep one value per possible CPU of this machine


def test_both_kernels_implement_the_contract(kernel: api.Kernel) -> None:
    assert isinstance(kernel, api.Kernel) and kernel.kind in ("emulated", "live")
    with kernel.load(BPF / "getpid.bpf.o") as coll:
        prog = coll.programs["count_getpid"]
        assert isinstance(prog, api.Program) and isinstance(coll.maps["getpid_percpu"], api.Map)
        assert (prog.prog_type, prog.attach_type, prog.attach_target) == (ProgType.RAW_TRACEPOINT, None, "sys_enter")
        assert isinstance(prog.fd, int) and prog.fd >= 0 and prog.attach_kind.value == "raw_tracepoint"
        assert coll.maps["getpid_percpu"].type == MapType.PERCPU_ARRAY


def test_global_data_and_kconfig_after_a_test_run(kernel: api.Kernel) -> None:
    with kernel.load(BPF / "globals.bpf.o", kconfig=KCONFIG) as coll:
        res = coll.programs["read_globals"].test_run(b"")
        assert isinstance(res, api.TestRunResult) and res.retval == 0
        assert list(coll.maps[".bss"]["bss_out"]) == [42, 3, 7, ord("p"), 0xF00 + 22, 0xBA5, kernel_version(),
                                                      1 | (250 << 8)]
        assert (coll.maps[".bss"]["bss_seen"], coll.maps[".data"]["data_counter"]) == (6, 43)
        with pytest.raises(PermissionError):  # .rodata is frozen on both kernels
            coll.maps[".rodata"]["ro_config"] = 8


def _exercise(kernel: api.Kernel, mtype: MapType, *, value_size: int = 8, inner: api.Map | None = None) -> list:
    """One map of ``mtype`` through the Map interface; what each step observed."""
    seen: list = []
    with kernel.create_map(mtype, 4, value_size, 4, name="api_m", inner=inner) as m:
        seen.append((m.type, m.key_size, m.value_size, m.max_entries, isinstance(m.fd, int)))
        if mtype in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
            assert inner is not None
            m[1] = inner
            seen.append((1 in m, len(list(m))))
            del m[1]
            seen.append(1 in m)
            return seen
        for k in range(3):
            m[k] = (k + 1) * 10
        seen.append(sorted(k if isinstance(k, int) else int.from_bytes(k, "little") for k in m))  # arrays: ints
        raw = m.lookup_raw(1)
        seen.append(sum(struct.unpack_from("<Q", raw, i)[0] for i in range(0, len(raw), 8)))
        seen.append(sorted(sum(struct.unpack_from("<Q", v, i)[0] for i in range(0, len(v), 8))
                           for _, v in m.raw_items())[-3:])
        if mtype in (MapType.ARRAY, MapType.PERCPU_ARRAY):
            with pytest.raises(BpfError) as no_delete:  # arrays cannot delete: the kernel's EINVAL
                del m[1]
            assert no_delete.value.errno == errno.EINVAL
            seen.append(len(m))
        else:
            del m[1]
            seen.append(1 in m)
            with pytest.raises(KeyError):
                del m[1]
            m[3] = 5
            with pytest.raises(BpfError) as full:  # four entries: the fifth key does not fit
                m[4], m[5] = 1, 2
            seen.append(full.value.errno if mtype != MapType.LRU_HASH else "evicts")
    return seen


@pytest.mark.parametrize("mtype", [MapType.ARRAY, MapType.HASH, MapType.PERCPU_ARRAY, MapType.PERCPU_HASH])
def test_maps_of_every_shared_type(kernel: api.Kernel, mtype: MapType) -> None:
    seen = _exercise(kernel, mtype)
    assert seen[0] == (mtype, 4, 8, 4, True)
    keys = [0, 1, 2, 3] if mtype in (MapType.ARRAY, MapType.PERCPU_ARRAY) else [0, 1, 2]  # arrays: every index
    ncpus = POSSIBLE_CPUS if mtype in (MapType.PERCPU_ARRAY, MapType.PERCPU_HASH) else 1  # one value per CPU
    assert seen[1:4] == [keys, 20 * ncpus, [10 * ncpus, 20 * ncpus, 30 * ncpus]]
    if mtype in (MapType.ARRAY, MapType.PERCPU_ARRAY):
        assert seen[4:] == [4]
    else:
        assert seen[4:] == [False, 7]  # E2BIG


def test_maps_of_maps(kernel: api.Kernel) -> None:
    with kernel.create_map(MapType.ARRAY, 4, 4, 1, name="api_inner") as inner:
        for mtype in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
            seen = _exercise(kernel, mtype, value_size=4, inner=inner)
            assert seen[1:] == [(True, 1), False]  # only filled slots are keys; a deleted slot is empty


def test_load_program_from_instructions_and_test_run(kernel: api.Kernel) -> None:
    insns = assemble("mov %r0, 41\nadd %r0, 1\nexit")
    with kernel.load_program(insns, ProgType.SYSCALL, name="api_42", flags=ProgFlags.SLEEPABLE) as prog:
        assert prog.test_run(b"").retval == 42


def test_syscall_and_raw_tp_test_runs_agree(kernel: api.Kernel) -> None:
    with kernel.load(BPF / "testrun.bpf.o") as coll:
        ctx = bytearray(8 * 19)  # struct tr_ctx: a, b, s, out[16]
        struct.pack_into("<QQ", ctx, 0, 0x1234_5678_9ABC_DEF0, 77)
        a = coll.programs["exercise"].test_run(bytes(ctx)).retval
        b = coll.programs["exercise_raw"].test_run(struct.pack("<QQ", 5, 6)).retval
        assert (a, b) == (EXPECTED_TESTRUN, 11)


def test_raw_tracepoint_counts_this_process(kernel: api.Kernel, driver: Driver) -> None:
    from bpfmux.obj import load_object

    spec = load_object(BPF / "getpid.bpf.o")
    spec.set_rodata("target_tgid", os.getpid())
    with kernel.load(spec) as coll, coll.programs["count_getpid"].attach() as link:
        assert link.program is coll.programs["count_getpid"]
        driver.getpid(25)
        assert coll.maps[".bss"]["getpid_calls"] == 25
        assert sum(coll.maps["getpid_percpu"][0]) == 25


def test_tracepoint_events_through_a_ring_buffer(kernel: api.Kernel, driver: Driver) -> None:
    from bpfmux.obj import load_object

    spec = load_object(BPF / "ringbuf.bpf.o")
    spec.set_rodata("target_tgid", os.getpid())
    with kernel.load(spec, programs=["on_getpid"]) as coll, coll.programs["on_getpid"].attach():
        driver.getpid(6)
        records: list[bytes] = []
        with coll.maps["events"].reader(lambda r: records.append(bytes(r))) as ring:
            ring.poll(0.5)
        seqs = [struct.unpack_from("<IIQ", r)[2] for r in records]
        tgids = {struct.unpack_from("<IIQ", r)[1] for r in records}
        assert seqs == list(range(6)) and tgids == {os.getpid()}


def test_fentry_fexit_fmod_ret_through_test_runs(kernel: api.Kernel) -> None:
    need(kernel, "fentry")
    with kernel.load(BPF / "fentry_test.bpf.o") as coll:
        links = coll.attach_all()
        assert coll.programs["entry1"].test_run().retval == 0
        bss = coll.maps[".bss"]
        assert list(bss["entry_calls"]) == [1] * 8
        assert [list(a) for a in bss["entry_args"]][:3] == [[1, 0, 0, 0, 0, 0], [2, 3, 0, 0, 0, 0], [4, 5, 6, 0, 0, 0]]
        for link in links:
            link.close()
    with kernel.load(BPF / "modify_return.bpf.o") as coll:
        links = coll.attach_all()
        assert coll.programs["mr_modret"].test_run().retval == (2 << 16) | 33  # test_run.c: two side effects, 33
        bss = coll.maps[".bss"]
        assert (bss["entry_seq"], bss["modret_seq"], bss["exit_seq"], bss["exit_ret"]) == (1, 2, 3, 4)
        for link in links:
            link.close()


def test_kprobes_and_kprobe_multi_on_the_test_functions(kernel: api.Kernel) -> None:
    need(kernel, "kprobes", "kprobe_multi", "fentry")
    with kernel.load(BPF / "kprobes.bpf.o") as coll, kernel.load(BPF / "fentry_test.bpf.o") as trigger:
        links = [p.attach() for n, p in coll.programs.items() if p.attach_target]
        trigger.programs["entry1"].test_run()  # calls bpf_fentry_test1..8 (and 9, 10 where present)
        hits = {name: [struct.unpack_from("<5Q", v) for _, v in coll.maps[name].raw_items()]
                for name in ("kprobe_hits", "kretprobe_hits", "multi_entry_hits", "multi_exit_hits")}
        assert [h[:3] for h in hits["kprobe_hits"]] == [(1, 2, 3)]  # bpf_fentry_test2(2, 3)
        assert [(h[0], h[3]) for h in hits["kretprobe_hits"]] == [(1, 5)]  # it returned 5
        assert len(hits["multi_entry_hits"]) >= 8 and {h[0] for h in hits["multi_entry_hits"]} == {1}
        assert len(hits["multi_exit_hits"]) == len(hits["multi_entry_hits"])
        for link in links:
            link.close()


def test_tracing_multi_one_program_on_many_functions(kernel: api.Kernel) -> None:
    need(kernel, "tracing_multi", "fentry")
    with kernel.load(BPF / "multi.bpf.o") as coll:
        prog = coll.programs["mainline_entry"]
        with prog.attach_many(["bpf_fentry_test1", "bpf_fentry_test2"]) as link:
            assert link.mechanism == "tracing_multi" and len(link.targets) == 2
            coll.programs["mainline_exit"].test_run()  # calls every test function
            assert len(coll.maps["mainline_entry_by_ip"]) == 2


def test_bad_arguments_are_invalid_argument_errors(kernel: api.Kernel) -> None:
    with kernel.load(BPF / "getpid.bpf.o") as coll:
        prog = coll.programs["count_getpid"]
        with pytest.raises(InvalidArgumentError):
            prog.attach_many([])
        with pytest.raises(InvalidArgumentError):
            prog.attach_many(["sys_enter", "sys_exit"], cookies=[1])
    with kernel.load_program(assemble("mov %r0, 0\nexit"), ProgType.TRACEPOINT, name="api_tp") as tp:
        with pytest.raises(ValueError):  # no target: InvalidArgumentError, a ValueError too
            tp.attach()
    with kernel.load_program(assemble("mov %r0, 0\nexit"), ProgType.SYSCALL, name="api_sys",
                             flags=ProgFlags.SLEEPABLE) as sc:
        with pytest.raises(NotSupportedError):  # a syscall program attaches to no tracing hook
            sc.attach("sys_enter")


@pytest.mark.parametrize("order", list(itertools.permutations(["link", "program", "collection"])))
def test_close_in_any_order(kernel: api.Kernel, driver: Driver, order: tuple[str, ...]) -> None:
    from bpfmux.obj import load_object

    spec = load_object(BPF / "getpid.bpf.o")
    spec.set_rodata("target_tgid", os.getpid())
    coll = kernel.load(spec)
    prog = coll.programs["count_getpid"]
    link = prog.attach()
    objs = {"link": link, "program": prog, "collection": coll}
    calls = 3
    driver.getpid(3)
    assert coll.maps[".bss"]["getpid_calls"] == calls
    for name in order:
        objs[name].close()
        assert objs[name].closed
        objs[name].close()  # a second close does nothing
        if not coll.closed:  # the maps are still readable: does the program still run?
            driver.getpid(2)
            calls += 2 if not link.closed else 0  # it runs exactly while the link holds it
            assert coll.maps[".bss"]["getpid_calls"] == calls
    assert link.closed and prog.closed and coll.closed


def test_a_second_attach_of_one_fentry_program_is_refused(kernel: api.Kernel) -> None:
    need(kernel, "fentry")
    with kernel.load(BPF / "fentry_test.bpf.o", programs=["entry1"]) as coll:
        prog = coll.programs["entry1"]
        with prog.attach(), pytest.raises(BpfError):
            prog.attach()


def test_attach_kind_drives_both_dispatches(kernel: api.Kernel) -> None:
    with kernel.load(BPF / "sections.bpf.o", programs=["s_tracepoint", "s_raw_tp"]) as coll:
        kinds = {n: p.attach_kind.value for n, p in coll.programs.items()}
        with coll.programs["s_tracepoint"].attach() as a, coll.programs["s_raw_tp"].attach() as b:
            assert (a.kind, b.kind) == ("tracepoint", "raw_tracepoint")
    assert kinds == {"s_tracepoint": "tracepoint", "s_raw_tp": "raw_tracepoint"}


#: the retval of exercise() on the context above, as this machine's kernel (6.18) computes it
EXPECTED_TESTRUN = 2839223281


def test_an_unknown_attach_option_is_an_invalid_argument(kernel: api.Kernel) -> None:
    with kernel.load(BPF / "getpid.bpf.o") as coll:
        with pytest.raises(InvalidArgumentError, match="unknown attach option colour"):
            coll.programs["count_getpid"].attach(colour="blue")
        with pytest.raises(InvalidArgumentError, match="unknown attach option"):
            coll.programs["count_getpid"].attach_many(["sys_enter"], pid=1)
