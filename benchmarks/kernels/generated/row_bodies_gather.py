"""Loop bodies around a stacked reduction, in the castpile language: written by row_bodies_spec.py (do not edit;
benchmarks/sweeps/sweep_row_bodies.py times them against hand_row_bodies.py)."""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def cp_none_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0 = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_none_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_none_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_none_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0__ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0__), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_none_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0___ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0___), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0____ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0____), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_____ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_____), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_before_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0______ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0______), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_before_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_______ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_______), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_after_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0__________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0__________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_after_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0___________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0___________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0____________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0____________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_____________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_____________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0______________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0______________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_______________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_______________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0________________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_________________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_res_weight_hoisted_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0__________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0__________________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_res_weight_hoisted_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0___________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0___________________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0____________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0____________________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_____________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_____________________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_scalar_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 2d binding, cast: to)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 2d binding, cast: dtype)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0______________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0______________________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_scalar_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_______________________ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_______________________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_for_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 2d binding, cast: to)."""
    bufs = table
    more = table2
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_for_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 2d binding, cast: dtype)."""
    bufs = table
    more = table2
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_for_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0________________________ = M * D
    more = table2; more_shape0 = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0________________________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, _castpile_unbounded(more_shape0), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_for_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0_________________________ = M * D
    more = table2; more_shape0_ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0_________________________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, _castpile_unbounded(more_shape0_), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def cp_two_stacks_while_2d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 2d binding, cast: to)."""
    bufs = table
    more = table2
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_while_2d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 2d binding, cast: dtype)."""
    bufs = table
    more = table2
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, (row < M) & (cols < D), "sum", dtype=tl.float32, align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_while_1d_to(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 1d binding, cast: to)."""
    bufs = table; bufs_shape0__________________________ = M * D
    more = table2; more_shape0__ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0__________________________), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, _castpile_unbounded(more_shape0__), "sum", mask, 0, steps="to", operands=(tl.float32,), align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def cp_two_stacks_while_1d_dtype(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop, 1d binding, cast: dtype)."""
    bufs = table; bufs_shape0___________________________ = M * D
    more = table2; more_shape0___ = M * D
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, _castpile_unbounded(bufs_shape0___________________________), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        g = _castpile_reduce_loop(more, W, None, ex, cols, _castpile_unbounded(more_shape0___), "sum", mask, 0, dtype=tl.float32, align=16, base=D*row)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.jit
def _castpile_unbounded(extent):
    """Nothing (``None``), the bounds of an access whose mask proves it inside ``extent`` (castpile/compiler/mask_bounds.py): a
    proof for integer extents only, so a float one is an error when Triton compiles the access."""
    tl.static_assert((extent + tl.zeros([1], tl.int8)).dtype.is_int(),
                     "castpile: this access's mask proves it inside its binding's shape= only for an integer extent, "
                     "and the extent is not an integer")


@triton.jit
def _castpile_entry_valid(smask, p: tl.constexpr):
    """Whether stack entry ``p`` is valid: entry ``p`` of ``smask`` (the ``ptr_mask``: of the tile's shape, entry
    ``p`` in row-major order; of a table slice's padded extent; a scalar for one buffer), or true without one."""
    if smask is None:
        valid = True
    elif len(smask.shape) == 0:
        valid = smask
    else:
        pos = tl.reshape(tl.arange(0, smask.numel), smask.shape)
        valid = tl.sum(tl.where(pos == p, smask.to(tl.int32), 0)) != 0
    return valid


@triton.jit
def _castpile_lane_mask(valid, mask, offs, user_mask=None):
    """The mask of one buffer's lanes: ``valid`` (the buffer) ANDed with the element masks.

    Always a fresh tensor of the shape of ``offs`` (offsets, or the pointers of a wait): Triton
    3.6's interpreter reads atomic operands as contiguous arrays, so a broadcast or Python-bool
    mask would be misread.  Each mask may be a tensor, a scalar or a ``tl.constexpr`` bool.
    """
    lanes = tl.full(offs.shape, 1, tl.int1) & valid
    if mask is not None:
        lanes = lanes & mask
    if user_mask is not None:
        lanes = lanes & user_mask
    return lanes


