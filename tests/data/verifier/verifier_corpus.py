"""The invalid-program corpus: programs both the kernel and bpfmux's verifier must reject.

Each :class:`Case` is one program, written with the builder below (named
after the kernel's ``BPF_*`` instruction macros), with the maps it uses
(``lddw`` map immediates are indices into ``maps``; the live test swaps in
real fds), the errno both verifiers must return, and a fragment ``why`` that
bpfmux's message must contain. ``kernel_why`` is the fragment the kernel's
log must contain (defaults to ``why``: most messages use the kernel's words).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bpfmux.isa import Insn
from bpfmux.uapi import HelperId as H
from bpfmux.uapi import MapType as M
from bpfmux.uapi import ProgType as P

EACCES, EINVAL, E2BIG, EBADF = 13, 22, 7, 9

# ---------------------------------------------------------------- builder
B, HW, W, DW = 0x10, 0x08, 0x00, 0x18
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH, NEG, MOD, XOR, MOV = (0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,
                                                          0x90, 0xA0, 0xB0)
JEQ, JGT, JGE, JNE, JSGT, JLT = 0x10, 0x20, 0x30, 0x50, 0x60, 0xA0


def MOV64_IMM(d: int, imm: int) -> Insn:
    return Insn(0xB7, d, 0, 0, imm)


def MOV64_REG(d: int, s: int) -> Insn:
    return Insn(0xBF, d, s)


def ALU64_IMM(op: int, d: int, imm: int) -> Insn:
    return Insn(0x07 | op, d, 0, 0, imm)


def ALU64_REG(op: int, d: int, s: int) -> Insn:
    return Insn(0x0F | op, d, s)


def ALU32_IMM(op: int, d: int, imm: int) -> Insn:
    return Insn(0x04 | op, d, 0, 0, imm)


def LDX(size: int, d: int, s: int, off: int) -> Insn:
    return Insn(0x61 | size, d, s, off)


def STX(size: int, d: int, s: int, off: int) -> Insn:
    return Insn(0x63 | size, d, s, off)


def ST(size: int, d: int, off: int, imm: int) -> Insn:
    return Insn(0x62 | size, d, 0, off, imm)


def ATOMIC_ADD(size: int, d: int, s: int, off: int) -> Insn:
    return Insn(0xC3 | size, d, s, off, 0)


def JMP_IMM(op: int, d: int, imm: int, off: int) -> Insn:
    return Insn(0x05 | op, d, 0, off, imm)


def JMP_REG(op: int, d: int, s: int, off: int) -> Insn:
    return Insn(0x0D | op, d, s, off)


def JA(off: int) -> Insn:
    return Insn(0x05, 0, 0, off)


def CALL(helper: int) -> Insn:
    return Insn(0x85, 0, 0, 0, int(helper))


def CALL_LOCAL(off: int) -> Insn:
    return Insn(0x85, 0, 1, 0, off)


def EXIT() -> Insn:
    return Insn(0x95)


def LD_MAP(d: int, idx: int) -> Insn:
    return Insn(0x18, d, 1, 0, idx)


def LD_MAP_VALUE(d: int, idx: int, off: int = 0) -> Insn:
    return Insn(0x18, d, 2, 0, idx | (off << 32))


def LD_FUNC(d: int, off: int) -> Insn:
    return Insn(0x18, d, 4, 0, off)


def LD_IMM64(d: int, v: int) -> Insn:
    return Insn(0x18, d, 0, 0, v & 0xFFFFFFFFFFFFFFFF)


RET0 = [MOV64_IMM(0, 0), EXIT()]


def KEY_ON_STACK(reg: int = 2, off: int = -4) -> list[Insn]:
    """``*(u32 *)(r10 + off) = 0; reg = r10 + off``."""
    return [ST(W, 10, off, 0), MOV64_REG(reg, 10), ALU64_IMM(ADD, reg, off)]


def LOOKUP(map_idx: int = 0) -> list[Insn]:
    """``r0 = bpf_map_lookup_elem(map, &key)`` with key 0 on the stack."""
    return [*KEY_ON_STACK(), LD_MAP(1, map_idx), CALL(H.map_lookup_elem)]


@dataclass(frozen=True)
class MapDef:
    type: int
    key_size: int
    value_size: int
    max_entries: int = 4
    flags: int = 0


@dataclass(frozen=True)
class Case:
    name: str
    prog_type: int
    insns: list[Insn]
    errno: int
    why: str
    maps: tuple[MapDef, ...] = ()
    kernel_why: str = ""
    attach_type: int = 0
    category: str = ""
    note: str = ""
    slow: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def kernel_fragment(self) -> str:
        return self.kernel_why or self.why


HASH = MapDef(M.HASH, 4, 8)
ARRAY = MapDef(M.ARRAY, 4, 16)
RINGBUF = MapDef(M.RINGBUF, 0, 0, 4096)
RODATA = MapDef(M.ARRAY, 4, 16, 1, 1 << 7)
PROG_ARRAY = MapDef(M.PROG_ARRAY, 4, 4)

KP, TP, PE, RAW, SOCK = P.KPROBE, P.TRACEPOINT, P.PERF_EVENT, P.RAW_TRACEPOINT, P.SOCKET_FILTER


def _ktime(reg: int) -> list[Insn]:
    """``reg = bpf_ktime_get_ns()`` (an unknown 64-bit scalar)."""
    return [CALL(H.ktime_get_ns), MOV64_REG(reg, 0)]


def _rand(reg: int) -> list[Insn]:
    """``reg = bpf_get_prandom_u32()`` (an unknown scalar)."""
    return [CALL(H.get_prandom_u32), MOV64_REG(reg, 0)]


CASES: list[Case] = [
    # ---------------------------------------------------------------- control flow
    Case("jump_out_of_range_forward", KP, [MOV64_IMM(0, 0), JA(5), EXIT()], EINVAL, "jump out of range",
         category="cfg"),
    Case("jump_out_of_range_backward", KP, [MOV64_IMM(0, 0), JA(-3), EXIT()], EINVAL, "jump out of range",
         category="cfg"),
    Case("unreachable_insn", KP, [MOV64_IMM(0, 0), EXIT(), MOV64_IMM(0, 1), EXIT()], EINVAL, "unreachable insn",
         category="cfg"),
    Case("falls_off_the_end", KP, [MOV64_IMM(0, 0), ALU64_IMM(ADD, 0, 1)], EINVAL,
         "last insn is not an exit or jmp", category="cfg"),
    Case("jump_into_ldimm64", KP, [JA(1), LD_IMM64(0, 1), EXIT()], EINVAL, "unreachable insn 1", category="cfg"),
    Case("infinite_self_loop", KP, [MOV64_IMM(0, 0), JA(-1)], EINVAL, "infinite loop detected", category="loop"),
    Case("infinite_loop_unknown_counter", KP,
         [*_rand(6), ALU64_IMM(ADD, 6, 1), JMP_IMM(JNE, 6, 0, -2), MOV64_IMM(0, 0), EXIT()], EINVAL,
         "infinite loop detected", category="loop"),
    Case("infinite_loop_no_progress", KP,
         [MOV64_IMM(1, 0), MOV64_IMM(0, 0), JMP_IMM(JLT, 1, 10, -1), EXIT()], EINVAL, "infinite loop detected",
         category="loop"),
    Case("unbounded_loop_counter_grows", KP,
         [MOV64_IMM(1, 10), ALU64_IMM(ADD, 1, 1), JMP_IMM(JGT, 1, 5, -2), MOV64_IMM(0, 0), EXIT()], E2BIG,
         "BPF program is too large", category="loop", slow=True),
    Case("call_to_invalid_destination", KP, [CALL_LOCAL(10), MOV64_IMM(0, 0), EXIT()], EINVAL,
         "call to invalid destination", category="cfg"),
    Case("unknown_opcode", KP, [Insn(0xFF), *RET0], EINVAL, "unknown opcode ff", category="cfg"),
    Case("alu_reserved_fields", KP, [Insn(0x07, 0, 1, 0, 1), *RET0], EINVAL, "BPF_ALU uses reserved fields",
         category="cfg"),
    Case("div_by_zero_imm", KP, [MOV64_IMM(0, 1), ALU64_IMM(DIV, 0, 0), EXIT()], EINVAL, "div by zero",
         category="cfg"),
    Case("invalid_shift", KP, [MOV64_IMM(0, 1), ALU64_IMM(LSH, 0, 64), EXIT()], EINVAL, "invalid shift 64",
         category="cfg"),
    Case("exit_reserved_fields", KP, [MOV64_IMM(0, 0), Insn(0x95, 1)], EINVAL, "BPF_EXIT uses reserved fields",
         category="cfg"),
    # ---------------------------------------------------------------- uninitialized registers
    Case("r0_not_set_at_exit", KP, [EXIT()], EACCES, "R0 !read_ok", category="uninit"),
    Case("mov_from_uninit", KP, [MOV64_REG(0, 2), EXIT()], EACCES, "R2 !read_ok", category="uninit"),
    Case("add_uninit", KP, [MOV64_IMM(0, 0), ALU64_REG(ADD, 0, 3), EXIT()], EACCES, "R3 !read_ok",
         category="uninit"),
    Case("store_uninit", KP, [STX(DW, 10, 5, -8), *RET0], EACCES, "R5 !read_ok", category="uninit"),
    Case("compare_uninit", KP, [MOV64_IMM(0, 0), JMP_IMM(JGT, 4, 0, 0), EXIT()], EACCES, "R4 !read_ok",
         category="uninit"),
    Case("helper_arg_uninit", KP, [LD_MAP(1, 0), CALL(H.map_lookup_elem), *RET0], EACCES, "R2 !read_ok",
         maps=(HASH,), category="uninit"),
    Case("r1_clobbered_by_call", KP, [CALL(H.ktime_get_ns), MOV64_REG(0, 1), EXIT()], EACCES, "R1 !read_ok",
         category="uninit"),
    Case("callee_reads_callee_saved", KP, [CALL_LOCAL(1), EXIT(), MOV64_REG(0, 6), EXIT()], EACCES,
         "R6 !read_ok", category="uninit"),
    Case("load_base_uninit", KP, [LDX(DW, 0, 7, 0), EXIT()], EACCES, "R7 !read_ok", category="uninit"),
    # ---------------------------------------------------------------- stack
    Case("stack_write_below_512", KP, [ST(DW, 10, -520, 0), *RET0], EACCES,
         "invalid write to stack R10 off=-520 size=8", kernel_why="invalid write to stack", category="stack"),
    Case("stack_write_at_fp", KP, [ST(DW, 10, 0, 0), *RET0], EACCES, "invalid write to stack",
         category="stack"),
    Case("stack_read_above_fp", KP, [LDX(DW, 0, 10, 8), EXIT()], EACCES, "invalid read from stack",
         category="stack"),
    Case("stack_misaligned", KP, [ST(W, 10, -6, 0), *RET0], EACCES, "misaligned stack access", category="stack"),
    Case("write_r10", KP, [MOV64_IMM(10, 0), *RET0], EACCES, "frame pointer is read only", category="stack"),
    Case("add_to_r10", KP, [ALU64_IMM(ADD, 10, 8), *RET0], EACCES, "frame pointer is read only",
         category="stack"),
    Case("partial_pointer_spill", KP, [STX(W, 10, 1, -8), *RET0], EACCES, "invalid size of register spill",
         category="stack"),
    Case("var_offset_stack_out_of_bounds", KP,
         [*_rand(1), ALU64_IMM(AND, 1, 0xFFF), MOV64_REG(2, 10), ALU64_REG(ADD, 2, 1), LDX(B, 0, 2, -8), *RET0], EINVAL, "invalid variable-offset read from stack", category="stack"),
    Case("helper_writes_past_stack", KP,
         [MOV64_REG(1, 10), ALU64_IMM(ADD, 1, -8), MOV64_IMM(2, 16), CALL(H.get_current_comm), *RET0], EINVAL,
         "invalid write to stack R1 off=-8 size=16", category="stack"),
    Case("combined_stack_too_large", SOCK,
         [ST(DW, 10, -400, 0), CALL_LOCAL(2), MOV64_IMM(0, 0), EXIT(), ST(DW, 10, -200, 0), MOV64_IMM(0, 0), EXIT()],
         EACCES, "combined stack size", category="stack"),
    Case("call_stack_too_deep", KP,
         [CALL_LOCAL(1), EXIT()] + [x for i in range(8) for x in (CALL_LOCAL(1), EXIT())] + [MOV64_IMM(0, 0), EXIT()],
         E2BIG, "frames is too deep", category="stack"),
    Case("return_stack_pointer", KP,
         [CALL_LOCAL(2), MOV64_IMM(0, 0), EXIT(), ST(DW, 10, -8, 0), MOV64_REG(0, 10), ALU64_IMM(ADD, 0, -8), EXIT()],
         EINVAL, "cannot return stack pointer to the caller", category="stack"),
    Case("stack_pointer_subtraction", KP, [MOV64_REG(1, 10), ALU64_IMM(SUB, 1, 8), ST(DW, 1, 0, 0), *RET0], EACCES,
         "R1 subtraction from stack pointer prohibited", category="stack"),
    # ---------------------------------------------------------------- context
    Case("kprobe_ctx_past_pt_regs", KP, [LDX(DW, 0, 1, 168), EXIT()], EACCES,
         "invalid bpf_context access off=168 size=8", category="ctx"),
    Case("kprobe_ctx_negative", KP, [LDX(DW, 0, 1, -8), EXIT()], EACCES, "invalid bpf_context access",
         category="ctx"),
    Case("kprobe_ctx_misaligned", KP, [LDX(W, 0, 1, 2), EXIT()], EACCES, "invalid bpf_context access off=2 size=4",
         category="ctx"),
    Case("kprobe_ctx_write", KP, [MOV64_IMM(0, 0), STX(DW, 1, 0, 0), EXIT()], EACCES,
         "invalid bpf_context access off=0 size=8", category="ctx"),
    Case("kprobe_ctx_st_imm", KP, [ST(DW, 1, 0, 0), *RET0], EACCES, "invalid bpf_context access off=0 size=8",
         category="ctx"),
    Case("modified_ctx_deref", KP, [ALU64_IMM(ADD, 1, 8), LDX(DW, 0, 1, 0), EXIT()], EACCES,
         "dereference of modified ctx ptr R1 off=8 disallowed", category="ctx"),
    Case("tracepoint_hidden_header", TP, [LDX(W, 0, 1, 4), EXIT()], EACCES, "invalid bpf_context access off=4",
         category="ctx"),
    Case("tracepoint_past_max_trace_size", TP, [LDX(DW, 0, 1, 8192), EXIT()], EACCES,
         "invalid bpf_context access off=8192", category="ctx"),
    Case("tracepoint_write", TP, [MOV64_IMM(0, 0), STX(DW, 1, 0, 8), EXIT()], EACCES, "invalid bpf_context access",
         category="ctx"),
    Case("perf_event_narrow_regs", PE, [LDX(W, 0, 1, 0), EXIT()], EACCES, "invalid bpf_context access off=0 size=4",
         category="ctx"),
    Case("perf_event_past_end", PE, [LDX(DW, 0, 1, 184), EXIT()], EACCES, "invalid bpf_context access off=184",
         category="ctx"),
    Case("raw_tp_args12", RAW, [LDX(DW, 0, 1, 96), EXIT()], EACCES, "invalid bpf_context access off=96",
         category="ctx"),
    Case("raw_tp_write", RAW, [MOV64_IMM(0, 0), STX(DW, 1, 0, 0), EXIT()], EACCES, "invalid bpf_context access",
         category="ctx"),
    Case("socket_filter_write_len", SOCK, [MOV64_IMM(0, 0), STX(W, 1, 0, 0), EXIT()], EACCES,
         "invalid bpf_context access off=0 size=4", category="ctx"),
    Case("socket_filter_tc_classid", SOCK, [LDX(W, 0, 1, 72), EXIT()], EACCES,
         "invalid bpf_context access off=72 size=4", category="ctx"),
    Case("atomic_on_ctx", KP, [MOV64_IMM(2, 1), ATOMIC_ADD(DW, 1, 2, 0), *RET0], EACCES,
         "BPF_ATOMIC stores into R1 ctx is not allowed", category="ctx"),
    Case("ctx_arg_not_ctx", KP,
         [MOV64_REG(1, 10), LD_MAP(2, 0), MOV64_IMM(3, 0), MOV64_REG(4, 10), ALU64_IMM(ADD, 4, -8), ST(DW, 10, -8, 0),
          MOV64_IMM(5, 8), CALL(H.perf_event_output), *RET0], EACCES, "R1 type=fp expected=ctx",
         maps=(MapDef(M.PERF_EVENT_ARRAY, 4, 4),), category="ctx"),
    # ---------------------------------------------------------------- map values
    Case("lookup_without_null_check", KP, [*LOOKUP(), LDX(DW, 0, 0, 0), EXIT()], EACCES,
         "invalid mem access 'map_value_or_null'", maps=(HASH,), category="map"),
    Case("map_value_past_end", KP, [*LOOKUP(), JMP_IMM(JEQ, 0, 0, 1), LDX(DW, 0, 0, 8), *RET0], EACCES,
         "invalid access to map value, value_size=8 off=8 size=8", maps=(HASH,), category="map"),
    Case("map_value_negative_offset", KP, [*LOOKUP(), JMP_IMM(JEQ, 0, 0, 1), LDX(DW, 0, 0, -8), *RET0], EACCES,
         "invalid access to map value", maps=(HASH,), category="map"),
    Case("map_value_write_past_end", KP, [*LOOKUP(), JMP_IMM(JEQ, 0, 0, 1), ST(W, 0, 6, 1), *RET0], EACCES,
         "invalid access to map value, value_size=8 off=6 size=4", maps=(HASH,), category="map"),
    Case("map_value_unbounded_index", KP,
         [*_rand(6), *LOOKUP(), JMP_IMM(JEQ, 0, 0, 2), ALU64_REG(ADD, 0, 6), LDX(B, 0, 0, 0), *RET0], EINVAL,
         "math between map_value pointer and register with unbounded min value is not allowed", maps=(HASH,),
         category="map"),
    Case("map_value_large_index", KP,
         [*_rand(6), ALU64_IMM(AND, 6, 0x3FFFFFFF), *LOOKUP(), JMP_IMM(JEQ, 0, 0, 2), ALU64_REG(ADD, 0, 6),
          LDX(B, 0, 0, 0), *RET0], EACCES, "unbounded memory access", maps=(HASH,), category="map"),
    Case("map_value_index_too_large", KP,
         [*_rand(6), ALU64_IMM(AND, 6, 15), *LOOKUP(), JMP_IMM(JEQ, 0, 0, 2), ALU64_REG(ADD, 0, 6),
          LDX(DW, 0, 0, 0), *RET0], EACCES, "invalid access to map value, value_size=16", maps=(ARRAY,),
         category="map"),
    Case("map_value_signed_index", KP,
         [*_ktime(6), ALU64_IMM(AND, 6, 0xFF), ALU64_IMM(SUB, 6, 128), *LOOKUP(), JMP_IMM(JEQ, 0, 0, 2),
          ALU64_REG(ADD, 0, 6),
          LDX(B, 0, 0, 0), *RET0], EACCES, "min value is negative", maps=(HASH,), category="map"),
    Case("write_into_readonly_map", KP, [LD_MAP_VALUE(1, 0), ST(DW, 1, 0, 1), *RET0], EACCES,
         "write into map forbidden", maps=(RODATA,), category="map"),
    Case("arith_on_map_value_or_null", KP, [*LOOKUP(), ALU64_IMM(ADD, 0, 8), *RET0], EACCES,
         "pointer arithmetic on map_value_or_null prohibited", maps=(HASH,), category="map"),
    Case("map_key_on_short_stack", KP,
         [MOV64_REG(2, 10), ALU64_IMM(ADD, 2, -2), ST(HW, 10, -2, 0), LD_MAP(1, 0), CALL(H.map_lookup_elem), *RET0],
         EINVAL, "invalid read from stack R2 off=-2 size=4", maps=(HASH,), category="map"),
    Case("map_key_is_scalar", KP, [MOV64_IMM(2, 0), LD_MAP(1, 0), CALL(H.map_lookup_elem), *RET0], EACCES,
         "R2 type=scalar expected=", maps=(HASH,), category="map"),
    Case("lookup_on_ringbuf", KP, [*LOOKUP(), *RET0], EACCES, "invalid zero-sized read", maps=(RINGBUF,),
         category="map"),
    Case("lookup_on_perf_event_array", KP, [*LOOKUP(), *RET0], EINVAL, "cannot pass map_type 4 into func "
         "bpf_map_lookup_elem#1", maps=(MapDef(M.PERF_EVENT_ARRAY, 4, 4),), category="map"),
    Case("ringbuf_output_on_hash", KP,
         [LD_MAP(1, 0), MOV64_REG(2, 10), ALU64_IMM(ADD, 2, -8), ST(DW, 10, -8, 0), MOV64_IMM(3, 8),
          MOV64_IMM(4, 0), CALL(H.ringbuf_output), *RET0], EINVAL, "cannot pass map_type 1 into func "
         "bpf_ringbuf_output#130", maps=(HASH,), category="map"),
    Case("tail_call_with_hash", KP, [LD_MAP(2, 0), MOV64_IMM(3, 0), CALL(H.tail_call), *RET0], EINVAL,
         "expected prog array map for tail call", maps=(HASH,), category="map"),
    Case("bad_map_fd", KP, [LD_MAP(1, 4000), *RET0], EBADF, "is not pointing to valid bpf_map", category="map",
         extra={"bad_fd": 4000}),
    Case("update_value_too_small", KP,
         [*KEY_ON_STACK(), LD_MAP(1, 0), MOV64_REG(3, 10), ALU64_IMM(ADD, 3, -2), ST(HW, 10, -2, 0),
          MOV64_IMM(4, 0), CALL(H.map_update_elem), *RET0], EINVAL, "invalid read from stack R3 off=-2 size=8",
         maps=(HASH,), category="map"),
    Case("scalar_deref", KP, [MOV64_IMM(0, 0), LDX(DW, 0, 0, 0), EXIT()], EACCES, "R0 invalid mem access 'scalar'",
         category="map"),
    # ---------------------------------------------------------------- helpers
    Case("kprobe_skb_load_bytes", KP, [CALL(H.skb_load_bytes), *RET0], EINVAL,
         "program of this type cannot use helper bpf_skb_load_bytes#26", category="helper"),
    Case("socket_filter_get_stackid", SOCK, [CALL(H.get_stackid), *RET0], EINVAL,
         "program of this type cannot use helper bpf_get_stackid#27", category="helper"),
    Case("tracepoint_perf_prog_read_value", TP, [CALL(H.perf_prog_read_value), *RET0], EINVAL,
         "program of this type cannot use helper bpf_perf_prog_read_value#56", category="helper"),
    Case("raw_tp_get_func_arg", RAW, [CALL(H.get_func_arg), *RET0], EINVAL,
         "program of this type cannot use helper bpf_get_func_arg#183", category="helper"),
    Case("kprobe_xdp_adjust_head", KP, [CALL(H.xdp_adjust_head), *RET0], EINVAL,
         "program of this type cannot use helper bpf_xdp_adjust_head#44", category="helper"),
    Case("socket_filter_probe_read", SOCK, [CALL(H.probe_read), *RET0], EINVAL,
         "program of this type cannot use helper bpf_probe_read#4", category="helper"),
    Case("unknown_helper", KP, [CALL(999), *RET0], EINVAL, "invalid func unknown#999", category="helper"),
    Case("probe_read_unbounded_size", KP,
         [*_rand(2), ALU64_IMM(AND, 2, 0x3FFFFFFF), MOV64_REG(1, 10), ALU64_IMM(ADD, 1, -8), MOV64_IMM(3, 0),
          CALL(H.probe_read_kernel), *RET0], EACCES, "R2 unbounded memory access", category="helper"),
    Case("probe_read_unknown_size", KP,
         [*_rand(2), MOV64_REG(1, 10), ALU64_IMM(ADD, 1, -8), MOV64_IMM(3, 0), CALL(H.probe_read_kernel), *RET0],
         EACCES, "R2 min value is negative", category="helper"),
    Case("get_comm_zero_size", KP,
         [MOV64_REG(1, 10), ALU64_IMM(ADD, 1, -8), MOV64_IMM(2, 0), CALL(H.get_current_comm), *RET0], EACCES,
         "invalid zero-sized read", category="helper"),
    Case("probe_read_negative_size", KP,
         [*_rand(2), ALU64_IMM(SUB, 2, 4), JMP_IMM(JSGT, 2, 8, 4), MOV64_REG(1, 10), ALU64_IMM(ADD, 1, -8),
          MOV64_IMM(3, 0), CALL(H.probe_read_kernel), *RET0], EACCES, "min value is negative",
         kernel_why="R2 min value is negative", category="helper"),
    Case("ringbuf_not_released", KP,
         [LD_MAP(1, 0), MOV64_IMM(2, 8), MOV64_IMM(3, 0), CALL(H.ringbuf_reserve), *RET0], EINVAL,
         "Unreleased reference", maps=(RINGBUF,), category="helper"),
    Case("ringbuf_submit_maybe_null", KP,
         [LD_MAP(1, 0), MOV64_IMM(2, 8), MOV64_IMM(3, 0), CALL(H.ringbuf_reserve), MOV64_REG(1, 0), MOV64_IMM(2, 0),
          CALL(H.ringbuf_submit), *RET0], EACCES, "type=ringbuf_mem_or_null expected=ringbuf_mem",
         maps=(RINGBUF,), category="helper"),
    Case("ringbuf_reserve_variable_size", KP,
         [*_rand(2), ALU64_IMM(AND, 2, 63), LD_MAP(1, 0), MOV64_IMM(3, 0), CALL(H.ringbuf_reserve), *RET0],
         EACCES, "is not a known constant", maps=(RINGBUF,), category="helper"),
    Case("ringbuf_record_past_end", KP,
         [LD_MAP(1, 0), MOV64_IMM(2, 8), MOV64_IMM(3, 0), CALL(H.ringbuf_reserve), JMP_IMM(JEQ, 0, 0, 4),
          ST(DW, 0, 8, 1), MOV64_REG(1, 0), MOV64_IMM(2, 0), CALL(H.ringbuf_submit), *RET0], EACCES,
         "invalid access to memory, mem_size=8 off=8 size=8", maps=(RINGBUF,), category="helper"),
    Case("ringbuf_double_submit", KP,
         [LD_MAP(1, 0), MOV64_IMM(2, 8), MOV64_IMM(3, 0), CALL(H.ringbuf_reserve), JMP_IMM(JEQ, 0, 0, 7),
          MOV64_REG(6, 0), MOV64_REG(1, 6), MOV64_IMM(2, 0), CALL(H.ringbuf_submit), MOV64_REG(1, 6),
          MOV64_IMM(2, 0), CALL(H.ringbuf_submit), *RET0], EACCES, "R1 type=scalar expected=ringbuf_mem",
         kernel_why="expected=ringbuf_mem", maps=(RINGBUF,), category="helper"),
    Case("ld_abs_in_kprobe", KP, [MOV64_REG(6, 1), Insn(0x20, 0, 0, 0, 0), *RET0], EINVAL,
         "BPF_LD_[ABS|IND] instructions not allowed for this program type", category="helper"),
    # ---------------------------------------------------------------- pointer arithmetic
    Case("pointer_multiply", KP, [ALU64_IMM(MUL, 1, 2), *RET0], EACCES,
         "R1 pointer arithmetic with *= operator prohibited", category="ptr"),
    Case("pointer_arith_32bit", KP, [ALU32_IMM(ADD, 1, 8), *RET0], EACCES, "R1 32-bit pointer arithmetic prohibited",
         category="ptr"),
    Case("pointer_plus_pointer", KP, [ALU64_REG(ADD, 1, 10), *RET0], EACCES, "R1 pointer += pointer prohibited",
         category="ptr"),
    Case("scalar_minus_pointer", KP, [MOV64_IMM(0, 0), ALU64_REG(SUB, 0, 1), *RET0], EACCES,
         "R0 tried to subtract pointer from scalar", category="ptr"),
    Case("map_ptr_arithmetic", KP, [LD_MAP(1, 0), ALU64_IMM(ADD, 1, 8), *RET0], EACCES,
         "R1 pointer arithmetic on map_ptr prohibited", maps=(HASH,), category="ptr"),
]
