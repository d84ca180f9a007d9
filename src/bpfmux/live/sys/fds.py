"""Owned file descriptors: :class:`Fd` closes what it owns, once.

Every ``bpf(2)`` or ``perf_event_open(2)`` call that makes a descriptor hands
it back as an :class:`Fd`: ``close()`` is idempotent, it is a context manager,
and a finalizer closes (and warns about) one that was dropped unclosed, so
nothing leaks.
"""

from __future__ import annotations

import contextlib
import errno as _errno
import os
import warnings
from collections.abc import Iterator

from ...errors import BpfError

__all__ = ["Fd", "fdnum"]


class Fd:
    """An owned file descriptor (a map, program, link, BTF object, perf event).

    ``int(fd)`` and ``fd.fileno()`` give the number; :meth:`close` releases it
    (idempotent); :meth:`detach` hands ownership to the caller. A dropped
    ``Fd`` that was never closed is closed by its finalizer, with a
    :class:`ResourceWarning`.

    :ivar kind: what it refers to (``"map"``, ``"prog"``, ``"link"``, …),
        used in messages.
    :raises BpfError: ``EBADF`` a negative descriptor.
    """

    __slots__ = ("_fd", "kind", "__weakref__")

    def __init__(self, fd: int, kind: str = "fd") -> None:
        if fd < 0:
            raise BpfError(_errno.EBADF, f"invalid {kind} file descriptor {fd}")
        self._fd = fd
        self.kind = kind

    @property
    def fd(self) -> int:
        """The descriptor number.

        :raises BpfError: ``EBADF`` once closed.
        """
        if self._fd < 0:
            raise BpfError(_errno.EBADF, f"{self.kind} file descriptor is closed; the object was closed before this use")
        return self._fd

    def fileno(self) -> int:
        """The descriptor number (so ``Fd`` works with :mod:`select`).

        :raises BpfError: ``EBADF`` once closed.
        """
        return self.fd

    __int__ = fileno
    __index__ = fileno

    @property
    def closed(self) -> bool:
        """True once closed or detached."""
        return self._fd < 0

    def close(self) -> None:
        """Close the descriptor; a second call does nothing."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:  # already gone: nothing left to release
                pass

    def detach(self) -> int:
        """Give up ownership and return the number (the caller must close it).

        :raises BpfError: ``EBADF`` once closed.
        """
        fd = self.fd
        self._fd = -1
        return fd

    def dup(self) -> Fd:
        """A new owned descriptor for the same object (``F_DUPFD_CLOEXEC``).

        :raises BpfError: ``EBADF`` once closed, or the ``fcntl`` error.
        """
        import fcntl

        try:
            return Fd(fcntl.fcntl(self.fd, fcntl.F_DUPFD_CLOEXEC, 3), self.kind)
        except OSError as err:
            raise BpfError(err.errno or _errno.EBADF, f"cannot duplicate {self.kind} fd: {err.strerror}") from None

    def __enter__(self) -> Fd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def close_on_error(self) -> Iterator[Fd]:
        """Keep the descriptor open only if the ``with`` body succeeds: on any
        exception (Ctrl-C included) it is closed and the exception goes on.
        For handing a new descriptor to the object that will own it::

            with fd.close_on_error():
                return LiveMap(fd, info)
        """
        try:
            yield self
        except BaseException:
            self.close()
            raise

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            warnings.warn(f"unclosed {self!r}; close() it or use it as a context manager", ResourceWarning, stacklevel=2)
            self.close()

    def __repr__(self) -> str:
        return f"<Fd {self.kind} {'closed' if self._fd < 0 else self._fd}>"


def fdnum(fd: Fd | int | None) -> int:
    """The number to put in an attribute field: ``None`` is 0 (no fd).

    :raises BpfError: ``EBADF`` a closed :class:`Fd`.
    """
    if fd is None:
        return 0
    if isinstance(fd, Fd):
        return fd.fd
    return int(fd)
