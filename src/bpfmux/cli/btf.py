"""``bpfmux btf``: dump and inspect BTF (the kernel's, a module's, an object's)."""

from __future__ import annotations

import argparse
import os
import sys

from ..btf import Btf
from ..btf.model import VMLINUX_PATH
from ._common import EXIT_STATUS_HELP

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``btf`` subcommand."""
    p = subparsers.add_parser("btf", help="dump and inspect BTF", description=__doc__,
                              epilog=EXIT_STATUS_HELP)
    sub = p.add_subparsers(dest="btf_command", metavar="ACTION")
    d = sub.add_parser("dump", help="print every type, as bpftool's raw listing or as C (vmlinux.h)")
    d.add_argument("file", nargs="?", default=VMLINUX_PATH, help=f"raw BTF or an ELF object (default {VMLINUX_PATH})")
    d.add_argument("--format", "-f", choices=("raw", "c"), default="raw", help="raw listing (default) or compilable C")
    d.add_argument("--base", help="base BTF for split BTF (default: vmlinux for /sys/kernel/btf/<module>)")
    d.set_defaults(func=_dump)
    s = sub.add_parser("show", help="show one type (struct layout, enum values) or a function's prototype")
    s.add_argument("name", help="type or function name; 'struct foo' / 'union foo' / 'enum foo' narrow the kind")
    s.add_argument("--file", default=VMLINUX_PATH, help=f"raw BTF or an ELF object (default {VMLINUX_PATH})")
    s.add_argument("--base", help="base BTF for split BTF")
    s.set_defaults(func=_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _load(path: str, base_path: str | None) -> Btf:
    base = None
    if base_path:
        base = Btf.load(base_path)
    elif os.path.dirname(os.path.abspath(path)) == os.path.dirname(VMLINUX_PATH) and os.path.basename(path) != "vmlinux":
        base = Btf.vmlinux()
    if os.path.abspath(path) == VMLINUX_PATH and base is None:
        return Btf.vmlinux()
    return Btf.load(path, base=base)


def _dump(args: argparse.Namespace) -> int:
    btf = _load(args.file, args.base)
    out = sys.stdout
    if args.format == "raw":
        from ..btf.rawdump import raw_lines

        write = out.write
        for entry in raw_lines(btf):
            write(entry)
            write("\n")
    else:
        from ..btf.cdump import dump_c

        out.write(dump_c(btf))
    out.flush()
    return 0


def _show(args: argparse.Namespace) -> int:
    from ..btf.cdump import declaration
    from ..btf.types import Composite, Enum, Func

    btf = _load(args.file, args.base)
    t = btf.find(args.name)
    if isinstance(t, Func):
        sig = btf.func(t.name)
        print(f"{declaration(btf, sig.proto_id, t.name)};")
        for i, a in enumerate(sig.args):
            extra = " (struct by value)" if a.by_value_struct else ""
            print(f"  arg{i}: {a.name or '(unnamed)'}: {declaration(btf, a.type.id, '')} size={a.size}{extra}")
        print(f"  returns: {declaration(btf, sig.return_type.id, '')} size={sig.return_size}")
        return 0
    r = btf.resolve(t)
    print(f"[{t.id}] {t.kind.name} {t.name or '(anon)'}", end="")
    try:
        print(f" size={btf.sizeof(t)} align={btf.alignof(t)}")
    except (TypeError, ValueError):
        print()
    if isinstance(r, Composite):
        for f in btf.fields(r, flatten=True):
            bf = f":{f.bitfield_size}" if f.bitfield_size else ""
            print(f"  {f.offset:6d} (bit {f.bit_offset:6d})  {declaration(btf, f.type.id, f.name)}{bf}")
    elif isinstance(r, Enum):
        for v in r.values:
            print(f"  {v.name} = {v.value}")
    return 0
