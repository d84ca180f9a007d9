"""Types of bpftrace values, and how each is laid out in memory.

A :class:`T` is a value's type as the semantic pass sees it (bpftrace 0.17's
``SizedType``): integers with a size and sign, strings of a size, pointers
(with what they point to, from BTF), records (BTF structs and unions),
arrays, tuples, stacks, symbols, probe names, and the aggregations a map
can hold (``count()``, ``hist()`` …).

Layout: every value the generated programs store (map keys and values,
event records, scratch variables) takes :func:`slot_size` bytes, a multiple
of 8. Scalars (integers, pointers, symbols, probe ids, stack ids) are one
8-byte slot, sign- or zero-extended from their size, so the program can keep
them in a register; the others live in memory.
"""

from __future__ import annotations

import builtins
import enum

from ..record import Frozen
from ..record import set_field as _set

__all__ = ["COMM_SIZE", "K", "T", "align8", "is_scalar", "slot_size"]

COMM_SIZE = 16


class K(enum.Enum):
    """Kinds of values."""

    NONE = "none"
    INT = "int"
    STR = "string"
    PTR = "pointer"
    RECORD = "record"
    ARRAY = "array"
    TUPLE = "tuple"
    KSTACK = "kstack"
    USTACK = "ustack"
    KSYM = "ksym"
    USYM = "usym"
    FUNC = "func"  #: a probe's function name (the probe index)
    PROBE = "probe"
    USERNAME = "username"
    BUF = "buffer"
    TIMESTAMP = "timestamp"
    INET = "inet"
    STRERROR = "strerror"
    MACADDR = "macaddr"
    CGROUP_PATH = "cgroup_path"
    STACK_MODE = "stack_mode"
    # aggregations (map values only)
    COUNT = "count"
    SUM = "sum"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    STATS = "stats"
    HIST = "hist"
    LHIST = "lhist"


AGGREGATIONS = frozenset({K.COUNT, K.SUM, K.MIN, K.MAX, K.AVG, K.STATS, K.HIST, K.LHIST})
_SCALARS = frozenset({K.INT, K.PTR, K.KSTACK, K.USTACK, K.KSYM, K.FUNC, K.PROBE, K.USERNAME, K.STRERROR, K.COUNT,
                      K.SUM, K.MIN, K.MAX})  # fmt: skip


