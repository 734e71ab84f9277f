"""A user's own castpile kernels, launched from a one-GPU body with no warm-up (benchmarks/check_one_gpu_own_kernels.py).

``ring_put`` writes through one peer's pointer (``table[peer]``); ``epoch_barrier`` counts
arrivals (``signal op="add"``) and waits for a count that only grows (``cmp="ge", reset=None``).
tests/test_launch_gate.py runs them on simulated ranks against torch and compiles them for sm_90.
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@castpile.jit
def ring_put(buf, table, x, n, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Row ``rank`` of the next rank's buffer [WORLD, n] = ``x`` (``table`` holds every rank's buffer address)."""
    peer = (rank + 1) % WORLD
    rows = multicast_like(buf, table[peer], shape=(WORLD, n))
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows[rank, cols] = tl.load(x + cols, mask=cols < n)


@castpile.jit
def epoch_barrier(pad, pad_ptrs, epoch, WORLD: tl.constexpr):
    """Add 1 to flag 0 of every rank, then wait until this rank's flag 0 reaches ``WORLD * epoch`` (never reset)."""
    flags = multicast_like(pad, pad_ptrs[:WORLD], shape=(1,))
    castpile.signal(flags[0], value=1, op="add")
    castpile.wait(pad, value=epoch * WORLD, cmp="ge", reset=None)


def ring_call(bufs, pads, rank: int, call: int, x, out, world: int, block: int) -> None:
    """Call ``call`` of rank ``rank``: put ``x`` into the next rank, meet, copy the row sent here to ``out``, meet."""
    buf, pad = bufs[rank], pads[rank]
    n = x.numel()
    ring_put[(triton.cdiv(n, block),)](buf.tensor, buf.ptrs, x, n, rank, WORLD=world, BLOCK=block)
    epoch_barrier[(1,)](pad.tensor, pad.ptrs, 2 * call + 1, WORLD=world)
    out.copy_(buf.tensor[(rank - 1) % world])
    epoch_barrier[(1,)](pad.tensor, pad.ptrs, 2 * call + 2, WORLD=world)
