"""Trampoline images: generated code specialised for what is attached.

As the kernel's JIT emits machine code for each trampoline, the emulated
kernel emits Python code for each image: the list of programs, their kinds,
cookies and context offsets are baked in. Source is generated per *shape*
(how many programs of which kind, whether the ip is known) and compiled once
per shape; an image is that code bound to its programs.
"""

from __future__ import annotations

import struct
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .frame import MAX_ARGS, SLOTS, U64, Abi, CallInfo, FramePool, ProgKind, ctx_slot, frame_slots, new_frame, set_ret
from .functions import KernelFunction

if TYPE_CHECKING:
    from ...vm.machine import EmuProgram


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


#: the traced function's body on the call's registers (its raw form without the per-argument conversions)
_BODY = "(func.body(*args) or 0) & U64 if func.raw else func.call_body(args)"


def _path_source(runs: Sequence[Attachment], static_ip: bool, nargs: int | None, steps: int, mode: str) -> str:
    """Source of one trampoline path: frame, programs, function, programs.

    ``mode``: ``"fresh"``: a new frame each call, each program run maps it;
    ``"pooled"``: the frame comes from the VM's frame pool (mapped once) and
    goes back when the call returns; ``"direct"``: pooled, and the programs'
    fast-tier code is called in line on one run state for the whole call
    (the image checks first that the code it holds is current and every
    program still runs on the fast tier, else takes the ``pooled`` path).
    """
    lines = ["def image(ip, args, func):"]
    if mode == "direct":
        tiers = " or ".join(f"(V{i}.tier or VM.tier) != 'fast'" for i in range(len(runs)))
        lines += [f"    if {tiers}:", "        return SLOW(ip, args, func)"]
        # VM.code_version() written out: this check runs on every call
        lines += ["    if VER[0] != (HV.version, VM._kfunc_version, VM._maps_version):", "        REFRESH()"]
    lines.append(f"    ST.dispatch_steps += {steps}")
    if nargs is None:
        lines.append("    n = len(args)")
    else:
        lines.append(f"    n = {nargs}")
    ind = "    "
    if mode == "fresh":
        lines += ["    frame = NEW_FRAME(ip, args)", "    info = CALLINFO(ip, n, frame)"]
    else:
        if mode == "direct":  # each frame has its run state (context: the frame's CallInfo), made on first use
            lines += ["    info = FREE.pop() if FREE else NEWFRAME()", "    rs = info.rs or NEWRS(info)",
                      "    VM._running += 1"]
        else:
            lines.append("    info = TAKE()")
        lines.append("    try:")
        ind = "        "
        lines.append(f"{ind}frame = info.frame")
        if nargs is None:
            lines.append(f"{ind}PACKS[n](frame, 0, ip, *args)")
        else:
            lines.append(f"{ind}PACK(frame, 0, ip, *args)")
        lines += [f"{ind}info.ip = ip", f"{ind}info.nargs = n"]
        if mode == "direct":  # what RunState.restart sets, once for the call
            lines += [f"{ind}base = info.base", f"{ind}rs.task = VM.task", f"{ind}rs.cpu = VM.cpu", f"{ind}rs.depth = 0"]
            if len(runs) > 1:
                lines += [f"{ind}budget = VM.run_budget", f"{ind}loops = VM.may_goto_budget"]

    def call(i: int, a: Attachment, assign: str = "") -> list[str]:
        slot = ctx_slot(a.kind, a.abi)
        out = [f"info.kind = K{i}"]
        if mode != "direct":  # in line, the ctx offset is the code's; helpers read kind and cookie only
            out += [f"info.slot = {slot}", f"info.abi = A{i}"]
        if a.kind.is_multi and not static_ip and a.cookies:
            out.append(f"info.cookie = C{i}.get(ip, 0)")
        elif a.kind.is_multi and not static_ip:
            out.append("info.cookie = 0")
        else:
            out.append(f"info.cookie = C{i}")
        if mode != "direct":
            out.append(f"{assign}P{i}(frame, info)")
            return out
        budgets = ["rs.left = budget", "rs.loops_left = loops"] if len(runs) > 1 else [
            "rs.left = VM.run_budget", "rs.loops_left = VM.may_goto_budget"]
        out += [f"O{i}.runs += 1", f"rs.prog = rs.current = V{i}", *budgets, "rs.tail_calls = 0", "try:",  # per run

                f"    {assign}F{i}(rs, base + {8 * slot}, 0, 0, 0, 0, 0)", "except Exception as e:",
                "    FAULT(rs, e)", "    raise"]
        return out

    body: list[str] = []
    before = [(i, a) for i, a in enumerate(runs) if a.kind in (ProgKind.MULTI_ENTRY, ProgKind.FENTRY)]
    modret = [(i, a) for i, a in enumerate(runs) if a.kind is ProgKind.FMOD_RET]
    after = [(i, a) for i, a in enumerate(runs) if a.kind in (ProgKind.FEXIT, ProgKind.MULTI_EXIT)]
    for i, a in before:
        body += call(i, a)
    if modret:
        body.append("while True:")
        for i, a in modret:
            body += ["    " + x for x in call(i, a, "r = ")]
            body += ["    if r & U64:", "        ret = r & U64", "        break"]
        body += ["    ret = " + _BODY, "    break"]
        body.append("SET_RET(frame, n, ret)")
    else:
        body.append("ret = " + _BODY)
        if after:
            body.append("SET_RET(frame, n, ret)")
    for i, a in after:
        body += call(i, a)
    body.append("return ret")
    lines += [ind + x for x in body]
    if mode == "pooled":
        lines += ["    finally:", "        GIVE(info)"]
    elif mode == "direct":
        lines += ["    finally:", "        VM._running -= 1", "        if rs.reservations or rs.locks or rs.deferred:",
                  "            rs.settle()", "        FREE.append(info)",
                  "        if not VM._running and VM._pending:", "            VM._flush()"]
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
    :ivar fn: the generated code, ``fn(ip, args, func) -> ret`` (``func``: the
        :class:`KernelFunction` called, whose body runs in the middle).
    :ivar size: bytes of generated code.
    :ivar refs: functions whose site points at this image.
    """

    kind: str
    func: KernelFunction | None
    multi: tuple[Attachment, ...]
    runs: tuple[Attachment, ...]
    fn: Callable[[int, Sequence[int], KernelFunction], int]
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


def _packer(nargs: int, slots: int) -> Callable[..., None]:
    """``pack_into(frame, 0, ip, *args)`` writing a whole frame of ``slots`` slots: ip, the arguments, zeros."""
    return struct.Struct(f"<{1 + nargs}Q{8 * (slots - 1 - nargs)}x").pack_into


#: frame writers of the seed layout by argument count (shared multi images: the count is the call's)
_SEED_PACKERS = tuple(_packer(n, SLOTS) for n in range(MAX_ARGS + 1))

_shapes: dict[tuple[object, ...], tuple[types.CodeType, int]] = {}
_direct_types: dict[type, bool] = {}


def _shape_code(runs: Sequence[Attachment], static: bool, nargs: int | None, steps: int,
                mode: str) -> tuple[types.CodeType, int]:
    """The compiled code of a path's shape (what :func:`_path_source` depends on), made once per shape."""
    key = (tuple((int(a.kind), a.abi is Abi.SEED, bool(a.cookies)) for a in runs), static, nargs, steps, mode)
    hit = _shapes.get(key)
    if hit is None:
        if len(_shapes) >= 4096:
            _shapes.clear()
        hit = _shapes[key] = _compile(_path_source(runs, static, nargs, steps, mode))
    return hit


