"""Atomics on every peer's buffer.

``tl.atomic_add(bins[key], 1, mask=m)`` adds into element ``key`` of every
buffer (a histogram that every peer receives), ``tl.atomic_max(peaks[0], v)``
keeps a running maximum in every peer, and ``tl.atomic_cas`` claims a slot in
every peer where it is still free.  Each returns the old values, one row per
buffer.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def histogram(keys, n, dev_ptrs, NBINS, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Count the local int32 ``keys`` into the NBINS-bin int32 histogram of every buffer.

    Keys outside [0, NBINS) fall outside the buffers' shape and are dropped.
    """
    bins = multicast_like(keys, dev_ptrs[:WORLD], shape=(NBINS,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    key = tl.load(keys + offs, mask=offs < n, other=-1)
    tl.atomic_add(bins[key], 1, mask=offs < n)


@triton.jit
def peak(x, n, dev_ptrs, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Raise element 0 of every buffer to at least the maximum of the local ``x``."""
    peaks = multicast_like(x, dev_ptrs[:WORLD])
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.max(tl.load(x + offs, mask=offs < n, other=-float("inf")), axis=0)
    tl.atomic_max(peaks[0], v)


@triton.jit
def claim(owners_out, dev_ptrs, slot, ticket, WORLD: tl.constexpr):
    """Set element ``slot`` of every buffer to ``ticket`` where it is 0 (free).

    ``owners_out[w]`` receives buffer w's previous owner (0: the claim succeeded).
    """
    owners = multicast_like(owners_out, dev_ptrs[:WORLD])
    previous = tl.atomic_cas(owners[slot], 0, ticket)  # (WORLD,)
    tl.store(owners_out + tl.arange(0, WORLD), previous)
