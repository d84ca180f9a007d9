"""The trampoline-policy study: measurements, plots, terminal charts, a reading.

The seeds' open question — what a shared multi trampoline saves, and what a
call costs under each design as functions gain programs of their own — as
numbers (:func:`measure`, the same rows as ``bench/emu_dispatch.py`` writes,
plus site patches, grace periods, dispatch steps and detach time), as plots
(:func:`draw`, matplotlib: PNG and SVG), as terminal charts
(:func:`terminal`, rich) and as a short written reading (:func:`reading`).

``measure``: ``functions`` kernel functions carry one multi program; then
the first ``k`` of them (for each ``k`` of ``counts``) also get an fentry
program of their own. For each ``k`` and policy: attach time of the new own
programs, images built and their bytes, site patches and grace periods so
far, and the time and dispatch steps of a call of a function without own
programs (``plain``) and of one with (``own``). At the end every own link is
detached (``detach_s``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BpfmuxError, InvalidArgumentError

POLICIES = ("clone", "filter", "per-function")
#: Row fields drawn, with their titles and units.
METRICS: dict[str, str] = {
    "us_plain": "call of a function without own programs (µs)",
    "us_own": "call of a function with own programs (µs)",
    "setup_s": "attach time of the new own programs (s)",
    "images_built": "trampoline images built (total)",
    "image_bytes": "image bytes built (total)",
    "site_patches": "call-site patches (total)",
    "grace_periods": "grace periods waited (total)",
    "steps_plain": "dispatch steps per call without own programs",
}


def measure(functions: int = 2000, counts: Sequence[int] = (1, 10, 100, 1000), policies: Sequence[str] = POLICIES,
            calls: int = 300, tier: str = "fast") -> dict[str, Any]:
    """Run the study on the emulated kernel; returns ``{"functions",
    "counts", "results": {policy: {"rows": [...], "detach_s": s}}}``.

    :raises InvalidArgumentError: counts not increasing or above ``functions``,
        an unknown policy, ``functions`` or ``calls`` below 1.
    """
    from ..isa.build import R0, Asm
    from ..uapi import AttachType, ProgFlags, ProgType
    from .kernel.emulator import Emulator

    counts = list(counts)
    if functions < 1 or calls < 1:
        raise InvalidArgumentError("the study needs at least one function and one call per measurement")
    if not counts or counts != sorted(set(counts)) or counts[0] < 1 or counts[-1] > functions:
        raise InvalidArgumentError(f"counts must increase, from 1 up to the number of functions ({functions})")
    for p in policies:
        if p not in POLICIES:
            raise InvalidArgumentError(f"unknown policy {p!r}; one of {', '.join(POLICIES)}")
    results: dict[str, Any] = {}
    for policy in policies:
        emu = Emulator(btf=None, policy=policy, tier=tier)
        try:
            funcs = [emu.define(f"fn{i}", [8, 8], 8, lambda a, b: a + b) for i in range(functions)]
            ret0 = Asm().mov(R0, 0).exit().assemble().insns
            multi = emu.load_program(ret0, ProgType.TRACING, name="multi", attach_type=AttachType.TRACE_FENTRY,
                                     flags=ProgFlags.MULTI_FUNC)
            own = emu.load_program(ret0, ProgType.TRACING, name="own", attach_type=AttachType.TRACE_FENTRY,
                                   attach_target=funcs[0].name)
            emu.link_tracing_multi(multi, funcs)
            plain = funcs[-1] if counts[-1] < functions else None
            links: list[Any] = []
            rows = []
            for k in counts:
                t = time.perf_counter()
                while len(links) < k:
                    links.append(own.attach(funcs[len(links)].name))
                setup = time.perf_counter() - t
                costs = emu.costs
                row: dict[str, Any] = {"own_functions": k, "setup_s": setup,
                                       "images_built": costs["images_built"], "image_bytes": costs["image_bytes"],
                                       "site_patches": costs["site_patches"],
                                       "grace_periods": costs["grace_periods"]}
                for key, fn in (("plain", plain), ("own", funcs[0])):
                    if fn is None:
                        row[f"us_{key}"] = row[f"steps_{key}"] = None
                        continue
                    before = emu.costs["dispatch_steps"]
                    best = float("inf")
                    for _ in range(3):
                        t = time.perf_counter()
                        for _ in range(calls):
                            emu.call(fn, 1, 2)
                        best = min(best, (time.perf_counter() - t) / calls * 1e6)
                    row[f"us_{key}"] = best
                    row[f"steps_{key}"] = (emu.costs["dispatch_steps"] - before) / (3 * calls)
                rows.append(row)
            t = time.perf_counter()
            for link in links:
                link.close()
            results[policy] = {"rows": rows, "detach_s": time.perf_counter() - t}
        finally:
            emu.close()
    return {"functions": functions, "counts": counts, "tier": tier, "results": results}


def load(path: str | Path) -> dict[str, Any]:
    """Study data from a JSON file (``bench/results/emu_dispatch.json`` or a
    study's own ``study.json``).

    :raises BpfmuxError: unreadable or not study data.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise BpfmuxError(f"cannot read study data from {path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) or "counts" not in data:
        raise BpfmuxError(f"{path} is not study data (expected 'counts' and 'results' per policy, as "
                          "bench/emu_dispatch.py writes)")
    return data


def series(data: dict[str, Any]) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """metric → policy → ``[(own functions, value)]`` for every metric the
    data has (the exact numbers of the rows; missing values left out)."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for metric in METRICS:
        per: dict[str, list[tuple[int, float]]] = {}
        for policy, res in data["results"].items():
            pts = [(int(r["own_functions"]), r[metric]) for r in res["rows"] if r.get(metric) is not None]
            if pts:
                per[policy] = pts
        if per:
            out[metric] = per
    return out


def draw(data: dict[str, Any], out_dir: str | Path, stem: str = "study") -> list[Path]:
    """Draw every metric (one panel each, log-scaled own-function axis) into
    ``out_dir/stem.png`` and ``out_dir/stem.svg``; returns the paths.

    :raises BpfmuxError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise BpfmuxError("drawing the study needs matplotlib: pip install bpfmux[study]") from e
    s = series(data)
    n = len(s)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.0 * cols, 3.2 * rows), squeeze=False)
    for ax, (metric, per) in zip(axes.flat, s.items(), strict=False):
        for policy, pts in per.items():  # distinct line styles: equal series stay visible on top of each other
            style = _STYLE.get(policy, ("-", "o"))
            ax.plot([k for k, _ in pts], [v for _, v in pts], linestyle=style[0], marker=style[1], label=policy)
        ax.set_xscale("log")
        if metric not in ("steps_plain",) and all(v > 0 for pts in per.values() for _, v in pts):
            ax.set_yscale("log")
        ax.set_title(METRICS[metric], fontsize=9)
        ax.set_xlabel("functions with own programs", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(f"trampoline policies, {data.get('functions', '?')} functions under one multi program",
                 fontsize=10)
    fig.tight_layout()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    for p in paths:
        fig.savefig(p, dpi=110)
    plt.close(fig)
    return paths


_STYLE = {"clone": ("-", "o"), "filter": ("--", "s"), "per-function": (":", "^")}


def _fmt(v: float) -> str:
    if v >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:.3g}"


