"""All-reduce kernels of ``castpile/collectives/kernels.py`` with ``align=16`` (transpiled into ``generated/``).

Same algorithms and barrier; the multicast binding declares its buffers
16-byte aligned (symmetric-memory buffers are), so loads and stores are 128
bits wide, and two-shot chunks are whole tiles.  The benchmark also launches them with larger
tiles and more blocks than the library's wrappers do.
"""

import triton
import triton.language as tl

from castpile import multicast_like
from castpile.collectives.kernels_triton import barrier


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``out = sum over ranks of buf``: every rank reads every rank's whole buffer."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs].to(tl.float32), axis=0)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def two_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``buf = sum over ranks of buf`` in place: rank r reduces chunk r and writes it to every rank.

    Chunks are whole tiles (unlike the library's ``cdiv(n, WORLD)``) so that
    Triton can prove ``rank * chunk`` 16-byte aligned and keep accesses 128-bit.
    """
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    chunk = tl.cdiv(n, WORLD * BLOCK) * BLOCK
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        offs = rank * chunk + local
        total = tl.sum(tl.load(bufs[offs], mask=local < chunk).to(tl.float32), axis=0)
        tl.store(bufs[offs], total[None, :], mask=local < chunk)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)
