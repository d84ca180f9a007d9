"""GroupLink/close_all semantics that need no kernel: every member is closed
even when some closes fail (or raise KeyboardInterrupt), in parallel or not,
and the first error is raised afterwards; close is idempotent."""

from __future__ import annotations

import threading
import time

import pytest

from bpfmux.live.links import GroupLink, close_all


class Fake:
    def __init__(self, fail: BaseException | None = None, delay: float = 0.0) -> None:
        self.fail = fail
        self.delay = delay
        self.closes = 0
        self.thread: str | None = None

    def close(self) -> None:
        self.closes += 1
        self.thread = threading.current_thread().name
        time.sleep(self.delay)
        if self.fail is not None:
            raise self.fail


@pytest.mark.parametrize("parallel", [False, True])
def test_every_member_closed_and_first_error_raised(parallel):
    items = [Fake(), Fake(OSError(5, "boom")), Fake(), Fake(KeyboardInterrupt()), Fake()]
    with pytest.raises((OSError, KeyboardInterrupt)):
        close_all(items, parallel=parallel)
    assert [x.closes for x in items] == [1] * 5


def test_parallel_close_runs_closes_concurrently():
    # every close waits until all four are inside close() at once: only
    # concurrent closes can get past the barrier (serial ones would break it)
    barrier = threading.Barrier(4)

    class Waiting(Fake):
        def close(self) -> None:
            super().close()
            barrier.wait(timeout=30)

    items = [Waiting() for _ in range(4)]
    close_all(items, parallel=True)
    assert all(x.closes == 1 for x in items)
    assert len({x.thread for x in items}) == 4


def test_group_link_close_is_idempotent():
    items = [Fake(), Fake()]
    g = GroupLink(None, items, ["a", "b"], mechanism="perf_event", kind="tracepoint", parallel_close=True)
    with g:
        assert not g.closed and len(g) == 2 and list(g) == items
    assert g.closed
    g.close()
    assert [x.closes for x in items] == [1, 1]


def test_fd_link_close_closes_everything_it_owns_when_one_close_fails():
    from bpfmux.live.links import FdLink

    order: list[str] = []

    class Named(Fake):
        def __init__(self, name: str, fail: BaseException | None = None) -> None:
            super().__init__(fail)
            self.name = name

        def close(self) -> None:
            order.append(self.name)
            super().close()

    fd = Named("link", OSError(9, "link close failed"))
    owned = [Named("first"), Named("second", OSError(5, "second close failed")), Named("third")]
    link = FdLink(None, fd, "t", owned=owned)
    with pytest.raises(OSError, match="link close failed"):
        link.close()
    assert order == ["link", "third", "second", "first"]
    assert link.closed
    link.close()
    assert [x.closes for x in [fd, *owned]] == [1, 1, 1, 1]


def test_live_kernel_detach_all_closes_concurrently_and_raises_the_first_error():
    # bpfmux bpftrace detaches every probe through Kernel.detach_all: the live kernel closes the links on
    # threads (each perf-event or uprobe detach waits for a grace period), all of them even when one fails
    from bpfmux.live import LiveKernel

    barrier = threading.Barrier(3)

    class Waiting(Fake):
        def close(self) -> None:
            fail, self.fail = self.fail, None
            super().close()
            barrier.wait(timeout=30)
            if fail is not None:
                raise fail

    items = [Waiting(), Waiting(OSError(5, "boom")), Waiting()]
    kernel = LiveKernel()
    try:
        with pytest.raises(OSError, match="boom"):
            kernel.detach_all(items)
    finally:
        kernel.close()
    assert [x.closes for x in items] == [1, 1, 1]
    assert len({x.thread for x in items}) == 3
