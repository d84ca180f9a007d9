"""Every corpus object in the emulated kernel, and its verifier's verdict on
every program against this kernel's.

The emulated kernel loads each object with the settings its tool would
choose there (it has every probe kind) and attaches it; and each program is
loaded on its own, with the settings the tool chooses on this kernel, by
both kernels: where both give a verdict (this kernel gives none for
fentry/fexit, which it refuses before verifying — the VM tier's guest
compares those), they must agree, except for the disagreements recorded in
:data:`KNOWN`, each with its cause. A fix on the emulator's verifier makes
this test fail until the record is updated, so the record stays true.
"""

from __future__ import annotations

import pytest
from corpus_harness import started, tool_names
from corpus_probes import EmuProbe, LiveProbe
from corpus_tools import TOOLS
from corpus_verdicts import disagreements, verdicts

from bpfmux.emu import Emulator

pytestmark = pytest.mark.usefixtures("corpus")

_R0 = "the emulated verifier's R0 at the exit of a static subprogram (branch verifier)"
_MOV32 = "the emulated verifier models 'w1 = w6' as an OR with 0 and loses the index bounds (branch verifier)"
_COOKIE = "the emulated verifier does not take a PTR_TO_BTF_ID sock in bpf_get_socket_cookie (branch verifier)"
_RODATA = ("the emulated verifier does not read frozen .rodata as constants, so it walks the branch the "
           "kernel prunes (targ_single is true on this kernel)")
_CTXOFF = "the emulated verifier refuses a tp_btf context read through a moved pointer (ctx + 8) the kernel allows"

#: tool → program → why this kernel's and the emulator's verifiers disagree
KNOWN: dict[str, dict[str, str]] = {
    "biolatency": {"block_rq_insert_btf": _RODATA, "block_rq_issue_btf": _RODATA},
    "biosnoop": {"block_rq_insert": _RODATA, "block_rq_issue": _RODATA},
    "bitesize": {"block_rq_issue": _CTXOFF},
    "klockstat": {"kprobe_mutex_unlock": _R0, "kprobe_up_read": _R0, "kprobe_up_write": _R0},
    "sigsnoop": {"kill_entry": _R0, "tkill_entry": _R0, "tgkill_entry": _R0},
    "softirqs": {"softirq_exit_btf": _MOV32, "softirq_exit": _MOV32},
    "tcppktlat": {"tcp_probe_btf": _COOKIE, "tcp_rcv_space_adjust_btf": _COOKIE, "tcp_destroy_sock_btf": _COOKIE},
}

#: tool → program → why the emulated kernel rejects it with the tool's own settings there (fentry chosen, …)
KNOWN_EMULATED: dict[str, dict[str, str]] = {
    "klockstat": {"mutex_unlock": _R0, "up_read": _R0, "up_write": _R0},
    "biolatency": {"block_rq_issue_btf": _RODATA},
    "biosnoop": {"block_rq_issue": _RODATA},
    "bitesize": {"block_rq_issue": _CTXOFF},
    "softirqs": {"softirq_exit_btf": _MOV32},
    "tcppktlat": KNOWN["tcppktlat"],
}


@pytest.fixture(scope="module")
def vmlinux():
    from bpfmux.btf import Btf

    try:
        return Btf.vmlinux()
    except OSError as err:
        pytest.skip(f"the emulated kernel models this machine's kernel from its BTF ({err})")


@pytest.mark.parametrize("tool", tool_names())
def test_object_starts_in_the_emulator(tool: str, vmlinux) -> None:
    t = TOOLS[tool]
    with Emulator(btf=vmlinux) as emu, started(emu, t, t.settings(EmuProbe(emu))) as st:
        assert set(st.failed) == set(KNOWN_EMULATED.get(tool, {})), st.failed
        absent = {n: w for n, w in st.attach_failed.items() if "no kernel function named" not in w}
        assert not absent, absent  # only functions this kernel does not have (md_flush_request: no md driver)


@pytest.mark.usefixtures("root_required")
@pytest.mark.parametrize("tool", tool_names())
def test_verifier_verdicts_match_this_kernel(tool: str, vmlinux) -> None:
    probe = LiveProbe()
    t = TOOLS[tool]
    settings = t.settings(probe)
    kernel_v = verdicts(probe.kernel, t, settings)
    with Emulator(btf=vmlinux) as emu:
        emu_v = verdicts(emu, t, settings)
    got = disagreements(kernel_v, emu_v)
    assert set(got) == set(KNOWN.get(tool, {})), got
