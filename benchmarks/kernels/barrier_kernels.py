"""One-shot all-reduce with a choice of start barrier (transpiled into ``generated/``), for sweeps/sweep_barrier.py.

``START_ORDERED`` picks the memory order of the library's barrier before the
reads: release/acquire, or relaxed (what the library does: the kernel boundary
has made the inputs visible).  The barrier after the reads is release/acquire.
"""

import triton
import triton.language as tl

from castpile import multicast_like
from castpile.gpu.collectives.kernels_triton import barrier


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, START_ORDERED: tl.constexpr):
    """``out = sum over ranks of buf``, as in castpile/gpu/collectives/kernels.py."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    barrier(pad, pad_ptrs, rank, WORLD, START_ORDERED)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs].to(tl.float32), axis=0)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    barrier(pad, pad_ptrs, rank, WORLD, True)
