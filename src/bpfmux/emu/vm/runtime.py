"""What a program run sees besides its instructions: task, clock, CPU, call context.

* :class:`Task` — the emulated "current" task (pid, tgid, comm, uid, gid and
  optionally its user memory).
* :class:`Clock` — the emulated clock behind ``bpf_ktime_get_*_ns``; follows
  the host's monotonic clock until :meth:`Clock.set` freezes it.
* :class:`RunContext` — per-call context supplied by whoever runs a program
  (the trampoline layer, a hook, a test): the traced function's ip, arguments
  and return value, the attach cookie, session state, the task and CPU to use
  for this call, the stacks ``bpf_get_stackid`` records.
* :class:`FuncCall` — a ready-made tracing-call description for tests and
  simple hooks (the trampoline layer passes its own ``CallInfo``, which has
  the same attributes).
* :class:`RunState` — the state of one run, handed to every helper.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import BpfmuxError, EmulatorFault
from .memory import AddressSpace, Region

if TYPE_CHECKING:
    from .machine import VM, EmuProgram

U64 = 0xFFFFFFFFFFFFFFFF
#: Kernel's ``MAX_CALL_FRAMES``: frames of bpf-to-bpf calls and callbacks.
MAX_CALL_FRAMES = 8
#: Kernel's ``MAX_TAIL_CALL_CNT``.
MAX_TAIL_CALL_CNT = 33
#: Kernel's ``BPF_MAX_LOOPS``: the ``may_goto`` budget of one run.
BPF_MAX_LOOPS = 8 * 1024 * 1024
#: Size of one stack frame.
STACK_SIZE = 512

_TASK_COMM_LEN = 16


@dataclass
class Task:
    """The emulated current task.

    :ivar pid: thread id (``bpf_get_current_pid_tgid() & 0xffffffff``).
    :ivar tgid: process id (the upper 32 bits).
    :ivar comm: the task's command name (at most 15 bytes are visible).
    :ivar uid: user id; :ivar gid: group id.
    :ivar memory: the task's user memory, read by ``bpf_probe_read_user*``
        (``None``: every user read fails with ``-EFAULT``).
    :ivar cgroup: the task's cgroup v2 path (``bpf_current_task_under_cgroup``).
    :ivar task_struct: the address of the task's ``struct task_struct`` in kernel memory, what
        ``bpf_get_current_task`` and ``bpf_get_current_task_btf`` return (0: the emulated kernel has none
        for this task, and those helpers raise ``NotSupportedError``).
    """

    pid: int = 1
    tgid: int = 1
    comm: str | bytes = "bpfmux-emu"
    uid: int = 0
    gid: int = 0
    memory: AddressSpace | None = None
    cgroup: str = "/"
    task_struct: int = 0

    def comm_bytes(self) -> bytes:
        """``comm`` as the kernel stores it: at most 15 bytes and a NUL."""
        raw = self.comm.encode() if isinstance(self.comm, str) else bytes(self.comm)
        return raw[: _TASK_COMM_LEN - 1] + b"\0"


class Clock:
    """The emulated clock (nanoseconds).

    Until :meth:`set` is called it follows ``time.monotonic_ns()`` (boot and
    TAI clocks add fixed offsets). Once set it is frozen, and moves only
    through :meth:`set`/:meth:`advance` (or by ``auto_step`` ns after each
    read, when given) — which makes runs reproducible.
    """

    def __init__(self, now: int | None = None, auto_step: int = 0) -> None:
        self._fixed = now
        self.auto_step = auto_step
        self.boot_offset = 0
        self.tai_offset = 37_000_000_000

    def set(self, ns: int) -> None:
        """Freeze the clock at ``ns``."""
        self._fixed = int(ns)

    def advance(self, ns: int) -> None:
        """Move a frozen clock forward (freezes a running clock at now + ns)."""
        self._fixed = self.monotonic() + int(ns)

    def release(self) -> None:
        """Follow the host's monotonic clock again."""
        self._fixed = None

    @property
    def frozen(self) -> bool:
        """True when set to a fixed value."""
        return self._fixed is not None

    def monotonic(self) -> int:
        """``bpf_ktime_get_ns``."""
        if self._fixed is None:
            return time.monotonic_ns()
        now = self._fixed
        if self.auto_step:
            self._fixed = now + self.auto_step
        return now

    def boot(self) -> int:
        """``bpf_ktime_get_boot_ns`` (monotonic plus suspend time; none here)."""
        return self.monotonic() + self.boot_offset

    def tai(self) -> int:
        """``bpf_ktime_get_tai_ns``."""
        return self.monotonic() + self.tai_offset


