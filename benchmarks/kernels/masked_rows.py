"""Rows the mask itself keeps below M, around a stacked reduction: a row per program (``(row < M) & (cols < D)``) and
a tile of rows per program (``(rows[:, None] < M) & (cols[None, :] < D)``), in the castpile language on 1-D
bindings beside their hand twins (``hand_*``, plain Triton: castpile leaves them as they are).

The mask rule proves their bounds (docs/language.md, the third rule); tests/test_index_rule.py compiles them for
sm_90 and compares their PTX with the twins'.
"""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def cp_row(ex, table, out, M, D, W: tl.constexpr, BM: tl.constexpr, BLOCK_D: tl.constexpr):
    """a row per program, summed over the stack and stored."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = (row < M) & (cols < D)
    h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
    tl.store(out + row * D + cols, h.to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_row(ex, table, out, M, D, W: tl.constexpr, BM: tl.constexpr, BLOCK_D: tl.constexpr):
    """a row per program, summed over the table's buffers by hand."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = (row < M) & (cols < D)
    h = tl.zeros((BLOCK_D,), tl.float32)
    for p in tl.static_range(W):
        peer = tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)), 16)
        h += tl.load(peer + row * D + cols, mask=mask, other=0).to(tl.float32)
    tl.store(out + row * D + cols, h.to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_tile(ex, table, out, M, D, W: tl.constexpr, BM: tl.constexpr, BLOCK_D: tl.constexpr):
    """a tile of BM rows per program, summed over the stack and stored."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BLOCK_D)
    offs = rows[:, None] * D + cols[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < D)
    h = tl.sum(tl.load(bufs[offs], mask=mask, other=0).to(tl.float32), axis=0)
    tl.store(out + offs, h.to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_tile(ex, table, out, M, D, W: tl.constexpr, BM: tl.constexpr, BLOCK_D: tl.constexpr):
    """a tile of BM rows per program, summed over the table's buffers by hand."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BLOCK_D)
    offs = rows[:, None] * D + cols[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < D)
    h = tl.zeros((BM, BLOCK_D), tl.float32)
    for p in tl.static_range(W):
        peer = tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)), 16)
        h += tl.load(peer + offs, mask=mask, other=0).to(tl.float32)
    tl.store(out + offs, h.to(out.dtype.element_ty), mask=mask)
