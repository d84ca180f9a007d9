"""The eBPF instruction set: instruction model, encoding, assembler, disassembler."""

from .insn import Insn, decode, encode

__all__ = ["Insn", "decode", "encode"]
