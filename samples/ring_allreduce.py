"""A ring all-reduce: reduce-scatter, then all-gather, each visiting one peer per step.

Every rank's buffer ``x`` holds WORLD chunks of ``chunk`` elements; on return every rank's
``x`` holds the elementwise sum of all ranks' buffers.  Rank r owns chunk r.

* Reduce-scatter: step s reads chunk r of rank ``(rank + s) % WORLD`` (itself first), one
  peer bound per step with ``table[(rank + step) % WORLD]``, a run-time rank; the sum goes
  back into rank r's own chunk r, which no peer reads in this phase.
* A barrier on the signal pads: each program raises its slot on every rank's pad and waits
  on the WORLD slots of its own.
* All-gather: step s copies chunk p (p = ``(rank + s) % WORLD``, reduced by rank p) from
  rank p into rank r's chunk p.

Launch on every rank with grid ``(cdiv(chunk, BLOCK),)``, the inputs written and the pads
zero before any rank starts; the pads are zero again on return.  Program ``pid`` only waits
for program ``pid`` of the other ranks (slots ``pid * WORLD + rank``).
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def ring_allreduce(x, buf_ptrs, pad_ptrs, flags, rank, chunk, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """x = the sum over ranks of x, chunk by chunk through a ring of peers."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    live = offs < chunk
    mine = rank * chunk + offs
    acc = tl.zeros((BLOCK,), tl.float32)
    for step in tl.static_range(WORLD):  # reduce-scatter: chunk `rank` of each peer in turn
        peer = multicast_like(x, buf_ptrs[(rank + step) % WORLD], shape=(WORLD * chunk,))
        acc += tl.load(peer[mine], mask=live).to(tl.float32)
    tl.store(x + mine, acc.to(x.dtype.element_ty), mask=live)

    tl.debug_barrier()  # every reduced chunk is written before any rank reads it
    pads = multicast_like(flags, pad_ptrs[:WORLD])
    castpile.signal(pads[pid * WORLD + rank], wait_for=0)
    slots = tl.arange(0, triton.next_power_of_2(WORLD))
    castpile.wait(flags + pid * WORLD + slots, mask=slots < WORLD)  # this rank's own pad
    tl.debug_barrier()

    for step in tl.static_range(1, WORLD):  # all-gather: the reduced chunk of each other rank in turn
        src = (rank + step) % WORLD
        owner = multicast_like(x, buf_ptrs[src], shape=(WORLD * chunk,))
        theirs = src * chunk + offs
        tl.store(x + theirs, tl.load(owner[theirs], mask=live), mask=live)
