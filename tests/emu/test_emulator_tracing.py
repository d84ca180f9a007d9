"""Tracing programs from real objects in the emulated kernel: fentry, fexit,
fmod_ret and tracing multi links (seed ABI and mainline ABI), on the kernel's
own test functions driven like BPF_PROG_TEST_RUN."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from bpfmux.errors import BpfError
from bpfmux.uapi import AttachType, ProgFlags, ProgType

BPF = Path(__file__).resolve().parents[1] / "bpf"
POLICIES = ["clone", "filter", "per-function"]
TEST_ARGS = [(1,), (2, 3), (4, 5, 6), (7, 8, 9, 10), (11, 12, 13, 14, 15), (16, 17, 18, 19, 20, 21)]
TEST_RETS = [2, 5, 15, 34, 65, 111]


@pytest.fixture(params=POLICIES)
def policy(request):
    return request.param


@pytest.mark.parametrize("btf", ["auto", None], ids=["vmlinux-btf", "no-btf"])
def test_fentry_objects_see_the_test_run_arguments(emulator_factory, policy, btf):
    with emulator_factory(btf=btf, policy=policy) as emu:
        coll = emu.load(BPF / "fentry_test.bpf.o")
        links = coll.attach_all()
        assert emu.test_run_tracing(coll.programs["entry1"]) == 0
        bss = coll.maps[".bss"]
        assert bss["entry_calls"] == [1] * 8
        for i, args in enumerate(TEST_ARGS):
            assert bss["entry_args"][i][: len(args)] == list(args)
        for link in links:
            link.close()
        assert emu.sites() == []


def test_fexit_objects_see_return_values(emulator_factory, policy):
    with emulator_factory(btf=None, policy=policy) as emu:
        coll = emu.load(BPF / "fexit_test.bpf.o")
        coll.attach_all()
        emu.test_run_tracing(coll.programs["exit1"])
        bss = coll.maps[".bss"]
        assert bss["exit_ret"][:6] == TEST_RETS
        assert bss["exit_calls"] == [1] * 8


@pytest.mark.parametrize("override", [0, -22])
def test_fmod_ret_order_and_skip(emulator_factory, policy, override):
    with emulator_factory(btf=None, policy=policy) as emu:
        coll = emu.load(BPF / "modify_return.bpf.o")
        coll.maps[".bss"]["override_ret"] = override
        coll.attach_all()
        retval = emu.test_run_tracing(coll.programs["mr_modret"])
        bss = coll.maps[".bss"]
        assert (bss["entry_seq"], bss["modret_seq"], bss["exit_seq"]) == (1, 2, 3)
        assert bss["entry_a"] == 1 and bss["entry_b"] == 2 and bss["modret_ret_in"] == 0
        if override == 0:  # the function ran: b became 3, ret = 1 + 3
            assert bss["exit_ret"] == 4 and bss["exit_b"] == 3
            assert retval == (2 << 16) | (4 + 29)
        else:  # skipped: b untouched, ret is the fmod_ret value
            assert bss["exit_ret"] == -22 and bss["exit_b"] == 2
            assert retval == (1 << 16) | ((-22 + 29) & 0xFFFF)


def _per_ip(m):
    out = {}
    for k, v in m.items():
        key = k if isinstance(k, int) else int.from_bytes(k, "little")
        calls, arg1, ret = (v.calls, v.arg1, v.ret) if hasattr(v, "calls") else struct.unpack("<3Q", v)
        out[key] = (calls, arg1, ret)
    return out


def test_seed_and_mainline_multi_programs(emulator_factory, policy):
    with emulator_factory(btf=None, policy=policy) as emu:
        coll = emu.load(BPF / "multi.bpf.o")
        seed = coll.programs["seed_entry"]
        assert seed.flags & ProgFlags.MULTI_FUNC and seed.attach_type == AttachType.TRACE_FENTRY
        assert coll.programs["mainline_exit"].attach_type == AttachType.TRACE_FEXIT_MULTI
        links = coll.attach_all()
        assert all(link.mechanism == "tracing_multi" for link in links)
        emu.test_run_tracing(seed)
        funcs = [emu.function(f"bpf_fentry_test{i}") for i in range(1, 7)]
        for mapname, with_ret in [("seed_entry_by_ip", False), ("seed_exit_by_ip", True),
                                  ("mainline_entry_by_ip", False), ("mainline_exit_by_ip", True)]:
            got = _per_ip(coll.maps[mapname])
            for f, args, ret in zip(funcs, TEST_ARGS, TEST_RETS, strict=True):
                assert got[f.addr] == (1, args[0], ret if with_ret else 0), (mapname, f.name)
        # four multi programs on every test function: one shared image (clone policy)
        sites = {s.function: s for s in emu.sites()}
        assert sites["bpf_fentry_test1"].programs[:2] == ("mainline_entry", "seed_entry")
        if policy == "clone":
            assert len({s.image for s in sites.values()}) == 1 and sites["bpf_fentry_test1"].image == "multi"
            assert sites["bpf_fentry_test1"].shared_with == len(sites)


def test_multi_plus_fentry_makes_a_clone_and_back(emulator_factory, policy):
    with emulator_factory(btf=None, policy=policy) as emu:
        multi = emu.load(BPF / "multi.bpf.o", programs=["seed_exit"])
        single = emu.load(BPF / "fexit_test.bpf.o", programs=["exit2"])
        ml = multi.programs["seed_exit"].attach()
        s = {x.function: x for x in emu.sites()}["bpf_fentry_test2"]
        assert s.image == {"clone": "multi", "filter": "filter", "per-function": "per-function"}[policy]
        sl = single.programs["exit2"].attach()
        s = {x.function: x for x in emu.sites()}["bpf_fentry_test2"]
        assert s.image == {"clone": "clone", "filter": "filter", "per-function": "per-function"}[policy]
        assert s.programs == ("exit2", "seed_exit")  # fexit before multi exit
        emu.test_run_tracing(multi.programs["seed_exit"])
        assert single.maps[".bss"]["exit_ret"][1] == 5
        got = _per_ip(multi.maps["seed_exit_by_ip"])
        assert got[emu.function("bpf_fentry_test2").addr] == (1, 2, 5)
        ml.close()
        s = {x.function: x for x in emu.sites()}["bpf_fentry_test2"]
        assert s.image == {"clone": "standard", "filter": "standard", "per-function": "per-function"}[policy]
        sl.close()
        assert emu.sites() == []
        emu.policy.check_invariants()


def test_multi_fmod_ret_is_refused(emu):
    from bpfmux.isa.build import R0, Asm

    insns = Asm().mov(R0, 0).exit().assemble().insns
    with pytest.raises(BpfError) as ei:
        emu.load_program(insns, ProgType.TRACING, name="bad", attach_type=AttachType.MODIFY_RETURN,
                         flags=ProgFlags.MULTI_FUNC)
    assert ei.value.errno == errno.EINVAL


def test_link_errors_and_update(emu):
    coll = emu.load(BPF / "multi.bpf.o", programs=["seed_entry", "seed_exit"])
    p = coll.programs["seed_entry"]
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(p, [])
    assert ei.value.errno == errno.EINVAL
    f1 = emu.function("bpf_fentry_test1")
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(p, [f1, f1])
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(BpfError) as ei:
        emu.link_tracing_multi(p, [f1, emu.function("bpf_modify_return_test2")])
    assert ei.value.errno == errno.EINVAL and "bpf_modify_return_test2" in str(ei.value)
    assert emu.sites() == []  # all or nothing
    link = emu.link_tracing_multi(p, [f1], cookies=[7])
    with pytest.raises(BpfError) as ei:
        link.update(coll.programs["seed_exit"])  # different attach type
    assert ei.value.errno == errno.EINVAL
    oc = emu.load(BPF / "multi.bpf.o", programs=["seed_entry"])
    other = oc.programs["seed_entry"]
    with pytest.raises(BpfError) as ei:
        link.update(other, old=coll.programs["seed_exit"])
    assert ei.value.errno == errno.EPERM
    emu.call("bpf_fentry_test1", 40)
    link.update(other, old=p)
    emu.call("bpf_fentry_test1", 41)
    assert _per_ip(coll.maps["seed_entry_by_ip"]) == {f1.addr: (1, 40, 0)}  # old program: only the first call
    assert _per_ip(oc.maps["seed_entry_by_ip"]) == {f1.addr: (1, 41, 0)}  # the new one took over
    link.close()
    assert not p.freed and not other.freed  # their fds are still open
    other.close()
    assert other.freed
