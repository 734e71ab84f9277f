"""A store of one row to every buffer.

``bufs[offs] = row[None, :]`` broadcasts a (1, BLOCK) value over the stack:
every buffer receives the same row (a one-to-all broadcast).
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def broadcast(src, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Copy the local ``src`` (n elements) into each of the WORLD buffers."""
    bufs = multicast_like(src, dev_ptrs[:WORLD], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row = tl.load(src + offs, mask=offs < n)
    bufs[offs] = row[None, :]
