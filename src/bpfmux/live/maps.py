"""Live BPF maps as Python mappings, one class per map type.

Keys and values go through codecs (:mod:`bpfmux.live.codecs`): decoded through
the map's BTF when it has one, raw ``bytes`` otherwise (ints are accepted for
1/2/4/8-byte keys and values).

- ``ArrayMap`` (also the global-data maps, see :class:`DataSecMap`): keys
  ``0..max_entries-1``; ``len()`` is ``max_entries`` (O(1)); elements cannot
  be deleted (``del`` raises), ``clear()`` zeroes them.
- ``HashMap``/``LruHashMap``: ``len()`` counts the keys with batched lookups
  (``BPF_MAP_LOOKUP_BATCH``, a few hundred keys per system call) because the
  kernel keeps no element count that user space can read; ``items()``,
  ``values()`` and iteration are batched too, with a ``get_next_key`` walk as
  the fallback on kernels or map types without batch operations.
- Per-CPU maps: values are lists with one entry per possible CPU; assigning a
  single value writes it to every CPU.
- ``ProgArrayMap``, ``ArrayOfMapsMap``, ``HashOfMapsMap``: assign a program,
  map or fd; reading returns the kernel object's id (what the kernel reports).
- ``StackTraceMap``: stack id → list of instruction pointers.
- ``RingBufMap``/``PerfEventArrayMap``: not element stores; ``reader()``
  returns a :class:`~bpfmux.live.ringbuf.RingBuffer` /
  :class:`~bpfmux.live.perfbuf.PerfBuffer`.
"""

from __future__ import annotations

import errno as _errno
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .. import api
from ..codecs import Codec, IntCodec, RawCodec, U64ListCodec, codec_for
from ..errors import ENOTSUPP, BpfError, NotFoundError, NotSupportedError, ParseError
from ..host.cpus import possible_cpus
from ..uapi import MapFlags, MapType, UpdateFlags
from . import sys as _sys

if TYPE_CHECKING:
    from ..btf import Btf
    from .perfbuf import PerfBuffer
    from .ringbuf import RingBuffer

_BATCH = 256


def _round8(n: int) -> int:
    return (n + 7) & ~7


