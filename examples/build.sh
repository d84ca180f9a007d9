#!/usr/bin/env bash
# Rebuilds examples/objects/*.bpf.o from their C sources with the same pinned,
# reproducible flags as tests/bpf/build.sh (clang -target bpf, BTF kept,
# DWARF stripped). Usage: examples/build.sh
set -euo pipefail
cd "$(dirname "$0")/objects"
CLANG="${CLANG:-clang}"
STRIP="${LLVM_STRIP:-llvm-strip}"
CFLAGS=(-O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86
	-nostdinc -isystem /usr/include -I .
	-fdebug-prefix-map="$PWD"=. -fno-ident
	-Wall -Werror -Wno-unused-variable -Wno-unused-function)
for src in *.bpf.c; do
	obj="${src%.c}.o"
	"$CLANG" "${CFLAGS[@]}" -c "$src" -o "$obj.tmp"
	"$STRIP" -g "$obj.tmp" -o "$obj"
	rm -f "$obj.tmp"
done
