"""``BPF_MAP_TYPE_QUEUE`` (FIFO) and ``BPF_MAP_TYPE_STACK`` (LIFO).

No keys (``key_size`` must be 0): values are pushed and popped. A full map
refuses a push with ``E2BIG`` unless the push passes ``BPF_EXIST``, which
drops the oldest value first. Popping or peeking an empty map fails
``ENOENT``. User space uses :meth:`push`, :meth:`pop` and :meth:`peek`
(the live kernel's queue maps have the same three); indexing is refused.
Programs use ``bpf_map_push_elem``, ``bpf_map_pop_elem`` and
``bpf_map_peek_elem`` (:func:`bpfmux.emu.vm.helpers.queues`).
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Iterator
from typing import Any

from ....errors import BpfError, NotFoundError, NotSupportedError
from ....uapi import MapType
from .base import EXIST, EmuMap

__all__ = ["QueueMap", "StackMap"]

#: the flags a queue or stack map may be created with (NUMA node, read/write-only from either side)
_ALLOWED_FLAGS = 0x4 | 0x8 | 0x10 | 0x80 | 0x100


class QueueMap(EmuMap):
    """``BPF_MAP_TYPE_QUEUE``: first in, first out (module doc)."""

    type = MapType.QUEUE
    has_values = True
    lifo = False

    def __init__(self, vm: Any, key_size: int, value_size: int, max_entries: int, **kw: Any) -> None:
        super().__init__(vm, key_size, value_size, max_entries, **kw)
        self._queue: deque[bytes] = deque()

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        super()._validate(key_size, value_size, max_entries, flags)
        if key_size != 0 or value_size == 0:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: key_size must be 0 and value_size at least 1")
        if flags & ~_ALLOWED_FLAGS:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: flags {flags:#x} are not allowed")

    def _release(self) -> None:
        self._queue.clear()

    # -- the kernel operations ----------------------------------------------------------

    def push_raw(self, value: bytes, flags: int) -> int:
        """Push; 0 or ``-errno``."""
        if flags & ~EXIST:
            return -errno.EINVAL
        if len(self._queue) >= self.max_entries:
            if not flags & EXIST:
                return -errno.E2BIG
            self._queue.popleft()  # the oldest goes, for a stack too
        self._queue.append(bytes(value))
        return 0

    def take_raw(self, delete: bool) -> bytes | None:
        """The next value (removed when ``delete``), ``None`` when empty."""
        if not self._queue:
            return None
        if delete:
            return self._queue.pop() if self.lifo else self._queue.popleft()
        return self._queue[-1] if self.lifo else self._queue[0]

    # -- user space ------------------------------------------------------------------------

    def push(self, value: Any, flags: int = 0) -> None:
        """Push ``value`` (``BPF_EXIST`` in ``flags``: drop the oldest when full).

        :raises BpfError: ``E2BIG`` full, ``EINVAL`` bad flags, ``EPERM`` frozen.
        """
        self._check_open()
        if self.frozen:
            raise BpfError(errno.EPERM, f"map {self.name!r} is frozen; user space cannot update it")
        err = self.push_raw(self._value(value), int(flags))
        if err:
            raise BpfError(-err, f"push to map {self.name!r} failed")

    def pop(self, *_: Any) -> Any:
        """Remove and return the next value.

        :raises NotFoundError: empty.
        """
        self._check_open()
        raw = self.take_raw(True)
        if raw is None:
            raise NotFoundError("element in", self.name, "the queue is empty")
        return self._out_value(raw)

    def peek(self) -> Any:
        """The next value, left in place.

        :raises NotFoundError: empty.
        """
        self._check_open()
        raw = self.take_raw(False)
        if raw is None:
            raise NotFoundError("element in", self.name, "the queue is empty")
        return self._out_value(raw)

    def _unsupported(self) -> NotSupportedError:
        return NotSupportedError(f"{self.type.name.lower()} element access",
                                 f"map {self.name!r} has no keys; use push(), pop() and peek()")

    def lookup(self, key: Any) -> Any:
        """Refused: a queue has no keys.

        :raises NotSupportedError: always.
        """
        raise self._unsupported()

    def put(self, key: Any, value: Any, flags: int = 0) -> None:
        """Refused: use :meth:`push`.

        :raises NotSupportedError: always.
        """
        raise self._unsupported()

    def delete(self, key: Any) -> None:
        """Refused: use :meth:`pop`.

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


class StackMap(QueueMap):
    """``BPF_MAP_TYPE_STACK``: last in, first out (module doc)."""

    type = MapType.STACK
    lifo = True
