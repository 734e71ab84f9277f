"""An all-gather: every rank's buffer, gathered into a local (WORLD, n) output.

Each program gathers a CHUNK of elements, BLOCK at a time, so the register
tile stays (WORLD, BLOCK) however large the chunk; every step loads all
buffers at once with ``tl.load(bufs[offs], mask=...)``.
"""

import triton
import triton.language as tl

import castpile


@triton.jit
def allgather(out, dev_ptrs, n, WORLD: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """out[w, i] = buffer w's element i; ``out`` is (WORLD, n), row-major."""
    bufs = castpile.multicast_like(out, dev_ptrs[:WORLD])
    w = tl.arange(0, triton.next_power_of_2(WORLD))[:, None]
    for start in range(0, CHUNK, BLOCK):
        offs = tl.program_id(0) * CHUNK + start + tl.arange(0, BLOCK)
        slab = tl.load(bufs[offs], mask=offs < n)  # (WORLD padded to a power of two, BLOCK)
        tl.store(out + w * n + offs[None, :], slab, mask=(w < WORLD) & (offs[None, :] < n))
