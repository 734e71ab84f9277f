"""The import hook: kernel packages transpiled on import through the compile cache.

Every kernel result is compared with a torch reference.  Test packages are written
to tmp_path under fresh names; some checks run in fresh interpreters. The cache's robustness (damaged, forged,
insecure or unwritable entries): tests/test_hook_cache.py; children, racing processes and pytest: test_hook_processes.py.
"""

import importlib
import importlib.machinery
import inspect
import os
import py_compile
import re
import stat
import sys
import textwrap
import traceback
import zipfile
from pathlib import Path

import pytest
import torch

import castpile
from castpile import cache, options
from castpile.hook import TranspileImportError
from compile_sm90 import Job, compile_for_sm90
from testkit.hook import (  # noqa: F401 (the fixtures cache_dir and pkg)
    BROKEN,
    BROKEN_LINE,
    KERNEL,
    REPO,
    Pkg,
    assert_triton_reads_transpiled_text,
    entries,
    hook_cache_dir,
    hook_package,
    line_of,
    run_python,
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


def zip_package(pkg: Pkg, archive: Path, compiled: bool) -> Path:
    """``pkg``'s files in a zip archive; with ``compiled``, each next to an unchecked .pyc, which zipimport prefers."""
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(pkg.dir.glob("*.py")):
            name = f"{pkg.name}/{path.name}"
            z.write(path, name)
            if compiled:
                pyc = py_compile.compile(
                    str(path),
                    cfile=str(path) + "c",
                    dfile=str(archive / name),
                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                )
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
