"""The emulated kernel's function table.

A :class:`KernelFunction` is what a trampoline can be attached to: a name, a
BTF id, an address, its argument and return types (sizes and signedness are
all a trampoline needs) and a Python body. :class:`FunctionTable` holds them
and looks them up by name, BTF id, address or glob.
"""

from __future__ import annotations

import fnmatch
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ....errors import NotFoundError, ParseError
from ....uapi import BtfKind
from .frame import MAX_ARGS, MAX_ARGS_SINGLE, U64

if TYPE_CHECKING:
    from ....btf import Btf

_QUALIFIERS = (BtfKind.TYPEDEF, BtfKind.CONST, BtfKind.VOLATILE, BtfKind.RESTRICT, BtfKind.TYPE_TAG)

#: Base of deterministically assigned function addresses (x86-64 kernel text).
TEXT_BASE = 0xFFFFFFFF81000000
#: Distance between deterministically assigned addresses.
TEXT_STRIDE = 0x40


class Memory(Protocol):
    """Kernel memory as function bodies see it (the emulator's address space)."""

    def read(self, addr: int, size: int) -> bytes: ...

    def write(self, addr: int, data: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter (or the return value) of a kernel function."""

    name: str
    size: int
    signed: bool = False
    pointer: bool = False
    by_value_struct: bool = False
    #: for pointers to structs/unions: the pointed-to type's name
    target: str | None = None

    def to_u64(self, value: int) -> int:
        """The register value a caller passes for ``value``."""
        return value & U64

    def from_u64(self, value: int) -> int:
        """Interpret a 64-bit register as this type (truncate, sign-extend)."""
        if self.size >= 8 or self.size == 0:
            v = value & U64
            return v - (1 << 64) if self.signed and v >> 63 else v
        bits = self.size * 8
        v = value & ((1 << bits) - 1)
        return v - (1 << bits) if self.signed and v >> (bits - 1) else v


VOID = Param("", 0)


def _whole(p: Param) -> bool:
    """A parameter (or return type) whose value is the whole register, unsigned."""
    return (p.size >= 8 or p.size == 0) and not p.signed


def _default_body(*args: int) -> int:
    return 0


@dataclass(eq=False, slots=True)
class KernelFunction:
    """A function of the emulated kernel.

    :ivar name: symbol name.
    :ivar btf_id: id of its ``FUNC`` in the table's BTF (0 when none).
    :ivar addr: its address (``bpf_get_func_ip`` returns it).
    :ivar params: its parameters.
    :ivar ret: its return type (``VOID`` when it returns nothing).
    :ivar body: what the function does: called with the arguments as Python
        ints (typed as the parameters say), returns the return value.
    """

    name: str
    btf_id: int
    addr: int
    params: tuple[Param, ...]
    ret: Param = VOID
    body: Callable[..., int] = _default_body
    #: every parameter is a whole unsigned register: the body gets the register values as they are
    raw: bool = field(init=False, default=False)
    #: the return type is a whole unsigned register (or void): the return register is the value as it is
    raw_ret: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.raw = all(_whole(p) for p in self.params)
        self.raw_ret = _whole(self.ret) and self.ret.size != 0

    @property
    def nargs(self) -> int:
        """Number of arguments."""
        return len(self.params)

    def untraceable_reason(self, multi: bool = True) -> str | None:
        """Why a trampoline (a multi link's, when ``multi``) cannot serve this function, or ``None``."""
        limit = MAX_ARGS if multi else MAX_ARGS_SINGLE
        if self.nargs > limit:
            kind = "multi-function trampolines" if multi else "trampolines"
            return f"{self.name} has {self.nargs} arguments; {kind} pass at most {limit}"
        for p in self.params:
            if p.by_value_struct:
                return f"{self.name} takes struct argument {p.name!r} by value"
        return None

    def call_body(self, args: Sequence[int]) -> int:
        """Run the body on register values; returns the return register (u64)."""
        if self.raw and len(args) == len(self.params):
            return (self.body(*args) or 0) & U64
        typed = [p.from_u64(a) for p, a in zip(self.params, args, strict=True)]
        return (self.body(*typed) or 0) & U64


@dataclass
class FunctionTable:
    """All functions of one emulated kernel.

    A table made by :meth:`from_btf` knows every ``FUNC`` of the BTF by name
    at once and builds a :class:`KernelFunction` the first time one is used.
    """

    _by_name: dict[str, KernelFunction] = field(default_factory=dict)
    _by_id: dict[int, KernelFunction] = field(default_factory=dict)
    _by_addr: dict[int, KernelFunction] = field(default_factory=dict)
    #: name → FUNC id of functions not built yet (from BTF)
    _lazy: dict[str, int] = field(default_factory=dict)
    _lazy_ids: dict[int, str] = field(default_factory=dict)
    _btf: Btf | None = None
    _addresses: Callable[[str, int], int] | None = None
    #: name → index in BTF order of the functions from_btf found (what _addresses numbers them by)
    _order: dict[str, int] = field(default_factory=dict)
    _type_cache: dict[int, Param] = field(default_factory=dict)
    _proto_cache: dict[int, tuple[tuple[Param, ...], Param]] = field(default_factory=dict)

    @classmethod
    def from_btf(cls, btf: Btf, addresses: Callable[[str, int], int] | None = None) -> FunctionTable:
        """A table of every function (``FUNC``) of ``btf``.

        ``addresses(name, index)`` gives each function's address; by default
        addresses are assigned deterministically in BTF order from
        :data:`TEXT_BASE`. Functions with one name appear once (the first).
        """
        t = cls()
        t._btf = btf
        kind_of = btf.kind_of
        for i in range(1, len(btf)):
            if kind_of(i) == BtfKind.FUNC:
                name = btf[i].name
                if name not in t._lazy:
                    t._lazy[name] = i
                    t._lazy_ids[i] = name
        order = {n: k for k, n in enumerate(t._lazy)}
        t._addresses = addresses or (lambda name, index: TEXT_BASE + TEXT_STRIDE * index)
        t._order = order
        return t

    def _param(self, type_id: int, name: str) -> Param:
        hit = self._type_cache.get(type_id)
        if hit is None:
            from ....btf.types import Composite, Enum, Int, Ptr, _Ref

            btf = self._btf
            assert btf is not None  # only a table from_btf has types to describe
            t = btf[type_id] if type_id else None
            if t is None or t.kind == BtfKind.UNKN:
                hit = VOID
            elif isinstance(t, _Ref) and t.kind in _QUALIFIERS:
                hit = self._param(t.type_id, "")
            elif isinstance(t, Ptr):
                hit = Param("", 8, pointer=True, target=self._struct_name(t.type_id))
            elif isinstance(t, Int):
                hit = Param("", t.size, bool(t.encoding & 1))
            elif isinstance(t, Enum):  # ENUM, ENUM64
                hit = Param("", t.size, bool(t.signed))
            elif isinstance(t, Composite):  # STRUCT, UNION
                hit = Param("", t.size, by_value_struct=True)
            else:
                hit = Param("", 8)
            self._type_cache[type_id] = hit
        return Param(name, hit.size, hit.signed, hit.pointer, hit.by_value_struct, hit.target) if name else hit

    def _struct_name(self, type_id: int) -> str | None:
        from ....btf.types import Composite, _Ref

        btf = self._btf
        assert btf is not None  # only a table from_btf has types to describe
        while type_id:
            t = btf[type_id]
            if isinstance(t, _Ref) and t.kind in _QUALIFIERS:
                type_id = t.type_id
                continue
            return t.name or None if isinstance(t, Composite) else None
        return None

    def _build(self, name: str) -> KernelFunction | None:
        fid = self._lazy.pop(name, None)
        if fid is None:
            return None
        del self._lazy_ids[fid]
        from ....btf.types import Func, FuncProto

        btf, addresses = self._btf, self._addresses
        assert btf is not None and addresses is not None  # from_btf set them with the lazy names
        fn = btf[fid]
        assert isinstance(fn, Func)  # from_btf took the FUNC ids
        proto_id = fn.type_id
        hit = self._proto_cache.get(proto_id)
        if hit is None:
            proto = btf[proto_id]
            assert isinstance(proto, FuncProto)  # a FUNC's type is its prototype
            params = tuple(self._param(p.type_id, p.name or f"arg{i}") for i, p in enumerate(proto.params))
            ret = self._param(proto.return_type_id, "ret") if proto.return_type_id else VOID
            hit = self._proto_cache[proto_id] = (params, ret)
        params, ret = hit
        f = KernelFunction(name, fid, addresses(name, self._order[name]), params, ret)
        self._by_name[name] = f
        self._by_id[fid] = f
        self._by_addr[f.addr] = f
        return f

    def _get(self, name: str) -> KernelFunction | None:
        f = self._by_name.get(name)
        if f is None and self._lazy:
            f = self._build(name)
        return f

    def add(self, func: KernelFunction) -> KernelFunction:
        """Add a function; its name, id and address must be new.

        :raises ParseError: a function with that name, BTF id or address
            exists (a ``ValueError``).
        """
        if func.name in self._by_name or func.name in self._lazy:
            raise ParseError(f"function {func.name!r} already exists; pick another name (or set the existing "
                             "one's body)")
        if func.btf_id and func.btf_id in self._by_id:
            raise ParseError(f"BTF id {func.btf_id} already used by {self._by_id[func.btf_id].name}; "
                             "give a free id (or 0 for none)")
        if func.addr in self._by_addr:
            raise ParseError(f"address {func.addr:#x} already used by {self._by_addr[func.addr].name}; "
                             "give a free address (or none to get one assigned)")
        self._by_name[func.name] = func
        if func.btf_id:
            self._by_id[func.btf_id] = func
        self._by_addr[func.addr] = func
        return func

    def define(
        self,
        name: str,
        params: Iterable[Param | int] = (),
        ret: Param | int = 8,
        body: Callable[..., int] | None = None,
        *,
        btf_id: int = 0,
        addr: int | None = None,
    ) -> KernelFunction:
        """Define a function; ints in ``params``/``ret`` are unsigned sizes.

        Addresses not given are assigned deterministically after the highest
        address in use.

        :raises ParseError: a function with that name, BTF id or address
            exists (a ``ValueError``).
        """
        ps = tuple(p if isinstance(p, Param) else Param(f"arg{i}", p) for i, p in enumerate(params))
        r = ret if isinstance(ret, Param) else (Param("ret", ret) if ret else VOID)
        if addr is None:
            addr = self._next_addr()
        return self.add(KernelFunction(name, btf_id, addr, ps, r, body or _default_body))

    def _next_addr(self) -> int:
        top = max(self._by_addr, default=TEXT_BASE - TEXT_STRIDE)
        if self._lazy and self._addresses is not None:  # from_btf sets both
            top = max(top, self._addresses(next(reversed(self._lazy)), len(self._order)))
        return top + TEXT_STRIDE

    def __len__(self) -> int:
        return len(self._by_name) + len(self._lazy)

    def __iter__(self) -> Iterator[KernelFunction]:
        for name in list(self._lazy):
            self._build(name)
        return iter(list(self._by_name.values()))

    def names(self) -> list[str]:
        """Every function name (cheap: builds nothing)."""
        return [*self._by_name, *self._lazy]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name or name in self._lazy

    def __getitem__(self, name: str) -> KernelFunction:
        """The function called ``name``.

        :raises NotFoundError: no such function.
        """
        f = self._get(name)
        if f is None:
            raise NotFoundError("kernel function", name)
        return f

    def by_id(self, btf_id: int) -> KernelFunction:
        """Look up by BTF id.

        :raises NotFoundError: no function has that id.
        """
        f = self._by_id.get(btf_id)
        if f is None:
            name = self._lazy_ids.get(btf_id)
            f = self._build(name) if name else None
        if f is None:
            raise NotFoundError("kernel function with BTF id", str(btf_id))
        return f

    def has_id(self, btf_id: int) -> bool:
        """True when a function has that BTF id."""
        return btf_id in self._by_id or btf_id in self._lazy_ids

    def by_addr(self, addr: int) -> KernelFunction:
        """Look up by address.

        :raises NotFoundError: no function starts there.
        """
        try:
            return self._by_addr[addr]
        except KeyError:
            raise NotFoundError("kernel function at", hex(addr)) from None

    def glob(self, pattern: str) -> list[KernelFunction]:
        """Functions whose name matches the shell glob, in table order."""
        if not any(c in pattern for c in "*?["):
            f = self._get(pattern)
            return [f] if f else []
        import re

        m = re.compile(fnmatch.translate(pattern)).match
        out = [f for n, f in self._by_name.items() if m(n)]
        out += [f for n in [n for n in self._lazy if m(n)] if (f := self._build(n)) is not None]
        return out


# --- the kernel's BPF test functions (net/bpf/test_run.c semantics) ---------

_I8, _I16, _I32, _I64 = (Param("", 1, True), Param("", 2, True), Param("", 4, True), Param("", 8, True))
_U32, _U64, _PTR = Param("", 4), Param("", 8), Param("", 8, pointer=True)


def _p(name: str, proto: Param, target: str | None = None) -> Param:
    return Param(name, proto.size, proto.signed, proto.pointer, proto.by_value_struct, target or proto.target)


def add_test_functions(table: FunctionTable, mem: Memory) -> None:
    """Add the kernel's BPF test targets with their kernel semantics.

    ``bpf_fentry_test1`` … ``bpf_fentry_test10``, ``bpf_modify_return_test``,
    ``bpf_modify_return_test2``, ``bpf_fentry_shadow_test`` and
    ``bpf_fentry_test_sinfo``. Pointer arguments are addresses in ``mem``.
    """

    def rd(addr: int, fmt: str) -> int:
        return struct.unpack(fmt, mem.read(addr, struct.calcsize(fmt)))[0]

    def modify_return_test(a: int, b: int) -> int:
        v = rd(b, "<i") + 1
        mem.write(b, struct.pack("<i", v))
        return a + v

    def modify_return_test2(a: int, b: int, c: int, d: int, e: int, f: int, g: int) -> int:
        v = rd(b, "<i") + 1
        mem.write(b, struct.pack("<i", v))
        return a + v + c + d + e + f + g

    defs: list[tuple[str, list[Param], Param, Callable[..., int]]] = [
        ("bpf_fentry_test1", [_p("a", _I32)], _I32, lambda a: a + 1),
        ("bpf_fentry_test2", [_p("a", _I32), _p("b", _U64)], _I32, lambda a, b: a + b),
        ("bpf_fentry_test3", [_p("a", _I8), _p("b", _I32), _p("c", _U64)], _I32, lambda a, b, c: a + b + c),
        (
            "bpf_fentry_test4",
            [_p("a", _PTR), _p("b", _I8), _p("c", _I32), _p("d", _U64)],
            _I32,
            lambda a, b, c, d: a + b + c + d,
        ),
        (
            "bpf_fentry_test5",
            [_p("a", _U64), _p("b", _PTR), _p("c", _I16), _p("d", _I32), _p("e", _U64)],
            _I32,
            lambda a, b, c, d, e: a + b + c + d + e,
        ),
        (
            "bpf_fentry_test6",
            [_p("a", _U64), _p("b", _PTR), _p("c", _I16), _p("d", _I32), _p("e", _PTR), _p("f", _U64)],
            _I32,
            lambda a, b, c, d, e, f: a + b + c + d + e + f,
        ),
        ("bpf_fentry_test7", [_p("arg", _PTR, "bpf_fentry_test_t")], _I32, lambda arg: arg),
        ("bpf_fentry_test8", [_p("arg", _PTR, "bpf_fentry_test_t")], _I32, lambda arg: rd(arg, "<Q") if arg else 0),
        ("bpf_fentry_test9", [_p("a", _PTR)], _U32, lambda a: rd(a, "<I") if a else 0),
        ("bpf_fentry_test10", [_p("a", _PTR)], _I32, lambda a: a),
        ("bpf_fentry_test_sinfo", [_p("sinfo", _PTR)], _I32, lambda s: 0),
        ("bpf_modify_return_test", [_p("a", _I32), _p("b", _PTR)], _I32, modify_return_test),
        (
            "bpf_modify_return_test2",
            [_p("a", _I32), _p("b", _PTR), _p("c", _I16), _p("d", _I32), _p("e", _PTR), _p("f", _I8), _p("g", _I32)],
            _I32,
            modify_return_test2,
        ),
        ("bpf_fentry_shadow_test", [_p("a", _I32)], _I32, lambda a: a + 1),
    ]
    for name, params, ret, body in defs:
        if name in table:
            table[name].body = body
        else:
            table.define(name, params, _p("ret", ret), body)
