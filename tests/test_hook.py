"""The import hook: kernel packages transpiled on import through the compile cache.

Every kernel result is compared with a torch reference.  Test packages are written
to tmp_path under fresh names; some checks run in fresh interpreters.
"""

import builtins
import codecs
import errno
import hashlib
import importlib
import importlib.machinery
import inspect
import itertools
import linecache
import os
import py_compile
import re
import stat
import subprocess
import sys
import textwrap
import time
import traceback
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

import castpile
from castpile import cache, files, options
from castpile.hook import CacheWarning, ImportHook, TranspileImportError
from compile_sm90 import Job, compile_for_sm90
from testkit import import_file

REPO = Path(castpile.__file__).absolute().parent.parent

KERNEL = '''\
import torch
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def sum_kernel(out, ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, ptrs[:W], shape=(n,))
    tl.store(out + offs, {scale}tl.sum(bufs[offs], axis=0), mask=offs < n)


@triton.jit
def bad_kernel(out, n):
    x = tl.arange(0, 3)
    tl.store(out + x, x)


def multicast_sum(tensors):
    out = torch.empty_like(tensors[0])
    ptrs = torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64)
    n = out.numel()
    sum_kernel[(1,)](out, ptrs, n, W=len(tensors), BLOCK=triton.next_power_of_2(n))
    return out


def fail_here():
    raise ValueError("raised from the kernel module")
'''

BROKEN = '''\
import triton
import triton.language as tl
import castpile


@triton.jit
def broken(out, ptrs, n):
    bufs = castpile.multicast_like(out, ptrs[:4], shape=(n,))
    x = bufs + 1
    tl.store(out, x)
'''
BROKEN_LINE = 9

PLAIN = "import math\n\n\ndef area(r):\n    return math.pi * r * r\n"

CHECK = """
def check(W=4, n=7, scale=1.0):
    import torch
    from {pkg} import kern
    torch.manual_seed(W * 100 + n)
    tensors = [torch.randn(n) for _ in range(W)]
    got = kern.multicast_sum(tensors)
    torch.testing.assert_close(got, scale * torch.stack(tensors).sum(0))
    return W
"""

_names = itertools.count()


def line_of(text, needle):
    """1-based number of the first line of ``text`` containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


class Pkg:
    """A package written under tmp_path: ``root/name/{__init__,kern,plain,check}.py``."""

    def __init__(self, root: Path, init: str = ""):
        self.root = root
        self.name = f"cp_hook_pkg_{os.getpid()}_{next(_names)}"
        self.dir = root / self.name
        self.dir.mkdir(parents=True)
        self.write("__init__", init)
        self.write("kern", KERNEL.format(scale=""))
        self.write("plain", PLAIN)
        self.write("check", CHECK.format(pkg=self.name))

    def write(self, module: str, text: str) -> Path:
        path = self.dir / f"{module}.py"
        path.write_text(text)
        return path

    def path(self, module: str) -> Path:
        return self.dir / f"{module}.py"

    def forget(self):
        """Drop the package's modules from sys.modules so the next import loads them again."""
        for name in [m for m in sys.modules if m == self.name or m.startswith(self.name + ".")]:
            del sys.modules[name]

    def load(self, module: str):
        self.forget()
        return importlib.import_module(f"{self.name}.{module}")

    def check(self, **kw):
        return self.load("check").check(**kw)


@pytest.fixture
def pkg(tmp_path):
    p = Pkg(tmp_path / "src")
    sys.path.insert(0, str(p.root))
    importlib.invalidate_caches()
    yield p
    p.forget()
    sys.path.remove(str(p.root))
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ImportHook)]


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"


def entries(directory: Path):
    return sorted(directory.glob("*.py"))


