"""`bpfmux objdump` output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bpfmux.cli.main import main

BPF = Path(__file__).resolve().parent.parent / "bpf"


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(["objdump", *args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_objdump_globals(capsys) -> None:
    rc, out, _ = run(capsys, str(BPF / "globals.bpf.o"))
    assert rc == 0
    assert "object globals: license 'Dual MIT/GPL', 1 programs, 6 maps, BTF yes" in out
    assert re.search(r"\.rodata: array key 4 value 12 max_entries 1 flags rdonly_prog,mmapable frozen", out)
    assert "0000: 07 00 00 00 62 70 66 6d 75 78 00 00" in out  # .rodata contents: 7, "bpfmux"
    assert "kconfig CONFIG_HZ (weak) at .kconfig+0 (int, 4 bytes)" in out
    assert "program read_globals: section 'syscall' type syscall attach none flags sleepable" in out
    assert re.search(r"r1 = 0 ll    <\.data\.foo\+8>", out)
    assert "<kconfig CONFIG_BPF_SYSCALL (.kconfig+9)>" in out
    assert "; bss_out[0] = data_counter;  [./globals.bpf.c:34]" in out


def test_objdump_subprograms_and_multi(capsys) -> None:
    rc, out, _ = run(capsys, str(BPF / "subprogs.bpf.o"), "-p", "caller_one", "--no-source")
    assert rc == 0 and "caller_two" not in out.split("program caller_one", 1)[1]
    assert re.search(r"call 21    <call twice>", out)
    assert "ld_pseudo\tr2, 4, 24    <&loop_body>" in out
    for name in ("twice:", "mix:", "global_add:", "loop_body:"):
        assert f"\n{name}\n" in out
    rc, out, _ = run(capsys, str(BPF / "multi.bpf.o"), "--no-source")
    assert "section 'fentry.multi_func/bpf_fentry_test*' type tracing attach trace_fentry " \
           "target 'bpf_fentry_test*' flags multi_func" in out
    assert "attach trace_fentry_multi target 'bpf_fentry_test*'," in out


def test_objdump_core_and_maps(capsys) -> None:
    _, out, _ = run(capsys, str(BPF / "core.bpf.o"), "--no-source")
    assert "<CO-RE field_byte_offset type" in out and "<CO-RE enumval_value type" in out
    _, out, _ = run(capsys, str(BPF / "maps.bpf.o"), "--no-source")
    assert "array_of_maps: array_of_maps key 4 value 4 max_entries 2" in out
    assert "    inner: array key 4 value 4 max_entries 1" in out and "    [1] = inner_b" in out
    assert "hash_map: hash key 8 value 8 max_entries 128 flags no_prealloc pinned by name" in out


def test_objdump_errors(capsys, tmp_path) -> None:
    bad = tmp_path / "bad.o"
    bad.write_bytes(b"\x7fELF" + b"\0" * 20)
    rc, _, err = run(capsys, str(bad))
    assert rc == 1 and err.startswith("bpfmux: error:") and "bad.o" in err
    rc, _, err = run(capsys, str(BPF / "globals.bpf.o"), "-p", "nope")
    assert rc == 1 and "no program named 'nope'" in err and "read_globals" in err
    with pytest.raises(SystemExit):
        main(["objdump"])


@pytest.mark.parametrize("obj", sorted(BPF.glob("*.bpf.o")), ids=lambda p: p.name)
def test_objdump_shows_every_test_object(capsys, obj: Path) -> None:
    rc, out, _ = run(capsys, str(obj))
    assert rc == 0 and out.startswith(f"object {obj.name.split('.')[0]}:")


def test_objdump_warns_about_what_a_loader_refuses(capsys) -> None:
    """btf_kinds' ``ext_var`` has no BTF description: shown as a ksym, with a warning, and a loader still refuses it."""
    from bpfmux.errors import ParseError
    from bpfmux.obj import load_object

    rc, out, err = run(capsys, str(BPF / "btf_kinds.bpf.o"))
    assert rc == 0 and "ksym ext_var (weak)" in out and "program kinds_entry" in out
    assert err.count("\n") == 1 and "warning: extern 'ext_var' has no BTF description" in err
    with pytest.raises(ParseError, match="ext_var"):
        load_object(BPF / "btf_kinds.bpf.o")
    assert load_object(BPF / "btf_kinds.bpf.o", lenient=True).warnings
