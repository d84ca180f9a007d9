"""Facts about this machine that both kernels and the tracer read: tracefs
(tracepoints and their formats), ``/proc/kallsyms``, symbols of user binaries
(ELF), the dynamic linker's cache, CPU lists and the kernel's config.

Nothing here makes a ``bpf(2)`` call; reading these needs no privileges beyond
what the files themselves ask (tracefs and real kallsyms addresses need root).
"""