def run_python(code: str, *, env: dict | None = None, cwd=None, timeout=240):
    """Run ``code`` in a fresh interpreter that can import castpile."""
    full = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1", **(env or {})}
    full = {k: v for k, v in full.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", code], env=full, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def test_kernel_module_is_transpiled_and_runs(pkg, cache_dir):
    with castpile.install_import_hook(pkg.name, cache_dir=cache_dir) as hook:
        assert hook in sys.meta_path
        assert pkg.check() == 4
        assert pkg.check(W=2, n=33) == 2
        assert pkg.check(W=3, n=5) == 3
        kern = sys.modules[f"{pkg.name}.kern"]
    assert hook not in sys.meta_path
    assert kern.__file__ == str(pkg.path("kern"))
    assert kern.__spec__.origin == str(pkg.path("kern"))
    [entry] = entries(cache_dir)
    assert entry.name.startswith(f"{pkg.name}.kern-")
    # Triton reads the kernel through inspect: it must get the transpiled text.
    fn = kern.sum_kernel.fn
    assert fn.__code__.co_filename == str(entry)
    lines, first = inspect.getsourcelines(fn)
    assert lines == entry.read_text().splitlines(keepends=True)[first - 1 : first - 1 + len(lines)]
    assert first == line_of(KERNEL, "@triton.jit")
    assert "".join(lines) != "".join(KERNEL.splitlines(keepends=True)[first - 1 : first - 1 + len(lines)])


def test_cache_dir_is_private_and_entries_0600(pkg, cache_dir):
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    [entry] = entries(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600


def test_cache_dir_from_environment(pkg, tmp_path, monkeypatch):
    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(tmp_path / "envcache"))
    castpile.install_import_hook(pkg.name)
    pkg.check()
    assert len(entries(tmp_path / "envcache")) == 1


def test_other_modules_import_as_before(pkg, cache_dir, tmp_path):
    other = Pkg(tmp_path / "src")  # uses castpile but is not hooked
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    try:
        for mod in (pkg.load("plain"), sys.modules[pkg.name], other.load("kern")):
            assert type(mod.__spec__.loader) is importlib.machinery.SourceFileLoader
            assert mod.__file__ == mod.__spec__.origin and Path(mod.__file__).parent in (pkg.dir, other.dir)
        assert pkg.load("plain").area(2.0) == pytest.approx(12.566370614359172)
        assert not cache_dir.exists() or entries(cache_dir) == []
    finally:
        other.forget()


def test_uninstall_restores_normal_imports(pkg, cache_dir):
    hook = castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    hook.uninstall()
    hook.uninstall()
    kern = pkg.load("kern")
    assert type(kern.__spec__.loader) is importlib.machinery.SourceFileLoader
    assert not cache_dir.exists()


def test_package_init_using_castpile(pkg, cache_dir):
    pkg.write("__init__", KERNEL.format(scale=""))
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.forget()
    top = importlib.import_module(pkg.name)
    assert top.__file__ == str(pkg.path("__init__"))
    assert list(top.__path__) == [str(pkg.dir)]
    torch.manual_seed(0)
    tensors = [torch.randn(9) for _ in range(4)]
    torch.testing.assert_close(top.multicast_sum(tensors), torch.stack(tensors).sum(0))
    assert pkg.check() == 4  # submodules are still found through __path__
    assert len(entries(cache_dir)) == 2


def test_edit_recompiles(pkg, cache_dir):
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    pkg.write("kern", KERNEL.format(scale="2.0 * "))
    pkg.check(scale=2.0)
    assert len(entries(cache_dir)) == 2


def test_strategy_and_version_change_the_entry(pkg, cache_dir, monkeypatch):
    from castpile.hook import install_import_hook

    for strategy in castpile.STRATEGIES:
        with install_import_hook(pkg.name, cache_dir=cache_dir, strategy=strategy):
            pkg.check(W=2)
    assert len(entries(cache_dir)) == 2
    monkeypatch.setattr(options, "VERSION", options.VERSION + ".post1")
    monkeypatch.setattr(cache, "_fingerprint", None)
    with castpile.install_import_hook(pkg.name, cache_dir=cache_dir):
        pkg.check()
    assert len(entries(cache_dir)) == 3


def test_warm_import_does_not_transpile(pkg, cache_dir, monkeypatch):
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    built = entries(cache_dir)

    def refuse(*args, **kwargs):
        raise AssertionError("transpile called on a warm import")

    monkeypatch.setattr(castpile, "transpile", refuse)
    pkg.check(W=2)
    assert entries(cache_dir) == built


def test_warm_import_in_fresh_process_parses_nothing(pkg, cache_dir):
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pkg.root)!r})
        import castpile
        castpile.install_import_hook({pkg.name!r}, cache_dir={str(cache_dir)!r})
        from {pkg.name} import check
        check.check()
        print("libcst" in sys.modules)
    """)
    cold = run_python(code)
    assert cold.returncode == 0, cold.stderr
    warm = run_python(code)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.split() == ["False"]


CORRUPTIONS = {
    "truncated": lambda data: data[: len(data) // 2],
    "garbage": lambda data: os.urandom(len(data)),
    "empty": lambda data: b"",
    # one bit of one byte, still valid Python: "raised" becomes "saised"
    "flipped byte": lambda data: data.replace(b"raised from", b"saised from"),
    # valid Python that would run if the entry were trusted without its seal
    "tampered": lambda data: b"import builtins\nbuiltins.CASTPILE_TAMPERED = True\n" + data,
}


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_damaged_entry_is_rebuilt_not_executed(pkg, cache_dir, how):
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    [entry] = entries(cache_dir)
    good = entry.read_bytes()
    entry.write_bytes(CORRUPTIONS[how](good))
    pkg.check(W=2)
    assert "CASTPILE_TAMPERED" not in vars(builtins)
    assert entries(cache_dir) == [entry] and entry.read_bytes() == good


FIFO_AT_ENTRY = """
import os, sys
sys.path.insert(0, {root!r})
import castpile
from castpile import cache
source = {source!r}
key = cache.entry_key(open(source, "rb").read(), source, {{"strategy": "loop"}})
entry = cache.entry_path(cache.prepare_dir(cache.cache_dir({cache!r})), {module!r}, key)
os.mkfifo(entry)
castpile.install_import_hook({pkg!r}, cache_dir={cache!r})
from {pkg} import check
print(check.check(), entry.is_fifo(), cache.load(entry, key) is not None)
"""


def test_fifo_at_entry_path_is_replaced_without_hanging(pkg, cache_dir):
    code = FIFO_AT_ENTRY.format(
        root=str(pkg.root), source=str(pkg.path("kern")), cache=str(cache_dir), module=f"{pkg.name}.kern", pkg=pkg.name
    )
    res = run_python(code, timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["4", "False", "True"]


@pytest.mark.parametrize("module", ["k" * 200, "ядро", "я" * 110], ids=["long", "non-ascii", "long-non-ascii"])
def test_long_and_non_ascii_module_names(pkg, cache_dir, module):
    pkg.write(module, KERNEL.format(scale=""))
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    kern = pkg.load(module)
    tensors = [torch.randn(5) for _ in range(4)]
    torch.testing.assert_close(kern.multicast_sum(tensors), torch.stack(tensors).sum(0))
    assert cache.info(cache_dir)["entries"] == 1
    assert cache.clear(cache_dir) == 1 and list(cache_dir.iterdir()) == []


PAIR_SUM = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def pair_sum(out, dev_ptrs, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, dev_ptrs[:2])
    x = bufs[offs]
    tl.store(out + offs, tl.sum(x, axis=0))
"""


