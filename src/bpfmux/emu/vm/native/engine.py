"""LLVM through llvmlite: MCJIT engines, a module per program.

Generated IR (:mod:`.codegen`) is optimised with a short pass pipeline and
added to the current MCJIT engine; identical IR is compiled once (while code
compiled from it is alive). After compiling, the module's IR is handed back
to Python and freed; the machine code stays in its engine. MCJIT frees code
only with its engine, so engines rotate: every :data:`MODULES_PER_ENGINE`
modules a new one starts, and an engine is freed when no
:class:`NativeModule` compiled into it is referenced any more (a program's
compiled code holds its module). The two callbacks generated code calls
(``bpfmux_cb_mem``, ``bpfmux_cb_call``) are global symbols, registered once.
"""

from __future__ import annotations

import hashlib
import re
import time
import weakref
from typing import Any

#: LLVM's code generator level. 0 (fast instruction selection) compiles four
#: times faster than 2 and the ALU loop of bench/vm_speed.py still runs at
#: about 4,000 M insn/s (5,700 at 2): compile time dominates short runs.
CODEGEN_OPT = 0
MODULES_PER_ENGINE = 64

_TM: Any = None
_AVAILABLE: bool | None = None
_SYMBOLS_ADDED = False
_COUNT = 0


class _Engine:
    """One MCJIT engine and how many modules went into it."""

    def __init__(self, llvm: Any) -> None:
        # the engine takes ownership of its target machine (and frees it): each engine gets its own
        tm = llvm.Target.from_default_triple().create_target_machine(opt=CODEGEN_OPT, codemodel="jitdefault")
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self.modules = 0


class NativeModule:
    """Compiled code of one IR module: its exported functions' addresses.

    :ivar seconds: what compiling took.
    """

    def __init__(self, engine: _Engine, prefix: str, addresses: dict[str, int], seconds: float) -> None:
        self.engine = engine  # keeps the engine (and so the code) alive
        self.prefix = prefix
        self.addresses = addresses
        self.seconds = seconds


_CURRENT: _Engine | None = None
_BY_IR: weakref.WeakValueDictionary[str, NativeModule] = weakref.WeakValueDictionary()


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


def _engine(llvm: Any, symbols: dict[str, int]) -> _Engine:
    global _CURRENT, _TM, _SYMBOLS_ADDED
    if not _SYMBOLS_ADDED:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        for name, addr in symbols.items():
            llvm.add_symbol(name, addr)
        _TM = llvm.Target.from_default_triple().create_target_machine(opt=CODEGEN_OPT, codemodel="jitdefault")
        _SYMBOLS_ADDED = True  # _TM (never given to an engine) tunes the pass pipeline
    if _CURRENT is None or _CURRENT.modules >= MODULES_PER_ENGINE:
        _CURRENT = _Engine(llvm)
    return _CURRENT


def compile_ir(ir: str, symbols: dict[str, int]) -> tuple[NativeModule, str, bool]:
    """Compile ``ir`` (its own symbols start with ``@P_``); returns the
    module, the prefix its symbols got, and whether it was compiled now
    (false: identical IR was compiled before and is still alive).

    :raises RuntimeError: LLVM refused the IR (a bug of the generator).
    """
    global _COUNT
    import llvmlite.binding as llvm

    digest = hashlib.blake2b(ir.encode(), digest_size=16).hexdigest()
    hit = _BY_IR.get(digest)
    if hit is not None:
        return hit, hit.prefix, False
    engine = _engine(llvm, symbols)
    t0 = time.perf_counter()
    _COUNT += 1
    prefix = f"bpf{_COUNT}_"
    mod = llvm.parse_assembly(ir.replace("@P_", f"@{prefix}"))
    mod.verify()
    _optimise(llvm, mod)
    ee = engine.ee
    ee.add_module(mod)
    ee.finalize_object()
    exported = re.compile(re.escape(prefix) + r"e\d+")
    addresses = {f.name: ee.get_function_address(f.name) for f in mod.functions if exported.fullmatch(f.name)}
    ee.remove_module(mod)  # the machine code stays in the engine's memory; the IR is freed
    engine.modules += 1
    nm = NativeModule(engine, prefix, addresses, time.perf_counter() - t0)
    _BY_IR[digest] = nm
    return nm, prefix, True


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
