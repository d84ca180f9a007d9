"""``-c CMD``: a child process held just before ``exec`` until the tracer is
attached, so its pid can be filtered on and none of its work is missed."""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal

from ..errors import BpfError, ParseError

__all__ = ["HELD_COMM", "HeldChild"]

#: The command name of a child held before ``exec``: the tracer's programs
#: skip it, so what the helper does between the fork and the ``exec`` (the
#: end of its wait, closing the pipes, entering ``execve``) is not counted for
#: the command. ``exec`` gives the process the command's own name.
HELD_COMM = "bpfmux-held"


class HeldChild:
    """Fork now, ``exec`` ``command`` when :meth:`release` is called.

    :ivar pid: the child's pid (the command keeps it across ``exec``).
    :raises ParseError: an empty or badly quoted command.
    """

    def __init__(self, command: str | list[str]) -> None:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ParseError("-c needs a command, e.g. -c 'ls /tmp'")
        if shutil.which(argv[0]) is None:
            raise BpfError(errno.ENOENT, f"cannot run {argv[0]!r}: no such command (check the path, or quote -c 'CMD ARGS')")
        self.argv = argv
        self.status: int | None = None
        r, w = os.pipe()
        er, ew = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: wait for the go byte, then exec
            try:
                os.close(w)
                os.close(er)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _set_comm(HELD_COMM)
                os.set_inheritable(ew, False)
                if os.read(r, 1) != b"g":
                    os._exit(0)
                os.close(r)
                os.execvp(argv[0], argv)
            except OSError as e:
                os.write(ew, f"{e.errno}:{e.strerror}".encode())
            finally:
                os._exit(127)
        os.close(r)
        os.close(ew)
        self.pid = pid
        self._go = w
        self._err = er

    #: the name the child has until it execs (what ``TraceOptions.skip_comm`` filters)
    comm = HELD_COMM

    def release(self) -> None:
        """Let the child exec its command.

        :raises BpfError: the command could not be started (not found, not executable).
        """
        os.write(self._go, b"g")
        os.close(self._go)
        self._go = -1
        msg = os.read(self._err, 512).decode(errors="replace")
        os.close(self._err)
        self._err = -1
        if msg:
            code, _, text = msg.partition(":")
            self.wait()
            raise BpfError(int(code) if code.isdigit() else 2, f"cannot run {self.argv[0]!r}: {text}")

    def poll(self) -> int | None:
        """The exit status once the command has ended, else ``None``."""
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait(self) -> int:
        """Wait for the command to end; its exit status."""
        if self.status is None:
            _, status = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def abandon(self) -> None:
        """Cancel a child that was never released (it exits without running)."""
        if self._go >= 0:
            os.close(self._go)
            self._go = -1
        if self._err >= 0:
            os.close(self._err)
            self._err = -1
        if self.status is None:
            self.wait()


def _set_comm(name: str) -> None:
    """``prctl(PR_SET_NAME)`` of the calling process (best effort)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass
