"""The emulated kernel: an eBPF VM with maps and helpers, in pure Python.

Overview
========

* :class:`~bpfmux.emu.vm.machine.VM` — one emulated kernel's BPF machinery: an
  :class:`~bpfmux.emu.vm.memory.AddressSpace`, maps (with emulated fds),
  programs, the :class:`~bpfmux.emu.vm.helpers.HelperTable`, the current
  :class:`~bpfmux.emu.vm.runtime.Task`, the :class:`~bpfmux.emu.vm.runtime.Clock`
  and the CPUs.
* Two execution tiers with identical results:

  - ``"checked"`` (:mod:`bpfmux.emu.vm.interp`): an interpreter; every load and
    store is checked against the region it falls in; counts instructions.
  - ``"fast"`` (:mod:`bpfmux.emu.vm.translate`): each BPF function translated to
    one Python function, compiled once and cached: registers are locals, the
    control-flow graph becomes structured Python (natural loops → ``for``
    loops, forward branches → ``if``; block dispatch only for irreducible
    graphs), and within a block copies, constants and frame-pointer offsets
    are propagated, single-use results fused into their use and dead values
    dropped (global liveness); stack accesses at known offsets and map
    lookups/updates with known map and key go straight to the buffer / the
    map. Accesses still cannot leave their region (a buffer per region), and
    faults are reported exactly like the checked tier (same message, slot and
    address). ``bench/vm_speed.py``: ~65 M instructions/s on an ALU loop.

* Memory model (:mod:`bpfmux.emu.vm.memory`): programs never touch host memory.
  A pointer is an integer in an emulated address space where each region
  (context, stack frame, map value, ring buffer record, packet) has its own
  4 GiB slot. A bad access raises :class:`bpfmux.errors.EmulatorFault` with
  ``pc`` (the slot of the instruction) and ``address``.

Semantics are the kernel's: 32-bit operations zero-extend; division by zero
gives 0 and modulo by zero leaves the dividend (its low 32 bits for 32-bit
ops); shift amounts are masked; signed division and modulo truncate towards
zero (``INT_MIN / -1 == INT_MIN``, ``INT_MIN % -1 == 0``); ``movsx``,
``ldsx``, ``bswap``, ``gotol``, atomics (add/or/and/xor with and without
fetch, xchg, cmpxchg, load-acquire/store-release), ``may_goto``, legacy
``ld_abs``/``ld_ind`` (with :attr:`RunContext.packet`), bpf-to-bpf calls with a
512-byte stack per frame (at most 8 frames), tail calls through prog arrays
(at most 33 per run), ``lddw`` of maps, map values (global data), functions
and kernel symbols. ``callx`` calls a function address, or a helper by number
(as the conformance suite expects).

Quick start
===========

Create a VM, a map, and load instructions whose map relocations are
resolved to the map's fd::

    from bpfmux.emu import VM
    from bpfmux.isa.asm import assemble
    from bpfmux.uapi import MapType

    vm = VM()                                   # VM(ncpus=2, tier="checked", seed=1, ...)
    counts = vm.create_map(MapType.HASH, 4, 8, 1024, name="counts")

    # from an object: one emulated map per MapSpec (global data filled,
    # .rodata frozen), then the program relocated against their fds
    spec = bpfmux.obj.load_object("prog.bpf.o")
    maps = {ms.name: vm.map_from_spec(ms) for ms in spec.maps.values()}
    insns = spec.program("handler").instructions(lambda name: maps[name].fd, target_btf)
    prog = vm.load(insns, name="handler", prog_type=ProgType.SYSCALL)

    prog2 = vm.load(assemble("mov32 %r0, 7\\nexit"))  # or by hand (bpfmux.isa.asm)

Run it with a context buffer (``r1`` points at it) and get ``r0`` and the
context back; choose the tier per run (default: the VM's, ``"fast"``)::

    res = prog.run(b"\\x01\\x02...", tier="checked")
    res.r0, res.ctx, res.insns           # insns: executed count (checked tier only)

    frame = bytearray(64)                # a bytearray is mapped in place:
    prog.run(frame, ctx_offset=8)        # the program writes into it; r1 = frame + 8

Per-call context for helpers (what the trampoline layer supplies)::

    from bpfmux.emu import RunContext, FuncCall, Task
    ctx = RunContext(tracing=FuncCall(ip=0xffffffff81000000, args=[1, 2], retval=3),
                     cookie=42, task=Task(pid=7, tgid=7, comm="worker"), cpu=0,
                     kernel_stack=[0xffffffff81000010, 0xffffffff81000020])
    prog.run(frame, context=ctx)

``RunContext.tracing`` is anything with ``ip``, ``nargs``, ``cookie``,
``arg(i)``, ``ret`` and ``has_ret`` (the trampoline layer's ``CallInfo``
fits as is). The clock and current task are settable: ``vm.clock.set(ns)``,
``vm.task = Task(...)``, ``vm.cpu = 1``.

Addresses: each map has a handle address (``m.handle``, what ``lddw`` of its
fd yields), every value a program looks up is a region of ``vm.space``; a
task's user memory is an :class:`AddressSpace` of its own
(``AddressSpace(first_slot=0x10)`` gives user-looking addresses).

Register a helper (or a kfunc by BTF id)::

    def my_helper(rs, r1, r2, r3, r4, r5):   # rs: RunState (rs.read/rs.write/rs.context/rs.vm)
        return r1 + r2
    vm.helpers.register(200, my_helper, "my_helper")
    vm.register_kfunc(btf_id, my_kfunc)

Maps implement :class:`bpfmux.api.Map` (a ``MutableMapping``; keys and values
as ``bytes``, ints packed little-endian, or through a codec such as
:mod:`bpfmux.btf.codec`), see :mod:`bpfmux.emu.vm.maps`. ``vm.trace_log``
collects ``bpf_trace_printk`` output.

A run executes at most ``vm.run_budget`` instructions (``VM(run_budget=)``,
``Emulator(run_budget=)``; default 2**22), callbacks and tail calls
included: past it, EmulatorFault "run budget of N instructions exhausted"
(the checked tier at the first instruction past it, the fast tier at the
next loop head or function entry). A VM is not
thread-safe. Random programs for differential testing come from
:mod:`bpfmux.emu.vm.progen`; the conformance runner is
:mod:`bpfmux.emu.vm.conformance` (``bpfmux conformance DIR``).
"""

from .kernel import Emulator
from .vm.helpers import HelperTable
from .vm.machine import TIERS, VM, EmuProgram, RunResult
from .vm.maps import EmuMap, create_map
from .vm.memory import AddressSpace, Region
from .vm.runtime import Clock, FuncCall, RunContext, RunState, Task, TracingInfo

__all__ = [
    "TIERS",
    "VM",
    "AddressSpace",
    "Clock",
    "EmuMap",
    "Emulator",
    "EmuProgram",
    "FuncCall",
    "HelperTable",
    "Region",
    "RunContext",
    "RunResult",
    "RunState",
    "Task",
    "TracingInfo",
    "create_map",
]
