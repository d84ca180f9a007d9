"""kprobe, kretprobe, kprobe_multi and kprobe sessions from a real object in the emulated kernel
(the same object the VM tier runs on a real 6.12 kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

OBJ = Path(__file__).resolve().parents[1] / "bpf" / "kprobes.bpf.o"


def hits(m):
    return {k: (v.calls, v.arg1, v.arg2, v.ret, v.cookie) for k, v in m.items()}


def test_kprobe_kinds_and_session(emulator_factory):
    with emulator_factory(btf="auto") as emu:
        if emu.btf is None:
            pytest.skip("the object's kprobe.session uses kfuncs, resolved through kernel BTF")
        coll = emu.load(OBJ)
        p = coll.programs
        p["kp_entry"].attach(cookie=21)
        p["kp_exit"].attach(cookie=22)
        funcs = ["bpf_fentry_test1", "bpf_fentry_test2"]
        ml = p["multi_entry"].attach_many(funcs, cookies=[31, 32])
        assert ml.mechanism == "kprobe_multi"
        p["multi_exit"].attach_many(funcs, cookies=[41, 42])
        p["session"].attach_many(funcs, cookies=[51, 52])
        assert emu.call("bpf_fentry_test2", 2, 3) == 5
        assert emu.call("bpf_fentry_test1", 1) == 2
        f1, f2 = (emu.function(n).addr for n in funcs)
        m = coll.maps
        assert hits(m["kprobe_hits"]) == {f2: (1, 2, 3, 0, 21)}
        assert hits(m["kretprobe_hits"]) == {f2: (1, 0, 0, 5, 22)}
        assert hits(m["multi_entry_hits"]) == {f1: (1, 1, 0, 0, 31), f2: (1, 2, 3, 0, 32)}
        assert hits(m["multi_exit_hits"]) == {f1: (1, 0, 0, 2, 41), f2: (1, 0, 0, 5, 42)}
        assert hits(m["session_entry_hits"]) == {f1: (1, 1, 0, 0, 51), f2: (1, 2, 3, 0, 52)}
        # the session's entry keeps arg1 * 1000 + 7 in its session cookie; test2's entry skips the return run
        assert hits(m["session_exit_hits"]) == {f1: (1, 1007, 0, 2, 51)}
        emu.call("bpf_fentry_test1", 1)  # warm: the VM keeps freed stack frames for reuse
        regions = len(emu.vm.space)
        for _ in range(5):
            emu.call("bpf_fentry_test1", 1)
        assert len(emu.vm.space) == regions  # session cookies do not outlive their call
