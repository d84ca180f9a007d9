"""Semantic analysis: the type of every expression, the layout of every map,
what each output call prints, checked against bpftrace 0.17's rules.

Types come from the kernel: tracepoint ``args`` from the tracefs formats
(:mod:`bpfmux.abi.tpformat`), kfunc/kretfunc ``args`` and ``retval`` from
the function's BTF prototype, struct fields and casts from BTF
(:mod:`.kerneltypes`). One probe block is checked once per
:class:`~bpfmux.bpftrace.probes.Context` it is compiled for, because a glob's
tracepoints may lay their records out differently; maps are global and must
agree across blocks.

The result is a :class:`Checked`: per context the types (keyed by node
identity), how ``args->field`` is read, the scratch variables; globally the
maps (:class:`MapInfo`) and the output actions (:class:`Action`).
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..errors import BpfmuxError, NotFoundError
from ..record import Value
from ..trace.plan import Mechanism
from . import ast as A
from .errors import Loc, ScriptError, Source
from .kerneltypes import LazyBtf, field_of, from_btf, from_c_decl, from_name
from .probes import Context, Resolution
from .types import AGGREGATIONS, COMM_SIZE, K, T, slot_size

__all__ = ["Action", "ArgsField", "Checked", "CtxInfo", "Env", "MapInfo", "analyze", "printf_specifiers"]

STRLEN = 64
MAP_KEYS_MAX = 4096
JOIN_ARGNUM = 16
JOIN_ARGSIZE = 1024
_SPEC_LENGTHS = ("", "hh", "h", "l", "ll", "j", "z", "t")
_SPEC_CONV = ("d", "u", "o", "x", "X", "p")
#: printf conversions bpftrace 0.17 accepts → the value kind each needs
PRINTF_TYPES: dict[str, str] = {"s": "string", "r": "buffer", "rx": "buffer", "rh": "buffer", "c": "integer",
                                **{ln + c: "integer" for ln in _SPEC_LENGTHS for c in _SPEC_CONV}}  # fmt: skip
_SPEC_RE = re.compile(r"%-?[0-9]*(\.[0-9]+)?(" + "|".join(sorted(PRINTF_TYPES, key=len, reverse=True)) + ")")
_AS_STRING = {K.STR, K.KSYM, K.USYM, K.FUNC, K.PROBE, K.USERNAME, K.KSTACK, K.USTACK, K.INET, K.TIMESTAMP,
              K.MACADDR, K.CGROUP_PATH, K.STRERROR}  # fmt: skip
_SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6, "SIGBUS": 7,
            "SIGFPE": 8, "SIGKILL": 9, "SIGUSR1": 10, "SIGSEGV": 11, "SIGUSR2": 12, "SIGPIPE": 13, "SIGALRM": 14,
            "SIGTERM": 15, "SIGSTKFLT": 16, "SIGCHLD": 17, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20,
            "SIGTTIN": 21, "SIGTTOU": 22, "SIGURG": 23, "SIGXCPU": 24, "SIGXFSZ": 25, "SIGVTALRM": 26,
            "SIGPROF": 27, "SIGWINCH": 28, "SIGIO": 29, "SIGPWR": 30, "SIGSYS": 31}  # fmt: skip
_AGG_CALLS = {"count": K.COUNT, "sum": K.SUM, "min": K.MIN, "max": K.MAX, "avg": K.AVG, "stats": K.STATS,
              "hist": K.HIST, "lhist": K.LHIST}  # fmt: skip
#: every function bpftrace 0.17 knows (so an unknown name is reported as such)
KNOWN_CALLS = frozenset({"avg", "buf", "cat", "cgroupid", "clear", "count", "delete", "exit", "hist", "join", "kaddr",
                         "kptr", "ksym", "lhist", "macaddr", "max", "min", "ntop", "override", "print", "printf",
                         "cgroup_path", "reg", "signal", "sizeof", "stats", "str", "strerror", "strftime", "strncmp",
                         "sum", "system", "time", "uaddr", "uptr", "usym", "zero", "path", "unwatch", "bswap",
                         "skboutput", "pton", "debugf", "kstack", "ustack", "offsetof"})  # fmt: skip
_PT_REGS = ("r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8", "ax", "cx", "dx", "si", "di", "orig_ax",
            "ip", "cs", "flags", "sp", "ss")  # fmt: skip
_REG_ALIASES = {"rip": "ip", "rsp": "sp", "rbp": "bp", "rax": "ax", "rbx": "bx", "rcx": "cx", "rdx": "dx",
                "rsi": "si", "rdi": "di"}  # fmt: skip
ARG_REGS = ("di", "si", "dx", "cx", "r8", "r9")
SYSCALL_ARG_REGS = ("di", "si", "dx", "r10", "r8", "r9")


def reg_offset(name: str) -> int:
    """Byte offset of register ``name`` in x86-64 ``struct pt_regs``."""
    return 8 * _PT_REGS.index(_REG_ALIASES.get(name, name))


class Env(Value):
    """What the analysis needs besides the script.

    :ivar btf: the kernel's BTF (``None``: none; casts to structs fail).
    :ivar params: positional parameters (``$1`` …).
    :ivar unsafe: ``--unsafe`` given (``system()``, ``signal()``).
    :ivar has_child: ``-c CMD`` given (``cpid``).
    :ivar child_pid: its pid when known.
    :ivar strlen: bytes of a ``str()`` (``BPFTRACE_STRLEN``).
    :ivar map_keys_max: entries of a keyed map (``BPFTRACE_MAP_KEYS_MAX``).
    :ivar kallsyms: name → address, for ``kaddr()`` (loaded lazily when ``None``).
    """

    __slots__ = ("btf", "params", "unsafe", "has_child", "child_pid", "strlen", "map_keys_max", "kallsyms")

    btf: Any
    params: list[str]
    unsafe: bool
    has_child: bool
    child_pid: int
    strlen: int
    map_keys_max: int
    kallsyms: dict[str, int] | None

    def __init__(
        self,
        btf: Any = None,
        params: list[str] | None = None,
        unsafe: bool = False,
        has_child: bool = False,
        child_pid: int = 0,
        strlen: int = STRLEN,
        map_keys_max: int = MAP_KEYS_MAX,
        kallsyms: dict[str, int] | None = None,
    ) -> None:
        self.btf = btf
        self.params = [] if params is None else params
        self.unsafe = unsafe
        self.has_child = has_child
        self.child_pid = child_pid
        self.strlen = strlen
        self.map_keys_max = map_keys_max
        self.kallsyms = kallsyms


class MapInfo(Value):
    """One ``@map``.

    :ivar keys: the key's component types (empty: no key).
    :ivar value: the value type (an aggregation, or what was assigned).
    :ivar index: its id in output actions (``print``, ``clear``).
    """

    __slots__ = ("name", "keys", "value", "loc", "index", "keyed")

    name: str
    keys: list[T]
    value: T
    loc: Loc
    index: int
    keyed: bool

    def __init__(self, name: str, keys: list[T], value: T, loc: Loc, index: int = 0, keyed: bool = False) -> None:
        self.name = name
        self.keys = keys
        self.value = value
        self.loc = loc
        self.index = index
        self.keyed = keyed

    @property
    def array(self) -> bool:
        """A ``count()`` map without key: bpftrace keeps it in a one-entry per-CPU
        array, so it always exists (prints ``0``) and ``clear``/``delete`` zero it."""
        return self.value.kind == K.COUNT and not self.keyed

    @property
    def key_size(self) -> int:
        """Bytes of a key (8 for a map without key, 4 for an array)."""
        if self.array:
            return 4
        return max(8, sum(slot_size(k) for k in self.keys))

    @property
    def value_size(self) -> int:
        """Bytes of a value (per CPU for aggregations)."""
        return max(8, slot_size(self.value))

    @property
    def percpu(self) -> bool:
        """Whether the map is per-CPU (aggregations are)."""
        return self.value.kind in AGGREGATIONS


class Action(Value):
    """An output call user space carries out when its event arrives.

    :ivar kind: ``printf``, ``time``, ``join``, ``cat``, ``system``,
        ``print_map``, ``print_value``, ``clear``, ``zero``, ``exit``, or
        ``helper_error`` (``-k``: added by the code generator).
    :ivar fmt: the format (printf, time, cat, system), join's delimiter, or
        the failed helper's name (helper_error).
    :ivar args: the argument types, in record order.
    :ivar map: the map ``print``/``clear``/``zero`` act on.
    :ivar top: / :ivar div: ``print(@m, top, div)``.
    """

    __slots__ = ("kind", "fmt", "args", "map", "top", "div", "loc")

    kind: str
    fmt: str
    args: list[T]
    map: str
    top: int
    div: int
    loc: Loc | None

    def __init__(
        self,
        kind: str,
        fmt: str = "",
        args: list[T] | None = None,
        map: str = "",
        top: int = 0,
        div: int = 0,
        loc: Loc | None = None,
    ) -> None:
        self.kind = kind
        self.fmt = fmt
        self.args = [] if args is None else args
        self.map = map
        self.top = top
        self.div = div
        self.loc = loc


class ArgsField(Value):
    """How a context reads ``args->NAME``.

    :ivar how: ``record`` (tracepoint record offset), ``data_loc`` (a
        ``__data_loc`` string in the record), ``sysarg`` (the syscall's
        argument register through ``pt_regs``), ``sysret`` (``ctx->args[1]``
        of ``sys_exit``), ``sysnr_enter``/``sysnr_exit`` (the syscall number),
        ``rawsys_args`` (``raw_syscalls:sys_enter``'s ``args`` array),
        ``slot`` (a kfunc argument: ``ctx[slot]``).
    :ivar per_probe: probe index → offset / argument index / slot; one entry
        per probe of the context.
    """

    __slots__ = ("how", "type", "per_probe")

    how: str
    type: T
    per_probe: dict[int, int]

    def __init__(self, how: str, type: T, per_probe: dict[int, int]) -> None:
        self.how = how
        self.type = type
        self.per_probe = per_probe


class CtxInfo(Value):
    """What the analysis found for one context."""

    __slots__ = ("ctx", "types", "fields", "vars", "var_widths", "actions", "consts", "signature")

    ctx: Context
    types: dict[int, T]
    fields: dict[int, ArgsField]
    vars: dict[str, T]
    #: an integer variable's width as first assigned (stored widened; bswap() swaps that many bytes, as bpftrace)
    var_widths: dict[str, int]
    actions: dict[int, int]
    consts: dict[int, int]
    signature: Any

    def __init__(
        self,
        ctx: Context,
        types: dict[int, T] | None = None,
        fields: dict[int, ArgsField] | None = None,
        vars: dict[str, T] | None = None,
        var_widths: dict[str, int] | None = None,
        actions: dict[int, int] | None = None,
        consts: dict[int, int] | None = None,
        signature: Any = None,
    ) -> None:
        self.ctx = ctx
        self.types = {} if types is None else types
        self.fields = {} if fields is None else fields
        self.vars = {} if vars is None else vars
        self.var_widths = {} if var_widths is None else var_widths
        self.actions = {} if actions is None else actions
        self.consts = {} if consts is None else consts
        self.signature = signature

    def type(self, node: A.Expr) -> T:
        """The type of ``node`` in this context."""
        return self.types[id(node)]


class Checked(Value):
    """The result of :func:`analyze`."""

    __slots__ = ("program", "resolution", "contexts", "maps", "actions", "env", "source")

    program: A.Program
    resolution: Resolution
    contexts: list[CtxInfo]
    maps: dict[str, MapInfo]
    actions: list[Action]
    env: Env
    source: Source | None

    def __init__(
        self,
        program: A.Program,
        resolution: Resolution,
        contexts: list[CtxInfo],
        maps: dict[str, MapInfo],
        actions: list[Action],
        env: Env,
        source: Source | None = None,
    ) -> None:
        self.program = program
        self.resolution = resolution
        self.contexts = contexts
        self.maps = maps
        self.actions = actions
        self.env = env
        self.source = source


class _Lenient(Exception):
    """An error to ignore in the first passes (a map used before its assignment is seen)."""


class Analyzer:
    """Checks one script (see :func:`analyze`)."""

    def __init__(self, program: A.Program, resolution: Resolution, env: Env, source: Source | None) -> None:
        self.program = program
        self.res = resolution
        self.env = env
        self.source = source
        self.maps: dict[str, MapInfo] = {}
        self.actions: list[Action] = []
        self.final = False
        self.cur: CtxInfo | None = None
        self.loop_depth = 0
        self._formats: dict[tuple[str, str], Any] = {}

    def error(self, message: str, loc: Loc, expected: str | None = None, construct: str | None = None) -> ScriptError:
        """A :class:`ScriptError` at ``loc``."""
        return ScriptError(message, loc, self.source, expected=expected, construct=construct)

    # -- driver ---------------------------------------------------------------------------

    def run(self) -> Checked:
        seen: set[str] = set()
        for probe in self.program.probes:
            for ap in probe.attach_points:
                if ap.text in ("BEGIN", "END"):
                    if ap.text in seen:
                        raise self.error(f"more than one {ap.text} probe defined", ap.loc, construct=f"probe {ap.text}")
                    seen.add(ap.text)
        infos: list[CtxInfo] = []
        for _ in range(3):
            self._pass(lenient=True)
        self.actions = []
        self.final = True
        infos = self._pass(lenient=False)
        for i, name in enumerate(sorted(self.maps)):
            self.maps[name].index = i
        return Checked(self.program, self.res, infos, self.maps, self.actions, self.env, self.source)

    def _pass(self, lenient: bool) -> list[CtxInfo]:
        infos = []
        for bi, probe in enumerate(self.program.probes):
            for ctx in self.res.contexts[bi] if bi < len(self.res.contexts) else []:
                info = CtxInfo(ctx)
                self.cur = info
                try:
                    self._probe(probe)
                except _Lenient:
                    pass
                except ScriptError:
                    if not lenient:
                        raise
                infos.append(info)
        return infos

    def _probe(self, probe: A.Probe) -> None:
        info = self.cur
        assert info is not None
        if info.ctx.how in (Mechanism.FENTRY, Mechanism.FEXIT):
            info.signature = self._signature(info.ctx)
        if probe.predicate is not None:
            t = self.expr(probe.predicate)
            if self.final and not self._truthy(t):
                raise self.error(f"invalid type for predicate: {t.describe()}", probe.predicate.loc,
                                 expected="an integer or a pointer")  # fmt: skip
        self.stmts(probe.body)

    def _signature(self, ctx: Context) -> Any:
        btf = self.env.btf
        fn = ctx.targets[0].info.get("function") if ctx.targets else None
        if not btf or fn is None:
            return None
        try:
            return btf.func(fn)
        except (NotFoundError, BpfmuxError, KeyError):
            return None

    # -- statements -----------------------------------------------------------------------

    def stmts(self, body: list[A.Stmt]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.ExprStmt):
            e = s.expr
            if isinstance(e, A.Call) and e.name in _AGG_CALLS:
                raise self.error(f"{e.name}() should be directly assigned to a map", e.loc,
                                 expected=f"@name = {e.name}(...)", construct=f"call to {e.name}()")  # fmt: skip
            self.expr(e, statement=True)
        elif isinstance(s, A.AssignMap):
            self.assign_map(s)
        elif isinstance(s, A.AssignVar):
            self.assign_var(s)
        elif isinstance(s, A.If):
            t = self.expr(s.cond)
            if self.final and not self._truthy(t):
                raise self.error(f"invalid condition in if(): {t.describe()}", s.cond.loc, expected="an integer")
            self.stmts(s.then)
            if s.orelse is not None:
                self.stmts(s.orelse)
        elif isinstance(s, A.Unroll):
            n = self.const_int(s.count, "unroll count")
            if not 1 <= n <= 100:
                raise self.error(f"unroll count must be between 1 and 100, not {n}", s.count.loc)
            self.cur.consts[id(s)] = n  # type: ignore[union-attr]
            self.stmts(s.body)
        elif isinstance(s, A.While):
            t = self.expr(s.cond)
            if self.final and not self._truthy(t):
                raise self.error(f"invalid condition in while(): {t.describe()}", s.cond.loc, expected="an integer")
            self.loop_depth += 1
            try:
                self.stmts(s.body)
            finally:
                self.loop_depth -= 1
        elif isinstance(s, A.Jump):
            if s.kind in ("break", "continue") and self.loop_depth == 0:
                raise self.error(f"'{s.kind}' outside of a loop", s.loc, construct=s.kind)

    def _truthy(self, t: T) -> bool:
        return t.kind in (K.INT, K.PTR, K.COUNT, K.SUM, K.MIN, K.MAX)

    def assign_map(self, s: A.AssignMap) -> None:
        m = s.map
        e = s.expr
        keys = self.map_keys(m)
        if isinstance(e, A.Call) and e.name in _AGG_CALLS:
            value = self.aggregation(e)
        else:
            value = self.expr(e)
            if value.kind == K.NONE:
                raise self.error(f"cannot assign the result of {_what(e)} to a map: it has no value", e.loc)
            if value.kind in AGGREGATIONS:
                raise self.error(f"cannot assign a {value.kind.value}() map's value to another map", e.loc)
            value = _storable(value)
        self.define_map(m, keys, value, e.loc)
        self._type(m, self.maps[m.name].value if self.maps[m.name].value.kind not in AGGREGATIONS else value)

    def define_map(self, m: A.MapRef, keys: list[T], value: T, loc: Loc) -> None:
        info = self.maps.get(m.name)
        if info is None:
            self.maps[m.name] = MapInfo(m.name, keys, value, m.loc, keyed=bool(m.keys))
            return
        self._check_keys(info, m, keys)
        old = info.value
        if old.kind == K.NONE:
            info.value = value
            return
        if old.kind != value.kind or (old.kind == K.LHIST and old.lhist != value.lhist):
            raise self.error(f"type mismatch for {m.name}: trying to assign a value of type '{value.describe()}' when "
                             f"the map already holds values of type '{old.describe()}'", loc,
                             construct=f"map {m.name}")  # fmt: skip
        if old.kind == K.STR and value.size > old.size:
            info.value = value
        if old.kind == K.TUPLE and value != old:
            info.value = _merge_tuple(old, value) or old

    def _check_keys(self, info: MapInfo, m: A.MapRef, keys: list[T]) -> None:
        if info.keyed != bool(m.keys) or len(info.keys) != len(keys):
            want = "[" + ", ".join(k.describe() for k in info.keys) + "]" if info.keyed else "no key"
            got = "[" + ", ".join(k.describe() for k in keys) + "]" if m.keys else "no key"
            raise self.error(f"argument mismatch for {m.name}: trying to access with {got} when the map expects "
                             f"{want}", m.loc, construct=f"map {m.name}")  # fmt: skip
        for i, (a, b) in enumerate(zip(info.keys, keys, strict=True)):
            if _key_kind(a) != _key_kind(b):
                raise self.error(f"argument mismatch for {m.name}: key {i + 1} is '{b.describe()}' here but "
                                 f"'{a.describe()}' elsewhere", m.keys[i].loc, construct=f"map {m.name}")  # fmt: skip
            if a.kind == K.STR and b.size > a.size:
                info.keys[i] = b

    def map_keys(self, m: A.MapRef) -> list[T]:
        out = []
        for k in m.keys:
            t = self.expr(k)
            if t.kind in (K.NONE, K.STACK_MODE) or t.kind in AGGREGATIONS:
                raise self.error(f"{_what(k)} cannot be a map key (type {t.describe()})", k.loc)
            out.append(_storable(t))
        return out

    def assign_var(self, s: A.AssignVar) -> None:
        info = self.cur
        assert info is not None
        e = s.expr
        if isinstance(e, A.Call) and e.name in _AGG_CALLS:
            raise self.error(f"{e.name}() should be directly assigned to a map", e.loc, expected=f"@name = {e.name}(...)")
        t = self.expr(e)
        if t.kind == K.NONE:
            raise self.error(f"cannot assign the result of {_what(e)} to a variable: it has no value", e.loc)
        if t.kind == K.INT:
            info.var_widths.setdefault(s.var.name, t.size)
        t = _storable(t)
        old = info.vars.get(s.var.name)
        if old is not None and _key_kind(old) != _key_kind(t):
            raise self.error(f"type mismatch for {s.var.name}: trying to assign a value of type '{t.describe()}' when "
                             f"the variable already holds a value of type '{old.describe()}'", s.loc,
                             construct=f"variable {s.var.name}")  # fmt: skip
        if old is None or (t.kind == K.STR and t.size > old.size):
            info.vars[s.var.name] = t
        self._type(s.var, info.vars[s.var.name])

    def aggregation(self, e: A.Call) -> T:
        kind = _AGG_CALLS[e.name]
        want = {"count": 0, "lhist": 4}.get(e.name, 1)
        if len(e.args) != want:
            raise self.error(f"{e.name}() takes {want} argument{'s' * (want != 1)}, not {len(e.args)}", e.loc,
                             construct=f"call to {e.name}()")  # fmt: skip
        signed = False
        for a in e.args:
            t = self.expr(a)
            if not t.is_int:
                raise self.error(f"{e.name}() takes integers, not {t.describe()}", a.loc, construct=f"call to {e.name}()")
        if e.args:
            signed = self.cur.type(e.args[0]).signed  # type: ignore[union-attr]
        if kind == K.LHIST:
            lo = self.const_int(e.args[1], "lhist() min")
            hi = self.const_int(e.args[2], "lhist() max")
            step = self.const_int(e.args[3], "lhist() step")
            if lo < 0:
                raise self.error("lhist() min must be non-negative", e.args[1].loc)
            if step <= 0:
                raise self.error("lhist() step must be >= 1", e.args[3].loc)
            if hi <= lo:
                raise self.error("lhist() max must be greater than min", e.args[2].loc)
            if (hi - lo) // step > 1000:
                raise self.error("lhist() too many buckets, (max - min) / step must be <= 1000", e.loc)
            t = T(K.LHIST, 8, signed, lhist=(lo, hi, step), count=(hi - lo) // step + 2)
        elif kind == K.HIST:
            t = T(K.HIST, 8, signed, count=34)
        else:
            t = T(kind, 8, signed)
        self._type(e, t)
        return t

    # -- expressions ----------------------------------------------------------------------

    def _type(self, node: A.Expr, t: T) -> T:
        assert self.cur is not None
        self.cur.types[id(node)] = t
        return t

    def const_int(self, e: A.Expr, what: str) -> int:
        """The value of an integer literal (or positional parameter).

        :raises ScriptError: not a constant integer.
        """
        self.expr(e)
        v = self._const(e)
        if v is None:
            raise self.error(f"{what} must be an integer literal", e.loc, expected="an integer literal")
        return v

    def _const(self, e: A.Expr) -> int | None:
        if isinstance(e, A.Int):
            return e.value
        if isinstance(e, A.Param):
            if e.n == 0:
                return len(self.env.params)
            p = self._param(e.n)
            return int(p, 0) if _is_number(p) else None
        if isinstance(e, A.Unop) and e.op == "-":
            v = self._const(e.expr)
            return -v if v is not None else None
        return None

    def _param(self, n: int) -> str:
        return self.env.params[n - 1] if 0 < n <= len(self.env.params) else ""

    def expr(self, e: A.Expr, statement: bool = False) -> T:
        """The type of ``e`` (recorded for the current context).

        :raises ScriptError: ``e`` is not valid here.
        """
        t = self._expr(e, statement)
        return self._type(e, t)

    def _expr(self, e: A.Expr, statement: bool) -> T:
        if isinstance(e, A.Int):
            if e.value > (1 << 63) - 1:
                return T.u64()
            return T.s64()
        if isinstance(e, A.Str):
            if len(e.value.encode()) > 200:
                raise self.error(f"string is too long (over 200 bytes): {e.value[:40]}…", e.loc)
            return T.string(len(e.value.encode()) + 1)
        if isinstance(e, A.Param):
            if e.n == 0:
                return T.u64()
            p = self._param(e.n)
            if _is_number(p) or p == "":
                return T.s64()
            return T.string(len(p.encode()) + 1)
        if isinstance(e, A.Builtin):
            return self.builtin(e)
        if isinstance(e, A.Ident):
            if e.name in ("bpftrace", "perf", "raw"):
                return T(K.STACK_MODE, 0, name=e.name)
            enum = self._enum_value(e.name)
            if enum is not None:
                self.cur.consts[id(e)] = enum  # type: ignore[union-attr]
                return T.s64()
            raise self.error(f"unknown identifier '{e.name}'", e.loc,
                             expected="a builtin, a $variable, an @map, a number or a string")  # fmt: skip
        if isinstance(e, A.Var):
            assert self.cur is not None
            t = self.cur.vars.get(e.name)
            if t is None:
                raise self.error(f"undefined variable: {e.name}", e.loc, expected=f"an assignment '{e.name} = …' before its use",
                                 construct=f"variable {e.name}")  # fmt: skip
            return t
        if isinstance(e, A.MapRef):
            keys = self.map_keys(e)
            info = self.maps.get(e.name)
            if info is None:
                if not self.final:
                    return T.s64()  # assigned later in the script: known in the next pass
                raise self.error(f"undefined map: {e.name}", e.loc, expected=f"an assignment '{e.name} = …' somewhere",
                                 construct=f"map {e.name}")  # fmt: skip
            self._check_keys(info, e, keys)
            v = info.value
            if v.kind in (K.AVG, K.STATS, K.HIST, K.LHIST):
                raise self.error(f"the value of {v.kind.value}() map {e.name} cannot be read in a program", e.loc,
                                 construct=f"map {e.name}")  # fmt: skip
            if v.kind in (K.COUNT, K.SUM, K.MIN, K.MAX):
                return T.int(8, v.signed and v.kind != K.COUNT)
            return v
        if isinstance(e, A.Call):
            return self.call(e, statement)
        if isinstance(e, A.Binop):
            return self.binop(e)
        if isinstance(e, A.Unop):
            return self.unop(e)
        if isinstance(e, A.Ternary):
            c = self.expr(e.cond)
            if self.final and not self._truthy(c):
                raise self.error(f"invalid condition in ternary: {c.describe()}", e.cond.loc)
            lt, rt = self.expr(e.left), self.expr(e.right)
            if _key_kind(lt) != _key_kind(rt) and not (lt.is_int and rt.is_int):
                raise self.error(f"ternary operator must return the same type: have '{lt.describe()}' and "
                                 f"'{rt.describe()}'", e.loc)  # fmt: skip
            if lt.kind == K.STR:
                return T.string(max(lt.size, rt.size))
            if lt.is_int:
                return T.int(8, lt.signed)
            if lt.kind == K.NONE:
                return T.none()
            if lt.kind == K.TUPLE:
                return _merge_tuple(lt, rt) or lt
            return lt
        if isinstance(e, A.FieldAccess):
            return self.field(e)
        if isinstance(e, A.TupleIndex):
            t = self.expr(e.expr)
            if t.kind != K.TUPLE:
                raise self.error(f"cannot access index {e.index} on an expression of type '{t.describe()}'", e.loc,
                                 expected="a tuple")  # fmt: skip
            if not 0 <= e.index < len(t.elems):
                raise self.error(f"invalid tuple index {e.index}; the tuple has {len(t.elems)} elements", e.loc)
            return t.elems[e.index]
        if isinstance(e, A.Index):
            t = self.expr(e.expr)
            it = self.expr(e.index)
            if not it.is_int:
                raise self.error(f"the index must be an integer, not {it.describe()}", e.index.loc)
            if t.kind == K.ARRAY:
                at = self._const(e.index)
                if at is not None and not 0 <= at < t.count:
                    raise self.error(f"the index {at} is out of bounds for an array of size {t.count}", e.index.loc)
                return t.elems[0]
            if t.kind == K.PTR:
                if t.pointee is None:
                    raise self.error("cannot index a void pointer", e.loc, expected="a cast to a typed pointer")
                return t.pointee
            if t.kind == K.STR:
                return T.int(1, True)
            raise self.error(f"the [] operator cannot be used on expressions of type '{t.describe()}'", e.loc,
                             expected="an array or a pointer")  # fmt: skip
        if isinstance(e, A.Cast):
            return self.cast(e)
        if isinstance(e, A.Tuple):
            elems = []
            for x in e.elems:
                t = self.expr(x)
                if t.kind in (K.NONE, K.STACK_MODE) or t.kind in AGGREGATIONS:
                    raise self.error(f"{_what(x)} cannot be a tuple element (type {t.describe()})", x.loc)
                elems.append(_storable(t))
            return T(K.TUPLE, sum(slot_size(x) for x in elems), elems=tuple(elems))
        raise self.error("unsupported expression", e.loc)

    def _enum_value(self, name: str) -> int | None:
        btf = self.env.btf
        if not btf:
            return None
        try:
            ids = btf.find_ids(name)
        except (BpfmuxError, KeyError, ValueError):
            return None
        for tid in ids:
            t = btf[tid]
            if hasattr(t, "value_of"):
                try:
                    return int(t.value_of(name))
                except (BpfmuxError, KeyError, ValueError):
                    continue
        return _enum_lookup(btf, name)

    # -- builtins ------------------------------------------------------------------------

    def _providers(self) -> set[str]:
        assert self.cur is not None
        return {self.cur.ctx.provider}

    def builtin(self, e: A.Builtin) -> T:
        info = self.cur
        assert info is not None
        ctx = info.ctx
        p = ctx.provider
        n = e.name
        if n in ("pid", "tid", "uid", "gid", "cpu", "nsecs", "elapsed", "cgroup", "rand", "numaid"):
            return T.u64()
        if n == "comm":
            return T.string(COMM_SIZE)
        if n == "curtask":
            task = from_name(self.env.btf, "struct task_struct", 1)
            return task if task is not None else T(K.PTR, 8)
        if n == "username":
            return T(K.USERNAME)
        if n == "probe":
            return T(K.PROBE)
        if n == "cpid":
            if not self.env.has_child:
                raise self.error("cpid cannot be used without child command", e.loc, expected="-c CMD",
                                 construct="builtin cpid")  # fmt: skip
            return T.int(4, False)
        if n in ("kstack", "ustack"):
            return T(K.KSTACK if n == "kstack" else K.USTACK, 8, mode="bpftrace", limit=127)
        if n == "func":
            if p not in ("kprobe", "kretprobe", "uprobe", "uretprobe", "kfunc", "kretfunc"):
                raise self.error(f"the func builtin can not be used with '{p}' probes", e.loc, construct="builtin func")
            if p in ("uprobe", "uretprobe"):  # bpftrace: the instruction pointer as a user symbol
                return T(K.USYM, 16)
            return T(K.FUNC)
        if n == "retval":
            if p in ("kretprobe", "uretprobe"):
                return T.u64().with_user(p == "uretprobe")
            if p == "kretfunc":
                sig = info.signature
                if sig is None:
                    return T.u64()
                return from_btf(self.env.btf, sig.return_type) if sig.return_size else T.u64()
            hint = " (try to use args->ret instead)" if p == "tracepoint" else ""
            raise self.error(f"the retval builtin can only be used with 'kretprobe' and 'uretprobe' and 'kfunc' "
                             f"probes{hint}", e.loc, construct="builtin retval")  # fmt: skip
        if re.fullmatch(r"s?arg\d", n):
            if p not in ("kprobe", "uprobe", "usdt"):
                raise self.error(f"the {n} builtin can only be used with 'kprobes', 'uprobes' and 'usdt' probes",
                                 e.loc, construct=f"builtin {n}")  # fmt: skip
            if n.startswith("arg") and int(n[3:]) >= len(ARG_REGS):
                raise self.error(f"x86_64 doesn't support {n}", e.loc)
            return T.u64().with_user(p == "uprobe")
        if n == "args":
            if p in ("tracepoint", "kfunc", "kretfunc"):
                return T(K.PTR, 8, name="args")
            if p == "uprobe":
                raise self.error("args for uprobes needs DWARF debug info, which bpfmux does not read; use arg0, arg1…",
                                 e.loc, construct="builtin args")  # fmt: skip
            raise self.error(f"the args builtin can only be used with tracepoint/kfunc/uprobe probes ({p} used here)",
                             e.loc, construct="builtin args")  # fmt: skip
        if n == "ctx":
            raise self.error("the ctx builtin is not supported by bpfmux", e.loc, construct="builtin ctx")
        raise self.error(f"unknown builtin variable: '{n}'", e.loc)

    # -- args->field ---------------------------------------------------------------------

    def field(self, e: A.FieldAccess) -> T:
        if isinstance(e.expr, A.Builtin) and e.expr.name == "args":
            self.expr(e.expr)
            return self.args_field(e)
        t = self.expr(e.expr)
        if t.kind == K.PTR and t.name == "args":
            return self.args_field(e)
        rec = t
        if e.arrow:
            if t.kind != K.PTR or t.pointee is None or t.pointee.kind != K.RECORD:
                raise self.error(f"can not access field '{e.field}' on type '{t.describe()}'; '->' needs a pointer to "
                                 "a struct", e.loc, expected="a cast such as (struct x *)")  # fmt: skip
            rec = t.pointee
        elif t.kind != K.RECORD:
            if t.kind == K.PTR and t.pointee is not None and t.pointee.kind == K.RECORD:
                raise self.error(f"can not access field '{e.field}' on type '{t.describe()}' with '.'", e.loc,
                                 expected="'->'")  # fmt: skip
            raise self.error(f"can not access field '{e.field}' on expression of type '{t.describe()}'", e.loc)
        f = field_of(self.env.btf, rec, e.field)
        if f is None:
            raise self.error(f"{rec.describe()} has no field named '{e.field}'", e.loc, construct=f"field {e.field}")
        self.cur.consts[id(e)] = f.offset  # type: ignore[union-attr]
        if f.bit_width:
            self.cur.consts[-id(e)] = (f.bit_shift << 8) | f.bit_width  # type: ignore[union-attr]
        return f.type.with_user(rec.user) if f.type.kind == K.PTR else f.type

    def args_field(self, e: A.FieldAccess) -> T:
        info = self.cur
        assert info is not None
        ctx = info.ctx
        name = e.field
        if ctx.provider in ("kfunc", "kretfunc"):
            sig = info.signature
            if sig is None:
                raise self.error(f"no BTF prototype for {ctx.name}; args needs the kernel's BTF", e.loc)
            slot = 0
            for a in sig.args:
                if a.name == name:
                    t = from_btf(self.env.btf, a.type)
                    info.fields[id(e)] = ArgsField("slot", t, {p.idx: slot for p in ctx.targets})
                    return t
                slot += a.nregs
            raise self.error(f"can't find function parameter {name}", e.loc,
                             expected="one of " + ", ".join(a.name for a in sig.args) if sig.args else None)  # fmt: skip
        how = ctx.how
        per: dict[int, int] = {}
        ftype: T | None = None
        mode = ""
        for p in ctx.targets:
            tp = p.info.get("tracepoint")
            if tp is None:
                raise self.error("args is only available on tracepoints here", e.loc)
            fmt = _format(*tp)
            if fmt is None:
                raise self.error(f"no format for tracepoint {tp[0]}:{tp[1]}", e.loc)
            fields = [f for f in fmt.fields if not f.common]
            f = next((x for x in fields if x.name == name), None)
            if f is None:
                raise self.error(f"the tracepoint {tp[0]}:{tp[1]} has no field named '{name}'", e.loc,
                                 expected="one of " + ", ".join(x.name for x in fields) if fields else None,
                                 construct=f"args->{name}")  # fmt: skip
            user = tp[0] == "syscalls"
            t = from_c_decl(self.env.btf, f.type, f.size, f.signed, user=user)
            if how == Mechanism.SYS_ENTER:
                args = [x for x in fields if x.name != "__syscall_nr"]
                if name == "__syscall_nr":
                    mode, val = "sysnr_enter", 0
                else:
                    mode, val = "sysarg", args.index(f)
            elif how == Mechanism.SYS_EXIT:
                mode, val = ("sysnr_exit", 0) if name == "__syscall_nr" else ("sysret", 0)
            elif how == Mechanism.RAW_TP and tp[0] == "raw_syscalls":
                if name == "id":
                    mode, val = ("sysnr_enter" if tp[1] == "sys_enter" else "sysnr_exit"), 0
                elif name == "ret":
                    mode, val = "sysret", 0
                elif name == "args":
                    mode, val = "rawsys_args", 0
                else:
                    raise self.error(f"args->{name} is not available on {tp[0]}:{tp[1]}", e.loc)
            else:
                mode = "data_loc" if t.extra == ("data_loc",) else "record"
                val = f.offset
            if ftype is None:
                ftype = t
            elif _key_kind(ftype) != _key_kind(t):
                raise self.error(f"args->{name} has type '{t.describe()}' in {p.name} but '{ftype.describe()}' in "
                                 f"{ctx.targets[0].name}", e.loc)  # fmt: skip
            per[p.idx] = val
        assert ftype is not None
        if mode == "data_loc":
            ftype = T.string(self.env.strlen)
        info.fields[id(e)] = ArgsField(mode, ftype, per)
        return ftype

    # -- operators -----------------------------------------------------------------------

    def binop(self, e: A.Binop) -> T:
        lt, rt = self.expr(e.left), self.expr(e.right)
        op = e.op
        if op in ("&&", "||"):
            for side, t in ((e.left, lt), (e.right, rt)):
                if not self._truthy(t):
                    raise self.error(f"the {op} operator needs integers, not {t.describe()}", side.loc)
            return T.u64()
        if lt.kind == K.STR or rt.kind == K.STR:
            if op not in ("==", "!=") or lt.kind != rt.kind:
                raise self.error(f"the {op} operator can not be used on expressions of types "
                                 f"'{lt.describe()}' and '{rt.describe()}'", e.loc,
                                 expected="== or != between two strings" if op in ("==", "!=") else None)  # fmt: skip
            return T.u64()
        if lt.kind == K.BUF and rt.kind == K.BUF and op in ("==", "!="):
            return T.u64()
        for side, t in ((e.left, lt), (e.right, rt)):
            if not t.is_int and t.kind not in (K.COUNT, K.SUM, K.MIN, K.MAX):
                raise self.error(f"the {op} operator can not be used on an expression of type '{t.describe()}'",
                                 side.loc)  # fmt: skip
        if lt.kind == K.PTR and op in ("+", "-") and rt.kind != K.PTR:
            return lt
        if rt.kind == K.PTR and op == "+" and lt.kind != K.PTR:
            return rt
        lsign = lt.signed and lt.kind != K.PTR
        rsign = rt.signed and rt.kind != K.PTR
        if lsign != rsign:
            if lsign and isinstance(e.left, A.Int) and e.left.value >= 0:
                lsign = False
            elif rsign and isinstance(e.right, A.Int) and e.right.value >= 0:
                rsign = False
        signed = lsign if op in ("<<", ">>") else (lsign and rsign)
        self.cur.consts[id(e)] = int(lsign and rsign)  # type: ignore[union-attr]
        return T.int(8, signed)

    def unop(self, e: A.Unop) -> T:
        op = e.op
        if op in ("++", "--"):
            target = e.expr
            if isinstance(target, A.MapRef) and target.name not in self.maps:
                self.define_map(target, self.map_keys(target), T.s64(), target.loc)
            if isinstance(target, A.Var) and target.name not in self.cur.vars:  # type: ignore[union-attr]
                raise self.error(f"undefined variable: {target.name}", target.loc)
            t = self.expr(target)
            if not t.is_int:
                raise self.error(f"the {op} operator can not be used on expressions of type '{t.describe()}'", e.loc)
            return T.int(8, t.signed) if t.kind != K.PTR else t
        t = self.expr(e.expr)
        if op == "*":
            if t.kind == K.PTR:
                if t.pointee is None:
                    return T.u64()
                return t.pointee
            if t.kind == K.INT:
                return T.u64()
            raise self.error(f"the * operator can not be used on expressions of type '{t.describe()}'", e.loc)
        if not t.is_int and t.kind not in (K.COUNT, K.SUM, K.MIN, K.MAX):
            raise self.error(f"the {op} operator can not be used on expressions of type '{t.describe()}'", e.loc)
        if op == "!":
            return T.u64()
        return T.int(8, t.signed and t.kind != K.PTR)

    def cast(self, e: A.Cast) -> T:
        inner = self.expr(e.expr)
        target = from_name(self.env.btf, e.type_name, e.ptr)
        if target is None:
            raise self.error(f"unknown type '{e.type_name}' in a cast", e.loc,
                             expected="int8..int64, uint8..uint64, a C integer type, 'struct NAME *' or a BTF typedef",
                             construct=f"cast to {e.type_name}")  # fmt: skip
        if target.kind == K.RECORD:
            raise self.error(f"cannot cast to '{target.describe()}'; cast to a pointer instead", e.loc,
                             expected=f"({e.type_name} *)")  # fmt: skip
        if not inner.is_int and inner.kind not in (K.COUNT, K.SUM, K.MIN, K.MAX):
            raise self.error(f"cannot cast from '{inner.describe()}' to '{target.describe()}'", e.loc)
        if target.kind == K.PTR:
            return target.with_user(inner.user) if inner.user else target
        if target.kind == K.STR:
            raise self.error(f"cannot cast to '{target.describe()}'", e.loc)
        return target

    # -- calls -----------------------------------------------------------------------------

    def _nargs(self, e: A.Call, lo: int, hi: int | None = None) -> None:
        hi = lo if hi is None else hi
        n = len(e.args)
        if not lo <= n <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise self.error(f"{e.name}() takes {want} argument{'s' * (hi != 1)} ({n} given)", e.loc,
                             construct=f"call to {e.name}()")  # fmt: skip

    def _map_arg(self, e: A.Call, keyed: bool | None) -> A.MapRef:
        if not e.args or not isinstance(e.args[0], A.MapRef):
            raise self.error(f"{e.name}() expects a map argument", e.args[0].loc if e.args else e.loc,
                             expected="@name", construct=f"call to {e.name}()")  # fmt: skip
        m = e.args[0]
        if keyed is False and m.keys:
            raise self.error(f"{e.name}() expects a map with no keys ({m.name}, not {m.name}[…])", m.loc,
                             expected=m.name)  # fmt: skip
        return m

    def _action(self, e: A.Call, action: Action) -> None:
        assert self.cur is not None
        action.loc = e.loc
        self.cur.actions[id(e)] = len(self.actions)
        self.actions.append(action)

    def call(self, e: A.Call, statement: bool) -> T:
        n = e.name
        if n in _AGG_CALLS:
            raise self.error(f"{n}() should be directly assigned to a map", e.loc, expected=f"@name = {n}(...)",
                             construct=f"call to {n}()")  # fmt: skip
        if n not in KNOWN_CALLS:
            raise self.error(f"unknown function: {n}", e.loc, construct=f"call to {n}()")
        handler = getattr(self, f"call_{n}", None)
        if handler is None:
            raise self.error(f"{n}() is not supported by bpfmux", e.loc, construct=f"call to {n}()")
        t: T = handler(e)
        return t

    def call_printf(self, e: A.Call) -> T:
        return self._format_call(e, "printf")

    def call_system(self, e: A.Call) -> T:
        if not self.env.unsafe:
            raise self.error("system() is an unsafe function and needs --unsafe", e.loc, expected="--unsafe",
                             construct="call to system()")  # fmt: skip
        return self._format_call(e, "system")

    def call_cat(self, e: A.Call) -> T:
        return self._format_call(e, "cat")

    def _format_call(self, e: A.Call, kind: str) -> T:
        if not e.args:
            raise self.error(f"{kind}() needs at least a format string", e.loc, construct=f"call to {kind}()")
        fmt_node = e.args[0]
        if not isinstance(fmt_node, A.Str):
            raise self.error(f"{kind}() expects a string literal as its first argument", fmt_node.loc,
                             expected="a format string such as \"%d\\n\"")  # fmt: skip
        self._type(fmt_node, T.string(len(fmt_node.value) + 1))
        types = []
        for a in e.args[1:]:
            t = self.expr(a)
            if t.kind == K.NONE or t.kind == K.STACK_MODE:
                raise self.error(f"{_what(a)} has no value to print", a.loc)
            types.append(_storable(t))
        problem = check_format(fmt_node.value, types, kind)
        if problem:
            raise self.error(problem, e.loc, construct=f"call to {kind}()")
        self._action(e, Action(kind, fmt_node.value, types))
        return T.none()

    def call_time(self, e: A.Call) -> T:
        self._nargs(e, 0, 1)
        fmt = "%H:%M:%S\n"
        if e.args:
            if not isinstance(e.args[0], A.Str):
                raise self.error("time() expects a string literal", e.args[0].loc)
            self.expr(e.args[0])
            fmt = e.args[0].value
        self._action(e, Action("time", fmt))
        return T.none()

    def call_exit(self, e: A.Call) -> T:
        self._nargs(e, 0)
        self._action(e, Action("exit"))
        return T.none()

    def call_join(self, e: A.Call) -> T:
        self._nargs(e, 1, 2)
        t = self.expr(e.args[0])
        if not t.is_int:
            raise self.error(f"join() expects an array of strings (a char ** pointer), not {t.describe()}", e.args[0].loc)
        delim = " "
        if len(e.args) == 2:
            if not isinstance(e.args[1], A.Str):
                raise self.error("join() expects a string literal delimiter", e.args[1].loc)
            self.expr(e.args[1])
            delim = e.args[1].value
        self._action(e, Action("join", delim, [T.string(JOIN_ARGSIZE)] * JOIN_ARGNUM))
        return T.none()

    def call_print(self, e: A.Call) -> T:
        self._nargs(e, 1, 3)
        arg = e.args[0]
        if isinstance(arg, A.MapRef) and not arg.keys:
            info = self.maps.get(arg.name)
            if info is None:
                if not self.final:
                    raise _Lenient()
                raise self.error(f"undefined map: {arg.name}", arg.loc)
            top = self.const_int(e.args[1], "print() top") if len(e.args) > 1 else 0
            div = self.const_int(e.args[2], "print() div") if len(e.args) > 2 else 0
            self._type(arg, info.value)
            self._action(e, Action("print_map", map=arg.name, top=max(0, top), div=max(0, div)))
            return T.none()
        if len(e.args) > 1:
            raise self.error("print() of a value takes one argument", e.loc)
        t = self.expr(arg)
        if t.kind in (K.NONE, K.STACK_MODE):
            raise self.error(f"{_what(arg)} has no value to print", arg.loc)
        self._action(e, Action("print_value", args=[_storable(t)]))
        return T.none()

    def call_clear(self, e: A.Call) -> T:
        return self._map_action(e, "clear")

    def call_zero(self, e: A.Call) -> T:
        return self._map_action(e, "zero")

    def _map_action(self, e: A.Call, kind: str) -> T:
        self._nargs(e, 1)
        m = self._map_arg(e, False)
        if m.name not in self.maps:
            if not self.final:
                raise _Lenient()
            raise self.error(f"undefined map: {m.name}", m.loc)
        self._type(m, self.maps[m.name].value)
        self._action(e, Action(kind, map=m.name))
        return T.none()

    def call_delete(self, e: A.Call) -> T:
        self._nargs(e, 1)
        m = self._map_arg(e, None)
        info = self.maps.get(m.name)
        if info is None:
            if not self.final:
                raise _Lenient()
            raise self.error(f"undefined map: {m.name}", m.loc)
        keys = self.map_keys(m)
        self._check_keys(info, m, keys)
        self._type(m, info.value)
        return T.none()

    def call_str(self, e: A.Call) -> T:
        self._nargs(e, 1, 2)
        t = self.expr(e.args[0])
        if len(e.args) == 2:
            lt = self.expr(e.args[1])
            if not lt.is_int:
                raise self.error("str() length must be an integer", e.args[1].loc)
            v = self._const(e.args[1])
            if v is not None and v <= 0:
                raise self.error("str() length must be positive", e.args[1].loc)
        if isinstance(e.args[0], A.Param):
            return T.string(self.env.strlen)
        if t.kind == K.STR:
            return T.string(t.size)
        if not t.is_int:
            raise self.error(f"str() expects an integer or a pointer, not {t.describe()}", e.args[0].loc)
        return T.string(self.env.strlen)

    def call_buf(self, e: A.Call) -> T:
        self._nargs(e, 1, 2)
        t = self.expr(e.args[0])
        size = 64
        if len(e.args) == 2:
            self.expr(e.args[1])
            v = self._const(e.args[1])
            if v is not None:
                size = max(1, min(v, 64))
        elif t.kind == K.ARRAY:
            size = min(64, t.size)
        elif t.kind == K.PTR and t.pointee is not None and t.pointee.size:
            size = min(64, t.pointee.size)
        else:
            raise self.error("buf() needs a length unless its argument is an array", e.loc,
                             expected="buf(pointer, length)")  # fmt: skip
        return T(K.BUF, size)

    def call_ksym(self, e: A.Call) -> T:
        self._nargs(e, 1)
        t = self.expr(e.args[0])
        if not t.is_int:
            raise self.error(f"ksym() expects an integer or a pointer, not {t.describe()}", e.args[0].loc)
        return T(K.KSYM)

    def call_usym(self, e: A.Call) -> T:
        self._nargs(e, 1)
        t = self.expr(e.args[0])
        if not t.is_int:
            raise self.error(f"usym() expects an integer or a pointer, not {t.describe()}", e.args[0].loc)
        return T(K.USYM, 16)

    def call_kaddr(self, e: A.Call) -> T:
        self._nargs(e, 1)
        if not isinstance(e.args[0], A.Str):
            raise self.error("kaddr() expects a string literal", e.args[0].loc)
        self.expr(e.args[0])
        name = e.args[0].value
        if self.env.kallsyms is None:
            self.env.kallsyms = _kallsyms()
        if name not in self.env.kallsyms:
            raise self.error(f"kaddr(\"{name}\"): no kernel symbol of that name", e.args[0].loc)
        self.cur.consts[id(e)] = self.env.kallsyms[name]  # type: ignore[union-attr]
        return T.u64()

    def call_uaddr(self, e: A.Call) -> T:
        self._nargs(e, 1)
        if not isinstance(e.args[0], A.Str):
            raise self.error("uaddr() expects a string literal", e.args[0].loc)
        self.expr(e.args[0])
        ctx = self.cur.ctx  # type: ignore[union-attr]
        binary = next((p.info.get("binary") for p in ctx.targets if p.info.get("binary")), None)
        if ctx.provider not in ("uprobe", "uretprobe") or binary is None:
            raise self.error("uaddr() can only be used in uprobes", e.loc)
        from ..host.elfsyms import ElfSymbols

        try:
            syms = ElfSymbols.cached(binary)
            addr = next(s.address for s in syms.symbols if s.name == e.args[0].value)
        except (StopIteration, BpfmuxError, OSError, AttributeError):
            raise self.error(f"uaddr(\"{e.args[0].value}\"): no symbol of that name in {binary}", e.args[0].loc) from None
        self.cur.consts[id(e)] = int(addr)  # type: ignore[union-attr]
        return T(K.PTR, 8, user=True)

    def _stack(self, e: A.Call, kind: K) -> T:
        self._nargs(e, 0, 2)
        mode, limit = "bpftrace", 127
        for a in e.args:
            t = self.expr(a)
            if t.kind == K.STACK_MODE:
                mode = t.name
            else:
                v = self._const(a)
                if v is None:
                    raise self.error(f"{e.name}() takes a stack mode (bpftrace, perf, raw) and a frame limit", a.loc)
                if not 1 <= v <= 1024:
                    raise self.error(f"{e.name}() limit must be between 1 and 1024, not {v}", a.loc)
                limit = v
        return T(kind, 8, mode=mode, limit=min(limit, 127))

    def call_kstack(self, e: A.Call) -> T:
        return self._stack(e, K.KSTACK)

    def call_ustack(self, e: A.Call) -> T:
        return self._stack(e, K.USTACK)

    def call_signal(self, e: A.Call) -> T:
        self._nargs(e, 1)
        if not self.env.unsafe:
            raise self.error("signal() is an unsafe function and needs --unsafe", e.loc, expected="--unsafe",
                             construct="call to signal()")  # fmt: skip
        a = e.args[0]
        if isinstance(a, A.Str):
            self.expr(a)
            name = a.value if a.value.startswith("SIG") else "SIG" + a.value
            if name not in _SIGNALS:
                raise self.error(f"signal(\"{a.value}\"): unknown signal", a.loc, expected="a name such as SIGKILL")
            self.cur.consts[id(e)] = _SIGNALS[name]  # type: ignore[union-attr]
        else:
            t = self.expr(a)
            if not t.is_int:
                raise self.error("signal() takes a signal number or name", a.loc)
            v = self._const(a)
            if v is not None and not 1 <= v <= 64:
                raise self.error(f"signal({v}): not a signal number", a.loc)
        return T.none()

    def call_strncmp(self, e: A.Call) -> T:
        self._nargs(e, 3)
        a, b = self.expr(e.args[0]), self.expr(e.args[1])
        if a.kind != K.STR or b.kind != K.STR:
            raise self.error("strncmp() compares two strings", e.loc)
        self.const_int(e.args[2], "strncmp() length")
        return T.u64()

    def call_sizeof(self, e: A.Call) -> T:
        self._nargs(e, 1)
        a = e.args[0]
        if isinstance(a, A.Ident):
            name = a.name.rstrip(" *")
            ptr = a.name.count("*")
            t = from_name(self.env.btf, name, ptr)
            if t is None:
                raise self.error(f"sizeof(): unknown type '{a.name}'", a.loc)
            self._type(a, t)
            size = t.size
        else:
            size = self.expr(a).size
        self.cur.consts[id(e)] = size  # type: ignore[union-attr]
        return T.u64()

    def call_reg(self, e: A.Call) -> T:
        self._nargs(e, 1)
        if not isinstance(e.args[0], A.Str):
            raise self.error("reg() expects a string literal", e.args[0].loc)
        self.expr(e.args[0])
        name = e.args[0].value
        if _REG_ALIASES.get(name, name) not in _PT_REGS:
            raise self.error(f"'{name}' is not a valid register", e.args[0].loc, expected=", ".join(_PT_REGS))
        if self.cur.ctx.provider not in ("kprobe", "kretprobe", "uprobe", "uretprobe", "profile", "software",  # type: ignore[union-attr]
                                         "hardware"):  # fmt: skip
            raise self.error("reg() can only be used with kprobes, uprobes and profile/software probes", e.loc)
        self.cur.consts[id(e)] = reg_offset(name)  # type: ignore[union-attr]
        return T.u64()

    def call_strerror(self, e: A.Call) -> T:
        self._nargs(e, 1)
        if not self.expr(e.args[0]).is_int:
            raise self.error("strerror() takes an integer", e.args[0].loc)
        return T(K.STRERROR)

    def call_bswap(self, e: A.Call) -> T:
        self._nargs(e, 1)
        t = self.expr(e.args[0])
        if t.kind != K.INT:
            raise self.error("bswap() takes an integer", e.args[0].loc)
        arg = e.args[0]
        if isinstance(arg, A.Var) and self.cur is not None and arg.name in self.cur.var_widths:
            return T.int(self.cur.var_widths[arg.name], t.signed)
        return t

    def call_cgroupid(self, e: A.Call) -> T:
        self._nargs(e, 1)
        if not isinstance(e.args[0], A.Str):
            raise self.error("cgroupid() expects a string literal path", e.args[0].loc)
        self.expr(e.args[0])
        try:
            self.cur.consts[id(e)] = os.stat(e.args[0].value).st_ino  # type: ignore[union-attr]
        except OSError as err:
            raise self.error(f"cgroupid(\"{e.args[0].value}\"): {err.strerror}", e.args[0].loc) from None
        return T.u64()

    def call_strftime(self, e: A.Call) -> T:
        self._nargs(e, 2)
        if not isinstance(e.args[0], A.Str):
            raise self.error("strftime() expects a string literal format", e.args[0].loc)
        self.expr(e.args[0])
        if not self.expr(e.args[1]).is_int:
            raise self.error("strftime() takes nanoseconds since boot as its second argument", e.args[1].loc)
        return T(K.TIMESTAMP, 16, name=e.args[0].value)

    def call_macaddr(self, e: A.Call) -> T:
        self._nargs(e, 1)
        t = self.expr(e.args[0])
        if not t.is_int and t.kind not in (K.ARRAY, K.STR):
            raise self.error("macaddr() takes a pointer or an array of 6 bytes", e.args[0].loc)
        return T(K.MACADDR, 6)

    def call_ntop(self, e: A.Call) -> T:
        self._nargs(e, 1, 2)
        ts = [self.expr(a) for a in e.args]
        addr = ts[-1]
        if addr.kind == K.INT:
            return T(K.INET, 24, extra=("v4int",))
        if addr.kind in (K.ARRAY, K.STR, K.PTR):
            return T(K.INET, 24, extra=("array", addr.size if addr.kind != K.PTR else 16))
        raise self.error("ntop() takes an address (integer or byte array)", e.args[-1].loc)


def _kallsyms() -> dict[str, int]:
    try:
        from ..host.kallsyms import KernelSymbols

        return {s.name: s.address for s in KernelSymbols.cached().symbols}
    except (BpfmuxError, OSError):
        return {}


_ENUMERATORS: dict[int, dict[str, int]] = {}


def _enum_lookup(btf: Any, name: str) -> int | None:
    """The value of enumerator ``name`` of any enum in ``btf`` (indexed once per BTF)."""
    from ..uapi import BtfKind

    if isinstance(btf, LazyBtf):  # the cache is keyed by the parsed BTF, not by its wrapper
        btf = btf.get()
    table = _ENUMERATORS.get(id(btf))
    if table is None:
        table = {}
        for tid in range(1, len(btf)):
            if btf.kind_of(tid) in (BtfKind.ENUM, BtfKind.ENUM64):
                for v in getattr(btf[tid], "values", ()):
                    table.setdefault(v.name, int(v.value))
        _ENUMERATORS[id(btf)] = table
    return table.get(name)


def _format(system: str, event: str) -> Any:
    from ..abi.tpformat import load_format

    try:
        return load_format(system, event)
    except (NotFoundError, BpfmuxError):
        return None


def _is_number(text: str) -> bool:
    try:
        int(text, 0)
        return True
    except ValueError:
        return False


def _what(e: A.Expr) -> str:
    if isinstance(e, A.Call):
        return f"{e.name}()"
    if isinstance(e, A.Builtin):
        return e.name
    return "this expression"


def _key_kind(t: T) -> tuple[Any, ...]:
    """What must agree for two values to share a map key, a value slot or a variable."""
    if t.kind in (K.INT, K.PTR):
        return (K.INT,)
    if t.kind == K.STR:
        return (K.STR,)
    if t.kind == K.TUPLE:
        return (K.TUPLE, tuple(_key_kind(x) for x in t.elems))
    if t.kind in (K.KSTACK, K.USTACK):
        return (t.kind, t.mode, t.limit)
    if t.kind == K.BUF:
        return (K.BUF, t.size)
    return (t.kind, t.size)


def _storable(t: T) -> T:
    """The type a value has once stored (integers widen to 64 bits)."""
    if t.kind == K.INT:
        return T.int(8, t.signed)
    if t.kind == K.TUPLE:
        elems = tuple(_storable(x) for x in t.elems)
        return T(K.TUPLE, sum(slot_size(x) for x in elems), elems=elems)
    return t


def _merge_tuple(a: T, b: T) -> T | None:
    if len(a.elems) != len(b.elems):
        return None
    out = []
    for x, y in zip(a.elems, b.elems, strict=True):
        if x.kind == K.STR and y.kind == K.STR:
            out.append(T.string(max(x.size, y.size)))
        else:
            out.append(x)
    return T(K.TUPLE, sum(slot_size(x) for x in out), elems=tuple(out))


def printf_specifiers(fmt: str) -> list[re.Match[str]]:
    """The conversion specifiers of a format, as bpftrace 0.17 finds them."""
    return list(_SPEC_RE.finditer(fmt))


def check_format(fmt: str, args: list[T], call: str) -> str:
    """bpftrace's format check: ``""`` when ``args`` fit ``fmt``, else the problem."""
    specs = printf_specifiers(fmt)
    if len(args) < len(specs):
        return f"{call}: Not enough arguments for format string ({len(args)} supplied, {len(specs)} expected)"
    if len(args) > len(specs):
        return f"{call}: Too many arguments for format string ({len(args)} supplied, {len(specs)} expected)"
    for m, t in zip(specs, args, strict=True):
        conv = m.group(2)
        want = PRINTF_TYPES[conv]
        have = "string" if t.kind in _AS_STRING else ("integer" if t.kind in (K.INT, K.PTR) else
                                                       "buffer" if t.kind == K.BUF else t.kind.value)  # fmt: skip
        if have != want:
            return f"{call}: %{conv} specifier expects a value of type {want} ({have} supplied)"
    return ""


def analyze(program: A.Program, resolution: Resolution, env: Env | None = None,
            source: Source | None = None) -> Checked:
    """Check ``program`` for the contexts ``resolution`` found.

    :raises ScriptError: the first problem, with its place and the construct.
    """
    return Analyzer(program, resolution, env or Env(), source).run()
