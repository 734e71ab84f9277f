"""The command line's interface: outputs, modes, several SRC, exit codes, cache dispatch."""

import ast
import subprocess
import sys

import pytest

from castpile import cli, transpile

KERNEL = b"""import triton
import triton.language as tl
import castpile as cp


@triton.jit
def kern(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = cp.multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    x = bufs[offs]
"""
BAD = b"import castpile as cp\n\n\n@triton.jit\ndef k(out, t):\n    bufs = cp.multicast_like(out, t[:4])\n    y = bufs + 1\n"


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "kern.py"
    path.write_bytes(KERNEL)
    return path


def run(argv, capsysbinary):
    code = cli.main([str(a) for a in argv])
    out, err = capsysbinary.readouterr()
    return code, out, err.decode()


def test_stdout_without_o(src, capsysbinary):
    code, out, err = run([src], capsysbinary)
    assert code == 0 and err == ""
    assert out == transpile(KERNEL, str(src))
    ast.parse(out)


def test_o_file_and_strategy(src, tmp_path, capsysbinary):
    for strategy in ("loop", "gather"):
        out = tmp_path / f"out_{strategy}.py"
        code, _, _ = run([src, "-o", out, "--strategy", strategy], capsysbinary)
        assert code == 0
        assert out.read_bytes() == transpile(KERNEL, str(src), strategy=strategy)
    assert (tmp_path / "out_loop.py").read_bytes() != (tmp_path / "out_gather.py").read_bytes()


def test_stdin():
    proc = subprocess.run([sys.executable, "-m", "castpile", "-"], input=KERNEL, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == transpile(KERNEL, "<stdin>")
    proc = subprocess.run([sys.executable, "-m", "castpile", "-"], input=BAD, capture_output=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.decode().startswith("<stdin>:7:")


def test_several_sources_into_a_directory(src, tmp_path, capsysbinary):
    other = tmp_path / "plain.py"
    other.write_bytes(b"x = 1\n")
    outdir = tmp_path / "out"
    outdir.mkdir()
    code, _, _ = run([src, other, "-o", outdir], capsysbinary)
    assert code == 0
    assert (outdir / "kern.py").read_bytes() == transpile(KERNEL)
    assert (outdir / "plain.py").read_bytes() == b"x = 1\n"


def test_several_sources_need_a_directory(src, tmp_path, capsysbinary):
    code, _, err = run([src, src, "-o", tmp_path / "x.py"], capsysbinary)
    assert code == 2 and "existing directory" in err


def test_check_writes_nothing(src, tmp_path, capsysbinary):
    out = tmp_path / "out.py"
    code, stdout, _ = run([src, "--check", "-o", out], capsysbinary)
    assert code == 0 and stdout == b"" and not out.exists()


def test_diff(src, capsysbinary):
    code, out, _ = run([src, "--diff"], capsysbinary)
    text = out.decode()
    assert code == 0 and text.startswith(f"--- {src}\n+++ {src} (castpile)\n")
    assert "-    x = bufs[offs]" in text


def test_diagnostics_exit_1_all_errors(tmp_path, capsysbinary):
    bad = tmp_path / "bad.py"
    bad.write_bytes(BAD + b"    z = bufs\n")
    out = tmp_path / "out.py"
    code, stdout, err = run([bad, "-o", out], capsysbinary)
    assert code == 1 and not out.exists() and stdout == b""
    heads = [line for line in err.splitlines() if ": error: " in line]
    assert [h.split(":")[1] for h in heads] == ["7", "8"], err
    assert "    y = bufs + 1\n" in err and "^" in err


def test_usage_errors_exit_2(capsysbinary):
    assert run(["--strategy", "nope", "x.py"], capsysbinary)[0] == 2
    assert run(["--diff", "--check", "x.py"], capsysbinary)[0] == 2
    assert run([], capsysbinary)[0] == 2


def test_version_and_help(capsysbinary):
    code, out, _ = run(["--version"], capsysbinary)
    assert code == 0 and out.startswith(b"castpile ")
    code, out, _ = run(["--help"], capsysbinary)
    assert code == 0 and b"cache" in out


def test_cache_dispatch(tmp_path, capsysbinary):
    code, out, _ = run(["cache", "info", "--dir", tmp_path], capsysbinary)
    assert code == 0 and out
    assert run(["cache", "bogus"], capsysbinary)[0] == 2


def test_output_keeps_line_numbers(src, capsysbinary):
    _, out, _ = run([src], capsysbinary)
    before, after = KERNEL.splitlines(), out.splitlines()[: len(KERNEL.splitlines())]
    changed = [i + 1 for i, (a, b) in enumerate(zip(before, after)) if a != b]
    assert changed == [8, 10]
    assert after[8] == b"    offs = tl.arange(0, BLOCK)"
