"""All-reduce fused with a residual add and RMSNorm: one program per row.

Single launch, no barrier: the caller guarantees that every rank's input is
written before any rank starts (the library's ``castpile.gpu.fused.rmsnorm``
adds barriers, or a low-latency protocol).  ``bufs[at]`` loads the row from
every rank's buffer as a (WORLD, BLOCK) stack and ``tl.sum(..., axis=0)``
reduces it over the ranks.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def allreduce_rmsnorm(x, dev_ptrs, residual, weight, out, D, eps, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """residual[row] += sum over ranks of x[row]; out[row] = rms_norm(residual[row]) * weight."""
    bufs = multicast_like(x, dev_ptrs[:WORLD])
    cols = tl.arange(0, BLOCK)
    at = tl.program_id(0) * D + cols
    h = tl.sum(tl.load(bufs[at], mask=cols < D).to(tl.float32), axis=0)
    h = (h + tl.load(residual + at, mask=cols < D).to(tl.float32)).to(residual.dtype.element_ty)
    tl.store(residual + at, h, mask=cols < D)
    h = h.to(tl.float32)
    inv_rms = 1 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
    y = h * inv_rms * tl.load(weight + cols, mask=cols < D).to(tl.float32)
    tl.store(out + at, y.to(out.dtype.element_ty), mask=cols < D)
