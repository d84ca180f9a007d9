"""What a program recorded, as a person reads it (``bpfmux run``, ``bpfmux emulate``).

* :mod:`bpfmux.show.values`: decoded values as plain data and one-line text;
* :mod:`bpfmux.show.hist`: ``slots`` histograms drawn as bpftrace draws them;
* :mod:`bpfmux.show.events`: the C type of ring/perf-buffer records (BTF, else DWARF);
* :mod:`bpfmux.show.maps`: map readings, per-interval differences, sorted text.

Nothing here touches a kernel: it works on :class:`bpfmux.api.Map` objects
and decoded values, so both kernels' maps render the same way.
"""
