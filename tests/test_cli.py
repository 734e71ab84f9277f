"""The command line's interface: outputs, modes, several SRC, exit codes, cache dispatch."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from castpile import cli, transpile
from castpile.plain_args import plain_form
from testkit.cli import KERNEL, PLAIN

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


# The plain form ``SRC [-o OUT]``: recognised without argparse, and a SRC that never
# mentions castpile comes back byte for byte (``python -m castpile`` copies it before
# castpile.cli is even imported).  Every outcome must be what the full run gives.


def module_main(argv, monkeypatch, capsysbinary):
    """``python -m castpile ARGV`` in this process."""
    from castpile import __main__

    monkeypatch.setattr(sys, "argv", ["castpile", *map(str, argv)])
    code = __main__.main()
    out, err = capsysbinary.readouterr()
    return code, out, err.decode()


@pytest.fixture(params=["module", "main"])
def entry(request, monkeypatch, capsysbinary):
    """Both entry points: ``python -m castpile`` and the console script's ``cli.main``."""
    if request.param == "module":
        return lambda argv: module_main(argv, monkeypatch, capsysbinary)
    return lambda argv: run(argv, capsysbinary)


@pytest.fixture
def plain(tmp_path):
    path = tmp_path / "plain.py"
    path.write_bytes(PLAIN)
    return path


@pytest.mark.parametrize("form", ["src_o", "o_src", "output", "stdout"])
def test_plain_file_comes_back_unchanged(form, entry, plain, tmp_path):
    out = tmp_path / "out.py"
    argv = {
        "src_o": [plain, "-o", out],
        "o_src": ["-o", out, plain],
        "output": [plain, "--output", out],
        "stdout": [plain],
    }[form]
    code, stdout, err = entry(argv)
    assert code == 0 and err == ""
    if form == "stdout":
        assert stdout == PLAIN and not out.exists()
    else:
        assert stdout == b"" and out.read_bytes() == PLAIN
    assert sorted(p.name for p in tmp_path.iterdir()) == (["plain.py"] if form == "stdout" else ["out.py", "plain.py"])


def test_plain_output_replaces_old_file_keeping_its_mode(entry, plain, tmp_path):
    out = tmp_path / "out.py"
    out.write_bytes(b"previous\n")
    out.chmod(0o640)
    assert entry([plain, "-o", out])[0] == 0
    assert out.read_bytes() == PLAIN and out.stat().st_mode & 0o7777 == 0o640


