"""A barrier that hangs when a peer stays away: the GPU proof of debug-mode waits (benchmarks/debug_waits_proof.py).

``generated/hang_kernels_debug_waits.py`` is this file transpiled with ``CASTPILE_DEBUG_WAITS=2``
(``make generated``): its waits give up after 2 s and record this file's lines.
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def barrier(pad, pad_ptrs, rank, W: tl.constexpr):
    """Raise flag ``rank`` on every rank's pad (once the last call's is lowered), then wait for every rank's flag
    on this one, lowering them: a rank that never calls it leaves its peers waiting."""
    pads = multicast_like(pad, pad_ptrs[:W], shape=(W,))
    castpile.signal(pads[rank], wait_for=0)
    castpile.wait(pad + tl.arange(0, W))
