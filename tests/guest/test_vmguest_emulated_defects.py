"""Three defects of the emulated kernel (issue 11), each against the guest's
6.12 kernel (the host refuses fentry): the same programs, built once, loaded
into both kernels through the one contract, with the same outcome.

- attaching one fentry program twice to one function: the second attach is
  refused with ``EBUSY``;
- trampolines on functions of more than 6 arguments:
  ``bpf_modify_return_test2`` has 7; fentry sees the 7th at ``ctx[6]``,
  fexit the return value at ``ctx[7]``;
- addresses by BTF id: ``lddw`` of a function's id (``&bpf_fentry_test1``)
  is the function's address (kallsyms in the kernel, the emulator's own
  function table there), and a typed ``__ksym`` per-CPU variable
  (``bpf_prog_active``) reads through ``bpf_this_cpu_ptr`` as 0 in a fentry
  program (trampolines do not raise it; the emulator's variable is zeroed).

A kprobe on a function the kernel lacks says so (ENOENT, not "no such event").

(The fourth, a raw tracepoint's context slots, runs on the host:
``tests/emu/test_raw_tp_context_vs_kernel.py``.)
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bpfmux.emu import Emulator
from bpfmux.errors import BpfError
from bpfmux.isa.build import R0, R1, R2, R6, R7, R10, Asm
from bpfmux.isa.insn import Insn
from bpfmux.isa.opcodes import Pseudo
from bpfmux.live import LiveKernel
from bpfmux.uapi import AttachType, BtfKind, MapType, ProgType

LDDW = 0x18
HELPER_MAP_LOOKUP, HELPER_GET_FUNC_IP, HELPER_THIS_CPU_PTR = 1, 173, 154


def _kernels() -> Iterator[tuple[str, Any]]:
    live = LiveKernel()
    emu = Emulator()  # the guest kernel's BTF: the same functions and prototypes
    try:
        yield "live", live
        yield "emulated", emu
    finally:
        emu.close()
        live.close()


def _both(body: Callable[[Any], Any]) -> dict[str, Any]:
    return {name: body(k) for name, k in _kernels()}


def _btf_id(kernel: Any, name: str, kind: BtfKind) -> int:
    return next(i for i in kernel.btf.find_ids(name) if kernel.btf.kind_of(i) == kind)


def _store(a: Asm, slot: int, src: Any) -> None:
    """``out[slot] = src`` (``src`` kept in r6 or r7 across the lookup)."""
    a.stw(R10, -4, slot).ld_map_fd(R1, "out").mov(R2, R10).add(R2, -4).call(HELPER_MAP_LOOKUP)
    a.jeq(R0, 0, f"skip{slot}").stxdw(R0, 0, src).label(f"skip{slot}")


def _out(kernel: Any) -> Any:
    return kernel.create_map(MapType.ARRAY, 4, 8, 4, name="out")


def _values(m: Any) -> list[int]:
    return [int.from_bytes(bytes(m[i]), "little") for i in range(4)]


def _trigger(kernel: Any) -> int:
    """An fmod_ret test run: the kernel calls bpf_modify_return_test and bpf_modify_return_test2."""
    prog = kernel.load_program(Asm().mov(R0, 0).exit().assemble().resolve({}), ProgType.TRACING, name="trigger",
                               attach_type=AttachType.MODIFY_RETURN, attach_target="bpf_modify_return_test")
    return int(prog.test_run().retval)


def test_second_attach_of_one_fentry_program_is_ebusy() -> None:
    def attach_twice(k: Any) -> tuple[str, int | None]:
        prog = k.load_program(Asm().mov(R0, 0).exit().assemble().resolve({}), ProgType.TRACING, name="twice",
                              attach_type=AttachType.TRACE_FENTRY, attach_target="bpf_fentry_test1")
        first = prog.attach()
        try:
            prog.attach()
        except BpfError as err:
            return first.kind, err.errno
        finally:
            first.close()
        return first.kind, None

    got = _both(attach_twice)
    assert got["live"] == got["emulated"] == ("fentry", errno.EBUSY)


@pytest.mark.parametrize("attach_type,slot,want", [(AttachType.TRACE_FENTRY, 6, 7), (AttachType.TRACE_FEXIT, 7, 29)],
                         ids=["fentry-7th-argument", "fexit-return-value"])
def test_seven_argument_trampoline(attach_type: AttachType, slot: int, want: int) -> None:
    """bpf_modify_return_test2(1, &b, 3, 4, 5, 6, 7) returns 1 + 3 + 3 + 4 + 5 + 6 + 7 = 29 (b is incremented)."""

    def run(k: Any) -> tuple[int, int]:
        out = _out(k)
        a = Asm().ldxdw(R6, R1, 8 * slot)
        _store(a, 0, R6)
        a.mov(R0, 0).exit()
        prog = k.load_program(a.assemble().resolve({"out": out.fd}), ProgType.TRACING, name="seven",
                              attach_type=attach_type, attach_target="bpf_modify_return_test2")
        with prog.attach():
            retval = _trigger(k)
        return _values(out)[0] & 0xFFFFFFFF, retval

    got = _both(run)
    assert got["live"] == got["emulated"]
    assert got["live"][0] == want


def test_function_address_and_typed_ksym_by_btf_id() -> None:
    def run(k: Any) -> dict[str, int]:
        out = _out(k)
        a = Asm().mov(R7, R1)
        a.raw(Insn(LDDW, 6, int(Pseudo.BTF_ID), 0, _btf_id(k, "bpf_fentry_test1", BtfKind.FUNC)))
        _store(a, 0, R6)  # &bpf_fentry_test1
        a.mov(R1, R7).call(HELPER_GET_FUNC_IP).mov(R6, R0)
        _store(a, 1, R6)  # the traced function's address, as the trampoline gives it
        a.raw(Insn(LDDW, 1, int(Pseudo.BTF_ID), 0, _btf_id(k, "bpf_prog_active", BtfKind.VAR)))
        a.call(HELPER_THIS_CPU_PTR).ldxw(R6, R0, 0)
        _store(a, 2, R6)  # this CPU's bpf_prog_active
        a.mov(R0, 0).exit()
        prog = k.load_program(a.assemble().resolve({"out": out.fd}), ProgType.TRACING, name="addrs",
                              attach_type=AttachType.TRACE_FENTRY, attach_target="bpf_fentry_test1")
        with prog.attach():
            assert prog.test_run().retval == 0
        v = _values(out)
        own = k.ksym_addr("bpf_fentry_test1") if isinstance(k, LiveKernel) else k.functions["bpf_fentry_test1"].addr
        return {"address_is_the_function": int(v[0] == own), "func_ip_minus_address": v[1] - v[0],
                "bpf_prog_active": v[2], "address_set": int(v[0] != 0)}

    got = _both(run)
    assert got["live"]["address_set"] and got["live"]["address_is_the_function"]
    assert got["live"] == got["emulated"]


def test_kprobe_on_a_function_this_kernel_lacks_says_so() -> None:
    """A corpus tool's kprobe on a module's function (fsdist's ext4_file_read_iter when ext4 is not loaded): the
    kernel's ENOENT, named as a missing function rather than a bad perf event."""
    from bpfmux.live import perf

    with pytest.raises(BpfError, match="this kernel has no function 'bpfmux_no_such_function'") as ei:
        perf.open_kprobe("bpfmux_no_such_function")
    assert ei.value.errno == errno.ENOENT
