"""Load from a 1-D table of device pointers.

``dev_ptrs[:WORLD]`` names WORLD buffers; with ``shape=(n,)`` the access
``bufs[offs]`` is a masked load of shape (WORLD, BLOCK): row w holds buffer w's
elements at ``offs``.  The kernel writes that stack out as a (WORLD, n) copy.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def stack_copy(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """out[w, i] = buffer w's element i; ``out`` is (WORLD, n), row-major."""
    bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = bufs[offs]  # (WORLD padded to a power of two, BLOCK)
    w = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.store(out + w[:, None] * n + offs[None, :], x, mask=(w[:, None] < WORLD) & (offs[None, :] < n))
