"""castpile as a user installs it: an sdist and a wheel built from the tree, the wheel installed
(not editable) into a fresh venv, then the CLI, a transpile and an import through the hook."""

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
KERNEL = textwrap.dedent("""\
    import triton
    import triton.language as tl
    from castpile import multicast_like


    @triton.jit
    def stack_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
        bufs = multicast_like(out, table[:W], shape=(n,))
        offs = tl.arange(0, BLOCK)
        tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)
""")


def run(*cmd, **kw):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def test_wheel_in_a_fresh_venv(tmp_path):
    from castpile.options import VERSION

    src = tmp_path / "src"  # a copy: building writes build/ and egg-info next to the sources
    shutil.copytree(ROOT / "castpile", src / "castpile", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    run(sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", tmp_path / "dist", src)
    [wheel] = (tmp_path / "dist").glob("*.whl")
    [sdist] = (tmp_path / "dist").glob("*.tar.gz")
    assert wheel.name == f"castpile-{VERSION}-py3-none-any.whl" and sdist.name == f"castpile-{VERSION}.tar.gz"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    helpers = {
        f"castpile/compiler/helpers/{family}.py" for family in ("common", "reduction", "loop", "gather", "remote")
    }
    assert helpers | {"castpile/gpu/collectives/kernels_triton.py", "castpile/py.typed"} <= names
    license_file = f"castpile-{VERSION}.dist-info/licenses/LICENSE"
    assert license_file in names
    with zipfile.ZipFile(wheel) as z:
        assert z.read(license_file) == (ROOT / "LICENSE").read_bytes()
        metadata = z.read(f"castpile-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "Classifier: Typing :: Typed" in metadata

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel)
    # Its dependencies (libcst, sympy, platformdirs, triton, torch) come from the test environment's
    # site-packages, added as a plain path: the editable castpile there is never loaded.
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"TRITON_INTERPRET": "1"}

    assert run(venv / "bin" / "castpile", "--version", env=env) == f"castpile {VERSION}\n"
    where = run(python, "-c", "import castpile; print(castpile.__file__)", cwd=tmp_path, env=env)
    assert where.startswith(str(site)), where

    pkg = tmp_path / "app" / "kernels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import castpile\ncastpile.install_import_hook(__name__)\n")
    (pkg / "stack.py").write_text(KERNEL)
    run(venv / "bin" / "castpile", pkg / "stack.py", "-o", tmp_path / "stack_out.py", env=env)
    assert "_castpile_reduce_loop(bufs, W, None, out, offs" in (tmp_path / "stack_out.py").read_text()
    check = textwrap.dedent("""\
        import torch
        from kernels import stack
        bufs = [torch.arange(8.0) * (j + 1) for j in range(3)]
        table = torch.tensor([b.data_ptr() for b in bufs])
        out = torch.zeros(8)
        stack.stack_sum[(1,)](out, table, 8, 3, 8)
        assert torch.equal(out, torch.arange(8.0) * 6), out
    """)
    env["CASTPILE_CACHE_DIR"] = str(tmp_path / "cache")
    run(python, "-c", check, cwd=tmp_path / "app", env=env)
    assert list((tmp_path / "cache").glob("kernels.stack-*.py"))

    # py.typed: mypy reads the installed castpile's signatures (a wrong keyword is an error) and finds its stubs
    (pkg / "misuse.py").write_text("import castpile\n\ncastpile.wait(0, valu=1)\n")
    proc = subprocess.run(
        [python, "-m", "mypy", "--cache-dir", tmp_path / "mypy-cache", pkg / "misuse.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert 'misuse.py:3: error: Unexpected keyword argument "valu" for "wait"' in proc.stdout, proc.stdout
    assert "missing library stubs or py.typed marker" not in proc.stdout, proc.stdout


def _ranges(project: dict) -> dict:
    """pyproject.toml's ranges, of the dependencies and of the gpu extra: a SpecifierSet by package name."""
    ranges = project["dependencies"] + project["optional-dependencies"]["gpu"]
    return {requirement.name: requirement.specifier for requirement in map(Requirement, ranges)}


def _makefile_pins(variable: str) -> dict:
    """The ``name==version`` pins of the Makefile's ``variable`` (OLDEST, NEWEST): a Version by package name."""
    [line] = [x for x in (ROOT / "Makefile").read_text().splitlines() if x.startswith(f"{variable} :=")]
    return {name: Version(v) for name, v in (pin.split("==") for pin in line.split(":=")[1].split())}


def test_oldest_pins_are_the_lower_bounds():
    """make test-oldest installs exactly the lower bounds of pyproject.toml's ranges (and of the gpu extra);
    the license and the project URLs (documents in the repository) are there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lower = {name: [Version(s.version) for s in spec if s.operator == ">="] for name, spec in _ranges(project).items()}
    assert {name: [version] for name, version in _makefile_pins("OLDEST").items()} == lower
    assert project["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert project["urls"] and all((ROOT / url).is_file() for url in project["urls"].values()), project["urls"]


def test_newest_pins_end_the_ranges():
    """make test-newest installs releases that each range admits, and each range stops at the release series after
    them (what is admitted is what is tested); the test extra's pins lie inside the ranges too."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    admitted, newest = _ranges(project), _makefile_pins("NEWEST")
    assert newest.keys() == admitted.keys()
    for name, version in newest.items():
        assert version in admitted[name], f"{name} {version} is outside {admitted[name]}"
        [upper] = [spec for spec in admitted[name] if spec.operator == "<"]
        assert Version(upper.version) == Version(f"{version.major}.{version.minor + 1}"), (
            f"{name}: {upper} after {version}"
        )
    pinned = dict(pin.split("==") for pin in project["optional-dependencies"]["test"])
    assert all(Version(pinned[name]) in admitted[name] for name in admitted), pinned
