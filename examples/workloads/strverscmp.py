"""Call libc's strverscmp() N times (default 100); the interpreter never calls it itself."""

import ctypes
import sys

f = ctypes.CDLL("libc.so.6").strverscmp
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 100):
    f(b"file9", b"file10")
