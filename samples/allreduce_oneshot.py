"""A one-shot all-reduce: every rank sums all ranks' buffers into its output.

Single launch, no barrier: the caller guarantees that every rank's input is
written before any rank starts.  ``tl.sum(bufs[offs], axis=0)`` reduces the
(WORLD, BLOCK) stack over its buffers.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def allreduce_oneshot(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """out[i] = sum over w of buffer w's element i."""
    bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs], axis=0)  # (WORLD, BLOCK) -> (BLOCK,)
    tl.store(out + offs, total, mask=offs < n)
