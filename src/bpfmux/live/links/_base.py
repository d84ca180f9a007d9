"""What every live link kind shares: fd ownership, info, update, pinning,
closing many at once, and Ctrl-C held back while a link is made."""

from __future__ import annotations

import contextlib
import errno as _errno
import signal
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from ...api import Link, Program
from ...errors import ENOTSUPP, BpfError, NotAProgramError, NotSupportedError
from ...uapi import AttachType, LinkType, ProgType
from .. import sys as _sys
from ..program import LiveProgram

__all__ = ["FdLink", "RawProgram", "close_all", "deferred_signals", "prog_fd"]

#: errnos that mean "this kernel cannot do that" rather than "you asked wrong"
UNSUPPORTED_ERRNOS = frozenset({_errno.EOPNOTSUPP, ENOTSUPP})


class SupportsClose(Protocol):
    """What :func:`close_all` and a link's owned descriptors take: links, :class:`~bpfmux.live.sys.Fd`\\ s,
    perf events."""

    def close(self) -> None: ...


def prog_fd(program: object) -> int:
    """The fd number of a program object (a loaded ``Program``, a
    :class:`RawProgram`, an :class:`~bpfmux.live.sys.Fd` or an int).

    :raises NotAProgramError: the object has no program fd (a ``TypeError``).
    """
    if isinstance(program, int):
        return program
    if isinstance(program, _sys.Fd):
        return program.fd
    fd = getattr(program, "fd", None)
    if fd is None:
        raise NotAProgramError(f"{program!r} is not a loaded program (it has no fd); load it first "
                               "(LiveKernel().load(...)) or wrap an fd in RawProgram")
    return fd.fd if isinstance(fd, _sys.Fd) else int(fd)


