"""A 2-D tile of device pointers with a 1-D element index.

The pointer tile is a Triton tensor of addresses, (R, C) — e.g. R nodes of C
GPUs each — so ``bufs[offs]`` loads an (R, C, BLOCK) tensor: entry [r, c, q] is
element offs[q] of the buffer at ``tile[r, c]``.
"""

import triton
import triton.language as tl

import castpile as cp


@triton.jit
def grid_copy(out, dev_ptrs, n, R: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):
    """out[r, c] = the buffer at dev_ptrs[r * C + c]; ``out`` is (R, C, n)."""
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    bufs = cp.multicast_like(out, tl.load(dev_ptrs + r[:, None] * C + c[None, :]), shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = bufs[offs]  # (R, C, BLOCK)
    dst = out + (r[:, None, None] * C + c[None, :, None]) * n + offs[None, None, :]
    tl.store(dst, x, mask=offs[None, None, :] < n)


@triton.jit
def row_sums(out, dev_ptrs, n, R: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):
    """out[r] = the sum of the C buffers of row r of the tile; ``out`` is (R, n)."""
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    bufs = cp.multicast_like(out, tl.load(dev_ptrs + r[:, None] * C + c[None, :]), shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs], axis=1)  # (R, C, BLOCK) -> (R, BLOCK)
    tl.store(out + r[:, None] * n + offs[None, :], total, mask=offs[None, :] < n)
