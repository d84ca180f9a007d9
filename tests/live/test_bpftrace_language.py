"""The language, construct by construct: scripts whose output does not depend
on what the machine does (``BEGIN`` blocks that ``exit()``), run by bpftrace
0.17 and by ``bpfmux bpftrace``; the outputs must be byte for byte equal,
in text and in JSON (``-f json``)."""

from __future__ import annotations

import os
import subprocess

import pytest
from bpftrace_oracle import BPFMUX, ROOT, bpftrace_missing

pytestmark = pytest.mark.live

SCRIPTS = {
    "loops": 'BEGIN { $i = 0; while ($i < 5) { $i++; if ($i == 3) { continue } if ($i > 4) { break } @w[$i] = $i * 10; }'
             ' unroll(3) { @u = @u + 1; } exit(); }',
    "printf": 'BEGIN { printf("%lu %ld %d %u %hd %hhu %-8s| %08x %o %p %c %5s|%-5d|%%\\n", -1, -1, -1, -1, 70000, 300, '
              '"ab", 3054, 8, 0, 65, "xy", 42); printf("no newline"); printf(" %s %d\\n", "end", 1 + 2); exit(); }',
    "arithmetic": 'BEGIN { @neg = -7 / 2; @m = 7 % 3; @sh = 1 << 10; @b = !0 + ~0; @c = 10 - 20; @d = (uint8)300; '
                  '@e = (int8)200; @f = 3 > 2 && 2 > 3 || 1; @g = 0x10 | 1 ^ 3 & 2; @h = 1e3 + 1_000; exit(); }',
    "strings": 'BEGIN { $s = "hello"; @[$s] = 1; @eq = "a" == "a"; @ne = "abc" != "abd"; @lt = "abc" == "ab"; '
               'if (comm == "nosuchcomm") { printf("yes\\n"); } else { printf("no\\n"); } @c = str($2) == "hello";'
               ' exit(); }',
    "tuples": 'BEGIN { $x = (1, "two", -3); printf("%d %s %d\\n", $x.0, $x.1, $x.2); @tu[1, "k"] = (3, "v"); '
              '@p = (1, 2); print($x); exit(); }',
    "ternary": 'BEGIN { $a = 5; @x = $a > 3 ? 1 : 2; @y = $a < 3 ? "small" : "big"; @z = $a ? -1 : 1; exit(); }',
    "aggregations": 'BEGIN { @c = count(); @c = count(); @s = sum(5); @s = sum(-8); @mi = min(4); @mi = min(2); '
                    '@ma = max(4); @ma = max(9); @a = avg(3); @a = avg(4); @a2 = avg(-3); @a2 = avg(-4); '
                    '@st = stats(10); @st = stats(1); exit(); }',
    "keyed": 'BEGIN { @a[3] = count(); @a[1] = count(); @a[1] = count(); @a[2] = count(); @a[2] = count(); '
             '@a[2] = count(); @k["b", 2] = sum(3); @k["a", 1] = sum(2); @k["a", 2] = sum(7); @v[-1] = 1; @v[5] = 2; '
             '@v[0] = 3; @st[1] = stats(3); @st[2] = stats(1); @str["z"] = "last"; @str["a"] = "first"; exit(); }',
    "histograms": 'BEGIN { @h = hist(0); @h = hist(1); @h = hist(5); @h = hist(-3); @h = hist(1000000); '
                  '@h = hist(5000000000); @l = lhist(-5, 0, 100, 10); @l = lhist(15, 0, 100, 10); '
                  '@l = lhist(100, 0, 100, 10); @l = lhist(2000, 0, 100, 10); @hk[1] = hist(2); @hk[2] = hist(2); '
                  '@hk[2] = hist(4); @big = lhist(5000, 0, 10240, 1024); exit(); }',
    "map_calls": 'BEGIN { @a[1] = count(); @a[2] = count(); @a[2] = count(); @h[1] = hist(3); @h[2] = hist(300); '
                 'print(@a); print(@a, 1); print(@a, 0, 2); print(@h); clear(@a); print(@a); zero(@h); print(@h); '
                 '@z = count(); clear(@z); print(@z); @d[1] = 1; @d[2] = 2; delete(@d[1]); print(@d); exit(); }',
    "print_values": 'BEGIN { print(123); print(-5); print("str"); print((1, "x")); print(1 > 0); exit(); }',
    "params": 'BEGIN { printf("%s %d %d %s\\n", str($2), $1 + 1, $#, str($1)); @p[$1] = $1; exit(); }',
    "begin_end": 'END { printf("end %d\\n", @x); } BEGIN { printf("begin\\n"); @x = 1; exit(); }',
    "increments": 'BEGIN { $i = 1; $i++; ++$i; $j = $i--; @a++; @a++; --@a; @b += 5; @b -= 2; @b *= 3; @b /= 2; '
                  '@b %= 4; @b <<= 3; @b |= 1; @b ^= 3; @b &= 14; @b >>= 1; printf("%d %d\\n", $i, $j); exit(); }',
    "bswap": 'BEGIN { $x = (uint16)0x1234; $z = (uint32)0x12345678; printf("%x %x %x %x\\n", $x, bswap((uint16)0x1234), '
             'bswap($x), bswap($z)); $x = bswap($x); @x = $x; exit(); }',
    "exit_stops_the_block": 'BEGIN { printf("a\\n"); exit(); printf("never\\n"); }',
}


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def oracle(root_required: None) -> None:
    why = bpftrace_missing()
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_same_output_as_bpftrace(oracle: None, name: str, fmt: str) -> None:
    prog = SCRIPTS[name]
    extra = ["-f", "json"] if fmt == "json" else []
    theirs = _run(["bpftrace", *extra, "-e", prog, "41", "hello"])
    ours = _run([*BPFMUX, *extra, "-e", prog, "41", "hello"])
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout


