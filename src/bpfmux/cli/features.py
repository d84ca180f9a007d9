"""``bpfmux features``: what the running kernel supports, probed live.

Every row comes from actually loading a program, creating a map or creating a
link (see :mod:`bpfmux.live.features`); results are cached per boot.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..uapi import ProgType
from ._common import EXIT_STATUS_HELP, UsageError, console

__all__ = ["register"]

GROUPS = ("program_types", "map_types", "attach_types", "link_types", "helpers")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``features`` subcommand."""
    p = subparsers.add_parser("features", help="probe what the running kernel supports", description=__doc__,
                              epilog=EXIT_STATUS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument("--helpers", metavar="PROG_TYPE", action="append", default=[],
                   help="also list the helpers available to this program type (repeatable; 'all' for every type)")
    p.add_argument("--only", choices=GROUPS[:-1], action="append", help="show only this group (repeatable)")
    p.add_argument("--unsupported", action="store_true", help="show only what is NOT supported")
    p.set_defaults(func=_run)


def _prog_types(names: list[str]) -> list[ProgType]:
    """The program types ``--helpers`` names.

    :raises UsageError: an unknown program type.
    """
    if "all" in names:
        return [t for t in ProgType if t != ProgType.UNSPEC]
    out = []
    for n in names:
        try:
            out.append(ProgType[n.upper()])
        except KeyError:
            known = ", ".join(t.name.lower() for t in ProgType if t != ProgType.UNSPEC)
            raise UsageError(f"--helpers: unknown program type {n!r}; known: {known}") from None
    return out


def _run(args: argparse.Namespace) -> int:
    """Run ``bpfmux features`` (errors are reported by the caller's guard).

    :raises UsageError: ``--helpers`` names an unknown program type.
    """
    from ..live.features import features

    helper_types = _prog_types(args.helpers) if args.helpers else []
    f = features()
    table = f.table()
    if args.only:
        table = {k: v for k, v in table.items() if k in args.only}
    if args.helpers:
        table["helpers"] = {}
        for t in helper_types:
            if f.prog_type(t).supported:
                names = [h.name for h in f.helpers(t)]
                table["helpers"][t.name.lower()] = {"supported": True, "detail": " ".join(names), "method": "load",
                                                    "count": len(names)}
            else:
                table["helpers"][t.name.lower()] = {"supported": False, "detail": "program type unsupported",
                                                    "method": "load", "count": 0}
    if args.unsupported:
        table = {g: {k: v for k, v in rows.items() if not v["supported"]} for g, rows in table.items()}
    if args.json:
        json.dump(table, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from rich.table import Table

    out = console()
    for group, rows in table.items():
        tbl = Table(title=group.replace("_", " "), title_justify="left", show_lines=False)
        tbl.add_column("name", style="bold")
        tbl.add_column("supported")
        tbl.add_column("probe" if group != "helpers" else "count")
        tbl.add_column("detail", overflow="fold")
        for name, row in rows.items():
            ok = "[green]yes[/green]" if row["supported"] else "[red]no[/red]"
            third = row["method"] if group != "helpers" else str(row.get("count", ""))
            tbl.add_row(name, ok, third, row["detail"])
        out.print(tbl)
    return 0
