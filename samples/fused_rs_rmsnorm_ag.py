"""Reduce-scatter, RMSNorm and all-gather fused in one kernel, the communication in helpers.

Every rank holds ``x`` (M, D), its partial sums of the rows.  Rank ``r`` owns rows ``r``,
``r + WORLD``, ...: for each, ``reduce_row`` sums the row over every rank's ``x`` (the
reduce-scatter), the kernel normalises it (RMS over D, times ``weight``), and ``broadcast_row``
stores it into that row of every rank's ``out`` (the all-gather).  The helpers take the
multicast tensors as ``castpile.Multicast`` parameters, so they hold every access.

Single launch, no barrier: the caller guarantees that every rank's ``x`` is written before any
rank starts, and reads ``out`` only once every rank has finished (the library's fused ops add
barriers).
"""

import triton
import triton.language as tl

from castpile import Multicast, multicast_like


@triton.jit
def reduce_row(parts: Multicast, row, cols, inside):
    """Row ``row`` of every rank's ``parts``, summed over the ranks in fp32."""
    return tl.sum(tl.load(parts[row, cols], mask=inside, other=0.0).to(tl.float32), axis=0)


@triton.jit
def broadcast_row(outs: Multicast, row, cols, y, inside):
    """``y`` stored as row ``row`` of every rank's ``outs``."""
    tl.store(outs[row, cols], y[None, :], mask=inside)


@triton.jit
def fused_rs_rmsnorm_ag(x, x_ptrs, weight, out, out_ptrs, rank, M, D, eps, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr):
    """out[row] = rms_norm(sum over ranks of x[row]) * weight on every rank, each rank computing its rows."""
    parts = multicast_like(x, x_ptrs[:WORLD], shape=(M, D))
    outs = multicast_like(out, out_ptrs[:WORLD], shape=(M, D))
    cols = tl.arange(0, BLOCK)
    inside = cols < D
    w = tl.load(weight + cols, mask=inside, other=0.0).to(tl.float32)
    row = rank + tl.program_id(0) * WORLD
    while row < M:
        h = reduce_row(parts, row, cols, inside)
        inv_rms = 1 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        broadcast_row(outs, row, cols, (h * inv_rms * w).to(out.dtype.element_ty), inside)
        row += tl.num_programs(0) * WORLD
