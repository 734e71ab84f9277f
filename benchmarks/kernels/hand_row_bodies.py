"""The loop bodies of row_bodies.py by hand: written by row_bodies_spec.py (do not edit)."""

import triton
import triton.language as tl


@triton.jit
def _peer(table, p: tl.constexpr, ex):
    """Buffer ``p``'s address, typed and 16-byte aligned."""
    return tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)), 16)


@triton.jit
def hand_none_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_none_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalise h by its root mean square (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def hand_res_before_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_res_before_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded before the reduction, added, then normalised (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        r = tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += r
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def hand_res_after_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_res_after_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a residual row loaded after the reduction, added, then normalised (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def hand_res_weight_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_res_weight_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """residual after, normalised, scaled by a weight row loaded in the loop (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def hand_res_weight_hoisted_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_res_weight_hoisted_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """res_weight with the weight row loaded once, before the loop (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale * wt).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def hand_scalar_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_scalar_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(stats + row, scale)
        tl.store(out + row * D + cols, (h * (scale * alpha)).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)


@triton.jit
def hand_two_stacks_for(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (for loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        g = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            g += tl.load(_peer(table2, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_two_stacks_while(ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """a second stacked reduction (another table's row) added, then normalised (while loop), by hand."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        g = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            g += tl.load(_peer(table2, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        h += g
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)
