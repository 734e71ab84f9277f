"""``castpile show`` (a file or a hooked module, ``--diff``), ``inspect.getsource`` on a hooked module's
kernel, and ``castpile cache info``'s listing (module, source, size, age) and its refusals."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import castpile
from castpile import cache, cli
from testkit.cli import STORE, STORE_BINDING, STORE_KERNEL as KERNEL

REPO = Path(__file__).resolve().parents[1]


def run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def package(tmp_path):
    """``kp`` (its ``__init__`` installs the hook, strategy gather, and prints) holding ``kp.k``; ``plain_k.py`` beside it."""
    (tmp_path / "kp").mkdir()
    (tmp_path / "kp" / "__init__.py").write_text(
        "import castpile\ncastpile.install_import_hook(__name__, strategy='gather')\nprint('kp imported')\n"
    )
    (tmp_path / "kp" / "k.py").write_text(KERNEL)
    (tmp_path / "plain_k.py").write_text(KERNEL)
    return tmp_path


def run_in(directory: Path, *command: str) -> subprocess.CompletedProcess:
    """``command`` (from ``sys.executable``: the test's body names it, for its tier) run in ``directory``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CASTPILE_CACHE_DIR": str(directory / "cache")}
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=240)


def test_show_prints_a_files_output(package, capsys):
    code, out, err = run(["show", package / "plain_k.py"], capsys)
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[:7] == KERNEL.splitlines()[:7] and lines[7:10] == [
        STORE_BINDING,
        KERNEL.splitlines()[8],
        STORE.format("loop", package / "plain_k.py"),
    ]
    assert "def _castpile_store_loop(" in out


def test_show_diff_is_unified_against_the_source(package, capsys):
    path = package / "plain_k.py"
    code, out, _ = run(["show", path, "--diff", "--strategy", "gather"], capsys)
    assert code == 0
    assert out.startswith(f"--- {path}\n+++ {path} (castpile)\n@@ -5,6 +5,")
    assert "\n-    bufs = multicast_like(out, table[:W], shape=(n,))\n+    bufs = table\n" in out
    assert f"\n-    bufs[offs] = tl.load(out + offs, mask=offs < n)\n+{STORE.format('gather', path)}\n" in out


def test_show_a_hooked_module_with_its_hooks_strategy_and_an_unhooked_one(package):
    hooked = run_in(package, sys.executable, "-m", "castpile", "show", "kp.k")
    assert hooked.returncode == 0 and hooked.stderr == "kp imported\n"  # the package's print is not the output
    assert hooked.stdout.encode() == castpile.transpile(
        KERNEL.encode(), str(package / "kp" / "k.py"), strategy="gather"
    )
    assert hooked.stdout.splitlines()[9] == STORE.format("gather", package / "kp" / "k.py")
    plain = run_in(package, sys.executable, "-m", "castpile", "show", "plain_k")
    assert plain.returncode == 0 and plain.stdout.splitlines()[9] == STORE.format("loop", package / "plain_k.py")
    assert (
        plain.stderr
        == f"castpile show: note: no import hook takes plain_k; showing what `castpile {package / 'plain_k.py'}` writes\n"
    )


def test_show_errors_are_located_or_usage(package, capsys):
    bad = package / "bad.py"
    bad.write_text(KERNEL.replace("bufs[offs] = tl.load", "x = bufs + tl.load"))
    code, out, err = run(["show", bad], capsys)
    assert (code, out) == (1, "") and err.startswith(f"{bad}:10:9: error: 'bufs' is a multicast tensor")
    missing = run_in(package, sys.executable, "-m", "castpile", "show", "no_such_module")
    assert (
        missing.returncode == 2 and missing.stderr == "castpile show: error: no_such_module: no such file or module\n"
    )


GETSOURCE = """
import inspect, linecache, os, sys
import kp.k
fn = kp.k.spread.fn
first = inspect.getsource(fn)
print(first.splitlines()[2:5:2])
print(fn.__code__.co_firstlineno, os.path.basename(fn.__code__.co_filename).startswith("kp.k-"))
if os.path.exists(fn.__code__.co_filename):
    os.unlink(fn.__code__.co_filename)   # castpile cache clear, while the process runs
linecache.checkcache()
print(inspect.getsource(fn) == first)
"""


