"""An object's global variables as its user space sets them before load.

A tool's user space writes ``skel->rodata->targ_pid = pid`` (``.rodata``,
``const volatile``), ``skel->bss->time = …`` or ``skel->data->x = …`` between
opening and loading the object. :func:`find_global` finds such a variable
in the object's global-data sections through their BTF ``DATASEC``;
:func:`parse_value` turns text (a command-line ``NAME=VALUE``) into a value
of the variable's BTF type; :func:`store` writes a value into the section's
initial contents.

=====================  =========================================================
BTF type               text accepted
=====================  =========================================================
integer, pointer       ``1234``, ``-1``, ``0x10``, ``0o17``, ``0b101``
``_Bool``              ``true``/``false``/``yes``/``no``/``1``/``0``
enum                   an enumerator name, or an integer
char array             the text itself (at most the array's size)
other arrays           comma-separated elements (``80,443``), fewer than the
                       array's length leave the rest 0
float                  a decimal number
=====================  =========================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ParseError
from ..uapi import BtfIntEncoding

if TYPE_CHECKING:
    from ..btf import Btf
    from .spec import MapSpec, ObjectSpec

__all__ = ["GlobalVar", "find_global", "global_variables", "parse_value", "store"]

#: sections whose variables user space may set before load
WRITABLE_SECTIONS = (".rodata", ".data", ".bss")


@dataclass(frozen=True, slots=True)
class GlobalVar:
    """One global variable of an object.

    :ivar name: its C name (``static`` locals read ``func.____fmt``).
    :ivar section: the map (section) holding it: ``.rodata``, ``.data``, ``.bss``, ``.rodata.str1.1``, …
    :ivar offset: / :ivar size: where it is in the section's value.
    :ivar type_id: its type in the object's BTF.
    """

    name: str
    section: str
    offset: int
    size: int
    type_id: int


def global_variables(spec: ObjectSpec) -> Iterator[GlobalVar]:
    """Every variable of the object's ``.rodata*``, ``.data*`` and ``.bss*`` sections, in section order."""
    from ..btf.types import Datasec, Var

    btf = spec.btf
    if btf is None:
        return
    for ms in spec.maps.values():
        if not ms.section.startswith(WRITABLE_SECTIONS):
            continue
        try:
            ds = btf.find(ms.section, "datasec")
        except KeyError:
            continue
        if not isinstance(ds, Datasec):
            continue
        for vs in ds.vars:
            var = btf[vs.type_id]
            if isinstance(var, Var):
                yield GlobalVar(var.name, ms.name, vs.offset, vs.size, var.type_id)


def find_global(spec: ObjectSpec, name: str, sections: tuple[str, ...] = WRITABLE_SECTIONS) -> GlobalVar:
    """The global variable ``name`` of one of ``sections``.

    :raises NotFoundError: no such variable (the message lists the object's).
    """
    found = [v for v in global_variables(spec) if v.name == name and v.section.startswith(sections)]
    if not found:
        have = [v.name for v in global_variables(spec) if v.section.startswith(sections)]
        raise NotFoundError("global variable", name, f"the object's globals are: {', '.join(have) or 'none'}"
                            + ("" if spec.btf is not None else " (the object has no BTF)"))
    return found[0]


def parse_value(btf: Btf, type_id: int, text: str) -> Any:
    """The Python value of ``text`` for BTF type ``type_id`` (module table),
    ready for :func:`bpfmux.btf.codec.codec`'s ``encode``.

    :raises ParseError: the text does not read as a value of that type.
    """
    from ..btf.layout import resolve
    from ..btf.types import Array, Composite, Enum, Float, Int

    t = resolve(btf, btf[type_id])
    if isinstance(t, Int):
        if t.is_bool:
            low = text.strip().lower()
            if low in ("true", "yes", "y", "on", "1"):
                return True
            if low in ("false", "no", "n", "off", "0"):
                return False
            raise ParseError(f"{text!r} is not a boolean; use true or false")
        return _int(text, t.size, t.signed)
    if isinstance(t, Enum):
        try:
            return t.value_of(text.strip())
        except (KeyError, ValueError, ParseError):
            return _int(text, t.size, t.signed)
    if t.kind.name == "PTR":
        return _int(text, 8, False)
    if isinstance(t, Float):
        try:
            return float(text)
        except ValueError:
            raise ParseError(f"{text!r} is not a number") from None
    if isinstance(t, Array):
        elem = resolve(btf, btf[t.type_id])
        if isinstance(elem, Int) and elem.size == 1 and (elem.encoding & BtfIntEncoding.CHAR or "char" in elem.name):
            raw = text.encode()
            if len(raw) > t.nelems:
                raise ParseError(f"{text!r} is {len(raw)} bytes; the variable is char[{t.nelems}]")
            return raw
        parts = [p for p in text.split(",") if p.strip()]
        if len(parts) > t.nelems:
            raise ParseError(f"{len(parts)} values do not fit an array of {t.nelems}")
        return [parse_value(btf, t.type_id, p) for p in parts]
    if isinstance(t, Composite):
        raise ParseError(f"a {t.kind.name.lower()} cannot be given as text; set it from Python with a dict")
    raise ParseError(f"values of kind {t.kind.name.lower()} cannot be set")


def _int(text: str, size: int, signed: bool) -> int:
    try:
        v = int(text.strip(), 0)
    except ValueError:
        raise ParseError(f"{text!r} is not an integer") from None
    bits = 8 * size
    low, high = (-(1 << (bits - 1)), (1 << bits) - 1) if signed or v < 0 else (0, (1 << bits) - 1)
    if not low <= v <= high:
        raise ParseError(f"{v} does not fit a {size}-byte {'signed' if signed else 'unsigned'} integer")
    if not signed and v < 0:  # -1 for an unsigned variable: all ones, as C's conversion
        v &= (1 << bits) - 1
    return v


def store(spec: ObjectSpec, var: GlobalVar, value: Any) -> None:
    """Write ``value`` (a Python value of the variable's type, or its raw
    bytes) into the initial contents of the variable's section.

    :raises ParseError: the value does not fit the variable.
    """
    from ..btf.codec import codec

    assert spec.btf is not None
    ms: MapSpec = spec.maps[var.section]
    if isinstance(value, bytes | bytearray) and not _is_char_array(spec.btf, var.type_id):
        data = bytes(value)
        if len(data) != var.size:
            raise ParseError(f"{len(data)} bytes given for {var.name!r}, which is {var.size} bytes")
    else:
        c = codec(spec.btf, var.type_id)
        v = value.encode() if isinstance(value, str) else value
        if isinstance(v, bytes | bytearray):
            v = bytes(v).ljust(c.size, b"\0")
        data = c.encode(v)[: var.size]
    contents = bytearray(ms.value or bytes(ms.value_size))
    contents[var.offset : var.offset + var.size] = data
    ms.value = bytes(contents)


def _is_char_array(btf: Btf, type_id: int) -> bool:
    from ..btf.layout import resolve
    from ..btf.types import Array, Int

    t = resolve(btf, btf[type_id])
    if not isinstance(t, Array):
        return False
    e = resolve(btf, btf[t.type_id])
    return isinstance(e, Int) and e.size == 1
