"""Which C type a ring-buffer or perf-buffer record is, so it can be decoded.

A record carries only its bytes. :class:`EventTypes` finds the struct it
is, in this order:

1. the type the user named (``--event-type NAME``: a struct, union or
   typedef of the object's BTF, else of its DWARF);
2. a struct of the record's size in the object's BTF;
3. a struct of that size in the object's DWARF
   (:func:`bpfmux.obj.dwarf.dwarf_structs`) — where the event type usually
   is, since a record reached only through a pointer to reserved ring-buffer
   memory never makes it into BTF.

A perf-buffer record is the sample's raw data, which the kernel pads: a
``size``-byte output arrives as ``round_up(size + 4, 8) - 4`` bytes, so a
struct of ``size`` in ``(len - 8, len]`` fits. Several candidates are
ranked: kernel types (the roots of CO-RE relocations, ``trace_event_raw_*``,
structs declared in ``vmlinux.h``) last, names like ``event`` first, an exact
size before a padded one before a longer struct with a trailing array
(below). A tie leaves the record undecoded, and the message says which types
could be meant.

A tool that sends only the used part of a trailing array (execsnoop's
``args``: ``bpf_perf_event_output(…, e, offsetof(args) + args_size)``)
makes records shorter than their struct: when no struct fits a record's
size, a struct whose last member is an array and whose other members fit in
the record is taken, and the record is decoded as if zero-padded to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ParseError

if TYPE_CHECKING:
    from ..btf.codec import Codec
    from ..obj.spec import ObjectSpec

__all__ = ["EventTypes", "Match"]


@dataclass(frozen=True, slots=True)
class Match:
    """The type found for a record size.

    :ivar codec: decodes records (``None``: no type found).
    :ivar name: the type's name; :ivar source: ``"btf"``, ``"dwarf"`` or ``"option"``.
    :ivar why: when nothing was found, why (the candidates, or none).
    """

    codec: Codec | None
    name: str = ""
    source: str = ""
    why: str = ""


@dataclass
class _Candidate:
    name: str
    size: int
    btf: Any
    type_id: int
    kernel: bool
    entry: Any = None  # a DWARF index entry, converted to BTF when chosen

    def typed(self, data: bytes | None) -> tuple[Any, int]:
        """``(btf, type id)``, converting a DWARF entry first."""
        if self.btf is None and self.entry is not None and data is not None:
            from ..obj.dwarf import dwarf_type

            self.btf, self.type_id = dwarf_type(data, self.entry)
        return self.btf, self.type_id


def _fits(size: int, length: int, perf: bool) -> bool:
    return size == length if not perf else length - 8 < size <= length


def _rank(c: _Candidate, length: int) -> tuple[int, int, int]:
    n = c.name.lower()
    named = 0 if n in ("event", "event_t", "data_t", "data") else 1 if "event" in n or n.endswith("_t") else 2
    return (int(c.kernel), named, int(c.size != length))


@dataclass
class EventTypes:
    """Finds and caches the type of records by their size (module doc).

    :param spec: the object (its BTF and CO-RE relocations).
    :param data: the object file's bytes (for its DWARF; ``None``: BTF only).
    :param wanted: a type name the user gave, or ``None``.
    :raises NotFoundError: ``wanted`` is neither in the object's BTF nor in its DWARF.
    """

    spec: ObjectSpec
    data: bytes | None = None
    wanted: str | None = None
    _cache: dict[tuple[int, bool], Match] = field(default_factory=dict)
    _dwarf: list[Any] | None = None
    _forced: Match | None = None
    _kernel_names: set[str] | None = None

    def __post_init__(self) -> None:
        if self.wanted:
            self._forced = self._named(self.wanted)

    def _named(self, name: str) -> Match:
        from ..btf.codec import codec

        btf = self.spec.btf
        if btf is not None:
            for kind in ("struct", "union", "typedef"):
                try:
                    t = btf.find(name, kind)
                except KeyError:
                    continue
                return Match(codec(btf, t), name, "option")
        try:
            cands = self._dwarf_candidates(None)
        except ParseError:
            cands = []
        for c in cands:
            if c.name == name:
                dbtf, tid = c.typed(self.data)
                return Match(codec(dbtf, dbtf[tid]), name, "option")
        raise NotFoundError("struct", name, "neither the object's BTF nor its DWARF has a struct, union or "
                            "typedef of that name")

    def match(self, length: int, perf: bool = False) -> Match:
        """The type of a ``length``-byte record (``perf``: a perf-buffer sample)."""
        if self._forced is not None:
            return self._forced
        key = (length, perf)
        if key not in self._cache:
            self._cache[key] = self._find(length, perf)
        return self._cache[key]

    def decode(self, record: bytes, perf: bool = False) -> tuple[Any, Match]:
        """``(value, match)``: the decoded record (a shorter record zero-padded
        to a struct with a trailing array), or its bytes when no type fits."""
        m = self.match(len(record), perf)
        if m.codec is not None:
            return m.codec.decode(bytes(record).ljust(m.codec.size, b"\0")), m
        return bytes(record), m

    def _find(self, length: int, perf: bool) -> Match:
        from ..btf.codec import codec

        tried: list[str] = []
        sources: list[tuple[int, Callable[[], list[_Candidate]]]] = [
            (0, lambda: self._btf_candidates(length, perf)),
            (0, lambda: [c for c in self._dwarf_candidates(self._sizes(length, perf)) if _fits(c.size, length, perf)]),
            (1, lambda: self._tail_candidates(length, "btf")),
            (1, lambda: self._tail_candidates(length, "dwarf")),
        ]
        pool: dict[str, tuple[tuple[int, int, int], _Candidate]] = {}
        for tail, find in sources:
            try:
                found = [c for c in find() if not c.kernel]
            except ParseError as err:
                tried.append(str(err))
                continue
            for c in found:
                named, padded = _rank(c, length)[1:]
                key = (named, 2 if tail else padded, 0)
                if c.name not in pool or key < pool[c.name][0]:  # the BTF copy of a type beats its DWARF one
                    pool[c.name] = (key, c)
        if pool:
            ranked = sorted(pool.values(), key=lambda kc: kc[0])
            best = [c for k, c in ranked if k == ranked[0][0]]
            if len(best) == 1:
                btf, tid = best[0].typed(self.data)
                return Match(codec(btf, btf[tid]), best[0].name, "btf" if best[0].entry is None else "dwarf")
            names = ", ".join(sorted({c.name for c in best}))
            return Match(None, why=f"{length}-byte records could be any of: {names}; name one with --event-type")
        why = f"no struct of {length} bytes in the object's BTF or DWARF"
        return Match(None, why=why + (f" ({'; '.join(sorted(set(tried)))})" if tried else "")
                     + "; name one with --event-type")

    def _tail_candidates(self, length: int, source: str) -> list[_Candidate]:
        """Structs longer than ``length`` whose last member is an array and whose other members fit."""
        from ..btf.layout import resolve
        from ..btf.types import Array, Composite

        if source == "btf":
            btf = self.spec.btf
            if btf is None:
                return []
            kernel_names = self._core_roots()
            pool = [_Candidate(t.name, t.size, btf, t.id,
                               t.name in kernel_names or t.name.startswith(("trace_event_raw_", "bpf_")))
                    for t in btf.own_types() if isinstance(t, Composite) and t.name]
        else:
            pool = self._dwarf_candidates(None)
        out = []
        for c in pool:
            if c.size <= length or c.kernel:
                continue
            if source == "dwarf" and c.size > 1 << 16:
                continue  # converting the largest kernel-sized structs costs more than it can find
            btf, tid = c.typed(self.data)
            t = btf[tid]
            if not isinstance(t, Composite) or not t.members or t.kind.name != "STRUCT":
                continue
            last = t.members[-1]
            if last.bitfield_size or not isinstance(resolve(btf, btf[last.type_id]), Array):
                continue
            if 0 < last.bit_offset // 8 < length:  # a fixed part, and the record reaches into the array
                out.append(c)
        return out

    @staticmethod
    def _sizes(length: int, perf: bool) -> list[int]:
        return list(range(length - 7, length + 1)) if perf else [length]

    def _core_roots(self) -> set[str]:
        """Names of the kernel's types in the object's BTF: the roots of its
        CO-RE relocations and every struct or union they reach."""
        if self._kernel_names is not None:
            return self._kernel_names
        btf = self.spec.btf
        out: set[str] = set()
        self._kernel_names = out
        if btf is None:
            return out
        from ..btf.types import Composite

        todo = [r.type_id for ps in self.spec.programs.values() for r in ps.core_relos]
        seen: set[int] = set()
        while todo:
            tid = todo.pop()
            if tid in seen or tid == 0:
                continue
            seen.add(tid)
            try:
                t = btf[tid]
            except (IndexError, KeyError, ParseError):
                continue
            if isinstance(t, Composite):
                if t.name:
                    out.add(t.name)
                todo.extend(m.type_id for m in t.members)
            elif hasattr(t, "type_id"):
                todo.append(t.type_id)
        return out

    def _btf_candidates(self, length: int, perf: bool) -> list[_Candidate]:
        btf = self.spec.btf
        if btf is None:
            return []
        from ..btf.types import Composite

        kernel_names = self._core_roots()
        out = []
        for t in btf.own_types():
            if isinstance(t, Composite) and t.name and _fits(t.size, length, perf):
                kernel = t.name in kernel_names or t.name.startswith(("trace_event_raw_", "bpf_"))
                out.append(_Candidate(t.name, t.size, btf, t.id, kernel))
        return out

    def _dwarf_candidates(self, sizes: list[int] | None) -> list[_Candidate]:
        if self.data is None:
            raise ParseError("the object's DWARF was not read")
        if self._dwarf is None:
            from ..obj.dwarf import dwarf_index

            self._dwarf = dwarf_index(self.data)
        out = []
        seen: set[tuple[str, int]] = set()
        for s in self._dwarf:
            if (sizes is not None and s.size not in sizes) or (s.name, s.size) in seen:
                continue
            seen.add((s.name, s.size))
            out.append(_Candidate(s.name, s.size, None, 0,
                                  s.decl_file.endswith("vmlinux.h") or s.name.startswith("trace_event_raw_"), s))
        return out

    def prepare(self) -> None:
        """Read the DWARF index now (seconds for a large object, the first
        time), so that the first record is not held up by it."""
        if self.data is not None and self._dwarf is None:
            try:
                self._dwarf_candidates([])
            except ParseError:
                self._dwarf = []