def test_quiet_and_output_file(oracle: None, tmp_path) -> None:
    prog = 'BEGIN { printf("x\\n"); @ = count(); exit(); }'
    for tool in (["bpftrace"], BPFMUX):
        out = tmp_path / f"{len(tool)}.txt"
        r = _run([*tool, "-q", "-o", str(out), "-e", prog])
        assert r.returncode == 0 and r.stdout == "\n\n"  # bpftrace writes these two to stdout even with -o
        assert out.read_text() == "x\n@: 1\n"


def test_the_event_wait_ends_when_the_wake_fd_is_readable(root_required: None) -> None:
    # the command line passes its signal wake-up pipe: Ctrl-C must end the wait for events at once
    import io
    import time

    from bpfmux.bpftrace.runtime import Options, Session, compile_script
    from bpfmux.live import LiveKernel

    r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    kernel = LiveKernel()
    try:
        script = compile_script('tracepoint:syscalls:sys_enter_getppid { @ = count(); }', kernel, Options())
        with Session(script, kernel, Options(), out=io.StringIO()) as session:
            session.start()
            os.write(w, b"\x02")
            t = time.monotonic()
            session.poll(60.0, r)
            assert time.monotonic() - t < 30.0  # returned because of the fd, long before the 60 s timeout
            with pytest.raises(BlockingIOError):
                os.read(r, 1)  # what the pipe held was read
    finally:
        kernel.close()
        os.close(r)
        os.close(w)


#: -k/-kk: failed helpers are reported where they are in the script (map updates into a full map, deletes of
#: missing keys, reads of bad addresses), with bpftrace's spans (a span starts where the whitespace before it
#: ended; one column more after each ``struct NAME``)
HELPER_ERRORS = {
    "updates_and_deletes": (["-k"], 'BEGIN { @a[1] = 1; @a[2] = 2; @c[1] = count(); @c[2] = count(); '
                            '@h[1] = hist(5); @h[2] = hist(5); @s[1]=sum(1); @s[2]=sum(2); @t[1,2] = 5; @t[3,4] = 6;\n'
                            '  @a[1]   =   3; delete(@a[7]); delete(@t[3, 4]); @i[1] = 0; @i[2]++; exit(); }'),
    "reads_are_checked_only_with_kk": (["-k"], 'BEGIN { printf("%s\\n", str(0)); @x = *(uint32*)8; exit(); }'),
    "reads": (["-kk"], 'BEGIN { printf("%s|%s\\n", str(0), str(8, 4)); $p = (struct task_struct *)0; '
              'printf("%d\\n", $p->pid); @x = *(uint32*)8; @y = (*(uint64*)16) + 1; exit(); }'),
}


@pytest.mark.parametrize("name", sorted(HELPER_ERRORS))
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_helper_errors_are_reported_as_bpftrace_reports_them(oracle: None, name: str, fmt: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    flags, prog = HELPER_ERRORS[name]
    monkeypatch.setenv("BPFTRACE_MAP_KEYS_MAX", "1")
    extra = [*flags, *(["-f", "json"] if fmt == "json" else [])]
    theirs = _run(["bpftrace", *extra, "-e", prog])
    ours = _run([*BPFMUX, *extra, "-e", prog])
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ("WARNING: Failed to" in ours.stdout or '"helper_error"' in ours.stdout) == (name != "reads_are_checked_only_with_kk")
    assert ours.stdout == theirs.stdout


def test_helper_errors_name_the_script_file(oracle: None, tmp_path) -> None:
    script = tmp_path / "k.bt"
    script.write_text('BEGIN\n{\n  @a[1] = 1;\n  delete(@a[2]);\n  exit();\n}\n')
    theirs = subprocess.run(["bpftrace", "-k", "k.bt"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    ours = subprocess.run([*BPFMUX, "-k", "k.bt"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))  # fmt: skip
    assert "k.bt:4:3-16: WARNING: Failed to map_delete_elem: No such file or directory (-2)" in ours.stdout
    assert ours.stdout == theirs.stdout
