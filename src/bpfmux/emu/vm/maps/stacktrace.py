"""``BPF_MAP_TYPE_STACK_TRACE``: stacks stored by ``bpf_get_stackid``.

A stack (a list of instruction pointers, from the run's
:class:`~bpfmux.emu.vm.runtime.RunContext`) hashes to a bucket among
``roundup_pow_of_two(max_entries)``; the bucket number is the stack id.
Like the kernel: the same stack gets the same id; a different stack in an
occupied bucket fails ``-EEXIST`` unless ``BPF_F_REUSE_STACKID`` replaces it;
an empty stack fails ``-EFAULT``. (The bucket hash is CRC-32 of the u64
ips; the kernel uses jhash2, so ids differ from a real kernel's.)
"""

from __future__ import annotations

import errno
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ....errors import BpfError
from ....uapi import MapType, StackFlags
from .base import EmuMap

if TYPE_CHECKING:
    from ..runtime import RunState

_VALID = StackFlags.SKIP_MASK | StackFlags.USER_STACK | StackFlags.FAST_STACK_CMP | StackFlags.REUSE_STACKID
#: ``sysctl kernel.perf_event_max_stack`` default.
MAX_STACK_DEPTH = 127


class StackTraceMap(EmuMap):
    """``BPF_MAP_TYPE_STACK_TRACE``: u32 stack id → ``value_size / 8`` u64 ips."""

    type = MapType.STACK_TRACE
    has_values = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        self.n_buckets = 1 << max(0, (max_entries - 1).bit_length())
        super().__init__(vm, key_size, value_size, max_entries, **kw)

    def _footprint(self) -> int:
        return 8 * self.n_buckets + self.max_entries * (self.value_size + 32)  # as the kernel preallocates

    def _allocate(self) -> None:
        self.buckets: dict[int, tuple[int, ...]] = {}

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if key_size != 4 or value_size < 8 or value_size % 8 or value_size // 8 > MAX_STACK_DEPTH:
            raise BpfError(errno.EINVAL, "STACK_TRACE map: key_size must be 4 and value_size a multiple of 8 "
                           f"up to {MAX_STACK_DEPTH * 8}")
        if max_entries > 1 << 31:
            raise BpfError(errno.E2BIG, f"STACK_TRACE map: max_entries {max_entries} is more than 2**31")

    def get_stackid(self, rs: RunState, flags: int) -> int:
        """``bpf_get_stackid``: the stack id or ``-errno``."""
        if flags & ~_VALID:
            return -errno.EINVAL
        ctx = rs.context
        stack: Sequence[int] = ctx.user_stack if flags & StackFlags.USER_STACK else ctx.kernel_stack
        skip = flags & StackFlags.SKIP_MASK
        ips = tuple(ip & 0xFFFFFFFFFFFFFFFF for ip in list(stack)[skip:][: self.value_size // 8])
        if not ips:
            return -errno.EFAULT
        sid = zlib.crc32(struct.pack(f"<{len(ips)}Q", *ips)) & (self.n_buckets - 1)
        old = self.buckets.get(sid)
        if old is not None and old != ips and not flags & StackFlags.REUSE_STACKID:
            return -errno.EEXIST
        self.buckets[sid] = ips
        return sid

    def sys_lookup(self, key: bytes) -> Any:
        ips = self.buckets.get(int.from_bytes(key[:4], "little"))
        if ips is None:
            return None
        return struct.pack(f"<{len(ips)}Q", *ips).ljust(self.value_size, b"\0")

    def sys_delete(self, key: bytes) -> int:
        return 0 if self.buckets.pop(int.from_bytes(key[:4], "little"), None) is not None else -errno.ENOENT

    def sys_keys(self) -> Iterator[bytes]:
        return (k.to_bytes(4, "little") for k in sorted(self.buckets))

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        return -errno.EINVAL

    def ips(self, stack_id: int) -> tuple[int, ...] | None:
        """The instruction pointers stored under ``stack_id``."""
        return self.buckets.get(stack_id)


__all__ = ["StackTraceMap"]
