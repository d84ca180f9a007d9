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

#: tool → program → why this kernel's and the emulator's verifiers disagree (none since the
#: emulated verifier follows the kernel's algorithm: R0 at the main exit only, 32-bit moves
#: keep their bounds, socket pointers in bpf_get_socket_cookie, frozen .rodata read as
#: constants, tp_btf context reads through a moved pointer)
KNOWN: dict[str, dict[str, str]] = {}

#: tool → program → why the emulated kernel rejects it with the tool's own settings there
KNOWN_EMULATED: dict[str, dict[str, str]] = {}


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
