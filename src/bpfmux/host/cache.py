"""Small JSON caches that are valid until the next boot (kernel features,
BTF ids of the running kernel), kept in a private directory.

The directory is ``$XDG_CACHE_HOME/bpfmux`` (``~/.cache/bpfmux``), made with
mode 0700; a directory that is a symlink, is not owned by this user or is
writable by others is not used (root running with a user's ``XDG_CACHE_HOME``
must not write where that user points it); one of ours that others may only
read is made 0700. Files are written to a fresh
``O_EXCL | O_NOFOLLOW`` temporary file and renamed into place, and read with
``O_NOFOLLOW`` and a size limit. Every failure means "no cache": the
callers compute the value again.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["MAX_CACHE_BYTES", "boot_id", "cache_dir", "read_json", "write_json"]

#: a cache file larger than this is ignored
MAX_CACHE_BYTES = 4 << 20


def boot_id() -> str | None:
    """This boot's id (``/proc/sys/kernel/random/boot_id``), ``None`` when unreadable."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read(64).strip() or None
    except OSError:
        return None


def cache_dir(base: str | os.PathLike[str] | None = None) -> Path | None:
    """The private cache directory (made if missing), or ``None`` when it
    cannot be made safely."""
    root = Path(base) if base else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bpfmux"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    if st.st_mode & 0o077:  # ours and only readable by others (made so by another tool): nothing could be planted
        try:
            os.chmod(root, 0o700, follow_symlinks=False)
        except OSError:
            return None
    return root


def read_json(path: Path) -> Any:
    """The JSON value in ``path``; ``None`` when absent, too large, a
    symlink or not valid JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_CACHE_BYTES + 1)
    if len(data) > MAX_CACHE_BYTES:
        return None
    import json  # imported when a cache is read: start-up time matters to tools

    try:
        return json.loads(data)
    except ValueError:
        return None


def write_json(path: Path, value: Any) -> None:
    """Replace ``path`` with ``value`` as JSON through a private temporary
    file (best effort: errors are ignored)."""
    import json

    with contextlib.suppress(OSError, TypeError, ValueError):
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)  # O_EXCL, mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(value, f)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
