"""Context layouts: what a program of a given type may read (or write) through ``r1``.

A :class:`ContextLayout` answers one question for the verifier: *is an access
of ``size`` bytes at ``offset`` into the context allowed, and what does it
load?*  Each layout mirrors the kernel's ``is_valid_access`` rules for its
program type (facts of Linux 6.18):

* ``kind="window"``: any read inside ``[lo, hi)`` whose offset is a multiple of
  its size (kprobe ``pt_regs``, tracepoint records, raw_tp ``u64 args[]``);
* ``kind="fields"``: only listed fields, each with its own rule for narrow
  (smaller than the field) loads and for writes (perf_event, ``__sk_buff``);
* ``kind="btf"``: u64 slots of a tracing frame (fentry/fexit/tp_btf): offsets
  must be multiples of 8, each slot has a type (scalar or a BTF pointer).

Layouts are immutable and hashable, so the verifier can key caches on them.
"""

from __future__ import annotations

from typing import Literal

from ..record import Frozen
from ..record import set_field as _set

#: What a successful context load puts into the destination register.
LoadKind = Literal["scalar", "ptr_to_btf_id", "ptr_to_tp_buffer", "ptr_to_packet"]


class CtxField(Frozen):
    """One field of a ``kind="fields"`` or ``kind="btf"`` context.

    :ivar name: field name, as in the C struct.
    :ivar offset: byte offset in the context.
    :ivar size: field size in bytes.
    :ivar narrow: whether loads smaller than ``size`` (aligned to their own
        size, inside the field) are allowed.
    :ivar sizes: for fields, the exact access sizes allowed when ``narrow`` is
        false (empty: only ``size``).
    :ivar writable: whether stores are allowed.
    :ivar load: what a full-size load yields (``scalar`` or a pointer kind).
    :ivar btf_type: for ``ptr_to_btf_id`` fields, the pointed-to type's name
        (informational; ``None`` when unknown).
    :ivar signed: whether the field is a signed integer (informational).
    """

    __slots__ = ("name", "offset", "size", "narrow", "sizes", "writable", "load", "btf_type", "signed")

    name: str
    offset: int
    size: int
    narrow: bool
    sizes: tuple[int, ...]
    writable: bool
    load: LoadKind
    btf_type: str | None
    signed: bool

    def __init__(
        self,
        name: str,
        offset: int,
        size: int,
        narrow: bool = True,
        sizes: tuple[int, ...] = (),
        writable: bool = False,
        load: LoadKind = "scalar",
        btf_type: str | None = None,
        signed: bool = False,
    ) -> None:
        _set(self, "name", name)
        _set(self, "offset", offset)
        _set(self, "size", size)
        _set(self, "narrow", narrow)
        _set(self, "sizes", sizes)
        _set(self, "writable", writable)
        _set(self, "load", load)
        _set(self, "btf_type", btf_type)
        _set(self, "signed", signed)

    @property
    def end(self) -> int:
        """First byte after the field."""
        return self.offset + self.size


class CtxAccess(Frozen):
    """The verdict on one context access.

    :ivar ok: whether the access is allowed.
    :ivar reason: when not allowed, the verifier message (kernel wording where
        the kernel has one).
    :ivar load: what a load yields.
    :ivar field: the field accessed, when the layout has fields.
    """

    __slots__ = ("ok", "reason", "load", "field")

    ok: bool
    reason: str
    load: LoadKind
    field: CtxField | None

    def __init__(self, ok: bool, reason: str = "", load: LoadKind = "scalar", field: CtxField | None = None) -> None:
        _set(self, "ok", ok)
        _set(self, "reason", reason)
        _set(self, "load", load)
        _set(self, "field", field)


class ContextLayout(Frozen):
    """The context a program type sees, and the kernel's rules for it.

    :ivar name: the C type (``struct pt_regs``, ``u64[12]``, …).
    :ivar size: size in bytes of the context object the emulator builds.
    :ivar kind: ``window``, ``fields`` or ``btf`` (see the module docstring).
    :ivar lo: for windows, the first readable offset (tracepoints hide their
        first 8 bytes).
    :ivar hi: for windows, the end of the readable range.
    :ivar fields: the fields (``fields``/``btf`` kinds; for windows only
        informational, e.g. the tracepoint record's fields).
    :ivar writable: for windows, whether stores are allowed (never, today).
    :ivar func: for ``btf`` layouts, the function (or tracepoint) whose frame
        this is; used in messages.
    """

    __slots__ = ("name", "size", "kind", "lo", "hi", "fields", "writable", "func")

    name: str
    size: int
    kind: Literal["window", "fields", "btf"]
    lo: int
    hi: int
    fields: tuple[CtxField, ...]
    writable: bool
    func: str

    def __init__(
        self,
        name: str,
        size: int,
        kind: Literal["window", "fields", "btf"] = "window",
        lo: int = 0,
        hi: int = 0,
        fields: tuple[CtxField, ...] = (),
        writable: bool = False,
        func: str = "",
    ) -> None:
        _set(self, "name", name)
        _set(self, "size", size)
        _set(self, "kind", kind)
        _set(self, "lo", lo)
        _set(self, "hi", hi)
        _set(self, "fields", fields)
        _set(self, "writable", writable)
        _set(self, "func", func)

    def field_at(self, offset: int) -> CtxField | None:
        """The field that contains byte ``offset``, if any."""
        for f in self.fields:
            if f.offset <= offset < f.end:
                return f
        return None

    def check(self, offset: int, size: int, write: bool) -> CtxAccess:
        """Decide whether an access of ``size`` bytes at ``offset`` is allowed.

        Never raises: a refused access returns ``CtxAccess(ok=False, reason=…)``.
        """
        if size not in (1, 2, 4, 8):
            return CtxAccess(False, f"invalid bpf_context access off={offset} size={size}")
        bad = CtxAccess(False, f"invalid bpf_context access off={offset} size={size}")
        if self.kind == "window":
            if offset < self.lo or offset >= self.hi or offset + size > self.hi:
                return bad
            if write and not self.writable:
                return bad
            if offset % size:
                return bad
            return CtxAccess(True, field=self.field_at(offset))
        if self.kind == "btf":
            func = self.func or "?"
            if offset < 0 or offset % 8:
                return CtxAccess(False, f"func '{func}' offset {offset} is not multiple of 8")
            f = self.field_at(offset)
            if f is None:
                return CtxAccess(False, f"func '{func}' doesn't have {offset // 8 + 1}-th argument")
            if write:
                return CtxAccess(False, f"only read is supported: func '{func}' offset {offset}")
            if f.load != "scalar" and size != 8:
                return bad
            return CtxAccess(True, load=f.load if size == 8 else "scalar", field=f)
        # kind == "fields"
        f = self.field_at(offset)
        if f is None or offset + size > f.end:
            return bad
        if write and not f.writable:
            return bad
        if size == f.size and offset == f.offset:
            return CtxAccess(True, load=f.load, field=f)
        if f.sizes and size in f.sizes and offset == f.offset:
            return CtxAccess(True, field=f)
        if not f.narrow or f.load != "scalar" or write or offset % size:
            return bad
        return CtxAccess(True, field=f)
