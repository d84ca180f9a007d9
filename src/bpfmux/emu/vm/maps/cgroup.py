"""``BPF_MAP_TYPE_CGROUP_ARRAY``: cgroups for ``bpf_current_task_under_cgroup``.

User space stores a cgroup in a slot — in the live kernel an open fd of a
cgroup v2 directory; here the cgroup's path (``"/"``, ``"/system.slice"``,
or its path under ``/sys/fs/cgroup``) or its id (an ``int``). Programs
cannot look slots up or change them (the verifier allows only
``bpf_current_task_under_cgroup`` and ``bpf_skb_under_cgroup`` on it);
:func:`task_under` answers the first for the emulated current task, whose
cgroup is :attr:`Task.cgroup <bpfmux.emu.vm.runtime.Task>` when it has one
(else the root, ``"/"``).
"""

from __future__ import annotations

import errno
from typing import Any

from ....errors import BpfError
from ....uapi import MapType
from .fdarray import _FdArray

__all__ = ["CGROUP_ROOT", "CgroupArrayMap", "task_under"]

#: where cgroup v2 is mounted; paths under it are taken as cgroup paths
CGROUP_ROOT = "/sys/fs/cgroup"


def _norm(path: str) -> str:
    if path.startswith(CGROUP_ROOT):
        path = path[len(CGROUP_ROOT):]
    path = "/" + path.strip("/")
    return path


class CgroupArrayMap(_FdArray):
    """``BPF_MAP_TYPE_CGROUP_ARRAY`` (module doc). A user-space lookup fails
    ``ENOTSUPP`` (524), as in the kernel."""

    type = MapType.CGROUP_ARRAY

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, str):
            return _norm(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, bytes | bytearray) and len(value) == 4:
            return int.from_bytes(value, "little")
        raise BpfError(errno.EBADF, f"map {self.name!r}: a cgroup array stores a cgroup path or id, not {value!r}")

    def sys_lookup(self, key: bytes) -> Any:
        from ....errors import ENOTSUPP

        raise BpfError(ENOTSUPP, f"map {self.name!r}: cgroup arrays cannot be read from user space")


def task_under(m: CgroupArrayMap, index: int, task: Any) -> int:
    """``bpf_current_task_under_cgroup(map, index)`` for ``task``: 1 when the
    task's cgroup is the one in slot ``index`` or below it, 0 when not,
    ``-E2BIG`` past the end, ``-EAGAIN`` for an empty slot."""
    if index >= m.max_entries:
        return -errno.E2BIG
    cg = m.slots[index]
    if cg is None:
        return -errno.EAGAIN
    mine = getattr(task, "cgroup", None)
    if isinstance(cg, int):
        return int(mine == cg or getattr(task, "cgroup_id", None) == cg)
    here = _norm(mine) if isinstance(mine, str) else "/"
    return int(cg == "/" or here == cg or here.startswith(cg + "/"))