@pytest.mark.parametrize("cache_state", ["usable", "world-writable"])
def test_getsource_on_a_hooked_kernel_gives_the_text_that_runs(package, cache_state):
    if cache_state == "world-writable":
        (package / "cache").mkdir()
        os.chmod(package / "cache", 0o777)
    result = run_in(package, sys.executable, "-W", "ignore", "-c", GETSOURCE)
    assert result.returncode == 0, result.stderr
    lines = [STORE_BINDING, STORE.format("gather", package / "kp" / "k.py")]
    assert result.stdout == (f"kp imported\n{lines}\n6 {cache_state == 'usable'}\nTrue\n")


def test_cache_info_lists_each_entry(tmp_path, capsys):
    directory = cache.prepare_dir(tmp_path / "c")
    for module, source, body in (("pkg.a", "/src/pkg/a.py", b"a = 1\n"), ("pkg.b", "/src/pkg/b é.py", b"b = 22\n")):
        cache.cached(directory, module, source, body, {"strategy": "loop"}, lambda body=body: body)
    old = next(directory.glob("pkg.a-*.py"))
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    code, out, _ = run(["cache", "info", "--dir", directory], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[:2] == [f"dir: {directory}", "entries: 2"]
    size_a, size_b = old.stat().st_size, next(directory.glob("pkg.b-*.py")).stat().st_size
    assert lines[3].startswith("bound: 256 MiB (CASTPILE_CACHE_MAX_MB, default 256)")
    assert lines[4:] == [
        f"  pkg.a  /src/pkg/a.py  {size_a} bytes  2 h old",
        f"  pkg.b  /src/pkg/b é.py  {size_b} bytes  0 s old",
    ]


def test_cache_info_says_when_the_hook_would_refuse_the_directory(tmp_path, capsys):
    directory = tmp_path / "open"
    directory.mkdir()
    os.chmod(directory, 0o777)
    code, out, _ = run(["cache", "info", "--dir", directory], capsys)
    assert code == 0
    assert (
        f"refused: the import hook will not use it: castpile cache directory {directory} is writable by "
        f"group or others (mode 777); refusing to use it (fix with `chmod 700 {directory}`"
    ) in out
    os.chmod(directory, 0o700)
    assert "refused" not in run(["cache", "info", "--dir", directory], capsys)[1]
    assert "refused" not in run(["cache", "info", "--dir", tmp_path / "not-yet"], capsys)[1]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a directory away needs root")
def test_cache_info_says_when_another_user_owns_the_directory(tmp_path, capsys):
    directory = tmp_path / "theirs"
    directory.mkdir(mode=0o700)
    os.chown(directory, 12345, -1)
    out = run(["cache", "info", "--dir", directory], capsys)[1]
    assert (
        f"refused: the import hook will not use it: castpile cache directory {directory} is owned by uid 12345" in out
    )


def test_an_entry_without_a_recorded_source_is_listed_as_such(tmp_path, capsys):
    directory = cache.prepare_dir(tmp_path / "c")
    cache.store(cache.entry_path(directory, "old", "ab" * 32), "ab" * 32, b"x = 1\n")
    assert run(["cache", "info", "--dir", directory], capsys)[1].splitlines()[4].startswith("  old  (not recorded)  ")


def test_the_recorded_source_is_read_without_waiting_on_a_fifo(tmp_path):
    directory = cache.prepare_dir(tmp_path / "c")
    entry, _ = cache.cached(directory, "pkg.a", "/src/pkg/a.py", b"a = 1\n", {"strategy": "loop"}, lambda: b"a = 1\n")
    assert cache.source_of(entry) == "/src/pkg/a.py"
    assert cache.source_of(cache.in_memory_name("/src/pkg/a.py", "castpile.jit")) == "/src/pkg/a.py"
    fifo = directory / f"pkg.b-{'ab' * 32}.py"
    os.mkfifo(fifo)
    assert cache.source_of(str(fifo)) is None and cache.source_of(str(tmp_path / "other.py")) is None
