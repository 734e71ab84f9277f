"""A producer/consumer queue between ranks on epoch flags that nobody resets.

The producer writes each message into the next slot of a ring of Q slots in the consumer's
buffer, then sets that slot's flag on the consumer to the slot's epoch (how many times the
ring has come round to it: 1, 2, ...).  The consumer waits with ``cmp="ge"`` for the epoch it
expects and ``reset=None``, reads the slot, and acknowledges by adding 1 (``op="add"``) to a
counter on the producer; before reusing a slot the producer waits until the counter says the
slot's previous message was read.  Flags only grow, so the queue runs any number of messages
and nothing has to be cleared between them.

Flags (int32, the signal pads): on the consumer, entry q is slot q's epoch; on the producer,
entry Q + c counts the messages rank c has consumed.
"""

import triton
import triton.language as tl

import castpile as cp


@triton.jit
def produce(src, ring, ring_ptrs, pad, pad_ptrs, consumer, count, n, Q: tl.constexpr, BLOCK: tl.constexpr):
    """Send the ``count`` rows of ``src`` (count, n) to rank ``consumer``, in order."""
    slots = cp.multicast_like(ring, tl.load(ring_ptrs + consumer), shape=(Q, n))  # the consumer's ring
    epochs = cp.multicast_like(pad, tl.load(pad_ptrs + consumer))  # its flags
    offs = tl.arange(0, BLOCK)
    m = 0
    while m < count:  # a while loop: Triton 3.6's interpreter cannot loop to a run-time range bound
        q = m % Q
        cp.wait(pad + Q + consumer, m - Q + 1, cmp="ge", reset=None)  # slot q's last message was read
        slots[q, offs] = tl.load(src + m * n + offs, mask=offs < n)
        tl.debug_barrier()
        cp.signal(epochs[q], m // Q + 1)
        m += 1


@triton.jit
def consume(out, ring, pad, pad_ptrs, producer, rank, count, n, Q: tl.constexpr, BLOCK: tl.constexpr):
    """Receive ``count`` rows from rank ``producer`` into ``out`` (count, n), in order."""
    acks = cp.multicast_like(pad, tl.load(pad_ptrs + producer))  # the producer's flags
    offs = tl.arange(0, BLOCK)
    m = 0
    while m < count:
        q = m % Q
        cp.wait(pad + q, m // Q + 1, cmp="ge", reset=None)
        tl.debug_barrier()
        tl.store(out + m * n + offs, tl.load(ring + q * n + offs, mask=offs < n), mask=offs < n)
        tl.debug_barrier()
        cp.signal(acks[Q + rank], op="add")
        m += 1
