"""The single-GPU benchmark kernels in the castpile language (transpiled into ``generated/``).

Each reads or writes W same-layout bf16 buffers named by a table of W
addresses.  The ``_u`` twins omit ``align=16``: Triton then cannot prove the
buffers' alignment and issues scalar 16-bit accesses.
"""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def stack_sum(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum of the W buffers`` (fp32 accumulation)."""
    bufs = multicast_like(ex, table[:W], shape=(n,), align=16)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs].to(tl.float32), axis=0)
    tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def stack_store(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer ``= src`` (broadcast store)."""
    bufs = multicast_like(ex, table[:W], shape=(n,), align=16)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    bufs[offs] = x[None, :]


@triton.jit
def stack_store_cs(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_store`` with streaming stores (``cache_modifier=".cs"``), for benchmarks/sweeps/sweep_store.py."""
    bufs = multicast_like(ex, table[:W], shape=(n,), align=16)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    tl.store(bufs[offs], x[None, :], cache_modifier=".cs")


@triton.jit
def stack_gather(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``out[w, :] = buffer w`` (out is W x n)."""
    bufs = multicast_like(ex, table[:W], shape=(n,), align=16)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, W)[:, None]
    tl.store(out + rows * n + offs[None, :], bufs[offs], mask=offs[None, :] < n)


@triton.jit
def stack_sum_u(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_sum`` without ``align=``."""
    bufs = multicast_like(ex, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs].to(tl.float32), axis=0)
    tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def stack_store_u(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_store`` without ``align=``."""
    bufs = multicast_like(ex, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    bufs[offs] = x[None, :]


@triton.jit
def stack_gather_u(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_gather`` without ``align=``."""
    bufs = multicast_like(ex, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, W)[:, None]
    tl.store(out + rows * n + offs[None, :], bufs[offs], mask=offs[None, :] < n)


@triton.jit
def stack_scatter_add(ex, table, vals, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer ``+= vals`` with relaxed atomics whose old values are never used."""
    bufs = multicast_like(ex, table[:W], shape=(n,), align=16)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(vals + offs, mask=offs < n)
    tl.atomic_add(bufs[offs], v[None, :], sem="relaxed")
