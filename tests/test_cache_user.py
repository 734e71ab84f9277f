"""The compile cache seen from the user: ``castpile cache`` on a DIR that is no directory, an unusable cache said
to be so, the hook's warning at the user's import line, notebook cells' entries across kernel restarts, and the
bound on the cache's size (``CASTPILE_CACHE_MAX_MB``)."""

import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from castpile import cache, cli
from testkit.cli import STORE_KERNEL

REPO = Path(__file__).resolve().parents[1]
OPTIONS = {"strategy": "loop"}


def run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


class OsWith:
    """The ``os`` module for :mod:`castpile.cache` alone, with some of its functions replaced."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


@pytest.mark.parametrize("action", ["info", "clear"])
@pytest.mark.parametrize("how", ["--dir", "env"])
def test_a_cache_dir_that_is_a_file_is_a_usage_error_naming_it(tmp_path, capsys, monkeypatch, action, how):
    target = tmp_path / "a-file"
    target.write_text("not a cache\n")
    if how == "env":
        monkeypatch.setenv(cache.ENV_VAR, str(target))
    code, out, err = run(["cache", action, *(["--dir", target] if how == "--dir" else [])], capsys)
    assert (code, out) == (2, "")
    assert (
        err == f"castpile cache: error: {target}: is not a directory; give --dir (or set {cache.ENV_VAR}) a directory\n"
    )
    assert target.read_text() == "not a cache\n"


def test_a_directory_that_cannot_be_read_is_a_usage_error(tmp_path, capsys, monkeypatch):
    directory = cache.prepare_dir(tmp_path / "c")

    def denied(path):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(cache, "os", OsWith(scandir=denied))
    for action in ("info", "clear"):
        code, out, err = run(["cache", action, "--dir", directory], capsys)
        assert (code, err) == (2, f"castpile cache: error: {directory}: Permission denied\n"), out


def test_info_says_why_a_cache_that_cannot_be_created_is_unusable(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").write_text("")  # a read-only home has no way to make ~/.cache/castpile either
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv(cache.ENV_VAR, raising=False)
    directory = home / ".cache" / "castpile"
    code, out, _ = run(["cache", "info"], capsys)
    assert code == 0
    assert out.splitlines()[:3] == [f"dir: {directory}", "entries: 0", "bytes: 0"]
    assert (
        f"unusable: the import hook cannot store entries here: cannot create {directory}: {home / '.cache'} is not a "
        "directory; it transpiles every module in memory, on every import (set CASTPILE_CACHE_DIR to a directory you "
        "can write)\n"
    ) in out


@pytest.mark.parametrize("state", ["unwritable directory", "unwritable parent"])
def test_info_says_why_a_cache_it_cannot_write_is_unusable(tmp_path, capsys, monkeypatch, state):
    # os.access stands in for the permissions (the tests may run as root, who can write anything)
    if state == "unwritable directory":
        directory = cache.prepare_dir(tmp_path / "c")
        why = f"cannot write {directory} (mode 700, or a read-only file system)"
    else:
        directory = tmp_path / "ro-home" / ".cache" / "castpile"
        (tmp_path / "ro-home").mkdir()
        why = f"cannot create {directory}: cannot write {tmp_path / 'ro-home'} (its permissions, or a read-only file system)"
    monkeypatch.setattr(cache, "os", OsWith(access=lambda path, how: False))
    code, out, _ = run(["cache", "info", "--dir", directory], capsys)
    assert code == 0 and f"unusable: the import hook cannot store entries here: {why}; " in out


def test_info_says_a_usable_cache_is_not_created_yet_and_nothing_when_it_is(tmp_path, capsys):
    out = run(["cache", "info", "--dir", tmp_path / "later"], capsys)[1]
    assert "not created yet: the import hook creates it, 0700, with its first entry\n" in out and "unusable" not in out
    out = run(["cache", "info", "--dir", cache.prepare_dir(tmp_path / "now")], capsys)[1]
    assert "unusable" not in out and "not created" not in out and "refused" not in out


HOOKED_IMPORT = """\
import sys
sys.path.insert(0, {root!r})
import castpile
castpile.install_import_hook("kp", cache_dir={cache!r})
import kp.k
print(kp.k.spread)
"""
IMPORT_LINE = HOOKED_IMPORT.splitlines().index("import kp.k") + 1


@pytest.mark.parametrize("through", ["script", "package"])
def test_the_hooks_cache_warning_points_at_the_users_import(tmp_path, through):
    (tmp_path / "kp").mkdir()
    (tmp_path / "kp" / "__init__.py").write_text("")
    (tmp_path / "kp" / "k.py").write_text(STORE_KERNEL)
    (tmp_path / "a-file").write_text("")
    script = tmp_path / "script.py"
    text = HOOKED_IMPORT.format(root=str(tmp_path), cache=str(tmp_path / "a-file" / "cache"))
    where, line = script, IMPORT_LINE
    if through == "package":  # the import that reaches the hooked module is the package's own line
        (tmp_path / "kp" / "__init__.py").write_text("\nfrom . import k\n")
        text = text.replace("import kp.k\n", "import kp\n")
        where, line = tmp_path / "kp" / "__init__.py", 2
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert f"{where}:{line}: CacheWarning: castpile cannot use its compile cache {tmp_path / 'a-file' / 'cache'}" in (
        result.stderr
    )
    assert "castpile/hook.py" not in result.stderr and "castpile/cache.py" not in result.stderr


# A notebook cell as ipykernel runs one: named <tmp>/ipykernel_<pid>/<hash of the cell>.py, its text in linecache.
CELL = STORE_KERNEL.replace("import triton\n", "import castpile\n").replace("@triton.jit", "@castpile.jit")
NOTEBOOK_KERNEL = """\
import inspect, linecache, os, sys
cell = {cell!r}
name = os.path.join({tmp!r}, f"ipykernel_{{os.getpid()}}", "3141592653.py")
linecache.cache[name] = (len(cell), None, cell.splitlines(keepends=True), name)
namespace = {{"__name__": "__main__"}}
exec(compile(cell, name, "exec"), namespace)
print("libcst:", "libcst" in sys.modules)
print("site:", f"site={{name + ':10'!r}}" in inspect.getsource(namespace["spread"].fn))
"""


def test_a_notebook_cells_entry_survives_a_kernel_restart(tmp_path):
    cells = tmp_path / "cache"
    program = NOTEBOOK_KERNEL.format(cell=CELL, tmp=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(REPO), "CASTPILE_CACHE_DIR": str(cells)}
    env.pop("TRITON_INTERPRET", None)
    runs = [
        subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=240)
        for _ in range(3)
    ]
    assert [r.stdout for r in runs] == ["libcst: True\nsite: True\n"] + ["libcst: False\nsite: True\n"] * 2, [
        r.stderr for r in runs
    ]
    [entry] = cells.iterdir()
    assert cache.source_of(str(entry)).startswith(str(tmp_path / "ipykernel_"))  # the last kernel's cell


def test_a_notebook_cells_key_leaves_out_the_process_and_the_execution_count(tmp_path):
    directory = tmp_path / "c"
    built = []

    def build(path):
        built.append(path)
        return cache_text(path)

    for path in ("/tmp/ipykernel_11/3141592653.py", "/tmp/ipykernel_22/3141592653.py"):
        entry, data = cache.cached(directory, "__main__", path, CELL.encode(), OPTIONS, lambda path=path: build(path))
        assert sites(data) == [f"site='{path}:10'"] and cache.source_of(entry) == path
    for path in ("<ipython-input-3-5e5e5e5e5e5e>", "<ipython-input-8-5e5e5e5e5e5e>"):
        entry, data = cache.cached(directory, "__main__", path, CELL.encode(), OPTIONS, lambda path=path: build(path))
        assert sites(data) == [f"site='{path}:10'"]
    assert built == ["/tmp/ipykernel_11/3141592653.py", "<ipython-input-3-5e5e5e5e5e5e>"]
    assert len(list(directory.iterdir())) == 2
    cache.cached(directory, "__main__", "/src/k.py", CELL.encode(), OPTIONS, lambda: build("/src/k.py"))
    cache.cached(directory, "__main__", "/tmp/ipykernel_33/2718281828.py", CELL.encode(), OPTIONS, lambda: b"x\n")
    assert len(list(directory.iterdir())) == 4  # another file, another cell: other keys
    assert cache.stable_path("/tmp/ipykernel_1/3141592653.py") == cache.stable_path("/var/t/ipykernel_2/3141592653.py")


def sites(data: bytes) -> list[str]:
    """The ``site='PATH:LINE'`` arguments of a transpiled text, each once."""
    return sorted(set(re.findall(r"site='[^']*'", data.decode())))


def cache_text(path: str) -> bytes:
    import castpile

    return castpile.transpile(CELL, path)


def test_the_bound_comes_from_the_environment(monkeypatch):
    assert cache.max_bytes({}) == cache.max_bytes({cache.MAX_MB_VAR: " "}) == 256 * 2**20
    assert cache.max_bytes({cache.MAX_MB_VAR: "0"}) is None
    assert cache.max_bytes({cache.MAX_MB_VAR: "1.5"}) == 3 * 2**19
    for bad in ("lots", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match=rf"^CASTPILE_CACHE_MAX_MB='{bad}' is not a number of MiB: "):
            cache.max_bytes({cache.MAX_MB_VAR: bad})


def body(k: int) -> bytes:
    return f"x = {k}\n".encode() + b"#" * 1000 + b"\n"


def stored(directory: Path, k: int) -> Path:
    """The entry of module ``m<k>`` (about 1 kB), stored."""
    return Path(cache.cached(directory, f"m{k}", f"/src/m{k}.py", body(k), OPTIONS, lambda: body(k))[0])


def test_storing_an_entry_removes_the_least_recently_used_beyond_the_bound(tmp_path, monkeypatch):
    directory = tmp_path / "c"
    monkeypatch.setenv(cache.MAX_MB_VAR, "0")
    old = [stored(directory, k) for k in range(4)]
    for k, entry in enumerate(old):  # written an hour apart, the first the longest ago
        os.utime(entry, (time.time() - 3600 * (4 - k),) * 2)
    assert sorted(directory.iterdir()) == sorted(old)  # no bound: nothing went
    assert cache.load(old[0], cache.entry_key(body(0), "/src/m0.py", OPTIONS))  # used now: kept longest
    monkeypatch.setenv(cache.MAX_MB_VAR, str(3.5 * old[0].stat().st_size / 2**20))  # room for three and a half
    new = stored(directory, 4)
    assert sorted(directory.iterdir()) == sorted([old[0], old[3], new])  # the two least recently used went
    assert cache.prune(directory, 0, keep=new) == 2 and list(directory.iterdir()) == [new]
    assert cache.prune(directory, 0) == 1 and list(directory.iterdir()) == []


def test_a_bad_bound_warns_once_and_keeps_to_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "_warned_bound", False)
    monkeypatch.setenv(cache.MAX_MB_VAR, "lots")
    with pytest.warns(cache.CacheWarning, match="CASTPILE_CACHE_MAX_MB='lots' is not a number of MiB.*keeping to 256"):
        stored(tmp_path / "c", 0)
        stored(tmp_path / "c", 1)
    assert len(list((tmp_path / "c").iterdir())) == 2


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (None, "bound: 256 MiB (CASTPILE_CACHE_MAX_MB, default 256): beyond it the least recently used entries go"),
        ("1024", "bound: 1024 MiB (CASTPILE_CACHE_MAX_MB, default 256): beyond it the least recently used entries go"),
        ("0", "bound: none (CASTPILE_CACHE_MAX_MB=0: entries are never removed but by `castpile cache clear`)"),
    ],
)
def test_info_shows_the_bound(tmp_path, capsys, monkeypatch, value, line):
    if value is None:
        monkeypatch.delenv(cache.MAX_MB_VAR, raising=False)
    else:
        monkeypatch.setenv(cache.MAX_MB_VAR, value)
    code, out, _ = run(["cache", "info", "--dir", cache.prepare_dir(tmp_path / "c")], capsys)
    assert code == 0 and out.splitlines()[3] == line


def test_info_refuses_a_bad_bound_naming_the_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(cache.MAX_MB_VAR, "-5")
    code, out, err = run(["cache", "info", "--dir", tmp_path], capsys)
    assert (code, out) == (2, "") and err.startswith(
        "castpile cache: error: CASTPILE_CACHE_MAX_MB='-5' is not a number"
    )
