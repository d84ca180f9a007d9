"""Reading the ``.BTF`` and ``.BTF.ext`` sections of an ELF object (pyelftools)."""

from __future__ import annotations

import io

from ..errors import ParseError

__all__ = ["btf_section", "elf_sections"]


def elf_sections(data: bytes, names: tuple[str, ...], source: str | None = None) -> dict[str, bytes]:
    """The contents of the named sections that exist in ELF ``data``.

    :raises ParseError: ``data`` is not a readable ELF file.
    """
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(data))
        out = {}
        for name in names:
            sec = elf.get_section_by_name(name)
            if sec is not None:
                out[name] = sec.data()
        return out
    except (ELFError, ValueError, KeyError, IndexError, OSError) as err:  # pyelftools raises several kinds
        raise ParseError(f"not a readable ELF object: {err}", None, source) from None


def btf_section(data: bytes, source: str | None = None) -> bytes:
    """The ``.BTF`` section of ELF ``data``.

    :raises ParseError: not ELF, or no ``.BTF`` section (compile with ``clang -g``).
    """
    secs = elf_sections(data, (".BTF",), source)
    if ".BTF" not in secs:
        raise ParseError("the object has no .BTF section; compile it with `clang -g -target bpf`", None, source)
    return secs[".BTF"]
