"""``bpfmux objdump``: show what a BPF ELF object holds.

Programs (section-derived type, attach type, target, flags; linked
instructions in llvm-objdump syntax with relocations, subprogram starts, CO-RE
relocations and source lines annotated), maps, global data and externs.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ..obj import ObjectSpec, ProgramSpec, load_object
from ._common import EXIT_STATUS_HELP

__all__ = ["format_object", "register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``objdump`` subcommand."""
    p = subparsers.add_parser("objdump", help="show the programs, maps and data of a BPF object", description=__doc__,
                              epilog=EXIT_STATUS_HELP)
    p.add_argument("object", help="a BPF ELF object (.bpf.o)")
    p.add_argument("--program", "-p", action="append", help="only this program (repeatable)")
    p.add_argument("--no-source", action="store_true", help="do not interleave source lines (from .BTF.ext)")
    p.add_argument("--no-data", action="store_true", help="do not dump global data contents")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    spec = load_object(args.object)
    if args.program:
        for name in args.program:
            spec.program(name)  # NotFoundError names the ones that exist
    format_object(spec, sys.stdout, programs=args.program, source=not args.no_source, data=not args.no_data)
    return 0


def format_object(spec: ObjectSpec, out: TextIO, *, programs: list[str] | None = None, source: bool = True,
                  data: bool = True) -> None:
    """Write the listing of ``spec`` to ``out``."""
    w = out.write
    w(f"object {spec.name}: license {spec.license!r}")
    if spec.kernel_version:
        w(f", kernel version {spec.kernel_version:#x}")
    w(f", {len(spec.programs)} programs, {len(spec.maps)} maps, BTF {'yes' if spec.btf is not None else 'no'}\n")
    if spec.maps:
        w("\nmaps:\n")
        for m in spec.maps.values():
            tname = getattr(m.type, "name", str(m.type)).lower()
            w(f"  {m.name}: {tname} key {m.key_size} value {m.value_size} max_entries {m.max_entries}")
            if int(m.flags):
                w(f" flags {_flags(m.flags)}")
            if m.pinning:
                w(" pinned by name")
            if m.frozen:
                w(" frozen")
            if m.kernel_name and m.kernel_name != m.name:
                w(f" (kernel name {m.kernel_name})")
            w("\n")
            if m.inner is not None:
                it = getattr(m.inner.type, "name", str(m.inner.type)).lower()
                w(f"    inner: {it} key {m.inner.key_size} value {m.inner.value_size} "
                  f"max_entries {m.inner.max_entries}\n")
            for slot, target in sorted(m.init_slots.items()):
                w(f"    [{slot}] = {target}\n")
            if data and m.value is not None:
                _hexdump(m.value, w)
    if spec.externs:
        w("\nexterns:\n")
        for e in spec.externs.values():
            extra = f" at .kconfig+{e.offset} ({e.kcfg_type}, {e.size} bytes)" if e.kcfg_type else ""
            w(f"  {e.kind.value} {e.name}{' (weak)' if e.weak else ''}{extra}\n")
    for p in spec.programs.values():
        if programs and p.name not in programs:
            continue
        w("\n")
        _program(p, w, source)


def _flags(flags: int) -> str:
    names = getattr(flags, "name", None)
    return names.lower().replace("|", ",") if names else hex(int(flags))


def _prog_flags(p: ProgramSpec) -> str:
    from ..uapi import ProgFlags, ProgType

    names = []
    for bit in range(32):
        v = int(p.flags) & (1 << bit)
        if not v:
            continue
        if v == ProgFlags.MULTI_FUNC and p.prog_type != ProgType.XDP:
            names.append("multi_func")  # the seed's bit 5; XDP_HAS_FRAGS only for XDP
        else:
            names.append((ProgFlags(v).name or hex(v)).lower() if v in ProgFlags._value2member_map_ else hex(v))
    return ",".join(names)


def _program(p: ProgramSpec, w, source: bool) -> None:
    from ..isa.disasm import format_insn

    at = p.expected_attach_type.name.lower() if p.expected_attach_type is not None else "none"
    w(f"program {p.name}: section {p.section!r} type {p.prog_type.name.lower()} attach {at}")
    if p.attach_target:
        w(f" target {p.attach_target!r}")
    if int(p.flags):
        w(f" flags {_prog_flags(p)}")
    if not p.autoload:
        w(" (not autoloaded)")
    w(f", {len(p.insns)} insns\n")
    relocs: dict[int, list[str]] = {}
    for r in p.relocations:
        text = {"map": f"map {r.target}", "map_value": f"{r.target}+{r.offset}",
                "kconfig": f"kconfig {r.symbol} (.kconfig+{r.offset})", "kfunc": f"kfunc {r.target}",
                "ksym": f"ksym {r.target}", "call": f"call {r.target}",
                "subprog_addr": f"&{r.target}"}[r.kind.value]
        relocs.setdefault(r.insn, []).append(text)
    for c in p.core_relos:
        relocs.setdefault(c.insn, []).append(f"CO-RE {c.kind.name.lower()} type {c.type_id} access {c.access}")
    starts = {0: p.name, **{i: n for n, i in p.subprograms}}
    lines = {li.insn: li for li in p.line_info} if source else {}
    slot = 0
    for i, ins in enumerate(p.insns):
        if i in starts:
            w(f"{starts[i]}:\n")
        li = lines.get(i)
        if li is not None and li.text:
            w(f"  ; {li.text.strip()}  [{li.file}:{li.line}]\n")
        text = format_insn(ins, alu32=True)
        note = relocs.get(i)
        w(f"{slot:>6}: {text}")
        if note:
            w(f"    <{'; '.join(note)}>")
        w("\n")
        slot += ins.size


def _hexdump(data: bytes, w) -> None:
    for off in range(0, min(len(data), 256), 16):
        chunk = data[off:off + 16]
        hexpart = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        w(f"    {off:04x}: {hexpart:<47}  {text}\n")
    if len(data) > 256:
        w(f"    ... ({len(data)} bytes)\n")
