"""End to end: programs loaded from an ELF object by ``LiveKernel`` attach by
their section names through ``Program.attach``/``attach_many`` (which hand
over to :mod:`bpfmux.live.links`), on this kernel.

Kinds this kernel lacks (kprobes, kprobe_multi, kprobe sessions) must raise
:class:`NotSupportedError`; everything else must attach and be listed by the
kernel as a link of the expected type.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from links_progs import bpftool_links_of_prog

from bpfmux.errors import InvalidArgumentError, NotSupportedError
from bpfmux.live import LiveKernel, links
from bpfmux.live.features import features
from bpfmux.uapi import LinkType

pytestmark = pytest.mark.usefixtures("root_required")
OBJ = Path(__file__).resolve().parents[1] / "bpf" / "sections.bpf.o"

# program → (expected link class name, kernel link type); None: needs a kernel feature absent here
EXPECT = {
    "s_tracepoint": ("TracepointLink", LinkType.PERF_EVENT),
    "s_tp": ("TracepointLink", LinkType.PERF_EVENT),
    "s_raw_tp": ("RawTracepointLink", LinkType.RAW_TRACEPOINT),
    "s_raw_tracepoint": ("RawTracepointLink", LinkType.RAW_TRACEPOINT),
    "s_tp_btf": ("TpBtfLink", LinkType.RAW_TRACEPOINT),
    "s_uprobe": ("UprobeLink", LinkType.PERF_EVENT),
    "s_uretprobe": ("UprobeLink", LinkType.PERF_EVENT),
    "s_uprobe_session": ("UprobeMultiLink", LinkType.UPROBE_MULTI),
    "s_kprobe": ("KprobeLink", LinkType.PERF_EVENT),
    "s_kretprobe": ("KprobeLink", LinkType.PERF_EVENT),
    "s_ksyscall": ("KprobeLink", LinkType.PERF_EVENT),
    "s_kprobe_multi": ("KprobeMultiLink", LinkType.KPROBE_MULTI),
    "s_kretprobe_multi": ("KprobeMultiLink", LinkType.KPROBE_MULTI),
    "s_kprobe_session": ("KprobeMultiLink", LinkType.KPROBE_MULTI),
}
KPROBE_PMU = os.path.exists("/sys/bus/event_source/devices/kprobe/type")


def _available(name: str) -> bool:
    if name in ("s_kprobe", "s_kretprobe", "s_ksyscall"):
        return KPROBE_PMU
    if name.startswith(("s_kprobe_", "s_kretprobe_")):
        return features().link_type(LinkType.KPROBE_MULTI).supported
    return True


@pytest.fixture(scope="module")
def coll():
    c = LiveKernel().load(str(OBJ), programs=[*EXPECT, "s_uprobe_multi", "s_raw_tp_manual"])
    yield c
    c.close()


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_attach_by_section(coll, name):
    prog = coll.programs[name]
    cls, link_type = EXPECT[name]
    if not _available(name):
        with pytest.raises(NotSupportedError):
            prog.attach()
        return
    with prog.attach() as link:
        assert type(link).__name__ == cls
        assert link.link_type == link_type
        assert [x["id"] for x in bpftool_links_of_prog(prog.id)] == [link.id]
    assert bpftool_links_of_prog(prog.id) == []


def test_section_target_overridden_and_multi(coll):
    # the section names a glob in the test binary; attach the same program elsewhere
    prog = coll.programs["s_uprobe_multi"]
    with prog.attach("libc.so.6:getpp*") as link:
        assert isinstance(link, links.UprobeMultiLink) and link.retprobe is False
    with prog.attach_many(["libc.so.6:getppid", "libm.so.6:erf"], cookies=[1, 2]) as ml:
        assert ml.mechanism == "uprobe_multi" and len(ml.links) == 2
    manual = coll.programs["s_raw_tp_manual"]  # SEC("raw_tp"): no target in the section
    with pytest.raises(InvalidArgumentError, match="no attach target"):
        manual.attach()
    with manual.attach_many(["sys_enter", "sys_exit"]) as ml:
        assert ml.mechanism == "raw_tracepoint" and len(ml.links) == 2
