"""The reverse of stacking: one value per buffer.

``bufs[k] = tl.arange(0, WORLD)`` addresses a (WORLD,) tensor (a scalar
index adds no dims), so element k of buffer j becomes j.  A full
(WORLD, BLOCK) value stores a different row into each buffer.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def stamp_rank(dev_ptrs, k, example, WORLD: tl.constexpr):
    """Element k of buffer j = j."""
    bufs = multicast_like(example, dev_ptrs[:WORLD])
    bufs[k] = tl.arange(0, WORLD)


@triton.jit
def scatter_rows(dev_ptrs, n, example, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Element i of buffer j = 1000 * j + i, for i < n."""
    bufs = multicast_like(example, dev_ptrs[:WORLD], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    bufs[offs] = tl.arange(0, WORLD)[:, None] * 1000 + offs[None, :]
