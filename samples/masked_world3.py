"""A world of 3 GPUs: a stack of 3 is padded to a block of 4.

``dev_ptrs[:3]`` is legal although 3 is no power of two: accesses have a
leading extent of 4 and the padded entry is never touched (loads give 0 there).
The tensor-tile form says the same with ``ptr_mask``: a 4-entry tile whose
last address is masked off, so that buffer is neither read nor written.
"""

import triton
import triton.language as tl

from castpile import multicast_like as mcl


@triton.jit
def stack3(out, dev_ptrs, n, BLOCK: tl.constexpr):
    """out[w] = buffer w for w < 3 and out[3] = 0; ``out`` is (4, n)."""
    bufs = mcl(out, dev_ptrs[:3], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    w = tl.arange(0, 4)
    tl.store(out + w[:, None] * n + offs[None, :], bufs[offs], mask=offs[None, :] < n)


@triton.jit
def add_one_masked(dev_ptrs, n, example, BLOCK: tl.constexpr):
    """Add 1 to buffers 0..2 of a 4-entry table; buffer 3 is masked off and left alone."""
    w = tl.arange(0, 4)
    bufs = mcl(example, tl.load(dev_ptrs + w), shape=(n,), ptr_mask=w < 3)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    bufs[offs] += 1