def test_plain_stdin():
    proc = subprocess.run([sys.executable, "-m", "castpile", "-"], input=PLAIN, capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == PLAIN and proc.stderr == b""


@pytest.mark.parametrize("order", ["src_o", "o_src"])
def test_module_plain_copy_in_a_child(order, plain, tmp_path):
    out = tmp_path / "out.py"
    args = [plain, "-o", out] if order == "src_o" else ["-o", out, plain]
    proc = subprocess.run([sys.executable, "-m", "castpile", *map(str, args)], capture_output=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    assert out.read_bytes() == PLAIN


def test_file_that_mentions_castpile_still_transpiles(entry, src, tmp_path):
    out = tmp_path / "out.py"
    code, _, err = entry([src, "-o", out])
    assert code == 0 and err == ""
    assert out.read_bytes() == transpile(KERNEL, str(src)) != KERNEL


def test_castpile_in_a_comment_is_checked_and_unchanged(entry, tmp_path):
    path = tmp_path / "note.py"
    path.write_bytes(b"# castpile is not used here\nx = 1\n")
    out = tmp_path / "out.py"
    assert entry([path, "-o", out])[0] == 0
    assert out.read_bytes() == path.read_bytes()


def test_diagnostics_still_exit_1(entry, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(BAD)
    out = tmp_path / "out.py"
    code, stdout, err = entry([bad, "-o", out])
    assert code == 1 and stdout == b"" and err.startswith(f"{bad}:7:") and not out.exists()


def test_kernel_through_a_pipe_is_transpiled(tmp_path):
    """A SRC that is a pipe cannot be read twice: the copy must not consume it first."""
    out = tmp_path / "out.py"
    cmd = [sys.executable, "-m", "castpile", "/dev/stdin", "-o", str(out)]
    proc = subprocess.run(cmd, input=KERNEL, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.read_bytes() == transpile(KERNEL, "/dev/stdin")
    proc = subprocess.run(cmd, input=PLAIN, capture_output=True, timeout=60)
    assert proc.returncode == 0 and out.read_bytes() == PLAIN


@pytest.mark.parametrize(
    "case", ["missing", "directory", "out_is_dir", "out_parent_missing", "out_is_src", "out_links_src"]
)
def test_plain_usage_errors_exit_2(case, entry, plain, tmp_path):
    src, out = plain, tmp_path / "out.py"
    if case == "missing":
        src = tmp_path / "missing.py"
        expected = "no such file"
    elif case == "directory":
        src = tmp_path / "d"
        src.mkdir()
        expected = "is a directory, not a Python file"
    elif case == "out_is_dir":
        out = tmp_path / "d"
        out.mkdir()
        expected = "is a directory; give a file name"
    elif case == "out_parent_missing":
        out = tmp_path / "nope" / "out.py"
        expected = "does not exist"
    elif case == "out_is_src":
        out = plain
        expected = "castpile never overwrites its input"
    else:
        out = tmp_path / "link.py"
        out.symlink_to(plain)
        expected = "castpile never overwrites its input"
    before = sorted(p.name for p in tmp_path.iterdir())
    code, stdout, err = entry([src, "-o", out])
    assert code == 2 and stdout == b"", err
    assert err.startswith("castpile: error: ") and expected in err and err.count("\n") == 1
    assert plain.read_bytes() == PLAIN and sorted(p.name for p in tmp_path.iterdir()) == before


def test_plain_over_the_read_cap_exits_2(entry, plain, tmp_path, monkeypatch):
    import castpile.__main__

    monkeypatch.setattr(cli, "MAX_SOURCE_BYTES", len(PLAIN) - 1)
    monkeypatch.setattr(castpile.__main__, "MAX_SOURCE_BYTES", len(PLAIN) - 1)
    out = tmp_path / "out.py"
    code, _, err = entry([plain, "-o", out])
    assert code == 2 and "larger than" in err and not out.exists()


def test_failed_plain_write_leaves_nothing(entry, plain, tmp_path, monkeypatch):
    out = tmp_path / "out.py"
    out.write_bytes(b"previous\n")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli.os, "replace", full)
    code, _, err = entry([plain, "-o", out])
    assert code == 2 and err == f"castpile: error: {out}: cannot write: No space left on device\n"
    assert out.read_bytes() == b"previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.py", "plain.py"]


def test_interrupted_plain_write_leaves_nothing(entry, plain, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.os, "replace", interrupted)
    assert entry([plain, "-o", tmp_path / "out.py"])[0] == 130
    assert [p.name for p in tmp_path.iterdir()] == ["plain.py"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--check", "P"],
        ["P", "--diff"],
        ["P", "--strategy", "gather", "-o", "O"],
        ["P", "P", "-o", "D"],
        ["P", "-o"],
        ["P", "-o", "-"],
        ["-o", "O"],
        ["P", "-o", "O", "-o", "O"],
        ["--output=O", "P"],
        ["-oO", "P"],
        ["--out", "O", "P"],
        ["--", "P"],
        ["-x"],
    ],
)
def test_other_forms_go_to_argparse(argv):
    assert plain_form(argv) is None


def test_cache_subcommand_wins_over_a_file_named_cache(entry, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").write_bytes(PLAIN)
    code, stdout, err = entry(["cache", "-o", "out.py"])
    assert code == 2 and stdout == b"" and err.startswith("usage: castpile cache")
    assert not (tmp_path / "out.py").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["P"],
        ["-"],
        ["P", "-o", "O"],
        ["-o", "O", "P"],
        ["P", "--output", "O"],
        ["--output", "O", "-"],
        ["-", "-o", "O"],
    ],
)
def test_plain_form_parses_as_argparse_does(argv):
    args = cli._parser().parse_args(argv)
    assert not (args.check or args.diff) and args.strategy == "loop"
    assert plain_form(argv) == (args.sources[0], args.output) and len(args.sources) == 1


