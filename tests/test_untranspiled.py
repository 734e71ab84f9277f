"""Kernels run without transpiling: castpile's names say how to transpile, compiled or in the interpreter."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from compile_sm90 import Job, compile_for_sm90
from testkit import import_file

UNTRANSPILED = """\
import triton
import triton.language as tl
import castpile
from castpile import multicast_like


@triton.jit
def table_slice(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


@triton.jit
def module_attribute(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = castpile.multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


@triton.jit
def tensor_tile(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, tl.load(dev_ptrs + tl.arange(0, WORLD)), shape=(n,))
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


@triton.jit
def signal_peers(flags, flag_ptrs, WORLD: tl.constexpr):
    castpile.signal(multicast_like(flags, flag_ptrs[:WORLD])[tl.arange(0, WORLD), 0], value=1)


@triton.jit
def wait_flag(flags):
    castpile.wait(flags + tl.arange(0, 1), value=1)
"""
HOW = "castpile.{name} only has meaning inside a kernel that castpile has transpiled: run `castpile kernel.py -o"
TABLE = {"out": "*fp32", "dev_ptrs": "*i64", "n": "i32", "WORLD": "constexpr", "BLOCK": "constexpr"}
UNTRANSPILED_JOBS = {  # kernel: (signature, constexprs, the castpile name it uses first)
    "table_slice": (TABLE, {"WORLD": 2, "BLOCK": 4}, "multicast_like"),
    "module_attribute": (TABLE, {"WORLD": 2, "BLOCK": 4}, "multicast_like"),
    "tensor_tile": (TABLE, {"WORLD": 2, "BLOCK": 4}, "multicast_like"),
    "signal_peers": ({"flags": "*i32", "flag_ptrs": "*i64", "WORLD": "constexpr"}, {"WORLD": 2}, "signal"),
    "wait_flag": ({"flags": "*i32"}, {}, "wait"),
}


def test_untranspiled_kernels_say_how_to_transpile_when_compiled(tmp_path):
    """Whatever the call's arguments, even a table slice that Triton cannot compile, the how-to message comes first."""
    module = tmp_path / "untranspiled.py"
    module.write_text(UNTRANSPILED)
    jobs = [Job(module, kernel, sig, constexprs) for kernel, (sig, constexprs, _) in UNTRANSPILED_JOBS.items()]
    results = compile_for_sm90(jobs, tmp_path / "sm90")
    for kernel, (_, _, name) in UNTRANSPILED_JOBS.items():
        assert not results[kernel].ok and HOW.format(name=name) in results[kernel].error, (
            kernel,
            results[kernel].error,
        )


def test_untranspiled_kernels_say_how_to_transpile_in_the_interpreter(tmp_path):
    """Python evaluates a call's arguments before the call, so the interpreter fails on a table slice before
    castpile's name is called: the message is castpile's all the same, at the kernel's line."""
    module = tmp_path / "untranspiled.py"
    module.write_text(UNTRANSPILED)
    kernels = import_file(module)
    out, ptrs, flags = torch.zeros(4), torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.int32)
    launches = {
        "table_slice": lambda: kernels.table_slice[(1,)](out, ptrs, 4, WORLD=2, BLOCK=4),
        "module_attribute": lambda: kernels.module_attribute[(1,)](out, ptrs, 4, WORLD=2, BLOCK=4),
        "tensor_tile": lambda: kernels.tensor_tile[(1,)](out, ptrs, 4, WORLD=2, BLOCK=4),
        "signal_peers": lambda: kernels.signal_peers[(1,)](flags, ptrs, WORLD=2),
        "wait_flag": lambda: kernels.wait_flag[(1,)](flags),
    }
    assert launches.keys() == UNTRANSPILED_JOBS.keys()
    for kernel, launch in launches.items():
        with pytest.raises(Exception, match=re.escape(HOW.format(name=UNTRANSPILED_JOBS[kernel][2]))) as caught:
            launch()
        if kernel in ("table_slice", "module_attribute", "signal_peers"):  # the argument failed first
            line = (
                1
                + UNTRANSPILED[: UNTRANSPILED.index(f"def {kernel}(")].count("\n")
                + (1 if kernel == "signal_peers" else 2)
            )
            assert str(caught.value).startswith(f"{module}:{line}: "), (kernel, str(caught.value))


def test_other_interpreter_errors_pass_unchanged(tmp_path):
    """An error outside castpile's calls keeps Triton's own message."""
    module = tmp_path / "plain.py"
    module.write_text(PLAIN_ERROR)
    kernels = import_file(module)
    with pytest.raises(Exception, match="unsupported tensor index") as caught:
        kernels.plain_slice[(1,)](torch.zeros(4), torch.zeros(2, dtype=torch.int64), WORLD=2)
    assert "castpile" not in str(caught.value)


PLAIN_ERROR = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def plain_slice(out, dev_ptrs, WORLD: tl.constexpr):
    table = dev_ptrs[:WORLD]
    tl.store(out, tl.load(table))
"""


RELOADED = """\
import importlib, sys
import torch
import castpile  # the first import wraps the interpreter
import triton.runtime.interpreter
for name in [m for m in sys.modules if m == "castpile" or m.startswith("castpile.")]:
    del sys.modules[name]
import castpile  # a second castpile: new markers
spec = importlib.util.spec_from_file_location("untranspiled", sys.argv[1])
kernels = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernels)
try:
    kernels.table_slice[(1,)](torch.zeros(4), torch.zeros(2, dtype=torch.int64), 4, WORLD=2, BLOCK=4)
except Exception as error:
    print(str(error))
"""


def test_a_castpile_imported_again_still_says_how_to_transpile(tmp_path):
    """A test runner or a notebook that imports castpile afresh gets new markers: the interpreter's wrapper follows."""
    module = tmp_path / "untranspiled.py"
    module.write_text(UNTRANSPILED)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-c", RELOADED, str(module)], capture_output=True, text=True, env=env, timeout=120
    )
    assert HOW.format(name="multicast_like") in result.stdout, result.stdout + result.stderr
