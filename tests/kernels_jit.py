"""Kernels decorated with ``@castpile.jit`` in a plain module (no import hook), for tests/test_jit.py.

``scaled_sum`` calls a ``@triton.jit`` helper of this module, which reads a module constant
through the ``tl`` alias; ``broadcast`` passes ``triton.jit`` keywords; ``sum_plus_one`` sits under
``triton.heuristics`` and calls a jit function defined after it.
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like

SCALE = tl.constexpr(3)


@triton.jit
def scaled(x):
    return x * SCALE


@castpile.jit
def scaled_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, scaled(tl.sum(bufs[offs], axis=0)), mask=offs < n)


@castpile.jit(do_not_specialize=["n"], debug=False)
def broadcast(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    bufs[offs] = tl.load(out + offs, mask=offs < n)


@triton.heuristics({"BLOCK": lambda args: 16})
@castpile.jit
def sum_plus_one(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, plus_one(tl.sum(bufs[offs], axis=0)), mask=offs < n)


def sum_plus_one_kernel():
    """The kernel under the heuristics (what tests/compile_sm90.py compiles)."""
    return sum_plus_one.fn


@triton.jit
def plus_one(x):
    return x + 1
