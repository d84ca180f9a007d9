"""The running kernel's build configuration, as ``__kconfig`` externs read it."""

from __future__ import annotations

import contextlib
import gzip
import os

__all__ = ["kernel_config", "kernel_version"]

#: at most this much of a (decompressed) config file is read
MAX_CONFIG_BYTES = 16 << 20


def kernel_version(release: str | None = None) -> int:
    """``LINUX_KERNEL_VERSION`` of a release string (``"6.18.44-x"`` → ``0x61200 + 44``),
    as libbpf computes it (the patch level saturates at 255)."""
    nums = []
    for part in (release or os.uname().release).split("-")[0].split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        nums.append(int(digits or 0))
    while len(nums) < 3:
        nums.append(0)
    return (nums[0] << 16) + (nums[1] << 8) + min(nums[2], 255)


def kernel_config() -> dict[str, str]:
    """The running kernel's config (``/proc/config.gz`` or
    ``/boot/config-<release>``) plus the values libbpf adds: ``LINUX_KERNEL_VERSION``,
    ``LINUX_HAS_BPF_COOKIE`` (the kernel has ``bpf_get_attach_cookie``, 5.15
    and later) and ``LINUX_HAS_SYSCALL_WRAPPER`` (``CONFIG_ARCH_HAS_SYSCALL_WRAPPER``);
    only those when neither file exists (weak ``__kconfig`` externs then read 0)."""
    from ..obj.kconfig import parse_config

    text = ""
    with contextlib.suppress(OSError, EOFError, gzip.BadGzipFile), gzip.open("/proc/config.gz", "rb") as f:
        text = f.read(MAX_CONFIG_BYTES).decode(errors="replace")
    if not text:
        with contextlib.suppress(OSError), open(f"/boot/config-{os.uname().release}", "rb") as f:
            text = f.read(MAX_CONFIG_BYTES).decode(errors="replace")
    values = parse_config(text) if text else {}
    version = kernel_version()
    values["LINUX_KERNEL_VERSION"] = str(version)
    # the two feature values libbpf gives besides the config (usdt.bpf.h and the BPF_KSYSCALL macros read them)
    values["LINUX_HAS_BPF_COOKIE"] = "y" if version >= 0x050F00 else "n"  # bpf_get_attach_cookie() since 5.15
    values["LINUX_HAS_SYSCALL_WRAPPER"] = "y" if values.get("CONFIG_ARCH_HAS_SYSCALL_WRAPPER") == "y" else "n"
    return values