@triton.jit
def _castpile_offsets(offs, base=None):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor), and ``base`` added to it where that is no
    scalar (a scalar ``base`` joins the pointer instead)."""
    offs = offs + tl.zeros((), tl.int32)
    if base is not None:
        if len((base + tl.zeros((), tl.int32)).shape) != 0:
            offs = offs + base
    return offs


@triton.jit
def _castpile_rebased(ptr, base):
    """``ptr`` (one buffer's pointer, or a tile of them) advanced by ``base``: an access's index summands that castpile
    classed as scalars (``base=``; ``None``: none), which join the pointer before the tensor offsets do, as hand-written
    ``ptr + row * D + cols`` does.  A ``base`` that is no scalar after all is part of the offsets instead
    (:func:`_castpile_offsets`), and ``ptr`` is returned as it is."""
    if base is None:
        return ptr
    elif len((base + tl.zeros((), tl.int32)).shape) != 0:
        return ptr
    else:
        return ptr + base


@triton.jit
def _castpile_peer(src, smask, p: tl.constexpr, example, align: tl.constexpr):
    """Typed pointer to buffer ``p`` of the stack (``align`` bytes aligned if given), and whether it is valid
    (:func:`_castpile_entry_valid`)."""
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        ptr = tl.load(src + p).to(ptr_ty)
    elif len(src.shape) == 0:  # a rank-0 tile: the one buffer (a reduction of a scalar does not compile)
        ptr = src.to(ptr_ty)
    else:
        pos = tl.reshape(tl.arange(0, src.numel), src.shape)
        ptr = tl.sum(tl.where(pos == p, src, 0)).to(ptr_ty)
    valid = _castpile_entry_valid(smask, p)
    if align is not None:
        ptr = tl.multiple_of(ptr, align)
    return ptr, valid


@triton.jit
def _castpile_reduce_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                          other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                          keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                          return_indices_tie_break_left: tl.constexpr = True,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None, combine_fn: tl.constexpr = None,
                          base=None):
    """A reduction ``OP`` (see :mod:`.reduction`; ``combine_fn``: ``tl.reduce``'s) over axis 0 of a table's access,
    one buffer at a time, without the P + I tensor.

    Each valid buffer's elements are loaded, taken through ``steps`` (:func:`_castpile_apply`) and the
    conversion the reduction makes, and folded in stack order; ``return_indices``: and the positions (a tie goes
    to the first buffer, whichever ``return_indices_tie_break_left``).  Lanes the user's ``mask`` turns off take
    part as ``other``; a lane out of bounds gives 0 (position 0).
    """
    offs = _castpile_offsets(offs, base)
    acc = None  # the fold starts at buffer 0
    at = None
    seen = None
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        x = tl.load(_castpile_rebased(peer, base) + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=0 if other is None else other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        acc, at, seen = _castpile_fold(p, x, valid, acc, at, seen, OP, steps, operands, dtype, return_indices,
                                        combine_fn)
    return _castpile_folded(acc, at, seen, bounds, other, steps, keep_dims, return_indices, OP)


@triton.constexpr_function
def _castpile_accumulator(dtype, OP, sum_dtype, indices):
    """The type Triton's ``tl.sum`` / ``max`` / ``min`` of ``dtype`` reduces in: ``tl.sum``'s ``dtype=``
    (``sum_dtype``), else int32 / uint32 for narrower integers; ``max`` / ``min``: float32 for bfloat16 and,
    without ``return_indices``, float32 / int32 for any narrower type; a combine function's: ``dtype``."""
    if _castpile_combines(OP):
        return dtype
    if OP == "sum":
        if sum_dtype is not None:
            return sum_dtype
        if dtype.is_int_signed() and dtype.int_bitwidth < 32:
            return tl.int32
        if dtype.is_int_unsigned() and dtype.int_bitwidth < 32:
            return tl.uint32
        return dtype
    if dtype.is_bf16():
        return tl.float32
    if not indices and dtype.primitive_bitwidth < 32:
        return tl.float32 if dtype.is_floating() else tl.int32
    return dtype


@triton.constexpr_function
def _castpile_combines(OP):
    """Whether the reduction ``OP`` folds with a combine function (:func:`_castpile_combine`), without an identity."""
    return OP in ("reduce", "xor_sum", "reduce_or")


@triton.jit
def _castpile_combine(OP: tl.constexpr, combine_fn: tl.constexpr, a, b):
    """``a`` and ``b`` combined as the reduction ``OP`` combines, elementwise: xor, or, or ``combine_fn(a, b)``."""
    if OP == "xor_sum":
        r = a ^ b
    elif OP == "reduce_or":
        r = a | b
    else:
        r = combine_fn(a, b)
    return r


@triton.constexpr_function
def _castpile_step_count(steps):
    """How many elementwise steps ``steps`` (their kinds, space-separated) names."""
    return len(steps.split())


@triton.constexpr_function
def _castpile_step(steps, k):
    """The kind of step ``k`` of ``steps``."""
    return steps.split()[k]


@triton.constexpr_function
def _castpile_operand(steps, k):
    """Where the operand of step ``k`` of ``steps`` sits among the steps' operands (``neg`` and the math
    functions have none)."""
    arithmetic = ("add", "sub", "mul", "truediv", "floordiv", "mod")
    casts = ("to", "bitcast", "to_rtne", "to_rtz")
    return sum(1 for kind in steps.split()[:k] if kind in casts or kind in arithmetic or kind[1:] in arithmetic)


@triton.constexpr_function
def _castpile_is_math(steps, k):
    """Whether step ``k`` of ``steps`` is one of Triton's math functions (:func:`_castpile_math`; no operand)."""
    math = ("abs", "ceil", "cos", "erf", "exp", "exp2", "floor", "log", "log2", "rsqrt", "sigmoid", "sin", "sqrt")
    return steps.split()[k] in (*math, "sqrt_rn")


@triton.constexpr_function
def _castpile_keeps_zero(steps):
    """Whether every step of ``steps`` turns 0 into 0, so that lanes whose loads gave 0 still hold 0."""
    return all(kind in ("to", "bitcast", "to_rtne", "to_rtz", "neg") for kind in steps.split())


@triton.constexpr_function
def _castpile_identity(dtype, OP):
    """The value that takes no part in a ``max``/``min`` reduction of ``dtype``."""
    if OP == "sum":
        return 0
    if dtype.is_floating():
        return float("-inf") if OP == "max" else float("inf")
    bits = dtype.primitive_bitwidth
    if dtype.is_int_signed():
        return -(2 ** (bits - 1)) if OP == "max" else 2 ** (bits - 1) - 1
    return 0 if OP == "max" else 2**bits - 1


@triton.jit
def _castpile_apply_one(v, KIND: tl.constexpr, x):
    """``v`` through one step of :func:`_castpile_apply` whose operand is ``x``."""
    if KIND == "to":
        r = v.to(x)
    elif KIND == "bitcast":
        r = v.to(x, bitcast=True)
    elif KIND == "to_rtne":
        r = v.to(x, fp_downcast_rounding="rtne")
    elif KIND == "to_rtz":
        r = v.to(x, fp_downcast_rounding="rtz")
    elif KIND == "add":
        r = v + x
    elif KIND == "radd":
        r = x + v
    elif KIND == "sub":
        r = v - x
    elif KIND == "rsub":
        r = x - v
    elif KIND == "mul":
        r = v * x
    elif KIND == "rmul":
        r = x * v
    elif KIND == "truediv":
        r = v / x
    elif KIND == "rtruediv":
        r = x / v
    elif KIND == "floordiv":
        r = v // x
    elif KIND == "rfloordiv":
        r = x // v
    elif KIND == "mod":
        r = v % x
    else:
        r = x % v
    return r


@triton.jit
def _castpile_math(v, KIND: tl.constexpr):
    """``v`` through the Triton math function named ``KIND``."""
    if KIND == "abs":
        r = tl.abs(v)
    elif KIND == "ceil":
        r = tl.ceil(v)
    elif KIND == "cos":
        r = tl.cos(v)
    elif KIND == "erf":
        r = tl.erf(v)
    elif KIND == "exp":
        r = tl.exp(v)
    elif KIND == "exp2":
        r = tl.exp2(v)
    elif KIND == "floor":
        r = tl.floor(v)
    elif KIND == "log":
        r = tl.log(v)
    elif KIND == "log2":
        r = tl.log2(v)
    elif KIND == "rsqrt":
        r = tl.rsqrt(v)
    elif KIND == "sigmoid":
        r = tl.sigmoid(v)
    elif KIND == "sin":
        r = tl.sin(v)
    elif KIND == "sqrt":
        r = tl.sqrt(v)
    else:
        r = tl.sqrt_rn(v)
    return r


@triton.jit
def _castpile_apply(v, steps: tl.constexpr, operands):
    """``v`` through the elementwise steps that stand between an access and its reduction, in order: ``to``,
    ``bitcast``, ``to_rtne``, ``to_rtz`` (``.to(T, ...)``), an operator with a scalar operand on the right (``add``,
    ``sub``, ``mul``, ``truediv``, ``floordiv``, ``mod``) or on the left (``radd``, ``rsub``, ...), ``neg``, and
    Triton's elementwise math functions (``exp``: ``tl.exp(v)``, :func:`_castpile_math`)."""
    for k in tl.static_range(_castpile_step_count(steps)):
        if _castpile_step(steps, k) == "neg":
            v = -v
        elif _castpile_is_math(steps, k):
            v = _castpile_math(v, _castpile_step(steps, k))
        else:
            v = _castpile_apply_one(v, _castpile_step(steps, k), operands[_castpile_operand(steps, k)])
    return v


@triton.jit
def _castpile_fold(p: tl.constexpr, x, valid, acc, at, seen, OP: tl.constexpr, steps: tl.constexpr, operands,
                   dtype: tl.constexpr, indices: tl.constexpr, combine_fn: tl.constexpr = None):
    """Buffer ``p``'s loaded elements ``x``, taken through ``steps`` (:func:`_castpile_apply`) and the conversion
    the reduction makes (``dtype``: ``tl.sum``'s), folded into ``acc``, the reduction of the buffers before it;
    ``at``: the position each lane's max / min comes from (``indices``; the first on a tie); ``seen``: the lanes
    some valid buffer reached.  ``valid`` says whether buffer ``p`` is; ``p == 0`` starts the fold.  A
    reduction with a combine function (``combine_fn``: ``tl.reduce``'s) has no identity: a lane's first valid
    buffer starts it.  A table's reductions make this step per buffer, however they reach it."""
    v = _castpile_apply(x, steps, operands)
    v = v.to(_castpile_accumulator(v.dtype, OP, dtype, indices))
    if not _castpile_combines(OP):
        v = tl.where(valid, v, _castpile_identity(v.dtype, OP))
    if p == 0:
        if OP == "sum":  # from zero, as a hand-written loop sums (a sum of -0.0 gives 0.0): Triton schedules it better
            acc = tl.zeros(v.shape, v.dtype) + v
        else:
            acc = v
        at = tl.zeros(v.shape, tl.int32)
        seen = _castpile_lane_mask(valid, None, v)
    elif _castpile_combines(OP):
        acc = tl.where(valid, tl.where(seen, _castpile_combine(OP, combine_fn, acc, v), v), acc)
        seen = seen | valid
    elif indices:
        if OP == "max":
            better = v > acc
        else:
            better = v < acc
        take = valid & (better | ~seen)
        acc = tl.where(take, v, acc)
        at = tl.where(take, p, at)
        seen = seen | valid
    else:
        if OP == "sum":
            acc = acc + v
        elif OP == "max":
            acc = tl.maximum(acc, v)
        else:
            acc = tl.minimum(acc, v)
        seen = seen | valid
    return acc, at, seen


@triton.jit
def _castpile_folded(acc, at, seen, bounds, other, steps: tl.constexpr, keep_dims: tl.constexpr,
                     indices: tl.constexpr, OP: tl.constexpr):
    """The result of a fold (:func:`_castpile_fold`) of the reduction ``OP``: a lane that no valid buffer reached,
    or out of ``bounds``, gives 0 and position 0 (a lane out of bounds holds value 0 already when its loads gave 0,
    no ``other``, through ``steps`` that keep 0, and ``OP`` is a sum, max or min; its position may be that of a
    later buffer when ``ptr_mask`` left out the first); ``keep_dims`` keeps the stack dim as extent 1; with
    ``indices``, the values and their positions."""
    zeroed: tl.constexpr = (other is None and _castpile_keeps_zero(steps) and not _castpile_combines(OP)
                            and not indices)
    live = seen
    if bounds is not None and not zeroed:
        live = live & bounds
    acc = tl.where(live, acc, tl.zeros_like(acc))
    at = tl.where(live, at, tl.zeros_like(at))
    if keep_dims:
        acc = tl.expand_dims(acc, 0)
        at = tl.expand_dims(at, 0)
    if indices:
        return acc, at
    else:
        return acc