def _is_direct(prog: object) -> bool:
    """Whether ``prog`` is a :class:`DirectProgram` (asked once per class: its instances are alike)."""
    cls = type(prog)
    hit = _direct_types.get(cls)
    if hit is None:
        hit = _direct_types[cls] = isinstance(prog, DirectProgram)
    return hit


@runtime_checkable
class DirectProgram(Protocol):
    """A program a trampoline can run in line: an emulated kernel's program
    (its VM program's fast-tier code is called directly)."""

    runs: int

    @property
    def vmprog(self) -> EmuProgram: ...


def build_path(runs: Sequence[Attachment], costs: Costs, func: KernelFunction | None, steps: int = 1,
               frames: FramePool | None = None) -> tuple[Callable, int]:
    """Generate and bind the code for one path; returns ``(fn, bytes)``.

    ``func`` given: the ip and argument count are constants of the code and
    multi cookies are resolved now; else they come from the call. ``frames``
    given: frames come from that pool, and programs of an emulated kernel
    run in line (see :func:`_path_source`). ``bytes`` is the size of the
    path's code as a trampoline (the in-line form is the emulator's own).
    """
    static = func is not None
    nargs = func.nargs if func else None
    mode = "fresh" if frames is None else "pooled"
    code, size = _shape_code(runs, static, nargs, steps, mode)
    g: dict[str, object] = {
        "ST": costs,
        "NEW_FRAME": new_frame,
        "CALLINFO": CallInfo,
        "SET_RET": set_ret,
        "U64": U64,
    }
    if frames is not None:
        slots = SLOTS if nargs is None else frame_slots(nargs)
        g["TAKE"], g["GIVE"] = frames.taker(slots * 8)
        if nargs is not None:
            g["PACK"] = _packer(nargs, slots)
        g["PACKS"] = _SEED_PACKERS
    for i, a in enumerate(runs):
        g[f"P{i}"] = a.prog.run_tracing
        g[f"K{i}"] = a.kind
        g[f"A{i}"] = a.abi
        if a.kind.is_multi:
            g[f"C{i}"] = a.cookies.get(func.addr, 0) if func is not None else a.cookies
        else:
            g[f"C{i}"] = a.cookie
    fn = types.FunctionType(code, g, "image")
    progs = [a.prog for a in runs]
    if frames is None or not progs or not all(_is_direct(p) for p in progs):
        return fn, size
    return _direct(runs, static, nargs, steps, g, fn, frames, progs), size  # type: ignore[arg-type]  # checked above


