"""BTF ids of the running kernel, remembered per boot.

Indexing the kernel's BTF by name takes a good part of a second; the BTF
cannot change until the next boot, so an id found once is kept on disk
(:mod:`bpfmux.host.cache`) and the next tool start needs no BTF parse at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import NotFoundError
from ..host.cache import boot_id, cache_dir, read_json, write_json

if TYPE_CHECKING:  # pragma: no cover
    from ..btf import Btf

__all__ = ["BtfIds"]


class BtfIds:
    """``(name, kind) → id`` of the running kernel's BTF, through a per-boot cache.

    :param vmlinux: gives the kernel's BTF, called only on a cache miss.
    """

    def __init__(self, vmlinux: Callable[[], Btf]) -> None:
        self._vmlinux = vmlinux
        self._lock = threading.Lock()
        boot, root = boot_id(), cache_dir()
        self._path: Path | None = root / f"btf-ids-{boot}.json" if boot and root else None
        self._ids: dict[str, int] | None = None

    def _load(self) -> dict[str, int]:
        if self._ids is None:
            data = read_json(self._path) if self._path is not None else None
            ok = isinstance(data, dict) and all(isinstance(v, int) for v in data.values())
            self._ids = dict(data) if ok and isinstance(data, dict) else {}
        return self._ids

    def get(self, name: str, kind: str = "func") -> int:
        """The id of ``name`` of ``kind`` (``func``, ``struct``, ``typedef``, …).

        :raises NotFoundError: the kernel's BTF has no such type.
        :raises NotSupportedError: the kernel has no BTF.
        """
        key = f"{kind}:{name}"
        with self._lock:
            ids = self._load()
            if key in ids:
                return ids[key]
        found = self._vmlinux().find_ids(name, kind)
        if not found:
            raise NotFoundError(f"kernel {kind}", name, "this kernel's BTF does not have it")
        with self._lock:
            ids[key] = found[0]
            if self._path is not None:
                write_json(self._path, ids)
        return found[0]
