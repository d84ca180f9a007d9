"""Function prototypes from BTF: argument names, types and sizes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFoundError
from ..record import Frozen
from ..record import set_field as _set
from ..uapi import BtfKind, FuncLinkage
from .layout import TypeKindError, resolve, sizeof
from .types import Composite, Enum, Func, FuncProto, Int, Type

if TYPE_CHECKING:
    from .model import Btf

__all__ = ["ArgInfo", "FuncSignature", "signature", "prototype"]


class ArgInfo(Frozen):
    """One argument of a function.

    :ivar name: argument name (``""`` when BTF has none).
    :ivar type: declared type (typedefs kept).
    :ivar size: byte size (0 when the type has none, e.g. ``void``).
    :ivar by_value_struct: a struct/union passed by value.
    :ivar signed: an integer/enum argument that is signed.
    """

    __slots__ = ("name", "type", "size", "by_value_struct", "signed")

    name: str
    type: Type
    size: int
    by_value_struct: bool
    signed: bool

    def __init__(self, name: str, type: Type, size: int, by_value_struct: bool, signed: bool) -> None:
        _set(self, "name", name)
        _set(self, "type", type)
        _set(self, "size", size)
        _set(self, "by_value_struct", by_value_struct)
        _set(self, "signed", signed)

    @property
    def nregs(self) -> int:
        """64-bit registers the argument takes (x86-64/BPF calling convention: 1, or 2 for 9–16-byte structs)."""
        return max(1, (self.size + 7) // 8)


class FuncSignature(Frozen):
    """A function's prototype as BTF records it.

    :ivar name: function name.
    :ivar func_id: id of the ``FUNC`` type (0 for a bare prototype).
    :ivar proto_id: id of the ``FUNC_PROTO`` type.
    :ivar linkage: static/global/extern (the raw number when BTF holds another value).
    :ivar args: the arguments (the ``...`` marker excluded).
    :ivar return_type: the return type (``Void`` for void).
    :ivar return_size: byte size of the return value (0 for void).
    :ivar variadic: the prototype ends with ``...``.
    """

    __slots__ = ("name", "func_id", "proto_id", "linkage", "args", "return_type", "return_size", "variadic")

    name: str
    func_id: int
    proto_id: int
    linkage: FuncLinkage | int
    args: tuple[ArgInfo, ...]
    return_type: Type
    return_size: int
    variadic: bool

    def __init__(
        self,
        name: str,
        func_id: int,
        proto_id: int,
        linkage: FuncLinkage | int,
        args: tuple[ArgInfo, ...],
        return_type: Type,
        return_size: int,
        variadic: bool,
    ) -> None:
        _set(self, "name", name)
        _set(self, "func_id", func_id)
        _set(self, "proto_id", proto_id)
        _set(self, "linkage", linkage)
        _set(self, "args", args)
        _set(self, "return_type", return_type)
        _set(self, "return_size", return_size)
        _set(self, "variadic", variadic)

    @property
    def nargs(self) -> int:
        """Number of arguments (``...`` not counted)."""
        return len(self.args)

    @property
    def arg_names(self) -> list[str]:
        """Argument names, in order."""
        return [a.name for a in self.args]

    @property
    def arg_sizes(self) -> list[int]:
        """Argument byte sizes, in order."""
        return [a.size for a in self.args]

    @property
    def has_struct_args(self) -> bool:
        """True when some argument is a struct/union passed by value."""
        return any(a.by_value_struct for a in self.args)

    @property
    def nregs(self) -> int:
        """Argument registers used (a 9–16-byte struct takes two)."""
        return sum(a.nregs for a in self.args)

    @property
    def returns_struct(self) -> bool:
        """True when the return value is a struct/union by value."""
        rt = self.return_type
        if rt.id == 0:
            return False
        assert rt.btf is not None
        return isinstance(resolve(rt.btf, rt), Composite)


def _size(btf: Btf, t: Type) -> int:
    try:
        return sizeof(btf, t)
    except TypeKindError:
        return 0


def prototype(btf: Btf, proto: FuncProto, name: str = "", func_id: int = 0, linkage: int = 0) -> FuncSignature:
    """Describe a ``FUNC_PROTO`` (``name`` and ``func_id`` label it).

    :raises ParseError: a reference loop in the argument types.
    """
    args = []
    params = proto.params[:-1] if proto.variadic else proto.params
    for p in params:
        t = btf[p.type_id]
        r = resolve(btf, t)
        signed = (isinstance(r, Int) and r.signed) or (isinstance(r, Enum) and r.signed)
        args.append(ArgInfo(p.name, t, _size(btf, t), isinstance(r, Composite), bool(signed)))
    rt = btf[proto.return_type_id]
    return FuncSignature(
        name,
        func_id,
        proto.id,
        FuncLinkage(linkage) if 0 <= linkage <= 2 else linkage,
        tuple(args),
        rt,
        _size(btf, rt) if proto.return_type_id else 0,
        proto.variadic,
    )


def signature(btf: Btf, name: str) -> FuncSignature:
    """The prototype of the function called ``name``.

    :raises NotFoundError: no ``FUNC`` of that name.
    :raises ParseError: the function's prototype is malformed.
    """
    ids = btf.find_ids(name, BtfKind.FUNC)
    if not ids:
        raise NotFoundError("BTF function", name, "it may be inlined or not traceable; list functions with `bpfmux btf dump | grep FUNC`")
    f = btf[ids[0]]
    assert isinstance(f, Func)
    proto = btf[f.type_id]
    if not isinstance(proto, FuncProto):
        from ..errors import ParseError

        raise ParseError(f"function {name} [{f.id}] points at {proto.kind.name} [{proto.id}], not a FUNC_PROTO", None, btf.source)
    return prototype(btf, proto, name, f.id, int(f.linkage))