class TracingInfo(Protocol):
    """What the tracing helpers read (``bpf_get_func_ip``/``_arg``/``_ret``,
    ``bpf_get_attach_cookie``). The trampoline layer's ``CallInfo`` has
    these attributes; :class:`FuncCall` is a plain implementation."""

    ip: int
    nargs: int
    cookie: int

    def arg(self, i: int) -> int: ...

    @property
    def ret(self) -> int: ...

    @property
    def has_ret(self) -> bool: ...


@dataclass
class FuncCall:
    """A traced call described by plain values (implements :class:`TracingInfo`).

    :ivar ip: the traced function's address.
    :ivar args: its arguments as u64.
    :ivar retval: its return value, or ``None`` before it returned (then
        ``bpf_get_func_ret`` fails with ``-EOPNOTSUPP``).
    :ivar cookie: the attach cookie.
    """

    ip: int = 0
    args: Sequence[int] = ()
    retval: int | None = None
    cookie: int = 0

    @property
    def nargs(self) -> int:
        """Argument count."""
        return len(self.args)

    def arg(self, i: int) -> int:
        """Argument ``i`` as u64."""
        return self.args[i] & U64

    @property
    def ret(self) -> int:
        """Return value as u64 (0 before the function returned)."""
        return (self.retval or 0) & U64

    @property
    def has_ret(self) -> bool:
        """True when the return value is visible."""
        return self.retval is not None


class Context(Protocol):
    """What a run's context provides (:class:`RunContext`, or any object with
    the same attributes: the trampolines' per-call ``CallInfo`` is one)."""

    @property
    def tracing(self) -> TracingInfo | None: ...

    @property
    def cookie(self) -> int | None: ...

    @property
    def task(self) -> Task | None: ...

    @property
    def cpu(self) -> int | None: ...

    @property
    def kernel_stack(self) -> Sequence[int]: ...

    @property
    def user_stack(self) -> Sequence[int]: ...

    @property
    def session_is_return(self) -> bool: ...

    @property
    def session_cookie(self) -> int: ...

    @property
    def packet(self) -> bytes | bytearray | None: ...

    @property
    def extra(self) -> dict[str, Any] | None: ...


@dataclass(slots=True)
class RunContext:
    """Per-call context for one program run (all optional).

    :ivar tracing: the traced call (:class:`TracingInfo`), for
        ``bpf_get_func_ip/arg/arg_cnt/ret`` and the cookie.
    :ivar cookie: the attach cookie when there is no ``tracing`` (kprobe,
        uprobe, tracepoint, perf-event links); overrides ``tracing.cookie``
        when set.
    :ivar task: the current task for this call (default: the VM's).
    :ivar cpu: the CPU this call runs on (default: the VM's).
    :ivar kernel_stack: instruction pointers of the kernel stack, innermost
        first, for ``bpf_get_stackid``/``bpf_get_stack``.
    :ivar user_stack: the same for the user stack (``BPF_F_USER_STACK``).
    :ivar session_is_return: for session programs (``kprobe.session``,
        ``uprobe.session``, ``fsession``): true in the return run.
    :ivar session_cookie: address of the session's u64 cookie slot (the
        ``bpf_session_cookie`` kfunc returns it).
    :ivar packet: packet data for the legacy ``ld_abs``/``ld_ind``
        instructions (socket filters).
    :ivar extra: free-form values for helpers registered by other layers
        (``None`` when there are none).
    """

    tracing: TracingInfo | None = None
    cookie: int | None = None
    task: Task | None = None
    cpu: int | None = None
    kernel_stack: Sequence[int] = ()
    user_stack: Sequence[int] = ()
    session_is_return: bool = False
    session_cookie: int = 0
    packet: bytes | bytearray | None = None
    extra: dict[str, Any] | None = None


