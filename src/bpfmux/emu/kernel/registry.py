"""What the emulated kernel keeps of its links and perf events, so that
closing the emulator detaches everything still attached."""

from __future__ import annotations

from typing import Protocol

from ...api import close_all

__all__ = ["Registry"]


class _Closable(Protocol):
    def close(self) -> None: ...


class Registry:
    """The open links and perf events of one emulated kernel.

    Links and perf events register themselves when made and leave when
    closed; :meth:`close_all` closes what is left (links first, so the perf
    events they hold are released by their last holder).
    """

    def __init__(self) -> None:
        self.links: set[_Closable] = set()
        self.perf_events: set[_Closable] = set()

    def close_all(self) -> None:
        """Close every link, then every perf event, all of them even if one
        close fails; the first error is raised at the end.

        :raises BaseException: the first error a close raised.
        """
        close_all([*self.links, *self.perf_events])
