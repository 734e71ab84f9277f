"""Hostile input to the command line: a clear message, the right exit code, bounded time and
memory, SRC never modified, OUT complete or untouched."""

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from castpile import cli
from testkit.diagnostics import headline

KERNEL = b"""import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def kern(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    bufs[offs] = tl.sum(bufs[offs], axis=0)[None, :]
"""
LIMIT_S = 60
MEMORY = 2 * 1024**3


def castpile(*args, stdin=b"", cwd=None):
    """Run the CLI in a child with a time limit and a 4 GiB address-space cap (twice MEMORY)."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY * 2, MEMORY * 2))

    return subprocess.run(
        [sys.executable, "-m", "castpile", *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=LIMIT_S,
        cwd=cwd,
        preexec_fn=cap,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_diagnostic(proc, path, line: int, col: int, id: str, params: dict, shows_source: bool = True):
    """Exit code 1 and exactly one diagnostic: ``path:line:col: error: message [castpile:id]``, then
    (unless it is about the whole file) the source line and a caret under the column."""
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 1, err
    lines = err.splitlines()
    assert lines[0] == headline(path, line, col, id, **params), err[:2000]
    if shows_source:
        assert len(lines) == 3 and lines[2] == " " * (4 + col - 1) + "^", err[:2000]
    else:
        assert len(lines) == 1, err[:2000]


NESTED = ("E001", {"detail": "too many nested parentheses"})


@pytest.mark.parametrize(
    "name, text, line, col, id, params",
    [
        ("nonutf8", b"import castpile\nx = '\xff\xfe'\n", 2, 6, "E003", {"byte": "0xff", "encoding": "utf-8"}),
        ("latin1_without_cookie", b"import castpile\n# caf\xe9\n", 2, 6, "E003", {"byte": "0xe9", "encoding": "utf-8"}),
        (
            "bad_cookie",
            b"# -*- coding: foobar -*-\nimport castpile\n",
            1,
            1,
            "E001",
            {"detail": "unknown encoding: foobar"},
        ),
        ("nul", b"import castpile\nx = 1\x00\n", 2, 6, "E002", {}),
        # Python takes 200 nested brackets: the 201st, at column 4 + 201, is refused.
        ("deep_parens", b"import castpile\nx = " + b"(" * 1000 + b"1" + b")" * 1000 + b"\n", 2, 205, *NESTED),
        ("deep_lists", b"import castpile\nx = " + b"[" * 1000 + b"]" * 1000 + b"\n", 2, 205, *NESTED),
        # Python's tokenizer refuses the 100th level of indentation: line 102 (indented by 100).
        (
            "deep_blocks",
            b"import castpile\n" + b"".join(b" " * i + b"if x:\n" for i in range(1000)) + b" " * 1000 + b"pass\n",
            102,
            1,
            "E001",
            {"detail": "too many levels of indentation"},
        ),
        ("syntax", b"import castpile\nx = (\n", 2, 5, "E001", {"detail": "'(' was never closed"}),
    ],
)
def test_rejected_with_a_located_diagnostic(tmp_path, name, text, line, col, id, params):
    src = tmp_path / f"{name}.py"
    src.write_bytes(text)
    out = tmp_path / "out.py"
    proc = castpile(src, "-o", out)
    assert_diagnostic(proc, src, line, col, id, params)
    assert not out.exists()
    assert src.read_bytes() == text


def test_too_deep_for_python_is_a_diagnostic_about_the_file(tmp_path):
    """A 50,000-term sum, which Python's own parser cannot take (a RecursionError, with no
    line): diagnosed at 1:1, without a source line."""
    text = b"import castpile\nx = " + b"+".join([b"1"] * 50_000) + b"\n"
    src = tmp_path / "long_sum_line.py"
    src.write_bytes(text)
    out = tmp_path / "out.py"
    proc = castpile(src, "-o", out)
    assert_diagnostic(proc, src, 1, 1, "E004", {}, shows_source=False)
    assert not out.exists() and src.read_bytes() == text


def test_deep_but_valid_python_transpiles(tmp_path):
    """Nesting that Python accepts (199 brackets, 2,000-term sums) never crashes castpile: the
    file (no multicast use) comes back byte for byte."""
    src = tmp_path / "deep.py"
    src.write_bytes(b"import castpile\nx = " + b"[" * 199 + b"]" * 199 + b"\ny = " + b"+".join([b"1"] * 2000) + b"\n")
    proc = castpile(src)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == src.read_bytes() and proc.stderr == b""


def test_long_line_passes_through(tmp_path):
    text = b"import castpile\nx = [" + b"1, " * 33_000 + b"]\ns = '" + b"a" * 100_000 + b"'\n"
    src = tmp_path / "long.py"
    src.write_bytes(text)
    proc = castpile(src)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == text


def test_empty_file(tmp_path):
    src = tmp_path / "empty.py"
    src.write_bytes(b"")
    out = tmp_path / "out.py"
    proc = castpile(src, "-o", out)
    assert proc.returncode == 0 and out.read_bytes() == b""


def test_ten_megabyte_files(tmp_path):
    """10 MB without castpile passes through unchanged; with castpile it is refused quickly."""
    text = b"x = 1  # filler filler filler filler\n" * (10 * 1024 * 1024 // 36)
    plain = tmp_path / "plain.py"
    plain.write_bytes(text)
    out = tmp_path / "plain_out.py"
    proc = castpile(plain, "-o", out)
    assert proc.returncode == 0 and out.read_bytes() == text
    using = tmp_path / "using.py"
    using.write_bytes(b"import castpile\n" + text)
    out = tmp_path / "using_out.py"
    proc = castpile(using, "-o", out)
    # 16 + 291,271 lines of 37 bytes: 10,777,043 bytes.
    assert_diagnostic(proc, using, 1, 1, "E005", {"size": "10.3", "limit": 4}, shows_source=False)
    assert not out.exists()


def test_source_over_the_read_cap_is_refused(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "MAX_SOURCE_BYTES", 1000)
    src = tmp_path / "big.py"
    src.write_bytes(b"x = 1\n" * 200)
    assert cli.main([str(src)]) == 2
    assert "larger than" in capsys.readouterr().err


def test_device_file_is_read_bounded(monkeypatch, capsys):
    monkeypatch.setattr(cli, "MAX_SOURCE_BYTES", 1 << 20)
    assert cli.main(["/dev/zero"]) == 2
    assert "larger than" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["directory", "missing"])
def test_bad_src(tmp_path, kind):
    src = tmp_path / "d" if kind == "directory" else tmp_path / "missing.py"
    if kind == "directory":
        src.mkdir()
    proc = castpile(src)
    what = "is a directory, not a Python file" if kind == "directory" else "no such file"
    assert proc.returncode == 2 and proc.stderr.decode() == f"castpile: error: {src}: {what}\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    src = tmp_path / "secret.py"
    src.write_bytes(KERNEL)
    src.chmod(0)
    proc = castpile(src)
    assert proc.returncode == 2 and "cannot read" in proc.stderr.decode()


def test_unreadable_file_in_process(monkeypatch, tmp_path, capsys):
    src = tmp_path / "secret.py"
    src.write_bytes(KERNEL)

    def denied(file, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr(cli, "open", denied, raising=False)  # the CLI's reads, as root cannot be denied one
    assert cli.main([str(src)]) == 2
    assert "cannot read: Permission denied" in capsys.readouterr().err


def test_out_in_missing_directory(tmp_path):
    src = tmp_path / "k.py"
    src.write_bytes(KERNEL)
    proc = castpile(src, "-o", tmp_path / "nope" / "out.py")
    assert proc.returncode == 2 and "does not exist" in proc.stderr.decode()
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "relative", "dir_collision"])
def test_out_is_src(tmp_path, how):
    src = tmp_path / "k.py"
    src.write_bytes(KERNEL)
    before = digest(src)
    if how == "same":
        args = [src, "-o", src]
    elif how == "symlink":
        (tmp_path / "link.py").symlink_to(src)
        args = [src, "-o", tmp_path / "link.py"]
    elif how == "hardlink":
        os.link(src, tmp_path / "hard.py")
        args = [src, "-o", tmp_path / "hard.py"]
    elif how == "relative":
        args = ["k.py", "-o", "./k.py"]
    else:
        other = tmp_path / "other"
        other.mkdir()
        (other / "k.py").write_bytes(KERNEL)
        args = [src, other / "k.py", "-o", tmp_path]
    proc = castpile(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr.decode()
    assert digest(src) == before


def test_unwritable_out_leaves_nothing(tmp_path, monkeypatch, capsys):
    src = tmp_path / "k.py"
    src.write_bytes(KERNEL)
    out = tmp_path / "out.py"
    out.write_bytes(b"previous\n")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli.os, "replace", full)
    assert cli.main([str(src), "-o", str(out)]) == 2
    assert "cannot write: No space left on device" in capsys.readouterr().err
    assert out.read_bytes() == b"previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.py", "out.py"]


def test_internal_error_exits_3_and_writes_nothing(tmp_path, monkeypatch, capsys):
    import castpile.compiler

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(castpile.compiler, "transpile_source", broken)
    src = tmp_path / "k.py"
    src.write_bytes(KERNEL)
    out = tmp_path / "out.py"
    assert cli.main([str(src), "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"castpile: internal error while transpiling {src}:")
    assert "please report it" in err.lower() and "KeyError: 'boom'" in err
    assert not out.exists()


def test_one_bad_file_of_several_writes_nothing(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_bytes(KERNEL)
    bad.write_bytes(b"import castpile\nx = (\n")
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = castpile(good, bad, "-o", outdir)
    assert proc.returncode == 1
    assert list(outdir.iterdir()) == []
