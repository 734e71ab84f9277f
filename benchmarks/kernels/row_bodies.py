"""Loop bodies around a stacked reduction, in the castpile language: written by row_bodies_spec.py (do not edit;
benchmarks/sweeps/sweep_row_bodies.py times them against hand_row_bodies.py)."""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def cp_none_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_none_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_none_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_none_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    more = multicast_like(ex, table2[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        g = tl.sum(more[row, cols].to(tl.float32), axis=0)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    more = multicast_like(ex, table2[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        g = tl.sum(more[row, cols], axis=0, dtype=tl.float32)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    more = multicast_like(ex, table2[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        g = tl.sum(tl.load(more[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    more = multicast_like(ex, table2[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        g = tl.sum(tl.load(more[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 2d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    more = multicast_like(ex, table2[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        g = tl.sum(more[row, cols].to(tl.float32), axis=0)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 2d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M, D), align=16)
    more = multicast_like(ex, table2[:W], shape=(M, D), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(bufs[row, cols], axis=0, dtype=tl.float32)
        g = tl.sum(more[row, cols], axis=0, dtype=tl.float32)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 1d binding, cast: to)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    more = multicast_like(ex, table2[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        g = tl.sum(tl.load(more[row * D + cols], mask=mask, other=0).to(tl.float32), axis=0)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 1d binding, cast: dtype)."""
    bufs = multicast_like(ex, table[:W], shape=(M * D,), align=16)
    more = multicast_like(ex, table2[:W], shape=(M * D,), align=16)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        g = tl.sum(tl.load(more[row * D + cols], mask=mask, other=0), axis=0, dtype=tl.float32)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)
