#!/usr/bin/env bash
# Rebuilds the committed test objects tests/bpf/*.bpf.o from tests/bpf/*.bpf.c.
#
# Reproducible: pinned flags, relative source paths with the build directory
# mapped to ".", DWARF stripped (the objects keep .BTF and .BTF.ext, which is
# what loaders use), only the project's own header and libbpf's headers from
# /usr/include/bpf (Debian 12 libbpf-dev 1.1). The same clang gives the same
# bytes on any machine; tests/unit/test_obj_fresh.py checks that.
#
# Objects listed in KEEP_DWARF keep their DWARF (run_tool: a struct only DWARF
# describes, as in real tools).
#
# Usage: tests/bpf/build.sh [OUTDIR]   (default: tests/bpf itself)
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-.}"
mkdir -p "$out"
CLANG="${CLANG:-clang}"
STRIP="${LLVM_STRIP:-llvm-strip}"
CFLAGS=(-O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86
	-nostdinc -isystem /usr/include -I .
	-fdebug-prefix-map="$PWD"=. -fno-ident
	-Wall -Werror -Wno-unused-variable -Wno-unused-function)
KEEP_DWARF=" run_tool.bpf.c "
for src in *.bpf.c; do
	obj="$out/${src%.c}.o"
	"$CLANG" "${CFLAGS[@]}" -c "$src" -o "$obj.tmp"
	if [[ "$KEEP_DWARF" == *" $src "* ]]; then
		mv "$obj.tmp" "$obj"
	else
		"$STRIP" -g "$obj.tmp" -o "$obj"
		rm -f "$obj.tmp"
	fi
done
