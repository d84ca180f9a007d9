"""Trampoline frames: the slot layout programs see, and per-call information.

Seed ABI (``multi-attach.md`` §2): the trampoline saves eight u64 slots

====  ==  =========  ===  =========  ===
slot  0   1 … n      n+1  n+2 … 6    7
====  ==  =========  ===  =========  ===
      ip  arg1…argn  ret  0          ret
====  ==  =========  ===  =========  ===

Multi programs (seed ABI) get ``ctx = &slot[0]``; fentry/fexit/fmod_ret and
mainline multi programs get ``ctx = &slot[1]``. Before the function runs, the
ret slots hold 0.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from ...vm.memory import AddressSpace, Region
    from ...vm.runtime import RunState

#: Slots of a trampoline frame.
SLOTS = 8
#: Bytes of a trampoline frame.
FRAME_SIZE = SLOTS * 8
#: Most arguments a function under a multi link may have (seed layout).
MAX_ARGS = 6
#: Most arguments a function may have for its own fentry/fexit/fmod_ret
#: programs (x86-64 trampolines pass up to 12; the frame grows past 8 slots).
MAX_ARGS_SINGLE = 12
#: Slot index of the always-present ret slot.
RET_SLOT = 7
U64 = (1 << 64) - 1

_PACK = struct.Struct("<8Q")


class ProgKind(enum.IntEnum):
    """Where a program sits in a trampoline, in execution order."""

    MULTI_ENTRY = 0
    FENTRY = 1
    FMOD_RET = 2
    FEXIT = 3
    MULTI_EXIT = 4

    @property
    def is_multi(self) -> bool:
        """True for programs of a tracing multi link."""
        return self in (ProgKind.MULTI_ENTRY, ProgKind.MULTI_EXIT)

    @property
    def sees_ret(self) -> bool:
        """True for kinds that run after the function (or decide its ret)."""
        return self in (ProgKind.FEXIT, ProgKind.FMOD_RET, ProgKind.MULTI_EXIT)


class Abi(enum.Enum):
    """Context layout a multi program is written for."""

    #: The seed's design: ``ctx = &ip``; ``ctx[1..6]`` args, ``ctx[7]`` ret.
    SEED = "seed"
    #: Mainline 2026 ``fentry.multi``: ``ctx = &arg1``, ip and argument count via helpers.
    MAINLINE = "mainline"


def ctx_slot(kind: ProgKind, abi: Abi) -> int:
    """First frame slot of the context a program of ``kind`` sees."""
    return 0 if kind.is_multi and abi is Abi.SEED else 1


def view_slots(kind: ProgKind, abi: Abi, nargs: int | None) -> int:
    """Number of u64 slots a program may read from its ``ctx``.

    ``nargs`` is the traced function's argument count (``None`` for a multi
    program, which is not bound to one function).
    """
    if kind.is_multi:
        return SLOTS if abi is Abi.SEED else SLOTS - 1
    assert nargs is not None
    return nargs + 1 if kind.sees_ret else nargs


def frame_slots(nargs: int) -> int:
    """Slots of the frame for a function with ``nargs`` arguments.

    Eight for the seed layout (``nargs`` ≤ 6); ``nargs + 2`` beyond, where
    only single-function programs can be attached.
    """
    return SLOTS if nargs <= MAX_ARGS else nargs + 2


def new_frame(ip: int, args: tuple[int, ...]) -> bytearray:
    """A fresh frame for a call of a function with ``args`` at ``ip``."""
    n = len(args)
    if n <= MAX_ARGS:
        frame = bytearray(FRAME_SIZE)
        _PACK.pack_into(frame, 0, ip & U64, *(a & U64 for a in args), *([0] * (SLOTS - 1 - n)))
        return frame
    return bytearray(struct.pack(f"<{n + 2}Q", ip & U64, *(a & U64 for a in args), 0))


class FramePool:
    """Frames mapped in a VM's address space for trampolines, reused.

    A trampoline takes a frame for each call and gives it back when the call
    returns, so a frame is mapped once, not once per program run; nested
    calls take further frames (the pool holds as many as the deepest
    nesting). A frame comes as its :class:`CallInfo` (``frame`` and ``base``
    set; the trampoline sets ``ip`` and ``nargs``). Frames are read-only to
    programs (a tracing program's ``ctx``).
    """

    def __init__(self, space: AddressSpace) -> None:
        self.space = space
        self._free: dict[int, list[CallInfo]] = {}
        self._regions: list[Region] = []

    def free(self, size: int) -> list[CallInfo]:
        """The free frames of ``size`` bytes: a trampoline pops one (:meth:`new` when there is none) and
        appends it back."""
        return self._free.setdefault(size, [])

    def taker(self, size: int) -> tuple[Callable[[], CallInfo], Callable[[CallInfo], None]]:
        """``(take, give)`` for frames of ``size`` bytes."""
        free = self.free(size)

        def take() -> CallInfo:
            return free.pop() if free else self.new(size)

        return take, free.append

    def new(self, size: int) -> CallInfo:
        """A new frame of ``size`` bytes (mapped; the pool unmaps it at :meth:`close`)."""
        frame = bytearray(size)
        region = self.space.map(frame, "trampoline frame", "ctx", False)
        self._regions.append(region)
        return CallInfo(0, 0, frame, base=region.base)

    def close(self) -> None:
        """Unmap every frame the pool made."""
        for region in self._regions:
            self.space.unmap(region)
        self._regions.clear()
        for free in self._free.values():
            free.clear()


def set_ret(frame: bytearray, nargs: int, ret: int) -> None:
    """Store ``ret`` in the ret slots (``n+1``, and 7 in the seed layout)."""
    ret &= U64
    struct.pack_into("<Q", frame, (nargs + 1) * 8, ret)
    if nargs < MAX_ARGS:
        struct.pack_into("<Q", frame, RET_SLOT * 8, ret)


def read_slots(frame: bytearray | memoryview) -> tuple[int, ...]:
    """All slots as unsigned ints."""
    return struct.unpack_from(f"<{len(frame) // 8}Q", frame, 0)


@dataclass(slots=True)
class CallInfo:
    """What the tracing helpers need while one program runs.

    One object per call of a traced function; the trampoline updates
    ``kind``, ``cookie`` and ``slot`` before each program.

    :ivar ip: address of the traced function (``bpf_get_func_ip``).
    :ivar nargs: its argument count (``bpf_get_func_arg_cnt``).
    :ivar frame: the frame (``bpf_get_func_arg``/``bpf_get_func_ret`` read it).
    :ivar kind: the running program's kind.
    :ivar cookie: the running attachment's cookie (``bpf_get_attach_cookie``).
    :ivar slot: first slot of the running program's ``ctx``.
    :ivar abi: the running program's ABI.
    :ivar base: address of the frame's mapping in the VM (0: not mapped;
        each program run maps it).

    It is also the run context of the call's programs (the attributes of
    ``RunContext``: ``tracing`` is the call itself, the cookie the running
    attachment's, the rest the defaults), so a call needs no further object.
    """

    task: ClassVar[None] = None
    cpu: ClassVar[None] = None
    kernel_stack: ClassVar[tuple[int, ...]] = ()
    user_stack: ClassVar[tuple[int, ...]] = ()
    session_is_return: ClassVar[bool] = False
    session_cookie: ClassVar[int] = 0
    packet: ClassVar[None] = None
    extra: ClassVar[None] = None

    ip: int
    nargs: int
    frame: bytearray
    kind: ProgKind = ProgKind.FENTRY
    cookie: int = 0
    slot: int = 1
    abi: Abi = Abi.SEED
    base: int = 0
    #: the run state in-line trampolines run this frame's programs on (made with the frame's first such call;
    #: its context is this object)
    rs: RunState | None = None

    @property
    def tracing(self) -> CallInfo:
        """The traced call: this object (as ``RunContext.tracing``)."""
        return self

    def arg(self, i: int) -> int:
        """Argument ``i`` (0-based) as u64."""
        return struct.unpack_from("<Q", self.frame, (1 + i) * 8)[0]

    @property
    def ret(self) -> int:
        """The current return value (slot ``n+1``)."""
        return struct.unpack_from("<Q", self.frame, (self.nargs + 1) * 8)[0]

    @property
    def has_ret(self) -> bool:
        """True when ``bpf_get_func_ret`` is allowed for the running program."""
        return self.kind.sees_ret

    def ctx(self, nslots: int | None = None) -> tuple[int, ...]:
        """The running program's context as u64 values (for Python programs)."""
        vals = read_slots(self.frame)[self.slot :]
        return vals if nslots is None else vals[:nslots]
