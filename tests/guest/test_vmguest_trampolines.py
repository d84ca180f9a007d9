"""fentry, fexit and fmod_ret on a real kernel's BPF trampolines (the VM tier's guest; the host refuses them),
and the emulator's trampolines against them.

The objects are ``tests/bpf/fentry_test.bpf.o``, ``fexit_test.bpf.o`` and
``modify_return.bpf.o``; BPF_PROG_TEST_RUN makes the kernel call the traced
functions with known arguments (``vmguest_expect``). The emulator runs the
same objects on its own copies of those functions, through its own
trampolines, with the same arguments; every result variable must match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from vmguest_expect import BPF_DIR, FENTRY_TESTS

from bpfmux.emu.kernel.emulator import Emulator
from bpfmux.live import LiveKernel
from bpfmux.live.links import TracingLink

FUNCS = sorted(FENTRY_TESTS)[:8]  # the objects trace bpf_fentry_test1..8
#: Lowest kernel-half address (5-level paging, which qemu's "-cpu max" offers; 4-level starts above it).
KERNEL_ADDRESS = 0xFF00_0000_0000_0000


def rows(values: dict[str, tuple[tuple[int | None, ...], int]]) -> list[list[int]]:
    """Expected ``*_args[8][6]`` rows: the integer arguments, zero-padded."""
    return [[a or 0 for a in values[f][0]] + [0] * (6 - len(values[f][0])) for f in FUNCS]


@pytest.fixture
def live() -> Iterator[LiveKernel]:
    yield LiveKernel()


def test_fentry_sees_every_argument(live: LiveKernel) -> None:
    with live.load(BPF_DIR / "fentry_test.bpf.o") as coll:
        links = coll.attach_all()
        try:
            assert all(isinstance(link, TracingLink) and link.kind == "fentry" for link in links)
            assert coll.programs["entry1"].test_run().retval == 0
        finally:
            for link in links:
                link.close()
        bss = coll.maps[".bss"]
        want = rows(FENTRY_TESTS)
        want[7][0] = 0  # entry8 stores arg->a, and the test run's struct is zeroed
        assert bss["entry_args"] == want
        assert bss["entry_calls"] == [1] * 8
        coll.programs["entry1"].test_run()  # detached: no program runs any more
        assert bss["entry_calls"] == [1] * 8


def test_fexit_sees_arguments_and_return_values(live: LiveKernel) -> None:
    with live.load(BPF_DIR / "fexit_test.bpf.o") as coll:
        links = coll.attach_all()
        try:
            assert {link.kind for link in links} == {"fexit"}
            assert coll.programs["exit1"].test_run().retval == 0
        finally:
            for link in links:
                link.close()
        bss = coll.maps[".bss"]
        got = bss["exit_args"]
        assert got[7][0] >= KERNEL_ADDRESS  # exit8 stores the pointer itself: the test run's stack
        got[7][0] = 0
        assert got == rows(FENTRY_TESTS)
        assert bss["exit_ret"] == [FENTRY_TESTS[f][1] for f in FUNCS]
        assert bss["exit_calls"] == [1] * 8


# bpf_modify_return_test(1, &b) returns 1 + ++b = 4; bpf_modify_return_test2(1, &b, 3, 4, 5, 6, 7) returns 29.
# Without an override both run and change b (side effects 2); with one, the first is skipped and returns it.
MODRET_CASES = {
    0: dict(retval=(2 << 16) | 33, entry_a=1, entry_b=2, modret_ret_in=0, exit_ret=4, exit_b=3),
    77: dict(retval=(1 << 16) | (77 + 29), entry_a=1, entry_b=2, modret_ret_in=0, exit_ret=77, exit_b=2),
}


@pytest.mark.parametrize("override", sorted(MODRET_CASES))
def test_fmod_ret_runs_between_fentry_and_fexit_and_can_replace_the_function(live: LiveKernel, override: int) -> None:
    with live.load(BPF_DIR / "modify_return.bpf.o") as coll:
        bss = coll.maps[".bss"]
        bss["override_ret"] = override
        links = coll.attach_all()
        try:
            assert [link.kind for link in links] == ["fentry", "fmod_ret", "fexit"]
            retval = coll.programs["mr_modret"].test_run().retval  # an fmod_ret test run calls the function
        finally:
            for link in links:
                link.close()
        want = MODRET_CASES[override]
        assert retval == want["retval"]
        assert (bss["entry_seq"], bss["modret_seq"], bss["exit_seq"], bss["seq"]) == (1, 2, 3, 3)
        assert {k: bss[k] for k in want if k != "retval"} == {k: v for k, v in want.items() if k != "retval"}


# --------------------------------------------------------------------------- the emulator against the kernel


def _run_live(obj: str, trigger: str, setup: Callable[[Any], None]) -> tuple[int, dict[str, Any]]:
    with LiveKernel().load(BPF_DIR / obj) as coll:
        setup(coll.maps[".bss"])
        links = coll.attach_all()
        try:
            retval = coll.programs[trigger].test_run().retval
        finally:
            for link in links:
                link.close()
        return retval, dict(coll.maps[".bss"].items())


def _run_emulated(obj: str, trigger: str, setup: Callable[[Any], None]) -> tuple[int, dict[str, Any]]:
    emu = Emulator()  # the guest kernel's BTF: the same function prototypes
    try:
        coll = emu.load(BPF_DIR / obj)
        setup(coll.maps[".bss"])
        coll.attach_all()
        retval = emu.test_run_tracing(coll.programs[trigger])
        return retval, dict(coll.maps[".bss"].items())
    finally:
        emu.close()


def _set(**values: int) -> Callable[[Any], None]:
    def setup(bss: Any) -> None:
        for k, v in values.items():
            bss[k] = v

    return setup


@pytest.mark.parametrize(
    "obj,trigger,setup",
    [
        ("fentry_test.bpf.o", "entry1", _set()),
        ("fexit_test.bpf.o", "exit1", _set()),
        ("modify_return.bpf.o", "mr_modret", _set()),
        ("modify_return.bpf.o", "mr_modret", _set(override_ret=77)),
    ],
    ids=["fentry", "fexit", "fmod_ret", "fmod_ret-override"],
)
def test_emulator_trampolines_match_the_kernel(obj: str, trigger: str, setup: Callable[[Any], None]) -> None:
    live_ret, live_vars = _run_live(obj, trigger, setup)
    emu_ret, emu_vars = _run_emulated(obj, trigger, setup)
    assert emu_ret == live_ret
    if "exit_args" in live_vars:
        # exit8 stores its struct pointer argument: the address of the test run's stack variable, which is a
        # kernel stack address in the kernel and an emulator address in the emulator. Both must be set.
        assert live_vars["exit_args"][7][0] and emu_vars["exit_args"][7][0]
        live_vars["exit_args"][7][0] = emu_vars["exit_args"][7][0] = 0
    assert emu_vars == live_vars