def test_plain_copy_imports_neither_argparse_nor_the_transpiler(plain, tmp_path):
    probe = (
        "import runpy, sys\n"
        "sys.argv = ['castpile', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('castpile', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "assert 'castpile.cli' not in sys.modules  # python -m castpile copied it alone\n"
        "from castpile import cli\n"
        "sys.stdout = sys.__stdout__\n"
        "assert cli.main(sys.argv[1:]) == 0\n"
        "heavy = ['argparse', 'castpile.compiler.analyse', 'libcst', 'sympy']\n"
        "print(*[m for m in heavy if m in sys.modules])\n"
    )
    out = tmp_path / "out.py"
    proc = subprocess.run([sys.executable, "-c", probe, str(plain), "-o", str(out)], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b"\n" and out.read_bytes() == PLAIN


# What a copy of a file without castpile may import beyond the standard library modules that castpile.files uses:
# castpile's package and the two modules of the copy (not castpile.options, castpile.jit nor typing); through
# castpile.cli, that module and the options too (no compiler, not even castpile.compiler's package).
COPY_PROBE = """\
import runpy, sys
import __future__, contextlib, itertools, signal, stat  # __future__: a table of flags, what `from __future__ import` reads
before = set(sys.modules)
sys.argv = ["castpile", *sys.argv[2:]]
if sys.argv[1:] and __import__("os").environ.get("HOW") == "cli":
    from castpile.cli import main
    code = main(sys.argv[1:])
else:
    try:
        runpy.run_module("castpile", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
print(code, *sorted(set(sys.modules) - before))
"""
COPY_MODULES = ["castpile", "castpile.files", "castpile.plain_args"]


@pytest.mark.parametrize("how", ["python -m castpile", "cli"])
def test_a_file_without_castpile_imports_only_what_copying_it_needs(plain, tmp_path, how):
    out = tmp_path / "out.py"
    env = {**os.environ, "HOW": how, "PYTHONPATH": str(Path(cli.__file__).parents[1])}
    env.pop("TRITON_INTERPRET", None)  # interpreter mode loads castpile's hint for Triton's interpreter too
    command = [sys.executable, "-c", COPY_PROBE, "x", str(plain), "-o", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    via_cli = ["castpile.cli", "castpile.options", "collections.abc"]
    loaded = COPY_MODULES if how != "cli" else sorted([*COPY_MODULES, *via_cli])
    assert proc.stdout.split() == ["0", *loaded] and out.read_bytes() == PLAIN


def test_the_castpile_command_is_the_plain_copy_first():
    import tomllib

    scripts = tomllib.loads((Path(cli.__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"castpile": "castpile.__main__:main"}


def test_import_castpile_stays_light_and_keeps_its_names():
    probe = (
        "import sys, castpile\n"
        "assert 'castpile.compiler' not in sys.modules\n"
        "from castpile import Diagnostic, TranspileError\n"
        "from castpile.compiler.errors import TranspileError as E\n"
        "assert castpile.TranspileError is TranspileError is E\n"
        "assert {'Diagnostic', 'TranspileError', 'transpile'} <= set(dir(castpile))\n"
        "assert all(hasattr(castpile, n) for n in castpile.__all__)\n"
        "assert not hasattr(castpile, 'nope')\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()


@pytest.mark.parametrize("args", [["{src}"], ["--version"], ["{src}", "-o", "-"]])
def test_closed_stdout_is_exit_2_without_a_traceback(tmp_path, args):
    src = tmp_path / "k.py"
    src.write_bytes(b"x = 1\n")
    argv = [a.format(src=src) for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "castpile", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=60,
        preexec_fn=lambda: os.close(1),
    )
    assert proc.returncode == 2 and proc.stderr == b"castpile: cannot write to stdout: it is closed\n"


def test_closed_stdin_is_exit_2_without_a_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "castpile", "-"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert proc.returncode == 2 and proc.stderr == b"castpile: error: cannot read stdin: it is closed\n"
