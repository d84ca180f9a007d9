"""LLVM through llvmlite: one MCJIT engine per process, a module per program.

Generated IR (:mod:`.codegen`) is optimised with LLVM's ``O2`` pipeline and
added to the process's MCJIT engine; identical IR is compiled once. The two
callbacks generated code calls (``bpfmux_mem``, ``bpfmux_call``) are
registered as global symbols before the first module is compiled.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

_ENGINE: Any = None
_TM: Any = None
_BY_IR: dict[str, tuple[str, float]] = {}
_COUNT = 0
_AVAILABLE: bool | None = None
#: LLVM's code generator level. 0 (fast instruction selection) compiles four
#: times faster than 2 and the ALU loop of bench/vm_speed.py still runs at
#: about 4,000 M insn/s (5,700 at 2): compile time dominates short runs.
CODEGEN_OPT = 0


def available() -> bool:
    """Whether llvmlite can be imported (the ``native`` extra is installed)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            import llvmlite.binding  # noqa: F401
        except ImportError:
            _AVAILABLE = False
        else:
            _AVAILABLE = True
    return _AVAILABLE


def _engine(symbols: dict[str, int]) -> Any:
    global _ENGINE, _TM
    if _ENGINE is None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for name, addr in symbols.items():
            llvm.add_symbol(name, addr)
        target = llvm.Target.from_default_triple()
        _TM = target.create_target_machine(opt=CODEGEN_OPT, codemodel="jitdefault")
        empty = llvm.parse_assembly("")
        _ENGINE = llvm.create_mcjit_compiler(empty, _TM)
    return _ENGINE


def compile_ir(make_ir: Any, symbols: dict[str, int]) -> tuple[str, float]:
    """Compile the IR ``make_ir(prefix)`` returns; returns the prefix its
    symbols carry and the seconds compiling took (0 when cached).

    ``make_ir`` is called twice when the IR is new: once with a neutral
    prefix (the cache key) and once with the module's own prefix.
    """
    global _COUNT
    import llvmlite.binding as llvm

    engine = _engine(symbols)
    key_ir = make_ir("P_")
    digest = hashlib.blake2b(key_ir.encode(), digest_size=16).hexdigest()
    hit = _BY_IR.get(digest)
    if hit is not None:
        return hit[0], 0.0
    t0 = time.perf_counter()
    _COUNT += 1
    prefix = f"bpf{_COUNT}_"
    ir = key_ir.replace("@P_", f"@{prefix}")
    mod = llvm.parse_assembly(ir)
    mod.verify()
    _optimise(llvm, mod)
    engine.add_module(mod)
    engine.finalize_object()
    spent = time.perf_counter() - t0
    _BY_IR[digest] = (prefix, spent)
    return prefix, spent


def _optimise(llvm: Any, mod: Any) -> None:
    """A short pipeline: registers to SSA, then the simplifications that pay
    off on translated BPF (LLVM's full O2 takes ten times longer to compile
    for no measurable gain on these programs)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=1)
    pb = llvm.create_pass_builder(_TM, pto)
    pm = llvm.create_new_module_pass_manager()
    pm.add_sroa_pass()
    pm.add_instruction_combine_pass()
    pm.add_simplify_cfg_pass()
    pm.add_new_gvn_pass()
    pm.add_instruction_combine_pass()
    pm.add_simplify_cfg_pass()
    pm.run(mod, pb)


def address(name: str) -> int:
    """The address of a compiled function."""
    return int(_ENGINE.get_function_address(name))
