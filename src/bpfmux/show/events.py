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
size before a padded one. A tie leaves the record undecoded, and the
message says which types could be meant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ParseError

if TYPE_CHECKING:
    from ..btf import Btf
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
    _dwarf: tuple[Btf, list[Any]] | None = None
    _forced: Match | None = None

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
        for c in self._dwarf_candidates(None):
            if c.name == name:
                return Match(codec(c.btf, c.btf[c.type_id]), name, "option")
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
        """``(value, match)``: the decoded record, or its bytes when no type fits."""
        m = self.match(len(record), perf)
        if m.codec is not None and m.codec.size <= len(record):
            return m.codec.decode(record), m
        return bytes(record), m

    def _find(self, length: int, perf: bool) -> Match:
        from ..btf.codec import codec

        tried: list[str] = []
        for source, cands in (("btf", self._btf_candidates(length, perf)), ("dwarf", None)):
            if cands is None:
                try:
                    cands = [c for c in self._dwarf_candidates(self._sizes(length, perf)) if _fits(c.size, length, perf)]
                except ParseError as err:
                    tried.append(str(err))
                    continue
            if not cands:
                continue
            cands.sort(key=lambda c: _rank(c, length))
            best = [c for c in cands if _rank(c, length) == _rank(cands[0], length)]
            if len(best) == 1:
                c = best[0]
                return Match(codec(c.btf, c.btf[c.type_id]), c.name, source)
            names = ", ".join(sorted({c.name for c in best}))
            return Match(None, why=f"{length}-byte records could be any of: {names}; name one with --event-type")
        why = f"no struct of {length} bytes in the object's BTF or DWARF"
        return Match(None, why=why + (f" ({'; '.join(tried)})" if tried else "") + "; name one with --event-type")

    @staticmethod
    def _sizes(length: int, perf: bool) -> list[int]:
        return list(range(length - 7, length + 1)) if perf else [length]

    def _core_roots(self) -> set[str]:
        btf = self.spec.btf
        out: set[str] = set()
        if btf is None:
            return out
        from ..btf.layout import resolve

        for ps in self.spec.programs.values():
            for r in ps.core_relos:
                try:
                    t = resolve(btf, btf[r.type_id])
                except (ParseError, IndexError, KeyError):
                    continue
                if t.name:
                    out.add(t.name)
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
            from ..obj.dwarf import dwarf_structs

            self._dwarf = dwarf_structs(self.data)
        btf, found = self._dwarf
        return [_Candidate(s.name, s.size, btf, s.type_id,
                           s.decl_file.endswith("vmlinux.h") or s.name.startswith("trace_event_raw_"))
                for s in found if sizes is None or s.size in sizes]
