"""The bpfmux error hierarchy.

Every error raised by bpfmux on purpose is a :class:`BpfmuxError`. Errors that
come from a system call are :class:`BpfError`, an :class:`OSError` subclass,
so ``except PermissionError`` and ``err.errno`` work as users expect. Every
message says what the user can do about it.
"""

from __future__ import annotations

import errno as _errno
import os
from typing import Self, TypeVar

#: ``ENOTSUPP`` (524): the kernel-internal "operation not supported" that
#: ``bpf(2)`` lets out to user space (not ``EOPNOTSUPP``, 95). Python's
#: :mod:`errno` module does not have it, and ``os.strerror`` does not know it.
ENOTSUPP = 524

__all__ = [
    "ENOTSUPP",
    "BpfError",
    "BpfmuxError",
    "EmulatorFault",
    "InvalidArgumentError",
    "NotAProgramError",
    "NotFoundError",
    "NotSupportedError",
    "ParseError",
    "VerifierError",
]


class BpfmuxError(Exception):
    """Base class of every error bpfmux raises on purpose."""


class BpfError(BpfmuxError, OSError):
    """A failed system call (``bpf(2)``, ``perf_event_open(2)``, an ioctl, …).

    ``errno`` keeps the kernel's error number. Constructing ``BpfError`` with
    an errno whose builtin ``OSError`` subclass exists (``EPERM`` →
    ``PermissionError``, ``ENOENT`` → ``FileNotFoundError``, …) returns an
    instance that is also of that subclass.

    :ivar log: the kernel's log when it refused a load (BTF, program), else ``""``.
    """

    log: str = ""

    def __new__(cls, errno: int, message: str, *args: object) -> Self:
        sub = _errno_class(cls, errno)
        return OSError.__new__(sub, errno, message)

    def __init__(self, errno: int, message: str, *args: object) -> None:
        OSError.__init__(self, errno, message)

    def __str__(self) -> str:
        name = _errno.errorcode.get(self.errno or 0, str(self.errno))
        return f"{self.strerror} [{name}: {os.strerror(self.errno or 0)}]"


_OS_SUBCLASSES: dict[int, type[OSError]] = {
    _errno.EPERM: PermissionError,
    _errno.EACCES: PermissionError,
    _errno.ENOENT: FileNotFoundError,
    _errno.EEXIST: FileExistsError,
    _errno.EINTR: InterruptedError,
    _errno.EAGAIN: BlockingIOError,
    _errno.ESRCH: ProcessLookupError,
}
_cache: dict[tuple[type[BpfError], type[OSError]], type[BpfError]] = {}
_E = TypeVar("_E", bound=BpfError)


def _errno_class(cls: type[_E], errno: int) -> type[_E]:
    """*cls*, or a subclass of *cls* and the builtin ``OSError`` subclass for *errno*."""
    base = _OS_SUBCLASSES.get(errno)
    if base is None or issubclass(cls, base):
        return cls
    key = (cls, base)
    if key not in _cache:
        _cache[key] = type(f"{cls.__name__}[{base.__name__}]", (cls, base), {"__module__": cls.__module__})
    sub = _cache[key]
    assert issubclass(sub, cls)  # made from cls above
    return sub


class VerifierError(BpfError):
    """The verifier (kernel's or the emulator's) rejected a program.

    :ivar log: the full verifier log.
    :ivar program: name of the rejected program.
    """

    def __new__(cls, errno: int, message: str, log: str = "", program: str = "") -> Self:
        return super().__new__(cls, errno, message)

    def __init__(self, errno: int, message: str, log: str = "", program: str = "") -> None:
        super().__init__(errno, message)
        self.log = log
        self.program = program

    def __str__(self) -> str:
        tail = "\n".join(self.log.rstrip().splitlines()[-20:])
        head = super().__str__()
        return f"{head}\nverifier log (last lines):\n{tail}" if tail else head


class NotSupportedError(BpfmuxError):
    """A feature this kernel (or backend) does not have.

    :ivar feature: short name of the missing feature (``"kprobe_multi"``,
        ``"fentry"``, …).
    """

    def __init__(self, feature: str, message: str | None = None) -> None:
        self.feature = feature
        super().__init__(message or f"{feature} is not supported by this kernel")


class ParseError(BpfmuxError, ValueError):
    """Malformed input: an ELF object, BTF, assembly text, a probe spec, ….

    :ivar offset: byte offset (or line number for text) where parsing failed,
        ``None`` when unknown.
    :ivar source: the file (or a description of the input) it came from.
    """

    def __init__(self, message: str, offset: int | None = None, source: str | None = None) -> None:
        self.offset = offset
        self.source = source
        where = []
        if source:
            where.append(str(source))
        if offset is not None:
            where.append(f"offset {offset:#x}" if offset >= 0 else "")
        prefix = ": ".join(w for w in where if w)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.message = message


class InvalidArgumentError(BpfmuxError, ValueError):
    """A bad argument to a bpfmux function or method: a missing attach
    target, an option that does not fit the program, a size out of range, ….
    (:class:`ParseError` is for malformed input: files, text, specs.)
    """


class NotAProgramError(BpfmuxError, TypeError):
    """What was given where a loaded program is needed is not one (a
    ``TypeError``, so ``except TypeError`` keeps working)."""


class NotFoundError(BpfmuxError, KeyError):
    """A named thing was not found (a BTF type, a symbol, a program, a map).

    :ivar name: what was looked up.
    """

    def __init__(self, kind: str, name: str, hint: str = "") -> None:
        self.kind = kind
        self.name = name
        msg = f"no {kind} named {name!r}"
        super().__init__(f"{msg}; {hint}" if hint else msg)

    def __str__(self) -> str:
        return str(self.args[0])


class EmulatorFault(BpfmuxError):
    """A program did something invalid at run time in the emulated kernel.

    :ivar pc: index of the faulting instruction.
    :ivar address: the faulting address, when the fault is a memory access.
    """

    def __init__(self, message: str, pc: int | None = None, address: int | None = None) -> None:
        self.pc = pc
        self.address = address
        super().__init__(message)
