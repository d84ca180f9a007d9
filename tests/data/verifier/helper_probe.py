"""Probe which helpers each program type may call on the running kernel.

Loads, for every (program type, helper id), a program that zeroes r1-r5 and
calls the helper, and classifies the verifier's answer: "cannot use helper"
or "unknown func" means the type may not call it; an acceptance, or a
rejection after the verifier reached the call (for its arguments, or because
it might sleep) means it may. SYSCALL programs are loaded sleepable, the only
way the kernel loads them; any answer before the call (the program refused as
a whole) is an error of the probe, not a verdict on the helper. Used by
``tests/live/test_verifier_corpus.py`` to check
``bpfmux/data/verifier_helper_types.json`` against the kernel, and run as a
script (as root) to regenerate that file::

    python3 tests/data/verifier/helper_probe.py > src/bpfmux/data/verifier_helper_types.json
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verifier_kshim import prog_load

#: program types probed: name -> (prog_type, expected_attach_type, attach tracepoint for tp_btf, prog flags)
PROBED = {
    "socket_filter": (1, 0, None, 0),
    "kprobe": (2, 0, None, 0),
    "sched_cls": (3, 0, None, 0),
    "tracepoint": (5, 0, None, 0),
    "xdp": (6, 0, None, 0),
    "perf_event": (7, 0, None, 0),
    "raw_tracepoint": (17, 0, None, 0),
    "tp_btf": (26, 23, "btf_trace_sched_switch", 0),
    "syscall": (31, 0, None, 16),  # BPF_F_SLEEPABLE: the kernel loads no other SYSCALL program
}
_CALL_SLOT = 5  # the call's index in the probe program
MAX_HELPER = 211
_REFUSED = ("cannot use helper", "unknown func", "invalid func")


def btf_type_id(name: str) -> int:
    """Id of a vmlinux BTF type, through bpftool (root not needed)."""
    out = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"], capture_output=True,
                         text=True, check=True).stdout
    needle = f"'{name}'"
    for line in out.splitlines():
        if needle in line and line.startswith("["):
            return int(line[1:line.index("]")])
    raise LookupError(name)


def _prog(helper: int) -> bytes:
    insns = [(0xB7, r, 0, 0) for r in range(1, 6)] + [(0x85, 0, 0, helper), (0xB7, 0, 0, 0), (0x95, 0, 0, 0)]
    return b"".join(struct.pack("<BBhi", op, dst, off, imm) for op, dst, off, imm in insns)


def _reached_call(log: str) -> bool:
    """Whether the verifier's log shows it got to the call instruction."""
    return any(line.startswith(f"{_CALL_SLOT}: (85)") for line in log.splitlines())


def probe() -> dict[str, list[int]]:
    """``{type name: sorted allowed helper ids}`` for this kernel.

    :raises RuntimeError: a program was refused before its call, so the answer
        says nothing about the helper (the probe's own program is wrong).
    """
    table: dict[str, list[int]] = {}
    for name, (ptype, attach, tp, flags) in PROBED.items():
        btf_id = btf_type_id(tp) if tp else 0
        allowed = []
        for helper in range(1, MAX_HELPER + 1):
            err, log = prog_load(ptype, _prog(helper), expected_attach=attach, attach_btf_id=btf_id, flags=flags)
            if not err:
                allowed.append(helper)
                continue
            last = log.strip().splitlines()[-2:] if log else []
            if any(r in line for line in last for r in _REFUSED):
                continue
            if not _reached_call(log):
                raise RuntimeError(f"{name}: helper {helper}: refused before the call (errno {err}): {last}")
            allowed.append(helper)
        table[name] = allowed
    return table


if __name__ == "__main__":
    json.dump({"kernel": subprocess.run(["uname", "-r"], capture_output=True, text=True).stdout.strip(),
               "types": probe()}, sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")
