"""The live-kernel backend: ``bpf(2)``, ``perf_event_open(2)``, mmap'd buffers.

:class:`LiveKernel` loads objects into the running kernel and returns a
:class:`~bpfmux.api.Collection`. The syscall layer is :mod:`bpfmux.live.sys`.
Heavy modules are imported lazily so ``import bpfmux.live`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .kernel import LiveKernel

__all__ = ["LiveKernel"]


def __getattr__(name: str) -> Any:
    if name == "LiveKernel":
        from .kernel import LiveKernel

        return LiveKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
