"""Handing the link layer something that is not a loaded program: our own
error (still a TypeError), no kernel needed."""

from __future__ import annotations

import pytest

from bpfmux.errors import BpfmuxError
from bpfmux.live.links import NotAProgramError, attach, prog_fd


class Unloaded:
    name = "unloaded"
    fd = None


@pytest.mark.parametrize("thing", [object(), Unloaded()])
def test_prog_fd_of_a_non_program_is_our_error_and_a_type_error(thing) -> None:
    with pytest.raises(NotAProgramError, match="is not a loaded program") as info:
        prog_fd(thing)
    assert isinstance(info.value, BpfmuxError) and isinstance(info.value, TypeError)


def test_attach_of_a_non_program_is_refused_before_the_kernel_is_asked() -> None:
    with pytest.raises(NotAProgramError):
        attach(Unloaded(), "sched/sched_switch")


def test_prog_fd_of_real_fd_forms() -> None:
    class Loaded:
        fd = 7

    assert (prog_fd(5), prog_fd(Loaded())) == (5, 7)