class LiveMap(api.Map):
    """A map in the running kernel; the base class of every map type.

    :ivar fd_obj: the owned :class:`~bpfmux.live.sys.Fd` (``fd`` is its number).
    :ivar name: map name (the ELF name when loaded from an object).
    :ivar type: :class:`~bpfmux.uapi.MapType`.
    :ivar id: the kernel's map id.
    :ivar key_codec: / :ivar value_codec: how keys and values are converted.
    """

    def __init__(self, fd: _sys.Fd, info: _sys.MapInfo, *, name: str | None = None,
                 key_codec: Codec | None = None, value_codec: Codec | None = None, btf: Btf | None = None) -> None:
        self.fd_obj = fd
        self.name = name if name is not None else info.name.decode(errors="replace")
        try:
            self.type = MapType(info.type)
        except ValueError:
            self.type = info.type  # a type newer than bpfmux: the kernel's number
        self.id = info.id
        self.key_size = info.key_size
        self.value_size = info.value_size
        self.max_entries = info.max_entries
        self.flags = MapFlags(info.map_flags)
        self.btf = btf
        self.key_codec: Codec = key_codec or self._default_key_codec()
        self.value_codec: Codec = value_codec or self._default_value_codec()
        self._batch_ok: bool | None = None

    # --- construction ----------------------------------------------------------

    def _default_key_codec(self) -> Codec:
        return RawCodec(self.key_size)

    def _default_value_codec(self) -> Codec:
        return RawCodec(self.value_size)

    # --- resource ---------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The map fd number.

        :raises BpfError: ``EBADF`` once closed.
        """
        return self.fd_obj.fd

    def close(self) -> None:
        """Close the map fd (the map lives on while programs or pins hold it)."""
        self.fd_obj.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self.fd_obj.closed

    def __repr__(self) -> str:
        t = self.type.name.lower() if isinstance(self.type, MapType) else self.type
        state = "closed" if self.closed else f"id={self.id}"
        return f"<{type(self).__name__} {self.name!r} {t} {state} key={self.key_size} value={self.value_size} max={self.max_entries}>"

    # --- element encoding ---------------------------------------------------------

    @property
    def _value_stride(self) -> int:
        return self.value_size

    def _k(self, key: Any) -> bytes:
        try:
            return self.key_codec.encode(key)
        except ParseError as err:
            raise ParseError(f"map {self.name!r}: bad key {key!r}: {err.message}") from None

    def _v(self, value: Any) -> bytes:
        try:
            return self.value_codec.encode(value)
        except ParseError as err:
            raise ParseError(f"map {self.name!r}: bad value {value!r}: {err.message}") from None

    def _decode_value(self, data: bytes | bytearray | memoryview) -> Any:
        return self.value_codec.decode(data)

    def _missing(self, key: Any) -> NotFoundError:
        return NotFoundError("key in map", f"{self.name}[{key!r}]", "it is not in the map")

    # --- element operations --------------------------------------------------------

    def lookup_raw(self, key: Any) -> bytes | None:
        """The raw value bytes for ``key``, or None when absent.

        :raises BpfError: the kernel's error.
        """
        out = bytearray(self._value_stride)
        return bytes(out) if _sys.map_lookup_elem(self.fd, self._k(key), out) else None

    def __getitem__(self, key: Any) -> Any:
        """The decoded value at ``key``.

        :raises NotFoundError: no such key.
        :raises ParseError: the key does not fit the map's key type.
        :raises BpfError: the kernel's error.
        """
        out = bytearray(self._value_stride)
        if not _sys.map_lookup_elem(self.fd, self._k(key), out):
            raise self._missing(key)
        return self._decode_value(out)

    def put(self, key: Any, value: Any, flags: UpdateFlags | int = UpdateFlags.ANY) -> None:
        """Write one element with explicit update flags (``NOEXIST``/``EXIST``).

        :raises BpfError: ``EEXIST``, ``ENOENT``, ``E2BIG`` (full), ….
        :raises ParseError: the key or value does not fit.
        """
        _sys.map_update_elem(self.fd, self._k(key), self._v(value), int(flags))

    def __setitem__(self, key: Any, value: Any) -> None:
        _sys.map_update_elem(self.fd, self._k(key), self._v(value), 0)

    def __delitem__(self, key: Any) -> None:
        if not _sys.map_delete_elem(self.fd, self._k(key)):
            raise self._missing(key)

    def lookup_and_delete(self, key: Any) -> Any:
        """Atomically read and remove ``key``.

        :raises NotFoundError: absent.
        :raises BpfError: the map type has no lookup-and-delete.
        """
        out = bytearray(self._value_stride)
        if not _sys.map_lookup_and_delete_elem(self.fd, self._k(key), out):
            raise self._missing(key)
        return self._decode_value(out)

    def __contains__(self, key: object) -> bool:
        try:
            return _sys.map_lookup_elem(self.fd, self._k(key), bytearray(self._value_stride))
        except ParseError:
            return False

    # --- iteration -------------------------------------------------------------------

    def _batch(self, delete: bool = False) -> Iterator[tuple[list[bytes], bytes]]:
        """Yield (raw keys, raw values block) per batch; sets ``_batch_ok``."""
        ks, vs = self.key_size, self._value_stride
        n = _BATCH
        token = bytearray(max(8, ks))
        first = True
        while True:
            keys, vals = bytearray(n * ks), bytearray(n * vs)
            try:
                res = _sys.map_lookup_batch(self.fd, None if first else bytes(token), token, keys, vals, n,
                                            delete=delete)
            except BpfError as err:
                if err.errno == _errno.ENOSPC and n < (1 << 16):  # a hash bucket holds more than n
                    n *= 4
                    continue
                if first and err.errno in (_errno.EINVAL, ENOTSUPP, _errno.EOPNOTSUPP, _errno.ENOSYS):
                    self._batch_ok = False
                    return
                raise
            self._batch_ok = True
            first = False
            yield [bytes(keys[i * ks:(i + 1) * ks]) for i in range(res.count)], bytes(vals[: res.count * vs])
            if res.done:
                return

    def _walk_keys(self) -> Iterator[bytes]:
        """Raw keys through ``BPF_MAP_GET_NEXT_KEY``; stops if the map restarts
        under concurrent deletion (a key seen twice)."""
        cur: bytes | None = None
        nk = bytearray(self.key_size)
        seen: set[bytes] = set()
        while _sys.map_get_next_key(self.fd, cur, nk):
            k = bytes(nk)
            if k in seen:
                return
            seen.add(k)
            yield k
            cur = k

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """A snapshot of (raw key, raw value) pairs, batched when possible.

        :raises BpfError: the kernel's error.
        """
        out: list[tuple[bytes, bytes]] = []
        if self._batch_ok is not False:
            vs = self._value_stride
            for keys, block in self._batch():
                out.extend((k, block[i * vs:(i + 1) * vs]) for i, k in enumerate(keys))
            if self._batch_ok:
                return out
        for k in self._walk_keys():
            v = bytearray(self._value_stride)
            if _sys.map_lookup_elem(self.fd, k, v):
                out.append((k, bytes(v)))
        return out

    def raw_keys(self) -> list[bytes]:
        """A snapshot of the raw keys (batched when possible).

        :raises BpfError: the kernel's error.
        """
        if self._batch_ok is not False:
            out = [k for keys, _ in self._batch() for k in keys]
            if self._batch_ok:
                return out
        return list(self._walk_keys())

    def __iter__(self) -> Iterator[Any]:
        dec = self.key_codec.decode
        return iter([dec(k) for k in self.raw_keys()])

    def __len__(self) -> int:
        return len(self.raw_keys())

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]  # a snapshot list, not a view
        """A snapshot list of (key, value), read with batched lookups.

        :raises BpfError: the kernel's error.
        """
        kd = self.key_codec.decode
        return [(kd(k), self._decode_value(v)) for k, v in self.raw_items()]

    def values(self) -> list[Any]:  # type: ignore[override]  # a snapshot list, not a view
        """A snapshot list of values (batched).

        :raises BpfError: the kernel's error.
        """
        return [self._decode_value(v) for _, v in self.raw_items()]

    def keys(self) -> list[Any]:  # type: ignore[override]  # a snapshot list, not a view
        """A snapshot list of keys (batched).

        :raises BpfError: the kernel's error.
        """
        return list(iter(self))

    def clear(self) -> None:
        """Delete every element (batched when possible).

        :raises BpfError: the kernel's error.
        """
        keys = self.raw_keys()
        if not keys:
            return
        try:
            _sys.map_delete_batch(self.fd, b"".join(keys), len(keys))
            return
        except BpfError as err:
            if err.errno not in (_errno.EINVAL, ENOTSUPP, _errno.EOPNOTSUPP):
                raise
        for k in keys:
            _sys.map_delete_elem(self.fd, k)

    # --- whole-map operations -----------------------------------------------------------

    def freeze(self) -> None:
        """Forbid further writes from user space (``BPF_MAP_FREEZE``).

        :raises BpfError: ``EBUSY`` a writable mapping exists.
        """
        _sys.map_freeze(self.fd)

    def pin(self, path: str) -> None:
        """Pin the map in bpffs.

        :raises BpfError: ``EEXIST`` taken, ``EPERM`` not on bpffs.
        """
        _sys.obj_pin(self.fd, path)

    def info(self) -> _sys.MapInfo:
        """Fresh ``bpf_map_info`` from the kernel.

        :raises BpfError: closed.
        """
        return _sys.map_info(self.fd)


class ArrayMap(LiveMap):
    """``BPF_MAP_TYPE_ARRAY``: fixed keys ``0..max_entries-1``, never absent."""

    def _default_key_codec(self) -> Codec:
        return IntCodec(4) if self.key_size == 4 else RawCodec(self.key_size)

    def _check_index(self, key: Any) -> None:
        if isinstance(key, int) and not 0 <= key < self.max_entries:
            raise NotFoundError("index in array map", f"{self.name}[{key}]", f"valid indices are 0..{self.max_entries - 1}")

    def __getitem__(self, key: Any) -> Any:
        self._check_index(key)
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_index(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        raise BpfError(_errno.EINVAL, f"map {self.name!r}: array elements cannot be deleted (the kernel refuses "
                                      "it); assign a zero value instead")

    def __len__(self) -> int:
        return self.max_entries

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.max_entries))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, int) and 0 <= key < self.max_entries

    def raw_keys(self) -> list[bytes]:
        """Every index, encoded (arrays have all of them)."""
        return [i.to_bytes(4, "little") for i in range(self.max_entries)]

    def clear(self) -> None:
        """Zero every element.

        :raises BpfError: the kernel's error (``EPERM`` when frozen).
        """
        zero = bytes(self._value_stride)
        for k in self.raw_keys():
            _sys.map_update_elem(self.fd, k, zero, 0)


class _PerCpu:
    """Mixin: values are lists with one entry per possible CPU."""

    value_size: int
    value_codec: Codec

    if TYPE_CHECKING:
        def __getitem__(self, key: Any) -> Any: ...  # the map class this is mixed into

    @property
    def ncpus(self) -> int:
        """Entries per value (possible CPUs)."""
        return possible_cpus()

    @property
    def _value_stride(self) -> int:
        return _round8(self.value_size) * possible_cpus()

    def _decode_value(self, data: bytes | bytearray | memoryview) -> list[Any]:
        step = _round8(self.value_size)
        dec = self.value_codec.decode
        mv = memoryview(data)
        return [dec(mv[i * step:i * step + self.value_size]) for i in range(possible_cpus())]

    def _v(self, value: Any) -> bytes:
        n = possible_cpus()
        step = _round8(self.value_size)
        if isinstance(value, list | tuple):
            if len(value) != n:
                raise ParseError(f"per-CPU value needs {n} entries (one per possible CPU), got {len(value)}")
            vals = value
        else:
            vals = [value] * n
        pad = bytes(step - self.value_size)
        try:
            return b"".join(self.value_codec.encode(v) + pad for v in vals)
        except ParseError as err:
            raise ParseError(f"bad per-CPU value {value!r}: {err.message}") from None

    def sum(self, key: Any) -> Any:
        """The sum over CPUs of an integer per-CPU value.

        :raises NotFoundError: absent key.
        """
        return sum(self[key])


class PerCpuArrayMap(_PerCpu, ArrayMap):
    """``BPF_MAP_TYPE_PERCPU_ARRAY``."""


class HashMap(LiveMap):
    """``BPF_MAP_TYPE_HASH``."""


class LruHashMap(HashMap):
    """``BPF_MAP_TYPE_LRU_HASH``: full maps evict the least recently used key."""


class PerCpuHashMap(_PerCpu, HashMap):
    """``BPF_MAP_TYPE_PERCPU_HASH``."""


class LruPerCpuHashMap(_PerCpu, HashMap):
    """``BPF_MAP_TYPE_LRU_PERCPU_HASH``."""


class _FdValueCodec:
    """Writes an fd (from an Fd, a Program/Map, or an int), reads an object id."""

    size = 4

    def encode(self, value: Any) -> bytes:
        fd = getattr(value, "fd", value)
        if isinstance(fd, _sys.Fd):
            fd = fd.fd
        if not isinstance(fd, int):
            raise ParseError(f"expected a program, map, Fd or fd number, got {type(value).__name__}")
        return fd.to_bytes(4, "little")

    def decode(self, data: bytes | bytearray | memoryview) -> int:
        return int.from_bytes(bytes(data[:4]), "little")


class _FdArray(ArrayMap):
    """Arrays of kernel objects: delete empties a slot; iteration yields the
    occupied slots."""

    def _default_value_codec(self) -> Codec:
        return _FdValueCodec()

    def __delitem__(self, key: Any) -> None:
        self._check_index(key)
        if not _sys.map_delete_elem(self.fd, self._k(key)):
            raise self._missing(key)

    def __iter__(self) -> Iterator[int]:
        return iter([self.key_codec.decode(k) for k in self.raw_keys()])

    def __len__(self) -> int:
        return len(self.raw_keys())

    def __contains__(self, key: object) -> bool:
        return LiveMap.__contains__(self, key)

    def raw_keys(self) -> list[bytes]:
        """The occupied slots (every index is a key of an array; a slot is
        occupied when the kernel can look it up)."""
        out = []
        buf = bytearray(4)
        for i in range(self.max_entries):
            k = i.to_bytes(4, "little")
            if _sys.map_lookup_elem(self.fd, k, buf):
                out.append(k)
        return out

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """(slot, object id) of the occupied slots."""
        out = []
        for i in range(self.max_entries):
            k, buf = i.to_bytes(4, "little"), bytearray(4)
            if _sys.map_lookup_elem(self.fd, k, buf):
                out.append((k, bytes(buf)))
        return out

    def clear(self) -> None:
        """Empty every slot.

        :raises BpfError: the kernel's error.
        """
        for k in self.raw_keys():
            _sys.map_delete_elem(self.fd, k)


class ProgArrayMap(_FdArray):
    """``BPF_MAP_TYPE_PROG_ARRAY``: tail-call targets; reading gives program ids."""


class ArrayOfMapsMap(_FdArray):
    """``BPF_MAP_TYPE_ARRAY_OF_MAPS``: reading gives inner map ids;
    :meth:`inner` opens one."""

    def inner(self, key: int) -> LiveMap:
        """The inner map at ``key`` (a new fd, owned by the caller).

        :raises NotFoundError: empty slot.
        """
        return from_id(self[key])


class HashOfMapsMap(LiveMap):
    """``BPF_MAP_TYPE_HASH_OF_MAPS``: reading gives inner map ids;
    :meth:`inner` opens one."""

    def _default_value_codec(self) -> Codec:
        return _FdValueCodec()

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """(raw key, inner map id) pairs (no batch ops for maps of maps)."""
        out = []
        for k in self._walk_keys():
            v = bytearray(4)
            if _sys.map_lookup_elem(self.fd, k, v):
                out.append((k, bytes(v)))
        return out

    def raw_keys(self) -> list[bytes]:
        """The keys present."""
        return list(self._walk_keys())

    def inner(self, key: Any) -> LiveMap:
        """The inner map at ``key`` (a new fd, owned by the caller).

        :raises NotFoundError: absent key.
        """
        return from_id(self[key])


class StackTraceMap(LiveMap):
    """``BPF_MAP_TYPE_STACK_TRACE``: stack id → instruction pointers."""

    def _default_key_codec(self) -> Codec:
        return IntCodec(4) if self.key_size == 4 else RawCodec(self.key_size)

    def _default_value_codec(self) -> Codec:
        return U64ListCodec(self.value_size)

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """(stack id, raw stack) pairs (stack maps have no batch ops)."""
        out = []
        for k in self._walk_keys():
            v = bytearray(self.value_size)
            if _sys.map_lookup_elem(self.fd, k, v):
                out.append((k, bytes(v)))
        return out

    def raw_keys(self) -> list[bytes]:
        """The stack ids present."""
        return list(self._walk_keys())


class _NoElements(LiveMap):
    """Maps that are channels, not element stores."""

    _reader_hint = "read it with map.reader()"

    def _unsupported(self) -> NotSupportedError:
        return NotSupportedError(f"{self.type.name.lower()} element access",
                                 f"map {self.name!r} ({self.type.name.lower()}) holds no elements; {self._reader_hint}")

    def __getitem__(self, key: Any) -> Any:
        raise self._unsupported()

    def __setitem__(self, key: Any, value: Any) -> None:
        raise self._unsupported()

    def __delitem__(self, key: Any) -> None:
        raise self._unsupported()

    def __contains__(self, key: object) -> bool:
        return False

    def raw_keys(self) -> list[bytes]:
        """Always empty."""
        return []

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """Always empty."""
        return []

    def clear(self) -> None:
        """Nothing to clear."""


class RingBufMap(_NoElements):
    """``BPF_MAP_TYPE_RINGBUF``: events are read with :meth:`reader`."""

    def reader(self, callback: Callable[[Any], Any] | None = None, **options: Any) -> RingBuffer:
        """A :class:`~bpfmux.live.ringbuf.RingBuffer` over this map.

        :raises BpfError: mmap or epoll failed.
        """
        from .ringbuf import RingBuffer

        return RingBuffer(self, callback, **options)


class PerfEventArrayMap(_NoElements):
    """``BPF_MAP_TYPE_PERF_EVENT_ARRAY``: one slot per CPU; :meth:`reader`
    opens the per-CPU ``BPF_OUTPUT`` perf events and stores them."""

    def _default_key_codec(self) -> Codec:
        return IntCodec(4)

    def __setitem__(self, key: Any, value: Any) -> None:
        _sys.map_update_elem(self.fd, self._k(key), _FdValueCodec().encode(value), 0)

    def __delitem__(self, key: Any) -> None:
        if not _sys.map_delete_elem(self.fd, self._k(key)):
            raise self._missing(key)

    def reader(self, callback: Callable[[int, Any], Any] | None = None, **options: Any) -> PerfBuffer:
        """A :class:`~bpfmux.live.perfbuf.PerfBuffer` over this map (``callback(cpu, data)`` per sample).

        :raises BpfError: perf_event_open or mmap failed.
        """
        from .perfbuf import PerfBuffer

        return PerfBuffer(self, callback, **options)


class QueueMap(_NoElements):
    """``BPF_MAP_TYPE_QUEUE``/``STACK``: :meth:`push`, :meth:`pop`, :meth:`peek`."""

    _reader_hint = "use push()/pop()/peek()"

    def push(self, value: Any, flags: UpdateFlags | int = UpdateFlags.ANY) -> None:
        """Push a value (``BPF_EXIST`` overwrites the oldest when full).

        :raises BpfError: ``E2BIG`` full.
        """
        _sys.map_update_elem(self.fd, None, self._v(value), int(flags))

    def pop(self) -> Any:  # type: ignore[override]  # a queue pops its head: no key, no default
        """Remove and return the next value.

        :raises NotFoundError: empty.
        """
        out = bytearray(self.value_size)
        if not _sys.map_lookup_and_delete_elem(self.fd, None, out):
            raise NotFoundError("element in", self.name, "the queue is empty")
        return self._decode_value(out)

    def peek(self) -> Any:
        """Return the next value without removing it.

        :raises NotFoundError: empty.
        """
        out = bytearray(self.value_size)
        if not _sys.map_lookup_elem(self.fd, None, out):
            raise NotFoundError("element in", self.name, "the queue is empty")
        return self._decode_value(out)


class DataSecMap(ArrayMap):
    """A global-data map (``.data``, ``.rodata``, ``.bss``, ``.data.*``…): one
    array element holding the section, viewed as ``{variable: value}`` when
    the object's BTF describes the section (``DATASEC``).

    ``m["counter"]`` reads one variable, ``m["counter"] = 5`` writes it (a
    read-modify-write of the section; ``.rodata`` is frozen after load, so
    writing it raises ``PermissionError``). :meth:`raw` gives the whole
    section.
    """

    def __init__(self, fd: _sys.Fd, info: _sys.MapInfo, *, variables: dict[str, tuple[int, int, Codec]] | None = None,
                 **kw: Any) -> None:
        super().__init__(fd, info, **kw)
        #: variable name → (offset, size, codec)
        self.variables: dict[str, tuple[int, int, Codec]] = variables or {}

    def raw(self) -> bytes:
        """The whole section's bytes.

        :raises BpfError: the kernel's error.
        """
        out = bytearray(self.value_size)
        _sys.map_lookup_elem(self.fd, b"\0\0\0\0", out)
        return bytes(out)

    def write_raw(self, data: bytes) -> None:
        """Overwrite the whole section.

        :raises BpfError: ``EPERM`` frozen.
        :raises ParseError: wrong size.
        """
        if len(data) != self.value_size:
            raise ParseError(f"section {self.name!r} is {self.value_size} bytes, got {len(data)}")
        _sys.map_update_elem(self.fd, b"\0\0\0\0", data, 0)

    def _var(self, name: Any) -> tuple[int, int, Codec]:
        if name not in self.variables:
            hint = f"variables: {', '.join(sorted(self.variables))}" if self.variables else \
                "the object has no BTF for this section; use raw()/index 0"
            raise NotFoundError("variable", f"{self.name}.{name}", hint)
        return self.variables[name]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int):
            return super().__getitem__(key)
        off, size, codec = self._var(key)
        return codec.decode(self.raw()[off:off + size])

    def __setitem__(self, key: Any, value: Any) -> None:
        """Write variable ``key`` (or the whole section at index 0).

        :raises NotFoundError: no such variable.
        :raises ParseError: the value does not fit the variable's type.
        :raises PermissionError: the section is frozen (``.rodata``).
        """
        if isinstance(key, int):
            super().__setitem__(key, value)
            return
        off, size, codec = self._var(key)
        try:
            enc = codec.encode(value)
        except ParseError as err:
            raise ParseError(f"{self.name}.{key}: {err.message}") from None
        data = bytearray(self.raw())
        data[off:off + size] = enc
        self.write_raw(bytes(data))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.variables) if self.variables else iter(range(1))

    def __len__(self) -> int:
        return len(self.variables) if self.variables else 1

    def __contains__(self, key: object) -> bool:
        return key in self.variables if not isinstance(key, int) else key == 0

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]  # a snapshot list, not a view
        """Every variable and its value (one read of the section).

        :raises BpfError: the kernel's error.
        """
        if not self.variables:
            return [(0, self.raw())]
        raw = self.raw()
        return [(n, c.decode(raw[o:o + s])) for n, (o, s, c) in self.variables.items()]

    def values(self) -> list[Any]:  # type: ignore[override]  # a snapshot list, not a view
        """Every variable's value.

        :raises BpfError: the kernel's error.
        """
        return [v for _, v in self.items()]

    def keys(self) -> list[Any]:  # type: ignore[override]  # a snapshot list, not a view
        """Variable names."""
        return list(iter(self))


MAP_CLASSES: dict[int, type[LiveMap]] = {
    MapType.ARRAY: ArrayMap,
    MapType.PERCPU_ARRAY: PerCpuArrayMap,
    MapType.HASH: HashMap,
    MapType.LRU_HASH: LruHashMap,
    MapType.PERCPU_HASH: PerCpuHashMap,
    MapType.LRU_PERCPU_HASH: LruPerCpuHashMap,
    MapType.PROG_ARRAY: ProgArrayMap,
    MapType.ARRAY_OF_MAPS: ArrayOfMapsMap,
    MapType.HASH_OF_MAPS: HashOfMapsMap,
    MapType.STACK_TRACE: StackTraceMap,
    MapType.RINGBUF: RingBufMap,
    MapType.PERF_EVENT_ARRAY: PerfEventArrayMap,
    MapType.QUEUE: QueueMap,
    MapType.STACK: QueueMap,
}


def wrap(fd: _sys.Fd, *, name: str | None = None, btf: Btf | None = None, key_type_id: int = 0, value_type_id: int = 0,
         cls: type[LiveMap] | None = None, **kw: Any) -> LiveMap:
    """Wrap an owned map fd in the class for its type; codecs from BTF when
    ``btf`` and the type ids are given.

    :raises BpfError: ``fd`` is not a map.
    """
    info = _sys.map_info(fd)
    cls = cls or MAP_CLASSES.get(info.type, LiveMap)
    kc = codec_for(btf, key_type_id, info.key_size) if btf is not None and key_type_id else None
    vc = codec_for(btf, value_type_id, info.value_size) if btf is not None and value_type_id else None
    if cls in (PerCpuArrayMap, PerCpuHashMap, LruPerCpuHashMap) and vc is None:
        vc = IntCodec(info.value_size) if info.value_size in (1, 2, 4, 8) else None
    return cls(fd, info, name=name, key_codec=kc, value_codec=vc, btf=btf, **kw)


def create(map_type: MapType | int, key_size: int, value_size: int, max_entries: int, *, name: str = "",
           flags: int = 0, inner_map: LiveMap | _sys.Fd | None = None, btf_fd: _sys.Fd | None = None,
           btf: Btf | None = None, key_type_id: int = 0, value_type_id: int = 0, map_extra: int = 0,
           numa_node: int = 0) -> LiveMap:
    """Create a map and wrap it (see :func:`wrap`).

    :raises BpfError: the kernel refused (``EINVAL`` sizes/flags, ``EPERM``).
    :raises NotSupportedError: the kernel does not know this map type.
    """
    inner = inner_map.fd_obj if isinstance(inner_map, LiveMap) else inner_map
    try:
        fd = _sys.map_create(int(map_type), key_size, value_size, max_entries, flags=flags, name=name,
                             inner_map_fd=inner, btf_fd=btf_fd, btf_key_type_id=key_type_id if btf_fd else 0,
                             btf_value_type_id=value_type_id if btf_fd else 0, map_extra=map_extra,
                             numa_node=numa_node)
    except BpfError as err:
        if err.errno == _errno.EINVAL:
            from .features import features

            try:
                known = MapType(int(map_type))
            except ValueError:
                raise NotSupportedError(f"map type {int(map_type)}",
                                        f"map type {int(map_type)} is unknown to bpfmux and refused by the kernel") from err
            if not features().map_type(known).supported:
                raise NotSupportedError(f"map type {known.name.lower()}") from err
        raise
    with fd.close_on_error():
        return wrap(fd, name=name or None, btf=btf, key_type_id=key_type_id, value_type_id=value_type_id)


def from_id(map_id: int) -> LiveMap:
    """Open the map with kernel id ``map_id`` (raw codecs).

    :raises BpfError: ``ENOENT`` no such map.
    """
    fd = _sys.get_fd_by_id(_sys.ObjKind.MAP, map_id)
    with fd.close_on_error():
        return wrap(fd)


def from_pin(path: str) -> LiveMap:
    """Open a map pinned at ``path``.

    :raises BpfError: ``ENOENT`` nothing pinned there.
    """
    fd = _sys.obj_get(path, kind="map")
    with fd.close_on_error():
        return wrap(fd)
