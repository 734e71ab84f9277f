"""2-D element tiles: a 1-D table of buffers, a 2-D index, a 3-D result.

With ``shape=(M, N)`` the access ``bufs[i[:, None], j[None, :]]`` loads a
(WORLD, BI, BJ) tile: entry [w, a, b] is element (i[a], j[b]) of buffer w,
masked to the M x N extent.  ``strides=`` reads a buffer through another
layout; here (1, M) reads each (N, M) row-major buffer as its transpose.
"""

import triton
import triton.language as tl

import castpile


@triton.jit
def stack_tiles(out, dev_ptrs, M, N, WORLD: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """out[w] = buffer w, each buffer (M, N) row-major; ``out`` is (WORLD, M, N)."""
    bufs = castpile.multicast_like(out, dev_ptrs[:WORLD], shape=(M, N))
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    j = tl.program_id(1) * BJ + tl.arange(0, BJ)
    x = bufs[i[:, None], j[None, :]]  # (WORLD padded to a power of two, BI, BJ)
    w = tl.arange(0, triton.next_power_of_2(WORLD))[:, None, None]
    mask = (w < WORLD) & (i[None, :, None] < M) & (j[None, None, :] < N)
    tl.store(out + w * M * N + i[None, :, None] * N + j[None, None, :], x, mask=mask)


@triton.jit
def stack_transposed(out, dev_ptrs, M, N, WORLD: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """out[w] = buffer w transposed, each buffer (N, M) row-major; ``out`` is (WORLD, M, N)."""
    bufs = castpile.multicast_like(out, dev_ptrs[:WORLD], shape=(M, N), strides=(1, M))
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    j = tl.program_id(1) * BJ + tl.arange(0, BJ)
    x = bufs[i[:, None], j[None, :]]  # element (i, j) of the view is element (j, i) of the buffer
    w = tl.arange(0, triton.next_power_of_2(WORLD))[:, None, None]
    mask = (w < WORLD) & (i[None, :, None] < M) & (j[None, None, :] < N)
    tl.store(out + w * M * N + i[None, :, None] * N + j[None, None, :], x, mask=mask)