class FdLink(Link):
    """A link held through one owned file descriptor (a ``bpf_link`` fd), plus
    any other descriptors it must keep open (the perf event of a perf-event
    link). ``close()`` releases them in reverse order of acquisition.

    :ivar kind: the link kind.
    :ivar target: what it is attached to, as text.
    :ivar cookie: the BPF cookie given at attach time (``None``: none).
    """

    kind = "link"
    #: the kernel can swap this kind's program (``BPF_LINK_UPDATE``); raw
    #: tracepoint, perf-event, kprobe/uprobe multi and trampoline links cannot
    updatable = False

    def __init__(self, program: Program, fd: _sys.Fd | None, target: str, *, owned: Sequence[SupportsClose] = (),
                 cookie: int | None = None) -> None:  # fmt: skip
        self._program = program
        self._fd = fd
        self._owned = list(owned)  # closed after the link fd, last first
        self.target = target
        self.cookie = cookie
        self._lock = threading.Lock()
        self._closed = False

    # -- Link API ---------------------------------------------------------

    @property
    def program(self) -> Program:
        """The attached program."""
        return self._program

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def close(self) -> None:
        """Detach: close the link fd, then what it owns, every one of them
        even if a close fails. A second call does nothing.

        :raises BaseException: the first error (or ``KeyboardInterrupt``) a
            close raised, after everything was closed.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            fd, owned = self._fd, self._owned
            self._owned = []
        close_all(([fd] if fd is not None else []) + owned[::-1])

    def __repr__(self) -> str:
        state = "closed" if self._closed else (f"fd={self._fd.fd}" if self._fd is not None else "open")
        return f"<{type(self).__name__} {self.kind} {self.target} {state}>"

    # -- kernel link object -----------------------------------------------

    @property
    def fd(self) -> int:
        """The ``bpf_link`` fd number.

        :raises NotSupportedError: this attachment has no bpf_link (it was
            made with the ``PERF_EVENT_IOC_SET_BPF`` ioctl).
        :raises BpfError: ``EBADF`` once closed.
        """
        if self._fd is None:
            raise NotSupportedError("bpf_link", f"this {self.kind} attachment was made without a bpf_link (ioctl)")
        return self._fd.fd

    @property
    def has_link(self) -> bool:
        """True when the attachment is a kernel ``bpf_link``."""
        return self._fd is not None

    def info(self) -> _sys.LinkInfo:
        """``BPF_OBJ_GET_INFO_BY_FD`` on the link.

        :raises NotSupportedError: no bpf_link (ioctl attachment).
        :raises BpfError: the kernel's error.
        """
        return _sys.link_info(self.fd)

    @property
    def id(self) -> int:
        """The kernel's link id (as ``bpftool link list`` shows it).

        :raises NotSupportedError: no bpf_link (ioctl attachment).
        """
        return int(self.info().id)

    @property
    def link_type(self) -> LinkType:
        """The kernel's link type.

        :raises NotSupportedError: no bpf_link (ioctl attachment).
        """
        return LinkType(self.info().type)

    def update(self, program: Program, old: Program | None = None) -> None:
        """Replace the attached program atomically (``BPF_LINK_UPDATE``).

        :raises NotSupportedError: this link kind cannot be updated.
        :raises BpfError: ``EINVAL`` incompatible program, ``EPERM`` ``old``
            does not match.
        """
        if not self.updatable:
            raise NotSupportedError(f"{self.kind} link update",
                                    f"the kernel cannot swap the program of a {self.kind} link; attach the new "
                                    "program, then close this link")  # fmt: skip
        try:
            _sys.link_update(self.fd, prog_fd(program), prog_fd(old) if old is not None else None)
        except BpfError as e:
            if e.errno in UNSUPPORTED_ERRNOS:
                raise NotSupportedError(f"{self.kind} link update", f"the kernel cannot update {self.kind} links ({e})") from e
            raise
        self._program = program

    def detach(self) -> None:
        """Force-detach while keeping the fd (``BPF_LINK_DETACH``); ``close()`` is still needed.

        :raises NotSupportedError: this link kind cannot be force-detached.
        """
        try:
            _sys.link_detach(self.fd)
        except BpfError as e:
            if e.errno in UNSUPPORTED_ERRNOS | {_errno.EINVAL}:
                raise NotSupportedError(f"{self.kind} link detach", f"cannot force-detach a {self.kind} link ({e})") from e
            raise

    def pin(self, path: str) -> None:
        """Pin the link in bpffs so it outlives this process.

        :raises BpfError: ``EEXIST`` path taken, ``EPERM`` not on bpffs.
        """
        _sys.obj_pin(self.fd, path)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back (in the main thread) while a kernel object is
    created and handed to its owner, so Ctrl-C cannot fall between the two
    and leak it; the signal is delivered right after the block.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def close_all(links: Iterable[SupportsClose], parallel: bool = False, max_workers: int = 64) -> None:
    """Close every object, all of them even if some fail or Ctrl-C arrives;
    the first error is raised at the end. With ``parallel``, closes run on
    threads (``close(2)`` of a perf event waits for an RCU grace period; many
    of those overlap when issued from several threads).

    :raises BaseException: the first error (or ``KeyboardInterrupt``) a close
        raised, after every object was closed.
    """
    items = list(links)
    if not items:
        return
    errors: list[BaseException] = []
    if not parallel or len(items) == 1:
        for item in items:
            try:
                item.close()
            except BaseException as e:  # keep closing, re-raise below
                errors.append(e)
    else:
        errors = _close_threaded(items, max_workers)
    if errors:
        raise errors[0]


def _close_threaded(items: list[SupportsClose], max_workers: int) -> list[BaseException]:
    errors: list[BaseException] = []
    lock = threading.Lock()
    it = iter(items)

    def worker() -> None:
        while True:
            with lock:
                item = next(it, None)
            if item is None:
                return
            try:
                item.close()
            except BaseException as e:  # collected, re-raised by the caller
                with lock:
                    errors.append(e)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(max_workers, len(items)))]
    for t in threads:
        t.start()
    interrupted: BaseException | None = None
    for t in threads:
        while t.is_alive():
            try:
                t.join()
            except BaseException as e:  # Ctrl-C: finish closing first
                interrupted = interrupted or e
    if interrupted is not None:
        errors.insert(0, interrupted)
    return errors


class RawProgram(LiveProgram):
    """A program loaded outside a :class:`~bpfmux.api.Collection` (for
    example with :func:`bpfmux.live.sys.prog_load`), so it can be attached
    with the same :meth:`attach`/:meth:`attach_many` as a loaded one.

    :param fd: the program fd; owned (closed by :meth:`close`) when it is an
        :class:`~bpfmux.live.sys.Fd`, borrowed when it is a number.
    :param prog_type: its program type.
    :param attach_type: the attach type it was loaded with.
    :param section: an ELF-style section name (``"uprobe.multi/libc.so.6:str*"``)
        that says how :meth:`attach` without a target attaches it.
    """

    def __init__(self, fd: _sys.Fd | int, prog_type: ProgType | int, attach_type: AttachType | int | None = None,
                 *, name: str = "", section: str = "") -> None:  # fmt: skip
        from ...obj.sections import match_section

        info = match_section(section) if section else None
        super().__init__(fd, name=name, prog_type=prog_type, section=section, attach_type=attach_type,
                         attach_target=info.target if info is not None else None,
                         flags=info.prog_flags if info is not None else 0)