def _direct(runs: Sequence[Attachment], static: bool, nargs: int | None, steps: int, g: dict[str, object],
            pooled: Callable, frames: FramePool, progs: list[DirectProgram]) -> Callable:
    """The ``direct`` form of a path whose ``pooled`` form is ``pooled`` (bound in ``g``)."""
    from ...vm.machine import fast_fault
    from ...vm.runtime import RunState

    code, _ = _shape_code(runs, static, nargs, steps, "direct")
    vms = [p.vmprog for p in progs]
    vm = vms[0].vm
    d = dict(g)
    size = (SLOTS if nargs is None else frame_slots(nargs)) * 8
    d.update(FREE=frames.free(size), NEWFRAME=lambda: frames.new(size))
    def new_run_state(info: CallInfo) -> RunState:
        rs = info.rs = RunState(vm, vms[0], "fast", info)
        return rs

    d.update(VM=vm, HV=vm.helpers, SLOW=pooled, FAULT=fast_fault, NEWRS=new_run_state, VER=[None])
    for i, (p, v) in enumerate(zip(progs, vms, strict=True)):
        d[f"O{i}"] = p
        d[f"V{i}"] = v

    def refresh() -> None:
        version = vm.code_version()
        for i, v in enumerate(vms):
            d[f"F{i}"] = v.fast_function(0)
        d["VER"] = [version]

    d["REFRESH"] = refresh
    return types.FunctionType(code, d, "image")


_FILTER_SRC = """def image(ip, args, func):
    i = 1
    for a in ADDRS:
        if ip == a:
            ST.dispatch_steps += i
            return HANDLERS[i - 1](ip, args, func)
        i += 1
    ST.dispatch_steps += i
    return MULTI(ip, args, func)
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