def test_module_starting_with_utf8_bom(pkg, cache_dir):
    pkg.path("pair").write_bytes(codecs.BOM_UTF8 + PAIR_SUM.encode())
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pair = pkg.load("pair")
    tensors = [torch.randn(8) for _ in range(2)]
    out = torch.empty(8)
    pair.pair_sum[(1,)](out, torch.tensor([t.data_ptr() for t in tensors], dtype=torch.int64), BLOCK=8)
    torch.testing.assert_close(out, tensors[0] + tensors[1])
    assert len(entries(cache_dir)) == 1


def forge(entry: Path, good: bytes) -> bytes:
    """A well-sealed entry that sets a flag when executed."""
    key = entry.stem.rsplit("-", 1)[1]
    body = b"import builtins\nbuiltins.CASTPILE_FORGED = True\n" + good[: good.rindex(b"# castpile-cache ")]
    return body + f"# castpile-cache {key} {hashlib.sha256(body).hexdigest()}\n".encode()


def test_entry_resealed_by_its_owner_runs(pkg, cache_dir):
    """The documented limit of the seal: it catches accidents, not the cache's owner."""
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    [entry] = entries(cache_dir)
    entry.write_bytes(forge(entry, entry.read_bytes()))
    assert "CASTPILE_FORGED" not in vars(builtins)
    pkg.check(W=2)
    assert vars(builtins).pop("CASTPILE_FORGED", None) is True


