"""Reading input files with limits.

A path a user gives may name anything: a character device (``/dev/zero``
never ends), a FIFO (opening it blocks until a writer comes), a directory, a
file larger than this machine's memory. :func:`read_file` accepts a regular
file within a size limit and refuses everything else *before* reading a
byte; since files in ``/proc`` and ``/sys`` report a size of 0 or a nominal
one, the limit is also kept while reading. :func:`open_text` does the same
checks for a file read as a stream of lines.

Refusals are :class:`~bpfmux.errors.ParseError` (the input is not one of
the things the caller reads), a missing or unreadable file the usual
:class:`OSError`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import TextIO

from ..errors import ParseError

__all__ = ["MAX_LINE", "MiB", "bounded_lines", "check_regular", "open_text", "read_file", "read_text"]

MiB = 1 << 20
#: Longest line :func:`bounded_lines` passes on.
MAX_LINE = 1 * MiB
_CHUNK = 1 << 20
_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _size_text(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n} bytes"


def check_regular(path: str | os.PathLike[str], what: str, limit: int | None = None) -> os.stat_result:
    """``stat`` of ``path`` when it is a regular file (of at most ``limit`` bytes).

    :raises ParseError: a device, FIFO, socket or directory, or a larger file.
    :raises OSError: it does not exist or cannot be examined.
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ParseError(f"is {_kind(st.st_mode)}, not a regular file; give the {what} as a file", None, os.fspath(path))
    if limit is not None and st.st_size > limit:
        raise ParseError(f"is {_size_text(st.st_size)}, more than a {what} may be ({_size_text(limit)})", None,
                         os.fspath(path))
    return st


def read_file(path: str | os.PathLike[str], limit: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    :param what: what the file should be, for messages (``"BPF object"``).
    :raises ParseError: not a regular file, or larger than ``limit``.
    :raises OSError: it does not exist or cannot be read.
    """
    check_regular(path, what, limit)
    # O_NONBLOCK: should the path have become a FIFO since the stat, opening it must not wait for a writer
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ParseError(f"is {_kind(st.st_mode)}, not a regular file; give the {what} as a file", None,
                             os.fspath(path))
        # a buffered reader's read(n) loops in C until n bytes or the end: sysfs files such as the kernel's
        # BTF come 4 KiB per read(2), and a Python loop over those (or a fresh 1 MiB bytes object per read)
        # costs several times the reading
        reader = open(fd, "rb", closefd=False)  # closed below; the fd by the outer finally
        try:
            parts = []
            total = 0
            want = min(st.st_size if st.st_size > 0 else _CHUNK, limit) + 1  # +1: a file past limit shows
            while True:
                chunk = reader.read(want)
                if not chunk:
                    break
                parts.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise ParseError(f"holds more than a {what} may ({_size_text(limit)})", None, os.fspath(path))
                want = min(_CHUNK, limit + 1 - total)
        finally:
            reader.close()
        return parts[0] if len(parts) == 1 else b"".join(parts)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int, what: str = "file", *, encoding: str = "utf-8",
              errors: str = "strict") -> str:
    """:func:`read_file` decoded.

    :raises ParseError: not a regular file, larger than ``limit``, or not
        text in ``encoding`` (with ``errors="strict"``).
    :raises OSError: it does not exist or cannot be read.
    """
    data = read_file(path, limit, what)
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError as e:
        raise ParseError(f"is not {encoding} text ({e.reason})", e.start, os.fspath(path)) from None


def open_text(path: str | os.PathLike[str], limit: int, what: str = "file", *, encoding: str = "utf-8") -> TextIO:
    """A regular file of at most ``limit`` bytes, open for reading as text.

    :raises ParseError: not a regular file, or larger than ``limit``.
    :raises OSError: it does not exist or cannot be opened.
    """
    check_regular(path, what, limit)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ParseError(f"is {_kind(st.st_mode)}, not a regular file; give the {what} as a file", None,
                             os.fspath(path))
        os.set_blocking(fd, True)
        return open(fd, encoding=encoding, closefd=True)  # the caller closes it
    except BaseException:
        os.close(fd)
        raise


def bounded_lines(stream: TextIO, source: str, limit: int, max_line: int = MAX_LINE) -> Iterator[str]:
    """The lines of a text stream (standard input may be ``/dev/zero``):
    none longer than ``max_line`` characters, at most ``limit`` in all.

    :raises ParseError: a longer line, or more text.
    """
    total = 0
    n = 0
    while True:
        line = stream.readline(max_line + 1)
        if not line:
            return
        n += 1
        total += len(line)
        if len(line) > max_line:
            raise ParseError(f"line {n} is longer than {max_line} characters", None, source)
        if total > limit:
            raise ParseError(f"more than {_size_text(limit)} of text", None, source)
        yield line