_DEFAULT_CONTEXT: Context = RunContext()


class RunState:
    """The state of one program run; every helper gets it as first argument.

    :ivar vm: the VM.
    :ivar space: its :class:`AddressSpace` (use :meth:`read`/:meth:`write`).
    :ivar context: the :class:`RunContext` of this call.
    :ivar task: the current task; :ivar cpu: the current CPU.
    :ivar prog: the program that started this run (tail calls change
        :attr:`current`).
    :ivar tier: ``"checked"``, ``"fast"`` or ``"native"``.
    :ivar pc: in the checked tier, the slot of the instruction being
        executed (for fault messages); ``None`` in the fast tier.
    :ivar insns: instructions executed so far (checked tier).
    :ivar left: what is left of the run budget (fast and native tiers): ``VM.run_budget``
        less the instructions charged so far; the run stops once it is
        negative.
    """

    __slots__ = (
        "_frames",
        "context",
        "cpu",
        "current",
        "deferred",
        "depth",
        "frames",
        "insns",
        "left",
        "locks",
        "loops_left",
        "pc",
        "prog",
        "reservations",
        "space",
        "tail_calls",
        "task",
        "tier",
        "vm",
    )

    def __init__(self, vm: VM, prog: EmuProgram, tier: str, context: Context | None) -> None:
        self.vm = vm
        self.space = vm.space
        self.frames: list[tuple[int, bytearray]] = []
        self._frames: list[Region] = []
        self.pc: int | None = None
        self.reservations: dict[int, Any] = {}
        self.locks: set[int] = set()
        self.deferred: list[Callable[[], None]] = []
        self.restart(prog, tier, context)

    # -- memory -------------------------------------------------------------

    def read(self, addr: int, size: int) -> bytes:
        """Read program memory.

        :raises EmulatorFault: not readable.
        """
        return self.space.read(addr, size, self.pc)

    def write(self, addr: int, data: bytes | bytearray | memoryview) -> None:
        """Write program memory.

        :raises EmulatorFault: not writable.
        """
        self.space.write(addr, data, self.pc)

    def read_u64(self, addr: int) -> int:
        """Read a u64 of program memory.

        :raises EmulatorFault: not readable.
        """
        return self.space.read_u64(addr, self.pc)

    def fault(self, message: str, address: int | None = None) -> EmulatorFault:
        """An :class:`EmulatorFault` at the current instruction."""
        where = f"insn {self.pc}: " if self.pc is not None else ""
        return EmulatorFault(f"{where}{message}", pc=self.pc, address=address)

    # -- calls back into the program ------------------------------------------

    def call_function(self, addr: int, *args: int) -> int:
        """Call the BPF subprogram at ``addr`` (a ``BPF_PSEUDO_FUNC`` address)
        with up to five arguments, in a new frame; returns its ``r0``.

        Used by callback helpers (``bpf_loop``, ``bpf_for_each_map_elem``).

        :raises EmulatorFault: ``addr`` is not a function, or the call depth
            would exceed 8 frames.
        """
        from .machine import resolve_function

        prog, pc = resolve_function(self, addr)
        regs = [a & U64 for a in args] + [0] * (5 - len(args))
        return prog.call_subprogram(self, pc, regs[:5], self.depth + 1)

    def callback(self, addr: int) -> Callable[..., int]:
        """The BPF function at ``addr`` (a ``BPF_PSEUDO_FUNC`` address) as a
        Python callable ``f(r1, r2, r3, r4, r5)`` returning its ``r0``, run
        one frame deeper than the helper's caller: resolved once, for a
        helper that calls it many times (``bpf_loop``).

        :raises EmulatorFault: ``addr`` is not a function.
        """
        from .machine import resolve_function

        prog, pc = resolve_function(self, addr)
        depth = self.depth + 1
        if self.tier == "checked":
            from .interp import interpret

            def run_checked(r1: int = 0, r2: int = 0, r3: int = 0, r4: int = 0, r5: int = 0) -> int:
                return interpret(self, prog, pc, [r1 & U64, r2 & U64, r3 & U64, r4 & U64, r5 & U64], depth)

            return run_checked
        if self.tier == "native":  # natively when the callback compiles (else the fast tier, inside run_function)
            from .native.runner import run_function

            def run_native(r1: int = 0, r2: int = 0, r3: int = 0, r4: int = 0, r5: int = 0) -> int:
                return run_function(self, prog, pc, [r1 & U64, r2 & U64, r3 & U64, r4 & U64, r5 & U64], depth)

            return run_native
        fn = prog.fast_function(pc)

        def run_fast(r1: int = 0, r2: int = 0, r3: int = 0, r4: int = 0, r5: int = 0) -> int:
            return fn(self, r1 & U64, r2 & U64, r3 & U64, r4 & U64, r5 & U64, depth)

        return run_fast

    def fast_callback(self, addr: int) -> tuple[Callable[..., int], int]:
        """The fast tier's function for the BPF function at ``addr`` and the
        call depth to give it (see :meth:`callback`).

        :raises EmulatorFault: ``addr`` is not a function.
        """
        from .machine import resolve_function

        prog, pc = resolve_function(self, addr)
        return prog.fast_function(pc), self.depth + 1

    def charge(self, count: int) -> None:
        """Count ``count`` instructions a helper runs on the program's behalf
        (``bpf_loop``'s own loop, as the kernel inlines it) against the run budget.

        :raises EmulatorFault: the run budget is exhausted.
        """
        if self.tier == "checked":
            self.insns += count
            over = self.insns > self.vm.run_budget
        else:
            self.left -= count
            over = self.left < 0
        if over:
            from .interp import budget_fault

            raise budget_fault(self.vm.run_budget, self.pc)

    def frame(self, depth: int) -> tuple[int, bytearray]:
        """``(address, buffer)`` of the stack frame at call depth ``depth``,
        zeroed.

        :raises EmulatorFault: ``depth`` is 8 or more.
        """
        frames = self.frames
        if depth < len(frames):
            base, buf = frames[depth]
            buf[:] = _ZERO_FRAME
            return base, buf
        if depth >= MAX_CALL_FRAMES:
            raise self.fault(f"call depth exceeds {MAX_CALL_FRAMES} frames")
        while len(frames) <= depth:
            region = self.vm._acquire_frame()
            self._frames.append(region)
            frames.append((region.base, region.buf))  # type: ignore[arg-type]  # frame regions map bytearrays (Region.buf allows views)
        return frames[depth]

    def restart(self, prog: EmuProgram, tier: str, context: Context | None) -> None:
        """Make this state the start of a run (what a new :class:`RunState` is), keeping its stack frames: the
        lean entry (:meth:`~bpfmux.emu.vm.machine.EmuProgram.run_at`) reuses finished states.

        :raises BpfmuxError: the context names a CPU the VM does not have.
        """
        vm = self.vm
        self.prog = self.current = prog
        self.tier = tier
        self.context = context = context or _DEFAULT_CONTEXT
        self.task = context.task or vm.task
        cpu = context.cpu
        self.cpu = cpu = vm.cpu if cpu is None else cpu
        if not 0 <= cpu < vm.ncpus:
            raise BpfmuxError(f"cpu {cpu} does not exist; the VM has {vm.ncpus} CPUs (VM(ncpus=...))")
        self.depth = self.tail_calls = self.insns = 0
        self.left = vm.run_budget
        self.loops_left = vm.may_goto_budget
        self.pc = None
        if self.locks:
            self.locks.clear()

    def settle(self) -> None:
        """End a run of a reused state: abandon what the program left reserved, forget locks a fault left
        held, run deferred work; the stack frames stay with the state."""
        if self.locks:
            self.locks.clear()
        if self.reservations:
            for res in list(self.reservations.values()):
                res.abandon()
            self.reservations.clear()
        if self.deferred:
            deferred, self.deferred = self.deferred, []
            for fn in deferred:
                fn()

    def finish(self) -> None:
        """Release the frames and run deferred work (end of the outermost run)."""
        for region in reversed(self._frames):  # LIFO pool: the next run gets the same frames at the same depths
            self.vm._release_frame(region)
        self._frames.clear()
        self.frames.clear()
        self.settle()


_ZERO_FRAME = bytes(STACK_SIZE)
_U64S = struct.Struct("<Q")
