"""Rows read in column blocks around a stacked reduction (Triton's layer-norm tutorial's loops), in the castpile
language beside their hand twins.

``cols = off + tl.arange(0, BLOCK_D)`` for ``off`` in ``range(0, D, BLOCK_D)``, under ``mask=cols < D``: the mask
rule proves a 1-D binding's bounds (docs/language.md, the third rule), a 2-D binding keeps ``cols < D`` and loses
``cols >= 0`` (the second).  ``sum`` stores each row's stacked sum; ``norm`` reads the stack twice, for the row's
root mean square and then to scale it.  The hand kernels (``hand_*``, plain Triton: castpile leaves them as they
are) sum the buffers in a ``tl.static_range`` loop over the table.  tests/test_index_rule.py compiles them for
sm_90; benchmarks/sweeps/sweep_column_blocks.py times them on one GPU.
"""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def cp_sum_1d(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """each row's stacked sum, in column blocks (1d binding)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = tl.sum(tl.load(bufs[row * D + cols], mask=cols < D, other=0).to(tl.float32), axis=0)
            tl.store(out + row * D + cols, h.to(out.dtype.element_ty), mask=cols < D)


@triton.jit
def cp_sum_2d(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """each row's stacked sum, in column blocks (2d binding)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
            tl.store(out + row * D + cols, h.to(out.dtype.element_ty), mask=cols < D)


@triton.jit
def _hand_row_sum(ex, table, row, D, cols, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """The W buffers' elements ``row * D + cols`` under ``cols < D``, summed in fp32 (a ``tl.static_range`` over the
    table: hand code)."""
    h = tl.zeros((BLOCK_D,), tl.float32)
    for p in tl.static_range(W):
        peer = tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)), 16)
        h += tl.load(peer + row * D + cols, mask=cols < D, other=0).to(tl.float32)
    return h


@triton.jit
def hand_sum(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """each row's stacked sum, in column blocks, by hand."""
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = _hand_row_sum(ex, table, row, D, cols, W, BLOCK_D)
            tl.store(out + row * D + cols, h.to(out.dtype.element_ty), mask=cols < D)


@triton.jit
def cp_norm_1d(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """each row's stacked sum normalised by its root mean square, in two passes of column blocks (1d binding)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        squares = tl.zeros((BLOCK_D,), tl.float32)
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = tl.sum(tl.load(bufs[row * D + cols], mask=cols < D, other=0).to(tl.float32), axis=0)
            squares += h * h
        scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / D + eps)
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = tl.sum(tl.load(bufs[row * D + cols], mask=cols < D, other=0).to(tl.float32), axis=0)
            tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=cols < D)


@triton.jit
def cp_norm_2d(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """each row's stacked sum normalised by its root mean square, in two passes of column blocks (2d binding)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        squares = tl.zeros((BLOCK_D,), tl.float32)
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
            squares += h * h
        scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / D + eps)
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
            tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=cols < D)


@triton.jit
def hand_norm(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """each row's stacked sum normalised by its root mean square, in two passes of column blocks, by hand."""
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        squares = tl.zeros((BLOCK_D,), tl.float32)
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = _hand_row_sum(ex, table, row, D, cols, W, BLOCK_D)
            squares += h * h
        scale = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / D + eps)
        for off in range(0, D, BLOCK_D):
            cols = off + tl.arange(0, BLOCK_D)
            h = _hand_row_sum(ex, table, row, D, cols, W, BLOCK_D)
            tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=cols < D)