class T(Frozen):
    """A type.

    :ivar kind: the :class:`K`.
    :ivar size: bytes of the value as C sees it (integers 1/2/4/8, strings
        their buffer, records their struct size); aggregations 8.
    :ivar signed: integers (and sum/min/max/avg/stats of them).
    :ivar pointee: what a pointer points to (``None``: ``void``).
    :ivar btf_id: a record's (or a pointer-to-record's pointee's) BTF id.
    :ivar name: a record's C name (``struct task_struct``), an int's name.
    :ivar elems: a tuple's element types, or an array's element type (one).
    :ivar count: an array's element count.
    :ivar user: a pointer into user memory.
    :ivar mode: a stack's mode (``bpftrace``, ``perf``, ``raw``).
    :ivar limit: a stack's frame limit.
    :ivar lhist: ``(min, max, step)`` of an ``lhist()``.
    """

    __slots__ = (
        "kind",
        "size",
        "signed",
        "pointee",
        "btf_id",
        "name",
        "elems",
        "count",
        "user",
        "mode",
        "limit",
        "lhist",
        "extra",
    )

    kind: K
    size: int
    signed: bool
    pointee: T | None
    btf_id: int
    name: str
    elems: tuple[T, ...]
    count: int
    user: bool
    mode: str
    limit: int
    lhist: tuple[int, int, int]
    extra: tuple[object, ...]

    def __init__(
        self,
        kind: K,
        size: int = 8,
        signed: bool = False,
        pointee: T | None = None,
        btf_id: int = 0,
        name: str = "",
        elems: tuple[T, ...] = (),
        count: int = 0,
        user: bool = False,
        mode: str = "bpftrace",
        limit: int = 127,
        lhist: tuple[int, int, int] = (0, 0, 0),
        extra: tuple[object, ...] = (),
    ) -> None:
        _set(self, "kind", kind)
        _set(self, "size", size)
        _set(self, "signed", signed)
        _set(self, "pointee", pointee)
        _set(self, "btf_id", btf_id)
        _set(self, "name", name)
        _set(self, "elems", elems)
        _set(self, "count", count)
        _set(self, "user", user)
        _set(self, "mode", mode)
        _set(self, "limit", limit)
        _set(self, "lhist", lhist)
        _set(self, "extra", extra)

    # what equality and hashing compare (types are compared often during the analysis): the fields, in order,
    # spelled out (faster than the generic getter for thirteen fields)
    _values_of = staticmethod(lambda t: (t.kind, t.size, t.signed, t.pointee, t.btf_id, t.name, t.elems, t.count,
                                         t.user, t.mode, t.limit, t.lhist, t.extra))  # fmt: skip

    # -- constructors ---------------------------------------------------------------------

    @staticmethod
    def int(size: int = 8, signed: bool = False) -> T:
        """An integer of ``size`` bytes."""
        return T(K.INT, size, signed)

    @staticmethod
    def u64() -> T:
        """``uint64``."""
        return T(K.INT, 8, False)

    @staticmethod
    def s64() -> T:
        """``int64``."""
        return T(K.INT, 8, True)

    @staticmethod
    def string(size: builtins.int = 64) -> T:
        """A string buffer of ``size`` bytes."""
        return T(K.STR, max(1, size))

    @staticmethod
    def none() -> T:
        """No value (a call used for its effect)."""
        return T(K.NONE, 0)

    def with_user(self, user: bool) -> T:
        """The same type marked as pointing into user (or kernel) memory."""
        return self.replace(user=user)

    # -- questions ------------------------------------------------------------------------

    @property
    def is_int(self) -> bool:
        """An integer (or a pointer, which arithmetic treats as one)."""
        return self.kind in (K.INT, K.PTR)

    @property
    def is_aggregation(self) -> bool:
        """A map-only aggregation (``count()`` …)."""
        return self.kind in AGGREGATIONS

    def describe(self) -> str:
        """bpftrace's name for the type (``int64``, ``string[64]``, ``struct x *``)."""
        k = self.kind
        if k == K.INT:
            return f"{'' if self.signed else 'u'}int{self.size * 8}"
        if k == K.STR:
            return f"string[{self.size}]"
        if k == K.PTR:
            return f"{self.pointee.describe() if self.pointee is not None else 'void'} *"
        if k == K.RECORD:
            return self.name or "record"
        if k == K.ARRAY:
            return f"{self.elems[0].describe() if self.elems else '?'}[{self.count}]"
        if k == K.TUPLE:
            return "(" + ",".join(e.describe() for e in self.elems) + ")"
        if k == K.LHIST:
            return "lhist"
        return k.value


def align8(n: int) -> int:
    """``n`` rounded up to a multiple of 8."""
    return (n + 7) & ~7


def is_scalar(t: T) -> bool:
    """Whether values of ``t`` fit one 8-byte register (else they live in memory)."""
    return t.kind in _SCALARS


def slot_size(t: T) -> int:
    """Bytes a value of ``t`` takes in keys, values, records and scratch (a multiple of 8)."""
    k = t.kind
    if k in _SCALARS:
        return 8
    if k == K.NONE:
        return 0
    if k in (K.USYM, K.TIMESTAMP):
        return 16
    if k == K.INET:
        return 24
    if k == K.BUF:
        return 8 + align8(t.size)
    if k == K.TUPLE:
        return sum(slot_size(e) for e in t.elems)
    if k in (K.AVG, K.STATS):
        return 16
    if k in (K.HIST, K.LHIST):
        return 8 * t.count
    return align8(max(1, t.size))


def tuple_offsets(t: T) -> list[int]:
    """Byte offset of each element of tuple type ``t`` in its layout."""
    out, off = [], 0
    for e in t.elems:
        out.append(off)
        off += slot_size(e)
    return out
