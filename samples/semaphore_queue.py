"""A producer/consumer exchange between ranks on counting semaphores (castpile.wait(..., decrement=True)).

Every rank but 0 produces: each round it writes its row into its own slot of rank 0's buffer and
adds 1 to rank 0's "full" semaphore, then takes 1 from its own "free" semaphore before the next
round.  Rank 0 consumes: each round it takes W - 1 from its "full" semaphore (every producer's row
has landed), sums the rows into ``out[round]``, then adds 1 to every producer's "free" semaphore.
A take is a wait until the count is high enough followed by one compare-and-swap that lowers it,
so no count is lost or taken twice however the signals interleave, and every semaphore ends at 0:
the exchange can run again, or be captured in a CUDA graph.

Flags (int32, the signal pads): entry 0 is a rank's "full" count, entry 1 its "free" count.
"""

import triton
import triton.language as tl

import castpile as cp


@triton.jit
def produce(rows, slots, slot_ptrs, pad, pad_ptrs, rank, rounds, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Send the ``rounds`` rows of ``rows`` (rounds, n) to rank 0, one a round, into slot ``rank`` there."""
    box = cp.multicast_like(slots, slot_ptrs[0], shape=(W, n))  # rank 0's slots
    full = cp.multicast_like(pad, pad_ptrs[0], shape=(2,))  # rank 0's semaphores
    offs = tl.arange(0, BLOCK)
    r = 0
    while r < rounds:  # a while loop: Triton 3.6's interpreter cannot loop to a run-time range bound
        box[rank, offs] = tl.load(rows + r * n + offs, mask=offs < n)
        tl.debug_barrier()
        cp.signal(full[0], op="add")  # one more row for rank 0
        cp.wait(pad + 1, 1, decrement=True)  # rank 0 has read it: the slot is free again
        tl.debug_barrier()
        r += 1


@triton.jit
def consume(out, slots, pad, pad_ptrs, rounds, n, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr):
    """Each of ``rounds`` rounds: take W - 1 rows, sum the producers' slots into ``out[round]`` and free them."""
    free = cp.multicast_like(pad, pad_ptrs[1:W], shape=(2,))  # every producer's semaphores
    peers = tl.arange(0, WP)
    offs = tl.arange(0, BLOCK)
    live = (peers[:, None] >= 1) & (peers[:, None] < W) & (offs[None, :] < n)
    r = 0
    while r < rounds:
        cp.wait(pad, W - 1, decrement=True)  # every producer's row of this round has landed
        tl.debug_barrier()
        rows = tl.load(slots + peers[:, None] * n + offs[None, :], mask=live, other=0.0)
        tl.store(out + r * n + offs, tl.sum(rows, axis=0), mask=offs < n)
        tl.debug_barrier()
        cp.signal(free[1], op="add")  # each producer may write its next row
        r += 1
