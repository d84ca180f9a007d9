"""The base of every emulated map: sizes, fds, codecs, the user-space API.

An emulated map has two faces:

* **programs** reach it through helpers with raw key bytes read from
  emulated memory: :meth:`EmuMap.bpf_lookup` returns the *address* of the
  value (a region of the VM's address space) or 0, :meth:`bpf_update` and
  :meth:`bpf_delete` return 0 or ``-errno`` — exactly what the helpers
  return;
* **user space** sees a :class:`bpfmux.api.Map`, a ``MutableMapping`` whose
  keys and values are ``bytes`` (ints are accepted and packed little-endian
  to the key/value size), or whatever a *codec* makes of them (an object with
  ``encode(value) -> bytes`` and ``decode(bytes) -> value``; the BTF codec
  of :mod:`bpfmux.btf.codec` fits). Failures raise the errno the kernel's
  ``bpf(2)`` would: :class:`~bpfmux.errors.BpfError` with ``EEXIST``,
  ``ENOENT``, ``E2BIG``, ``EINVAL``; a missing key in ``m[key]`` or
  ``del m[key]`` raises :class:`~bpfmux.errors.NotFoundError` (a
  ``KeyError``).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from .... import api
from ....errors import BpfError, BpfmuxError, NotFoundError
from ....uapi import MapType, UpdateFlags

if TYPE_CHECKING:
    from ..machine import VM
    from ..runtime import RunState

ANY, NOEXIST, EXIST, LOCK = 0, 1, 2, 4


class Codec(Protocol):
    """Converts between Python values and the bytes a map stores."""

    def encode(self, value: Any) -> bytes: ...

    def decode(self, data: bytes) -> Any: ...


def round8(n: int) -> int:
    """``n`` rounded up to a multiple of 8 (the kernel's value stride)."""
    return (n + 7) & ~7


class EmuMap(api.Map):
    """Common part of every emulated map.

    :ivar vm: the VM the map lives in (its address space holds the values).
    :ivar type: the :class:`~bpfmux.uapi.MapType`.
    :ivar fd: the map's emulated file descriptor (what ``lddw`` with
        ``BPF_PSEUDO_MAP_FD`` refers to).
    :ivar id: the map's id.
    :ivar handle: the map's address in the emulated kernel (what a program
        gets in its register after ``lddw``).
    :ivar key_codec: :ivar value_codec: optional codecs for the user API.
    """

    #: one value per CPU (per-CPU array and hash maps set it)
    percpu = False

    type: MapType = MapType.UNSPEC
    #: True when programs may look values up (and get a pointer).
    has_values = True

    def __init__(self, vm: VM, key_size: int, value_size: int, max_entries: int, *, flags: int = 0,
                 name: str = "", key_codec: Codec | None = None, value_codec: Codec | None = None) -> None:
        self.vm = vm
        self.name = name
        self.key_size = key_size
        self.value_size = value_size
        self.max_entries = max_entries
        self.flags = flags  # type: ignore[assignment]  # the raw flag word; api.Map declares MapFlags
        self._fd = self.id = self.handle = -1
        self._closed = True
        self._validate(key_size, value_size, max_entries, flags)
        self.key_codec = key_codec
        self.value_codec = value_codec
        self.frozen = False
        #: Offset of a ``struct bpf_spin_lock`` in the value (set from BTF by
        #: the loader); ``BPF_F_LOCK`` is only valid when there is one.
        self.spin_lock_off: int | None = None
        self._closed = False
        self._fd, self.id, self.handle = vm._register_map(self)

    # -- construction checks ------------------------------------------------

    @property
    def fd(self) -> int:
        """The map's emulated fd (what ``lddw`` map relocations use).

        :raises BpfError: ``EBADF`` once closed.
        """
        if self._closed:
            raise BpfError(errno.EBADF, f"map {self.name!r} is closed")
        return self._fd

    def _validate(self, key_size: int, value_size: int, max_entries: int, flags: int) -> None:
        if key_size < 0 or value_size < 0 or max_entries < 0:
            raise BpfError(errno.EINVAL, f"{self.type.name} map: sizes must not be negative")
        if max_entries == 0 and self.type not in (MapType.RINGBUF,):
            raise BpfError(errno.EINVAL, f"{self.type.name} map: max_entries must be at least 1")

    # -- Closable -------------------------------------------------------------

    def close(self) -> None:
        """Release the map's fd, handle and value regions. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._release()
        self.vm._unregister_map(self)

    def _release(self) -> None:
        """Unmap the map's regions (subclasses)."""

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise BpfError(errno.EBADF, f"map {self.name!r} is closed")

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} fd={self._fd} key_size={self.key_size} "
                f"value_size={self.value_size} max_entries={self.max_entries}>")

    # -- conversions (user API) -------------------------------------------------

    def _key(self, key: Any) -> bytes:
        return self._pack(key, self.key_size, self.key_codec, "key")

    def _value(self, value: Any) -> bytes:
        return self._pack(value, self.value_size, self.value_codec, "value")

    def _pack(self, obj: Any, size: int, codec: Codec | None, what: str) -> bytes:
        if isinstance(obj, bytes | bytearray | memoryview):
            data = bytes(obj)
        elif codec is not None:
            data = bytes(codec.encode(obj))
        elif isinstance(obj, int) and not isinstance(obj, bool):
            if size not in (1, 2, 4, 8):
                raise BpfmuxError(f"map {self.name!r}: an int {what} needs a {what} size of 1, 2, 4 or 8 "
                                  f"(this map's is {size}); pass bytes")
            data = (obj & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        else:
            raise BpfmuxError(f"map {self.name!r}: {what} must be bytes or int (or set a {what}_codec), "
                              f"not {type(obj).__name__}")
        if len(data) != size:
            raise BpfmuxError(f"map {self.name!r}: {what} is {len(data)} bytes, the map's {what} size is {size}")
        return data

    def _out_key(self, data: bytes) -> Any:
        return self.key_codec.decode(data) if self.key_codec is not None else data

    def _out_value(self, data: bytes) -> Any:
        return self.value_codec.decode(data) if self.value_codec is not None else data

    # -- user API ---------------------------------------------------------------

    def lookup(self, key: Any) -> Any:
        """The value at ``key``, or ``None`` when absent (``BPF_MAP_LOOKUP_ELEM``).

        :raises BpfError: ``EBADF`` closed, ``EINVAL``/``EOPNOTSUPP`` the map
            type has no lookup from user space.
        :raises BpfmuxError: the key has the wrong size or type.
        """
        self._check_open()
        raw = self.sys_lookup(self._key(key))
        return None if raw is None else self._out_value_any(raw)

    def _out_value_any(self, raw: Any) -> Any:
        return self._out_value(raw)

    def put(self, key: Any, value: Any, flags: int = UpdateFlags.ANY) -> None:
        """Store ``value`` at ``key`` (``BPF_MAP_UPDATE_ELEM``).

        :raises BpfError: ``EEXIST`` (``NOEXIST`` and present), ``ENOENT``
            (``EXIST`` and absent), ``E2BIG`` (full, or index out of range),
            ``EINVAL`` (bad flags), ``EPERM`` (frozen).
        :raises BpfmuxError: the key or value has the wrong size or type.
        """
        self._check_open()
        if self.frozen:
            raise BpfError(errno.EPERM, f"map {self.name!r} is frozen; user space cannot update it")
        err = self.sys_update(self._key(key), self._in_value(value), int(flags))
        if err:
            raise BpfError(-err, f"update of map {self.name!r} failed")

    def _in_value(self, value: Any) -> Any:
        return self._value(value)

    def delete(self, key: Any) -> None:
        """Delete ``key`` (``BPF_MAP_DELETE_ELEM``).

        :raises BpfError: ``ENOENT`` absent, ``EINVAL`` the map type cannot
            delete (arrays), ``EPERM`` frozen.
        """
        self._check_open()
        if self.frozen:
            raise BpfError(errno.EPERM, f"map {self.name!r} is frozen; user space cannot delete from it")
        err = self.sys_delete(self._key(key))
        if err:
            raise BpfError(-err, f"delete from map {self.name!r} failed")

    def next_key(self, key: Any | None = None) -> Any | None:
        """The key after ``key`` (the first key for ``None`` or an absent
        key), or ``None`` at the end (``BPF_MAP_GET_NEXT_KEY``)."""
        self._check_open()
        raw = self.sys_next_key(None if key is None else self._key(key))
        return None if raw is None else self._out_key(raw)

    def freeze(self) -> None:
        """``BPF_MAP_FREEZE``: user space may no longer change the map."""
        self._check_open()
        self.frozen = True

    def _raw(self, value: Any) -> bytes:
        if isinstance(value, list):  # per-CPU: each CPU's value padded to 8 bytes, as bpf(2) returns them
            return b"".join(bytes(v).ljust(round8(self.value_size), b"\0") for v in value)
        return bytes(value)

    def lookup_raw(self, key: Any) -> bytes | None:
        """The value bytes at ``key`` as ``bpf(2)`` returns them (per-CPU
        values one after another, each padded to 8 bytes), or ``None``.

        :raises BpfError: ``EBADF`` closed; the map type has no lookup.
        """
        self._check_open()
        raw = self.sys_lookup(self._key(key))
        return None if raw is None else self._raw(raw)

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """Every ``(key, value)`` as bytes (see :meth:`lookup_raw`).

        :raises BpfError: ``EBADF`` closed; the map type has no lookup.
        """
        self._check_open()
        out = []
        for k in self.sys_keys():
            v = self.sys_lookup(k)
            if v is not None:
                out.append((k, self._raw(v)))
        return out

    def __getitem__(self, key: Any) -> Any:
        value = self.lookup(key)
        if value is None:
            raise NotFoundError("map key", repr(key), f"map {self.name!r} has no such element")
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        try:
            self.delete(key)
        except BpfError as e:
            if e.errno == errno.ENOENT:
                raise NotFoundError("map key", repr(key), f"map {self.name!r} has no such element") from None
            raise

    def __iter__(self) -> Iterator[Any]:
        self._check_open()
        for raw in self.sys_keys():
            yield self._out_key(raw)

    def __len__(self) -> int:
        self._check_open()
        return self.sys_len()

    def __contains__(self, key: object) -> bool:
        try:
            return self.lookup(key) is not None
        except BpfError:
            return False

    # -- the kernel-side operations, on raw bytes (subclasses) --------------------

    def sys_lookup(self, key: bytes) -> Any:
        """Value bytes at ``key`` or ``None`` (user-space semantics)."""
        raise BpfError(errno.EINVAL, f"{self.type.name} maps have no lookup from user space")

    def sys_update(self, key: bytes, value: Any, flags: int) -> int:
        """Update from user space; 0 or ``-errno``."""
        return -errno.EINVAL

    def sys_delete(self, key: bytes) -> int:
        """Delete from user space; 0 or ``-errno``."""
        return -errno.EINVAL

    def sys_next_key(self, key: bytes | None) -> bytes | None:
        """The next key (``None`` at the end)."""
        keys = list(self.sys_keys())
        if key is None or key not in keys:
            return keys[0] if keys else None
        i = keys.index(key)
        return keys[i + 1] if i + 1 < len(keys) else None

    def sys_keys(self) -> Iterator[bytes]:
        """Every key, in iteration order."""
        return iter(())

    def sys_len(self) -> int:
        """Number of elements."""
        return sum(1 for _ in self.sys_keys())

    def bpf_lookup(self, rs: RunState, key: bytes) -> int:
        """``bpf_map_lookup_elem``: value address or 0."""
        return 0

    def bpf_update(self, rs: RunState, key: bytes, value: bytes, flags: int) -> int:
        """``bpf_map_update_elem``: 0 or ``-errno``."""
        return -errno.EINVAL

    def bpf_delete(self, rs: RunState, key: bytes) -> int:
        """``bpf_map_delete_elem``: 0 or ``-errno``."""
        return -errno.EINVAL

    def direct_value_addr(self, offset: int) -> int:
        """Address of byte ``offset`` of the first value (``lddw`` with
        ``BPF_PSEUDO_MAP_VALUE``, global data).

        :raises BpfError: ``EINVAL`` the map type has no direct value access.
        """
        raise BpfError(errno.EINVAL, f"{self.type.name} map {self.name!r} has no direct value access")


def check_update_flags(flags: int, allow_lock: bool = False) -> int:
    """0 when ``flags`` is a valid update flag word, else ``-EINVAL``."""
    if flags & ~LOCK > EXIST or (flags & LOCK and not allow_lock):
        return -errno.EINVAL
    return 0
