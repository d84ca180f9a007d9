"""What BPF_PROG_TEST_RUN does to the kernel's BPF test functions (``net/bpf/test_run.c``, Linux 6.12).

A test run of a fentry/fexit program calls ``bpf_fentry_test1`` … ``bpf_fentry_test9``
once each, with the arguments below; a test run of an fmod_ret program calls
``bpf_modify_return_test(1, &b)`` and ``bpf_modify_return_test2(1, &b, 3, 4, 5, 6, 7)``
(``b = 2`` before each) and returns ``side_effects << 16 | (sum of results & 0xffff)``.
"""

from __future__ import annotations

from pathlib import Path

from bpfmux.live import LiveKernel

BPF_DIR = Path(__file__).resolve().parents[1] / "bpf"

#: function → (integer arguments, or None where the argument is a pointer the kernel chooses; return value)
FENTRY_TESTS: dict[str, tuple[tuple[int | None, ...], int]] = {
    "bpf_fentry_test1": ((1,), 2),
    "bpf_fentry_test2": ((2, 3), 5),
    "bpf_fentry_test3": ((4, 5, 6), 15),
    "bpf_fentry_test4": ((7, 8, 9, 10), 34),
    "bpf_fentry_test5": ((11, 12, 13, 14, 15), 65),
    "bpf_fentry_test6": ((16, 17, 18, 19, 20, 21), 111),
    "bpf_fentry_test7": ((0,), 0),  # a NULL struct pointer
    "bpf_fentry_test8": ((None,), 0),  # &arg on the test run's stack; returns arg->a == 0
    "bpf_fentry_test9": ((None,), 0),  # &retval on the test run's stack; returns *a == 0
}


def run_fentry_tests() -> None:
    """Make the kernel call bpf_fentry_test1..9 once each (test run of an unattached fentry program)."""
    with LiveKernel().load(BPF_DIR / "fentry_test.bpf.o", programs=["entry1"]) as coll:
        assert coll.programs["entry1"].test_run().retval == 0


def run_modify_return_tests() -> int:
    """Make the kernel call bpf_modify_return_test(2) through an fmod_ret test run; return its retval."""
    with LiveKernel().load(BPF_DIR / "modify_return.bpf.o", programs=["mr_modret"]) as coll:
        return coll.programs["mr_modret"].test_run().retval
