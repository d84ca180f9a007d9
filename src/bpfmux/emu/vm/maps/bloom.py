"""``BPF_MAP_TYPE_BLOOM_FILTER``: is a value possibly in the set?

No keys (``key_size`` 0). A push (``bpf_map_push_elem``, or an update with
no key from user space) adds a value; a peek (``bpf_map_peek_elem``, or a
lookup) answers 0 when the value may be in the set and ``ENOENT`` when it
certainly is not. Values cannot be removed. ``map_extra``'s low 4 bits are
the number of hash functions (default 5), as in the kernel; the bit array is
sized as the kernel sizes it (``max_entries * hashes / ln 2`` bits, rounded
up to a power of two), so false positives happen about as often.
"""

from __future__ import annotations

import errno
import hashlib
import math
from collections.abc import Iterator
from typing import Any

from ....errors import BpfError, NotSupportedError
from ....uapi import MapType
from .base import EmuMap

__all__ = ["BloomFilterMap"]

#: the flags a bloom filter may be created with (NUMA node, access flags)
_ALLOWED_FLAGS = 0x4 | 0x8 | 0x10 | 0x80 | 0x100


class BloomFilterMap(EmuMap):
    """``BPF_MAP_TYPE_BLOOM_FILTER`` (module doc)."""

    type = MapType.BLOOM_FILTER
    has_values = True

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, *, map_extra: int = 0,
                 **kw: Any) -> None:
        self.nr_hashes = (map_extra & 0xF) or 5
        nbits = max(8, math.ceil(max_entries * self.nr_hashes / math.log(2)))
        self.nbits = 1 << (nbits - 1).bit_length()
        self.bits = bytearray(self.nbits // 8)
        super().__init__(vm, key_size, value_size, max_entries, **kw)

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if key_size != 0 or value_size == 0:
            raise BpfError(errno.EINVAL, "BLOOM_FILTER map: key_size must be 0 and value_size at least 1")
        if flags & ~_ALLOWED_FLAGS:
            raise BpfError(errno.EINVAL, f"BLOOM_FILTER map: flags {flags:#x} are not allowed")

    def _positions(self, value: bytes) -> list[int]:
        out = []
        for i in range(self.nr_hashes):
            h = hashlib.blake2b(value, digest_size=8, salt=i.to_bytes(8, "little")).digest()
            out.append(int.from_bytes(h, "little") & (self.nbits - 1))
        return out

    def push_raw(self, value: bytes, flags: int) -> int:
        """Add ``value``; 0 or ``-EINVAL`` (flags other than ``BPF_ANY``)."""
        if flags:
            return -errno.EINVAL
        for p in self._positions(bytes(value)):
            self.bits[p >> 3] |= 1 << (p & 7)
        return 0

    def peek_raw(self, value: bytes) -> int:
        """0 when ``value`` may be in the set, ``-ENOENT`` when it is not."""
        for p in self._positions(bytes(value)):
            if not self.bits[p >> 3] & (1 << (p & 7)):
                return -errno.ENOENT
        return 0

    # -- user space ------------------------------------------------------------------------

    def push(self, value: Any, flags: int = 0) -> None:
        """Add ``value`` to the set.

        :raises BpfError: ``EINVAL`` flags, ``EPERM`` frozen.
        """
        self._check_open()
        if self.frozen:
            raise BpfError(errno.EPERM, f"map {self.name!r} is frozen; user space cannot update it")
        err = self.push_raw(self._value(value), int(flags))
        if err:
            raise BpfError(-err, f"push to map {self.name!r} failed")

    def may_contain(self, value: Any) -> bool:
        """False when ``value`` is certainly not in the set."""
        self._check_open()
        return self.peek_raw(self._value(value)) == 0

    def _unsupported(self) -> NotSupportedError:
        return NotSupportedError("bloom filter element access",
                                 f"map {self.name!r} has no keys; use push() and may_contain()")

    def lookup(self, key: Any) -> Any:
        """Refused: a bloom filter has no keys.

        :raises NotSupportedError: always.
        """
        raise self._unsupported()

    def put(self, key: Any, value: Any, flags: int = 0) -> None:
        """Refused: use :meth:`push`.

        :raises NotSupportedError: always.
        """
        raise self._unsupported()

    def delete(self, key: Any) -> None:
        """Refused: values cannot be removed.

        :raises NotSupportedError: always.
        """
        raise self._unsupported()

    def __contains__(self, key: object) -> bool:
        return False

    def sys_keys(self) -> Iterator[bytes]:
        return iter(())

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """No keyed elements: always empty."""
        return []