@pytest.mark.parametrize("insecure", ["group-writable", "other-writable", "foreign-owner"])
def test_insecure_entry_is_never_loaded(pkg, cache_dir, insecure):
    if insecure == "foreign-owner" and os.geteuid() != 0:
        pytest.skip("needs root to give a file away")
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    pkg.check()
    [entry] = entries(cache_dir)
    good = entry.read_bytes()
    entry.write_bytes(forge(entry, good))
    assert cache.load(entry, entry.stem.rsplit("-", 1)[1]) is not None  # the forgery is well sealed
    if insecure == "group-writable":
        os.chmod(entry, 0o660)
    elif insecure == "other-writable":
        os.chmod(entry, 0o602)
    else:
        os.chown(entry, 4242, 4242)
    pkg.check(W=2)
    assert "CASTPILE_FORGED" not in vars(builtins)
    assert entry.read_bytes() == good
    st = entry.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()


class OsWith:
    """The ``os`` module for :mod:`castpile.files` alone, with some of its functions replaced."""

    def __init__(self, **replaced):
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(os, name)


def failing(errno_, why):
    def fail(*args, **kwargs):
        raise OSError(errno_, why)

    return fail


def under_a_file(pkg, cache_dir, monkeypatch):
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    (cache_dir.parent / "a-file").write_text("")
    return cache_dir.parent / "a-file" / "cache", "Not a directory"


def writable_by_others(pkg, cache_dir, monkeypatch):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    return cache_dir, "writable by group or others"


def directory_at_entry(pkg, cache_dir, monkeypatch):
    source = pkg.path("kern")
    key = cache.entry_key(source.read_bytes(), str(source), {"strategy": "loop"})
    cache.entry_path(cache.prepare_dir(cache_dir), f"{pkg.name}.kern", key).mkdir()
    return cache_dir, "is a directory, which castpile did not make"


def read_only(pkg, cache_dir, monkeypatch):
    monkeypatch.setattr(files, "os", OsWith(open=failing(errno.EROFS, "Read-only file system")))
    return cache_dir, "Read-only file system"


def full(pkg, cache_dir, monkeypatch):
    def no_space(fd, *args, **kwargs):  # the temporary file exists; its first write fails
        os.close(fd)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "os", OsWith(fdopen=no_space))
    return cache_dir, "No space left on device"


def cleared_before_rename(pkg, cache_dir, monkeypatch):
    def clear_then_replace(src, dst):  # `castpile cache clear` runs between the write and the rename
        cache.clear(cache_dir)
        os.replace(src, dst)

    monkeypatch.setattr(files, "os", OsWith(replace=clear_then_replace))
    return cache_dir, "No such file or directory"


CACHE_FAILURES = [under_a_file, writable_by_others, directory_at_entry, read_only, full, cleared_before_rename]


