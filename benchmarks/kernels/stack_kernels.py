"""The single-GPU benchmark kernels in the castpile language (transpiled into ``generated/``).

Each reads or writes W same-layout bf16 buffers named by a table of W
addresses.  The ``_u`` twins omit ``align=16``: Triton then cannot prove the
buffers' alignment and issues scalar 16-bit accesses.  ``stack_row_norm`` is the
row-normalising kernel whose stack sum converts each buffer to fp32 first.
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


@triton.jit
def stack_row_norm(ex, table, out, M, D, eps, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """Each row of ``out`` (M x D) = the row summed over the stack in fp32, over its root mean square; a
    persistent loop over the rows (BLOCK_D >= D)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=cols < D)
        row += tl.num_programs(0)
