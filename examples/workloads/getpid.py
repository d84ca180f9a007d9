"""Call getpid() N times (default 5): a workload whose syscall count is known."""

import os
import sys

for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
    os.getpid()