def assert_triton_reads_transpiled_text(kern):
    """The kernel's text, through inspect as Triton reads it, is the transpiled one, even with linecache emptied."""
    fn = kern.sum_kernel.fn
    text = inspect.getsource(fn)
    assert "multicast_like(" in KERNEL and "multicast_like(" not in text
    linecache.clearcache()
    assert inspect.getsource(fn) == text


@pytest.mark.parametrize("failure", CACHE_FAILURES, ids=lambda f: f.__name__)
def test_cache_failure_imports_from_memory_and_warns(pkg, cache_dir, monkeypatch, failure):
    directory, why = failure(pkg, cache_dir, monkeypatch)
    before = sorted(directory.iterdir()) if directory.is_dir() else []
    castpile.install_import_hook(pkg.name, cache_dir=directory)
    with pytest.warns(CacheWarning, match=rf"{re.escape(str(directory))}.*{why}.*in memory"):
        assert pkg.check() == 4
    kern = sys.modules[f"{pkg.name}.kern"]
    assert kern.__file__ == str(pkg.path("kern"))
    assert_triton_reads_transpiled_text(kern)
    assert not os.path.exists(kern.sum_kernel.fn.__code__.co_filename)
    if directory.is_dir():  # nothing was added, temporary files included
        assert sorted(directory.iterdir()) in (before, [])


def test_cache_failure_warns_once(pkg, cache_dir, monkeypatch):
    read_only(pkg, cache_dir, monkeypatch)
    pkg.write("kern2", KERNEL.format(scale="2.0 * "))
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kern2 = pkg.load("kern2")
        assert pkg.check() == 4
    assert [w.category for w in caught] == [CacheWarning]
    tensors = [torch.randn(6) for _ in range(3)]
    torch.testing.assert_close(kern2.multicast_sum(tensors), 2.0 * torch.stack(tensors).sum(0))


def test_cold_import_under_a_file_size_limit(pkg, cache_dir):
    """`ulimit -f 1`: writing the entry fails with EFBIG (Python ignores SIGXFSZ); the import does not."""
    import resource

    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pkg.root)!r})
        import castpile
        castpile.install_import_hook({pkg.name!r}, cache_dir={str(cache_dir)!r})
        from {pkg.name} import check
        print(check.check())
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"}
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024)),
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["4"]
    assert res.stderr.count("CacheWarning") == 1 and "File too large" in res.stderr
    assert list(cache_dir.iterdir()) == []


