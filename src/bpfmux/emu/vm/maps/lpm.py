"""``BPF_MAP_TYPE_LPM_TRIE``: longest-prefix match on ``struct bpf_lpm_trie_key``.

A key is a little-endian ``u32 prefixlen`` followed by ``key_size - 4``
data bytes (an address in network order). An element is identified by its
prefix length and the first ``prefixlen`` bits of its data; a lookup (from a
program or user space) finds the element with the longest prefix that
matches the key's data within the key's own ``prefixlen``. Update and delete
name an element exactly.

The kernel's rules: the map must be created with ``BPF_F_NO_PREALLOC``, a
key of 5 to 260 bytes and a value of at least 1 byte; a ``prefixlen`` above
``8 * (key_size - 4)`` fails ``EINVAL``. Keys are walked shortest prefix first.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ....errors import BpfError
from ....uapi import MapFlags, MapType
from .hash import HashMap

if TYPE_CHECKING:
    from ..runtime import RunState

__all__ = ["LpmTrieMap"]

_MAX_DATA = 256


class LpmTrieMap(HashMap):
    """``BPF_MAP_TYPE_LPM_TRIE`` (module doc). Elements are kept by their
    normalized key (data bits past the prefix cleared); the key given last
    is what iteration returns."""

    type = MapType.LPM_TRIE

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        super().__init__(vm, key_size, value_size, max_entries, **kw)
        self.max_prefixlen = 8 * (key_size - 4)
        self.given: dict[bytes, bytes] = {}

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if not flags & MapFlags.NO_PREALLOC:
            raise BpfError(errno.EINVAL, "LPM_TRIE map: must be created with BPF_F_NO_PREALLOC")
        if not 5 <= key_size <= 4 + _MAX_DATA:
            raise BpfError(errno.EINVAL, f"LPM_TRIE map: key_size must be 5 to {4 + _MAX_DATA} (a u32 prefix "
                           "length and the data)")

    def _norm(self, key: bytes) -> bytes | None:
        """The element identity of ``key``, ``None`` when its prefix length is too long."""
        plen = int.from_bytes(key[:4], "little")
        if plen > self.max_prefixlen:
            return None
        data = bytearray(key[4:])
        full, rest = divmod(plen, 8)
        if rest:
            data[full] &= (0xFF << (8 - rest)) & 0xFF
            full += 1
        for i in range(full, len(data)):
            data[i] = 0
        return key[:4] + bytes(data)

    def _match(self, key: bytes) -> bytes | None:
        """The normalized key of the longest stored prefix matching ``key``."""
        plen = min(int.from_bytes(key[:4], "little"), self.max_prefixlen)
        data = key[4:]
        best: tuple[int, bytes] | None = None
        for nk in self.elems:
            n = int.from_bytes(nk[:4], "little")
            if n > plen or (best is not None and n <= best[0]):
                continue
            probe = self._norm(n.to_bytes(4, "little") + data)
            if probe == nk:
                best = (n, nk)
        return best[1] if best is not None else None

    # -- the kernel operations ---------------------------------------------------

    def _update(self, key: bytes, values: list[bytes] | None, value: bytes | None, flags: int,
                cpu: int = 0) -> int:
        nk = self._norm(key)
        if nk is None:
            return -errno.EINVAL
        err = super()._update(nk, values, value, flags, cpu)
        if not err:
            self.given[nk] = bytes(key)
        return err

    def _delete(self, key: bytes) -> int:
        nk = self._norm(key)
        if nk is None:
            return -errno.EINVAL
        err = super()._delete(nk)
        if not err:
            self.given.pop(nk, None)
        return err

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        nk = self._match(key)
        return 0 if nk is None else super().bpf_lookup(rs, nk)

    def sys_lookup(self, key: bytes) -> Any:
        nk = self._match(key)
        return None if nk is None else super().sys_lookup(nk)

    def sys_keys(self) -> Iterator[bytes]:
        order = sorted(self.elems, key=lambda nk: (int.from_bytes(nk[:4], "little"), nk[4:]))
        return iter([self.given.get(nk, nk) for nk in order])

    def sys_next_key(self, key: bytes | None) -> bytes | None:
        keys = list(self.sys_keys())
        if key is None:
            return keys[0] if keys else None
        nk = self._norm(key)
        order = [self._norm(k) for k in keys]
        if nk not in order:
            return keys[0] if keys else None
        i = order.index(nk)
        return keys[i + 1] if i + 1 < len(keys) else None

    def _release(self) -> None:
        super()._release()
        self.given.clear()