def terminal(data: dict[str, Any], console: Any, width: int = 40) -> None:
    """Print one bar chart per metric with rich (bars scaled to the metric's maximum)."""
    from rich.table import Table

    for metric, per in series(data).items():
        top = max((v for pts in per.values() for _, v in pts), default=0) or 1
        tbl = Table(title=METRICS[metric], title_justify="left", show_edge=False, pad_edge=False)
        tbl.add_column("policy")
        tbl.add_column("own fns", justify="right")
        tbl.add_column("value", justify="right")
        tbl.add_column("", no_wrap=True)
        colours = {"clone": "green", "filter": "red", "per-function": "blue"}
        for policy, pts in per.items():
            for k, v in pts:
                bar = "█" * max(1 if v else 0, round(width * v / top))
                tbl.add_row(policy, f"{k:,}", _fmt(v), f"[{colours.get(policy, 'white')}]{bar}[/]")
        console.print(tbl)


def reading(data: dict[str, Any]) -> str:
    """A short written reading of what the data shows (computed from it)."""
    s = series(data)
    lines = []
    calls = s.get("us_plain", {})
    for policy, pts in calls.items():
        (k0, v0), (k1, v1) = pts[0], pts[-1]
        trend = "flat" if v1 <= 1.5 * v0 else f"grows x{v1 / v0:.1f}"
        lines.append(f"- {policy}: a call of a function without own programs costs {_fmt(v0)} µs at {k0:,} own "
                     f"functions and {_fmt(v1)} µs at {k1:,} ({trend}).")
    images = s.get("images_built", {})
    if images:
        last = {p: pts[-1] for p, pts in images.items()}
        parts = ", ".join(f"{p} {_fmt(v)}" for p, (_, v) in last.items())
        lines.append(f"- images built by {max(k for k, _ in last.values()):,} own functions: {parts}.")
    patches = s.get("site_patches", {})
    if patches:
        parts = ", ".join(f"{p} {_fmt(pts[-1][1])}" for p, pts in patches.items())
        lines.append(f"- call-site patches: {parts}; grace periods: "
                     + ", ".join(f"{p} {_fmt(pts[-1][1])}" for p, pts in s.get("grace_periods", {}).items()) + ".")
    steps = s.get("steps_plain", {})
    if steps:
        parts = ", ".join(f"{p} {_fmt(pts[0][1])} → {_fmt(pts[-1][1])}" for p, pts in steps.items())
        lines.append(f"- dispatch steps per call without own programs: {parts}.")
    return "\n".join(lines)


__all__ = ["METRICS", "POLICIES", "draw", "load", "measure", "reading", "series", "terminal"]
