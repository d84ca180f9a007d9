"""BPF ELF objects → :class:`ObjectSpec` (programs, maps, BTF, externs).

Reading
-------
``load_object(path_or_bytes, name=None) -> ObjectSpec``
    Parses the ELF (pyelftools), the BTF (DATASEC sizes and variable offsets
    fixed from the ELF symbols, as libbpf does), ``.BTF.ext``, maps, externs
    and programs. Corrupt input raises :class:`~bpfmux.errors.ParseError`.

``ObjectSpec``
    ``programs`` (name → :class:`ProgramSpec`), ``maps`` (name →
    :class:`MapSpec`; global data maps are named by their section: ``.data``,
    ``.rodata``, ``.bss``, ``.data.foo``, ``.kconfig``), ``btf``,
    ``license``, ``kernel_version``, ``externs`` (name → :class:`Extern`),
    ``kconfig_externs``, ``ksym_externs``, ``kconfig_data(values)``.

``ProgramSpec``
    ``prog_type``, ``expected_attach_type`` (``None`` = 0), ``attach_target``,
    ``flags`` (``ProgFlags``: sleepable, XDP frags, the seed's ``MULTI_FUNC``),
    ``autoload``, ``auto_attach``, ``section_info`` (see
    :mod:`bpfmux.obj.sections`), ``insns`` (linked: the program then each
    reachable ``.text`` subprogram, appended depth-first as libbpf does, with
    bpf-to-bpf calls and ``lddw`` of subprogram addresses — ``src=BPF_PSEUDO_FUNC``
    — already resolved), ``subprograms``, ``relocations``, ``func_info``,
    ``line_info``, ``core_relos`` (all indexed by position in ``insns``; use
    ``kernel_func_info()``/``kernel_line_info()`` for slot offsets),
    ``license``, ``kernel_version``.

Loading (what a backend calls)
------------------------------
``ProgramSpec.instructions(map_fd, target_btf=None, *, ksym_addr=None) -> list[Insn]``
    Returns the final instructions on a copy, in this order:

    1. CO-RE: each record is resolved against ``target_btf`` by
       :mod:`bpfmux.btf.core` and patched into its instruction (libbpf's
       rules; unsatisfiable relocations are poisoned with ``call 0xbad2310``);
    2. maps: ``lddw`` of a map → ``src=BPF_PSEUDO_MAP_FD, imm=map_fd(name)``;
       global data → ``src=BPF_PSEUDO_MAP_VALUE``, low word the fd, high word
       the offset; ``__kconfig`` externs → the same into map ``.kconfig``;
    3. externs: kfunc calls → ``src=BPF_PSEUDO_KFUNC_CALL, imm=<BTF id in
       target_btf>``; typed ksyms → ``src=BPF_PSEUDO_BTF_ID``; untyped ksyms →
       ``ksym_addr(name)``; an unresolved ``__weak`` extern becomes 0 (its call
       is poisoned as libbpf does), an unresolved strong one raises
       :class:`~bpfmux.errors.NotFoundError`.

    ``map_fd(name)`` gets the names of :attr:`ObjectSpec.maps`. The backend
    creates the maps first (``MapSpec``: type, sizes, flags, BTF ids,
    ``inner`` for map-in-map, ``value`` = initial contents of global data,
    ``frozen`` for ``.rodata``/``.kconfig``, ``init_slots`` for statically
    initialised prog arrays / map-in-maps), fills ``.kconfig`` with
    ``ObjectSpec.kconfig_data(config_values)``, then loads each program
    with ``prog_type``, ``expected_attach_type``, ``flags``, ``license``,
    ``kernel_func_info()``/``kernel_line_info()`` and the object's BTF.

Section names
-------------
:func:`~bpfmux.obj.sections.parse_section` / ``match_section``: libbpf's
section table plus the mainline tracing-multi and the seed's
``fentry.multi_func/<glob>`` / ``fexit.multi_func/<glob>`` sections.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .elf import load_object
    from .sections import SectionInfo, match_section, parse_section
    from .spec import (
        CoreRelo,
        CoreReloKind,
        Extern,
        ExternKind,
        FuncInfo,
        LineInfo,
        MapSpec,
        ObjectSpec,
        PinType,
        ProgramSpec,
        Relocation,
        RelocKind,
    )

__all__ = [
    "CoreRelo",
    "CoreReloKind",
    "Extern",
    "ExternKind",
    "FuncInfo",
    "LineInfo",
    "MapSpec",
    "ObjectSpec",
    "PinType",
    "ProgramSpec",
    "RelocKind",
    "Relocation",
    "SectionInfo",
    "load_object",
    "match_section",
    "parse_section",
]

#: name → the submodule that holds it (loaded on first use: pyelftools only when an object is read)
_WHERE = {"load_object": "elf", "SectionInfo": "sections", "match_section": "sections", "parse_section": "sections"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name, "spec" if name in __all__ else None)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value