def zip_package(pkg: Pkg, archive: Path, compiled: bool) -> Path:
    """``pkg``'s files in a zip archive; with ``compiled``, each next to an unchecked .pyc, which zipimport prefers."""
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(pkg.dir.glob("*.py")):
            name = f"{pkg.name}/{path.name}"
            z.write(path, name)
            if compiled:
                pyc = py_compile.compile(str(path), cfile=str(path) + "c", dfile=str(archive / name),
                                         invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
                z.write(pyc, name + "c")
    return archive


@pytest.mark.parametrize("compiled", [False, True], ids=["sources", "sources-and-pyc"])
def test_package_in_a_zip_file_is_transpiled(tmp_path, cache_dir, compiled):
    zipped = Pkg(tmp_path / "zipsrc")
    archive = zip_package(zipped, tmp_path / "kernels.zip", compiled)
    sys.path.insert(0, str(archive))
    try:
        castpile.install_import_hook(zipped.name, cache_dir=cache_dir)
        assert zipped.check(W=3) == 3
        kern = sys.modules[f"{zipped.name}.kern"]
        assert kern.__file__ == str(archive / zipped.name / "kern.py")
        assert_triton_reads_transpiled_text(kern)
        assert len(entries(cache_dir)) == 1
    finally:
        zipped.forget()
        sys.path.remove(str(archive))


def test_kernels_from_memory_and_from_a_zip_compile_for_sm90(tmp_path, monkeypatch):
    """What the two tests above run in the interpreter, compiled (in children that install the hooks)."""
    hooked = "import castpile\n\ncastpile.install_import_hook(__name__)\n"
    in_memory = Pkg(tmp_path / "src", init=hooked)
    zipped = Pkg(tmp_path / "zipsrc", init=hooked)
    archive = zip_package(zipped, tmp_path / "kernels.zip", compiled=True)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    path = [str(in_memory.root), str(archive), os.environ.get("PYTHONPATH", str(REPO))]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    sig = {"out": "*fp32", "ptrs": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}
    jobs = [Job(f"{p.name}.kern", "sum_kernel", sig, {"W": 3, "BLOCK": 8}, name=p.name) for p in (in_memory, zipped)]
    for name, result in compile_for_sm90(jobs, tmp_path / "sm90").items():
        assert result.ok, f"{name}: {result.error}"


def test_transpile_error_is_a_located_syntax_error(pkg, cache_dir):
    path = pkg.write("broken", BROKEN)
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    with pytest.raises(SyntaxError) as info:
        pkg.load("broken")
    err = info.value
    assert isinstance(err, TranspileImportError)
    assert re.match(rf"{re.escape(str(path))}:{BROKEN_LINE}:\d+: error: ", str(err))
    assert str(err) == castpile.TranspileError(err.diagnostics).render()
    assert (err.filename, err.lineno) == (str(path), BROKEN_LINE)
    assert err.text.strip() == "x = bufs + 1" and 1 <= err.offset <= len(err.text)
    assert err.__cause__ is None and err.__context__ is None
    assert entries(cache_dir) == []


def test_transpile_error_prints_without_internal_traceback(pkg, cache_dir):
    path = pkg.write("broken", BROKEN)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(pkg.root)!r})
        import castpile
        castpile.install_import_hook({pkg.name!r}, cache_dir={str(cache_dir)!r})
        import {pkg.name}.broken
    """)
    res = run_python(code)
    assert res.returncode == 1
    err = res.stderr
    assert f'File "{path}", line {BROKEN_LINE}\n    x = bufs + 1\n' in err
    assert re.search(rf"TranspileImportError: {re.escape(str(path))}:{BROKEN_LINE}:\d+: error: ", err)
    frames = re.findall(r'^  File "([^"]+)"', err, re.M)
    assert frames == ["<string>", str(path)], err
    assert "During handling" not in err and "libcst" not in err


def test_tracebacks_and_interpreter_errors_give_user_lines(pkg, cache_dir):
    castpile.install_import_hook(pkg.name, cache_dir=cache_dir)
    kern = pkg.load("kern")
    [entry] = entries(cache_dir)
    user = pkg.path("kern").read_text().splitlines()

    with pytest.raises(ValueError) as info:
        kern.fail_here()
    last = traceback.extract_tb(info.tb)[-1]
    assert (last.filename, last.lineno) == (str(entry), line_of(KERNEL, "raise ValueError"))
    assert last.line == user[last.lineno - 1].strip()

    with pytest.raises(Exception) as info:
        kern.bad_kernel[(1,)](torch.empty(4), 4)
    frames = [f for f in traceback.extract_tb(info.value.__cause__.__traceback__) if f.filename == str(entry)]
    assert [f.lineno for f in frames] == [line_of(KERNEL, "tl.arange(0, 3)")]


def test_triton_compiles_transpiled_text_and_reports_user_lines(pkg, cache_dir):
    code = textwrap.dedent(f"""
        import re, sys
        sys.path.insert(0, {str(pkg.root)!r})
        import castpile, triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError
        castpile.install_import_hook({pkg.name!r}, cache_dir={str(cache_dir)!r})
        from {pkg.name} import kern
        target = GPUTarget("cuda", 90, 32)
        sig = {{"out": "*fp32", "ptrs": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}}
        ok = triton.compile(ASTSource(kern.sum_kernel, sig, {{"W": 4, "BLOCK": 8}}), target=target)
        assert "ttir" in ok.asm
        try:
            triton.compile(ASTSource(kern.bad_kernel, {{"out": "*fp32", "n": "i32"}}), target=target)
        except CompilationError as e:
            print(re.match(r"at (\\d+):", str(e)).group(1))
    """)
    res = run_python(code, env={"TRITON_INTERPRET": None})
    assert res.returncode == 0, res.stderr
    relative = int(res.stdout.split()[-1])
    assert line_of(KERNEL, "def bad_kernel") + relative - 1 == line_of(KERNEL, "tl.arange(0, 3)")


RACER = """
import os, sys, time
sys.path.insert(0, {root!r})
import torch, triton, castpile
open(sys.argv[1], "w").close()
while not os.path.exists({go!r}):
    time.sleep(0.002)
