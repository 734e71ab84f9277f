"""The ``@castpile.jit`` tests' inputs: notebook cells (as IPython compiles them), scripts, and their data."""

import linecache

import torch

from testkit import address_table

CELL = """\
import triton
import triton.language as tl
import castpile
from castpile import multicast_like

OFFSET = tl.constexpr(10.0)


@triton.jit
def shifted(x):
    return x + OFFSET


@castpile.jit
def stack_max(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, shifted(tl.max(bufs[offs], axis=0)), mask=offs < n)
"""
"""A cell: a kernel calling another jit function of the cell, which reads a constant of the cell."""

SECOND_CELL = """\
@castpile.jit
def stack_min(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.min(bufs[offs], axis=0), mask=offs < n)
"""
"""A later cell of the same notebook, using the first one's imports."""

BAD_CELL = """\
import triton
import triton.language as tl
import castpile
from castpile import multicast_like


@castpile.jit
def broken(out, table, n, W: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    total = bufs + 1
"""
BAD_LINE, BAD_COL = 10, 13
BAD_MESSAGE = "'bufs' is a multicast tensor and may only be subscripted"

MIXED_CELL = """\
import triton
import triton.language as tl
import castpile
from castpile import multicast_like


def later():
    @castpile.jit
    def broken(out, table, n, W: tl.constexpr):
        bufs = multicast_like(out, table[:W], shape=(n,))
        total = bufs + 1
    return broken


@castpile.jit
def copy_first(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)
"""
"""A kernel that transpiles, and a kernel with an error (line 11) inside a function not yet called."""

LAUNCH = """
if __name__ == "__main__":
    import sys
    import inspect
    import torch
    bufs = [torch.arange(10, dtype=torch.float32) * (w + 1) - 4 for w in range(3)]
    table = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    out = torch.zeros(10)
    stack_max[(1,)](out, table, 10, W=3, BLOCK=16)
    print("equal:", torch.equal(out, torch.stack(bufs).max(dim=0).values + 10))
    print("libcst:", "libcst" in sys.modules)
    print("transpiled:", "multicast_like" not in inspect.getsource(stack_max.fn))
"""
"""Appended to :data:`CELL` to make a script: launch the kernel and print what the test checks."""


def run_cell(source: str, name: str, namespace: dict) -> None:
    """Run ``source`` as IPython runs a cell: its text in linecache under ``name``, compiled under that name."""
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), namespace)


def stacks(w: int = 3, n: int = 10):
    """``w`` buffers of ``n`` floats (distinct, some negative), their address table, and a zeroed output."""
    bufs = [torch.arange(n, dtype=torch.float32) * (k + 1) - 4 for k in range(w)]
    return bufs, address_table(bufs), torch.zeros(n)
