"""Trampoline images: generated code specialised for what is attached.

As the kernel's JIT emits machine code for each trampoline, the emulated
kernel emits Python code for each image: the list of programs, their kinds,
cookies and context offsets are baked in. Source is generated per *shape*
(how many programs of which kind, whether the ip is known) and compiled once
per shape; an image is that code bound to its programs.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .frame import U64, Abi, CallInfo, ProgKind, ctx_slot, new_frame, set_ret
from .functions import KernelFunction


class TracingProgram(Protocol):
    """A program a trampoline can run.

    ``run_tracing`` gets the frame and the :class:`CallInfo` (whose ``slot``
    says where its ``ctx`` starts) and returns the program's ``r0``.
    """

    name: str

    def run_tracing(self, frame: bytearray, info: CallInfo) -> int: ...


@dataclass(eq=False)
class Attachment:
    """One program attached through one link.

    For a single-function link ``cookie`` is its cookie; for a multi link,
    ``cookies`` maps each covered function's address to its cookie and
    ``funcs`` lists the covered functions.
    """

    prog: TracingProgram
    kind: ProgKind
    seq: int
    owner: object = None
    abi: Abi = Abi.SEED
    cookie: int = 0
    cookies: dict[int, int] = field(default_factory=dict)
    funcs: tuple[KernelFunction, ...] = ()

    def __repr__(self) -> str:
        return f"<{self.kind.name.lower()} {getattr(self.prog, 'name', '?')} #{self.seq}>"


def run_order(own: Sequence[Attachment], multi: Sequence[Attachment]) -> list[Attachment]:
    """The order programs run in for one call (``multi-attach.md`` §2).

    Multi entry, fentry, fmod_ret, (the function), fexit, multi exit; within
    one kind, newest first.
    """
    allp = list(own) + list(multi)
    return sorted(allp, key=lambda a: (a.kind, -a.seq))


class Costs:
    """Cost counters of one trampoline policy."""

    __slots__ = ("images_built", "image_bytes", "site_patches", "grace_periods", "dispatch_steps", "calls", "batches")

    def __init__(self) -> None:
        self.images_built = 0
        self.image_bytes = 0
        self.site_patches = 0
        self.grace_periods = 0
        self.dispatch_steps = 0
        self.calls = 0
        self.batches = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {k: getattr(self, k) for k in self.__slots__}


_code_cache: dict[str, tuple[types.CodeType, int]] = {}


def _compile(source: str) -> tuple[types.CodeType, int]:
    hit = _code_cache.get(source)
    if hit is None:
        module = compile(source, "<trampoline>", "exec")
        fn_code = next(c for c in module.co_consts if isinstance(c, types.CodeType))
        hit = _code_cache[source] = (fn_code, len(source.encode()))
    return hit


def _path_source(runs: Sequence[Attachment], static_ip: bool, nargs: int | None, steps: int) -> str:
    """Source of one trampoline path: frame, programs, function, programs."""
    lines = ["def image(ip, args, body):", f"    ST.dispatch_steps += {steps}"]
    if nargs is None:
        lines.append("    n = len(args)")
    else:
        lines.append(f"    n = {nargs}")
    lines += ["    frame = NEW_FRAME(ip, args)", "    info = CALLINFO(ip, n, frame)"]

    def call(i: int, a: Attachment, assign: str = "") -> list[str]:
        out = [f"    info.kind = K{i}", f"    info.slot = {ctx_slot(a.kind, a.abi)}", f"    info.abi = A{i}"]
        if a.kind.is_multi and not static_ip:
            out.append(f"    info.cookie = C{i}.get(ip, 0)")
        else:
            out.append(f"    info.cookie = C{i}")
        out.append(f"    {assign}P{i}(frame, info)")
        return out

    before = [(i, a) for i, a in enumerate(runs) if a.kind in (ProgKind.MULTI_ENTRY, ProgKind.FENTRY)]
    modret = [(i, a) for i, a in enumerate(runs) if a.kind is ProgKind.FMOD_RET]
    after = [(i, a) for i, a in enumerate(runs) if a.kind in (ProgKind.FEXIT, ProgKind.MULTI_EXIT)]
    for i, a in before:
        lines += call(i, a)
    if modret:
        lines.append("    while True:")
        for i, a in modret:
            lines += ["    " + x for x in call(i, a, "r = ")]
            lines += ["        if r:", "            ret = r & U64", "            break"]
        lines += ["        ret = body(args)", "        break"]
        lines.append("    SET_RET(frame, n, ret)")
    else:
        lines.append("    ret = body(args)")
        if after:
            lines.append("    SET_RET(frame, n, ret)")
    for i, a in after:
        lines += call(i, a)
    lines.append("    return ret")
    return "\n".join(lines) + "\n"


@dataclass(eq=False)
class Image:
    """One trampoline image.

    :ivar kind: ``"standard"``, ``"multi"``, ``"clone"``, ``"filter"`` or
        ``"per-function"``.
    :ivar func: the one function it serves (standard, clone, per-function).
    :ivar multi: the multi attachments it serves (the set ``S``).
    :ivar runs: programs in run order (for a filter image: its multi path).
    :ivar branches: filter images only: address → run order of that function.
    :ivar fn: the generated code, ``fn(ip, args, body) -> ret``.
    :ivar size: bytes of generated code.
    :ivar refs: functions whose site points at this image.
    """

    kind: str
    func: KernelFunction | None
    multi: tuple[Attachment, ...]
    runs: tuple[Attachment, ...]
    fn: Callable[[int, Sequence[int], Callable[[Sequence[int]], int]], int]
    size: int
    branches: dict[int, tuple[Attachment, ...]] = field(default_factory=dict)
    refs: set[KernelFunction] = field(default_factory=set)

    def plan(self, func: KernelFunction) -> tuple[Attachment, ...]:
        """The programs this image runs, in order, for a call of ``func``."""
        if self.kind == "filter":
            return self.branches.get(func.addr, self.runs)
        return self.runs

    def __repr__(self) -> str:
        who = self.func.name if self.func else f"{len(self.refs)} functions"
        return f"<{self.kind} image: {len(self.runs)} progs, {who}>"


def build_path(runs: Sequence[Attachment], costs: Costs, func: KernelFunction | None, steps: int = 1) -> tuple[Callable, int]:
    """Generate and bind the code for one path; returns ``(fn, bytes)``.

    ``func`` given: the ip and argument count are constants of the code and
    multi cookies are resolved now; else they come from the call.
    """
    static = func is not None
    src = _path_source(runs, static, func.nargs if func else None, steps)
    code, size = _compile(src)
    g: dict[str, object] = {
        "ST": costs,
        "NEW_FRAME": new_frame,
        "CALLINFO": CallInfo,
        "SET_RET": set_ret,
        "U64": U64,
    }
    for i, a in enumerate(runs):
        g[f"P{i}"] = a.prog.run_tracing
        g[f"K{i}"] = a.kind
        g[f"A{i}"] = a.abi
        if a.kind.is_multi:
            g[f"C{i}"] = a.cookies.get(func.addr, 0) if func is not None else a.cookies
        else:
            g[f"C{i}"] = a.cookie
    return types.FunctionType(code, g, "image"), size


_FILTER_SRC = """def image(ip, args, body):
    i = 1
    for a in ADDRS:
        if ip == a:
            ST.dispatch_steps += i
            return HANDLERS[i - 1](ip, args, body)
        i += 1
    ST.dispatch_steps += i
    return MULTI(ip, args, body)
"""


def build_filter(multi_fn: Callable, addrs: tuple[int, ...], handlers: tuple[Callable, ...], costs: Costs) -> tuple[Callable, int]:
    """Generate the shared image of the ``filter`` policy.

    It compares the ip against every function that has its own programs
    (a compare-and-branch chain) and falls through to the multi path.
    """
    code, size = _compile(_FILTER_SRC)
    g = {
        "ST": costs,
        "ADDRS": addrs,
        "HANDLERS": handlers,
        "MULTI": multi_fn,
    }
    return types.FunctionType(code, g, "image"), size