castpile.install_import_hook({pkg!r}, cache_dir={cache!r})
from {pkg} import check
print("ok", check.check(W=4, n=11))
"""


def test_concurrent_cold_imports(pkg, cache_dir, tmp_path):
    go = tmp_path / "go"
    code = RACER.format(root=str(pkg.root), go=str(go), pkg=pkg.name, cache=str(cache_dir))
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"}
    ready = [tmp_path / f"ready{i}" for i in range(8)]
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(r)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in ready
    ]
    try:
        deadline = time.monotonic() + 180
        while not all(r.exists() for r in ready) and time.monotonic() < deadline:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs if p.poll() is not None]
            time.sleep(0.01)
        go.touch()
        results = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0 and out.split() == ["ok", "4"], err
    assert len(entries(cache_dir)) == 1
    assert sorted(cache_dir.iterdir()) == entries(cache_dir)  # no temporary files left


def test_multiprocessing_spawn_children(pkg, cache_dir, monkeypatch):
    import multiprocessing

    pkg.write("__init__", "import castpile\n\ncastpile.install_import_hook(__name__)\n")
    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(cache_dir))
    check = pkg.load("check").check
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        assert pool.map(check, [2, 4]) == [2, 4]
    assert len(entries(cache_dir)) == 1


def test_torchrun_children(pkg, cache_dir, tmp_path):
    pkg.write("__init__", "import castpile\n\ncastpile.install_import_hook(__name__)\n")
    script = tmp_path / "train.py"
    script.write_text(
        f"import os, sys\nsys.path.insert(0, {str(pkg.root)!r})\n"
        f"from {pkg.name} import check\n"
        "rank = int(os.environ['RANK'])\n"
        "check.check(W=2 + 2 * rank)\n"
        "os.write(1, f'rank {rank} ok\\n'.encode())  # one write: the ranks share stdout\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1", "CASTPILE_CACHE_DIR": str(cache_dir)}
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script)],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "rank 0 ok" in res.stdout and "rank 1 ok" in res.stdout
    assert len(entries(cache_dir)) == 1


def test_pytest_assertion_rewriting_is_undisturbed(pkg, cache_dir, tmp_path):
    pkg.write("__init__", "import castpile\n\ncastpile.install_import_hook(__name__)\n")
    test_src = (
        "import castpile\n"
        f"from {pkg.name} import check\n\n\n"
        "def test_rewritten():\n"
        "    values = [check.check(W=2)]\n"
        "    assert values == [3]\n"
    )
    pkg.write("test_inside", test_src)
    outside = tmp_path / "tests_outside"
    outside.mkdir()
    (outside / "test_outside.py").write_text(test_src)
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(pkg.root)]), "CASTPILE_CACHE_DIR": str(cache_dir)}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "-q",
         str(pkg.path("test_inside")), str(outside / "test_outside.py")],
        env={**os.environ, **env, "TRITON_INTERPRET": "1"}, cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )
    out = res.stdout
    assert "2 failed" in out, out + res.stderr
    # pytest's rewriting shows the compared values; a plain assert would not.
    assert out.count("E       assert [2] == [3]") == 2, out
    assert len(entries(cache_dir)) == 1
