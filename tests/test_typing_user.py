"""A user's own code under both type checkers, mypy and basedpyright, with castpile installed as it is here.

castpile ships ``py.typed``; the editable install of the test venv (``pip install -e``, pyproject.toml maps the
package to the project's root so that it is a plain path in a ``.pth`` file) must be visible to both checkers from
a directory outside the tree.  Correct use gives no error; each wrong call (marked ``# wrong``) gives one on its line:
``castpile.jit`` typed as ``triton.jit`` (both call forms; ``kernel[grid](...)`` subscriptable), ``strategy`` a
``Literal``, the import hook's handle an ``ImportHook``.  Before, basedpyright found each launch "not
subscriptable" (``castpile.jit`` had no return type) and mypy let every wrong call pass.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

USER_FILE = """\
import triton
import triton.language as tl

import castpile
from castpile.hook import ImportHook


@castpile.jit
def one_shot_sum(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    bufs = castpile.multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


@castpile.jit(do_not_specialize=["n"], debug=False, noinline=False)
def copy(out, src, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])
@castpile.jit
def tuned(out, src, n, BLOCK: tl.constexpr):
    tl.store(out + tl.arange(0, BLOCK), tl.load(src + tl.arange(0, BLOCK)))


def launch(out: object, dev_ptrs: object, src: object, n: int, world: int) -> None:
    one_shot_sum[(1,)](out, dev_ptrs, n, WORLD=world, BLOCK=1024)
    one_shot_sum[lambda meta: (n // meta["BLOCK"],)](out, dev_ptrs, n, WORLD=world, BLOCK=1024)
    copy[(1,)](out, src, n, BLOCK=64)
    tuned[(1,)](out, src, n)


hook: ImportHook = castpile.install_import_hook("mypkg", strategy="gather", cache_dir="/tmp/castpile-cache")
hook.uninstall()
with castpile.install_import_hook("mypkg") as again:
    again.uninstall()
text: bytes = castpile.transpile(b"x = 1\\n", strategy="loop")

castpile.install_import_hook("mypkg", strategy="fast")  # wrong
castpile.transpile(b"x = 1\\n", strategy="fast")  # wrong
hook.uninstal()  # wrong


@castpile.jit(do_not_specialise=["n"])  # wrong
def misspelt(out, n):
    pass
"""

MYPY = [sys.executable, "-m", "mypy", "--no-incremental", "--show-error-codes", "--no-error-summary"]
WRONG = [k for k, line in enumerate(USER_FILE.splitlines(), 1) if line.endswith("# wrong")]


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A directory outside the tree holding the user's file: castpile is found only as installed."""
    (tmp_path / "user.py").write_text(USER_FILE)
    return tmp_path


def _error_lines(found: list[int], report: str) -> None:
    assert sorted(set(found)) == WRONG, f"errors on lines {sorted(set(found))}, expected {WRONG}:\n{report}"


def test_mypy_checks_the_users_calls(user_dir):
    result = subprocess.run(
        [*MYPY, "--disable-error-code", "import-untyped", "user.py"],  # triton ships no types: Any to mypy
        cwd=user_dir,
        capture_output=True,
        text=True,
    )
    assert "import-not-found" not in result.stdout, result.stdout  # the editable install is visible
    lines = [int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line]
    _error_lines(lines, result.stdout + result.stderr)


def test_basedpyright_checks_the_users_calls(user_dir):
    checker = shutil.which("basedpyright", path=str(Path(sys.executable).parent))
    if checker is None:
        pytest.skip("basedpyright is not installed beside this interpreter (the test extra pins it)")
    (user_dir / "pyrightconfig.json").write_text(json.dumps({"typeCheckingMode": "standard"}))
    result = subprocess.run(
        [checker, "--outputjson", "--pythonpath", sys.executable, "user.py"],
        cwd=user_dir,
        capture_output=True,
        text=True,
    )
    report = json.loads(result.stdout)
    # Triton's own typing, the same for a @triton.jit kernel: a `BLOCK: tl.constexpr` parameter takes a
    # tl.constexpr to pyright, so each launch's `BLOCK=1024` is reported; left out here.
    errors = [
        d
        for d in report["generalDiagnostics"]
        if d["severity"] == "error" and 'of type "constexpr"' not in d["message"]
    ]
    shown = "\n".join(f"{d['range']['start']['line'] + 1}: {d['message']}" for d in errors)
    assert not any("could not be resolved" in d["message"] for d in errors), shown  # the editable install
    _error_lines([d["range"]["start"]["line"] + 1 for d in errors], shown)
