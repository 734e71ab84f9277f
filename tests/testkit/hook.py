"""The import hook tests' kernel package: its sources, the package written under tmp_path, its fixtures, and fresh
interpreters that can import castpile (tests/test_hook.py, test_hook_cache.py, test_hook_processes.py)."""

import importlib
import inspect
import itertools
import linecache
import os
import subprocess
import sys
from pathlib import Path

import pytest

import castpile
from castpile.hook import ImportHook

REPO = Path(castpile.__file__).absolute().parent.parent

KERNEL = """\
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
"""

BROKEN = """\
import triton
import triton.language as tl
import castpile


@triton.jit
def broken(out, ptrs, n):
    bufs = castpile.multicast_like(out, ptrs[:4], shape=(n,))
    x = bufs + 1
    tl.store(out, x)
"""
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


@pytest.fixture(name="pkg")
def hook_package(tmp_path):
    """A fresh :class:`Pkg` on sys.path; afterwards its modules, its path entry and every import hook are gone."""
    p = Pkg(tmp_path / "src")
    sys.path.insert(0, str(p.root))
    importlib.invalidate_caches()
    yield p
    p.forget()
    sys.path.remove(str(p.root))
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ImportHook)]


@pytest.fixture(name="cache_dir")
def hook_cache_dir(tmp_path):
    """Where the hook's cache goes (not made yet)."""
    return tmp_path / "cache"


def entries(directory: Path):
    """The cache entries in ``directory``, sorted."""
    return sorted(directory.glob("*.py"))


def run_python(code: str, *, env: dict | None = None, cwd=None, timeout=240):
    """Run ``code`` in a fresh interpreter that can import castpile."""
    full = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1", **(env or {})}
    full = {k: v for k, v in full.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", code], env=full, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def assert_triton_reads_transpiled_text(kern):
    """The kernel's text, through inspect as Triton reads it, is the transpiled one, even with linecache emptied."""
    fn = kern.sum_kernel.fn
    text = inspect.getsource(fn)
    assert "multicast_like(" in KERNEL and "multicast_like(" not in text
    linecache.clearcache()
    assert inspect.getsource(fn) == text
