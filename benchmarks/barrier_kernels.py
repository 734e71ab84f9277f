"""One-shot all-reduce with barrier variants, for benchmarks/sweep_barrier.py (transpiled into ``generated/``).

``START_SEM`` picks the memory order of the barrier before the reads: the
library uses release/acquire; "relaxed" relies on the kernel boundary for the
inputs written before the launch (what torch's symm_mem one-shot does).  The
barrier after the reads stays release/acquire.
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def barrier(pad, pad_ptrs, rank, WORLD: tl.constexpr, RELAXED: tl.constexpr):
    """The library's barrier, with relaxed atomics when ``RELAXED``."""
    slot = tl.program_id(0) * WORLD
    pads = multicast_like(pad, pad_ptrs[:WORLD])
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    if RELAXED:
        castpile.signal(pads[slot + rank], value=1, wait_for=0, sem="relaxed", scope="sys")
        castpile.wait(pad + slot + peers, value=1, reset=0, sem="relaxed", scope="sys", mask=peers < WORLD)
    else:
        castpile.signal(pads[slot + rank], value=1, wait_for=0, sem="release", scope="sys")
        castpile.wait(pad + slot + peers, value=1, reset=0, sem="acquire", scope="sys", mask=peers < WORLD)
    tl.debug_barrier()


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, START_RELAXED: tl.constexpr):
    """``out = sum over ranks of buf``, as in castpile/collectives/kernels.py."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    barrier(pad, pad_ptrs, rank, WORLD, START_RELAXED)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs].to(tl.float32), axis=0)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    barrier(pad, pad_ptrs, rank, WORLD, False)
