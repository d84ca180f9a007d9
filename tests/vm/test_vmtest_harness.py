"""Unit tests of the VM tier's harness pieces that need no guest (cpio writer, module info, command script)."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest
import vmtest


def test_cpio_archive_is_read_by_busybox_cpio(tmp_path: Path) -> None:
    if not vmtest.BUSYBOX.is_file():
        pytest.skip(f"{vmtest.BUSYBOX} not installed (busybox-static); .ci/install installs it")
    cpio = vmtest._Cpio()
    cpio.dir("bin")
    cpio.file("bin/hello", b"hi there\n", 0o755)
    cpio.file("odd", b"x" * 5)  # lengths that need padding
    archive = tmp_path / "a.cpio"
    archive.write_bytes(cpio.finish())
    listing = subprocess.run([str(vmtest.BUSYBOX), "cpio", "-t", "-F", str(archive)], capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    assert listing.stdout.split() == ["bin", "bin/hello", "odd"]
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run([str(vmtest.BUSYBOX), "cpio", "-i", "-d", "-F", str(archive)], cwd=out, check=True, capture_output=True)
    assert (out / "bin/hello").read_bytes() == b"hi there\n"
    assert (out / "bin/hello").stat().st_mode & 0o777 == 0o755
    assert (out / "odd").read_bytes() == b"xxxxx"


def test_modinfo_reads_depends_and_vermagic() -> None:
    blob = b"\x7fELF junk\x00license=GPL\x00depends=netfs,9pnet\x00vermagic=6.12.1 SMP mod_unload\x00name=9p\x00"
    info = vmtest._modinfo(blob)
    assert info == {"depends": "netfs,9pnet", "vermagic": "6.12.1 SMP mod_unload", "name": "9p"}
    assert vmtest._modinfo(b"no modinfo here") == {}


def test_decompress_module_xz_and_gz() -> None:
    import lzma

    assert vmtest._decompress_module(lzma.compress(b"ko"), "a.ko.xz") == b"ko"
    assert vmtest._decompress_module(gzip.compress(b"ko"), "a.ko.gz") == b"ko"
    assert vmtest._decompress_module(b"ko", "a.ko") == b"ko"


def test_command_script_quotes_arguments_and_sets_env(tmp_path: Path) -> None:
    script = vmtest._command_script(
        ["/bin/sh", "-c", 'printf "%s|%s|%s\\n" "$0" "$FOO" "$(pwd)"', "it's a $x"],
        tmp_path,
        {"FOO": "a b'c", "PATH": "/usr/bin:/bin"},
    )
    proc = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, env={})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"it's a $x|a b'c|{tmp_path}\n"


def test_command_script_passes_the_exit_status(tmp_path: Path) -> None:
    script = vmtest._command_script(["/bin/sh", "-c", "exit 7"], tmp_path, {})
    assert subprocess.run(["/bin/sh", "-c", script]).returncode == 7


def test_guest_env_points_at_this_checkout() -> None:
    env = vmtest.guest_env()
    assert env["PYTHONPATH"].split(":")[0] == str(Path(__file__).resolve().parents[2] / "src")
    assert env[vmtest.GUEST_ENV_FLAG] == "1"
    assert Path(vmtest.python_real_path()).is_file()
    assert not Path(vmtest.python_real_path()).is_symlink()


def test_unavailable_reason_names_missing_qemu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vmtest.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(vmtest.shutil, "which", lambda name: None if name.startswith("qemu") else "/usr/bin/" + name)
    reason = vmtest.unavailable_reason()
    assert reason is not None and "qemu-system-x86_64 not found" in reason
    monkeypatch.setattr(vmtest.platform, "machine", lambda: "aarch64")
    assert "aarch64" in vmtest.unavailable_reason()


def test_qemu_command_uses_tcg_and_read_only_root(tmp_path: Path) -> None:
    kernel = vmtest.Kernel("pkg", "1", "6.12.0", tmp_path / "vmlinuz", tmp_path / "config", ())
    cmd = vmtest.qemu_command(kernel, tmp_path / "initrd", tmp_path, memory_mb=512, cpus=2)
    assert cmd[cmd.index("-accel") + 1].split(",")[0] == "tcg"
    assert "-enable-kvm" not in cmd
    root = [a for a in cmd if "mount_tag=hostroot" in a]
    assert root and "readonly=on" in root[0] and root[0].startswith("local,path=/,")


def test_newest_612_picks_the_highest_patch_level(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(argv, **kw):
        if argv[:2] == ["apt-cache", "search"]:
            out = "\n".join(
                f"linux-image-6.12.{n}+deb12-amd64-unsigned - Linux 6.12 for 64-bit PCs" for n in (9, 117, 41)
            ) + "\nlinux-image-6.12.200+deb12-cloud-amd64-unsigned - cloud\n"
        else:
            assert argv == ["apt-cache", "show", "linux-image-6.12.117+deb12-amd64-unsigned"]
            out = "Package: x\nVersion: 6.12.117-1~deb12u1\n"
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(vmtest.subprocess, "run", fake_run)
    assert vmtest._newest_612() == ("linux-image-6.12.117+deb12-amd64-unsigned", "6.12.117-1~deb12u1")
