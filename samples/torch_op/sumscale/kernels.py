"""A castpile kernel of the user's, and the torch op that launches it: ``torch.ops.sumscale.scaled_sum``.

``scaled_sum(x, symm, scale)`` is ``scale`` times the sum over ranks of every
rank's ``x`` (``scale = 1 / world`` averages gradients), through the symmetric
tensor registered as ``symm`` (``castpile.gpu.ops.register``).  The kernel is
written in the castpile language: this module is imported through the hook that
``sumscale/__init__.py`` installs.
"""

import torch
import triton
import triton.language as tl

from castpile import multicast_like
from castpile.gpu import ops
from castpile.gpu.collectives.kernels_triton import barrier

BLOCK = 256


@triton.jit
def scaled_sum_kernel(buf, buf_ptrs, pad, pad_ptrs, out, scale, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,))
    barrier(pad, pad_ptrs, rank, WORLD, False)  # every rank has written its input
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs].to(tl.float32), axis=0)  # (WORLD, BLOCK) loaded from every rank, summed
        tl.store(out + offs, (total * scale).to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    barrier(pad, pad_ptrs, rank, WORLD, True)  # no rank returns (and overwrites its buffer) while a peer reads it


@ops.kernel_op("sumscale::scaled_sum", like="x")
def scaled_sum(x: torch.Tensor, symm: str, scale: float) -> torch.Tensor:
    s = ops.staged(symm, x)  # the SymmetricTensor, x copied into its buffer (unless x is the buffer)
    out = x.new_empty(x.shape)
    grid = (max(1, min(triton.cdiv(x.numel(), BLOCK), s.max_blocks)),)
    scaled_sum_kernel[grid](s.tensor, s.buffer_ptrs, s.signal_pad, s.signal_pad_ptrs, out, scale, s.rank, x.numel(),
                            WORLD=s.world_size, BLOCK=BLOCK)
    return out
