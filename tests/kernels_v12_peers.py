"""Kernels of language v1.2's peer forms (transpiled by tests/test_language_v12_peers.py).

One peer at a run-time or constexpr rank (``table[r]``, written in the binding or bound to a
name first: P = ()), ``ptr_mask=`` on a table slice (a boolean tensor of the padded extent),
and a dtype in place of the example pointer.
"""

import triton
import triton.language as tl
from triton.language import int32

import castpile as cp
from castpile import multicast_like


@triton.jit
def next_peer(res, table, rank, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Buffer ``(rank + 1) % W`` alone: loaded, masked-loaded, reduced over its elements, then bumped by 1."""
    one = multicast_like(res, table[(rank + 1) % W], shape=(n,))
    rank = rank + 7  # the binding read the rank before this
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, one[offs])
    tl.store(res + BLOCK + offs, tl.load(one[offs], mask=offs < 3, other=-1))
    tl.store(res + 2 * BLOCK, tl.sum(one[offs], axis=0))
    tl.store(res + 2 * BLOCK + 1, tl.max(tl.load(one[offs], mask=offs < n, other=-100), axis=0))
    tl.store(res + 2 * BLOCK + 2, one[n - 1])
    one[offs] += 1


@triton.jit
def constexpr_peer(res, table, n, R: tl.constexpr, BLOCK: tl.constexpr):
    """Buffer ``R`` alone: stores, atomics (old values in res) and a compare-and-swap at a scalar index."""
    one = multicast_like(res, table[R], shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(one[offs], offs * 10, mask=offs < 4)
    tl.store(res + offs, tl.atomic_add(one[offs], 1))
    tl.store(res + BLOCK, tl.atomic_cas(one[1], 11, 99))
    tl.atomic_max(one[offs], 25)


@triton.jit
def named_peer(res, table, rank, n, BLOCK: tl.constexpr):
    """``tile = table[rank]`` bound first, then passed as the tile; the table rebound after the binding."""
    tile = table[rank]
    one = multicast_like(res, tile, shape=(n,))
    table = table + 1
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, one[offs] * 2)
    one[offs] = offs + 5


@triton.jit
def ring_flags(flags, table, rank, W: tl.constexpr):
    """A ring handshake: each rank raises slot ``rank`` of the next rank's flags and waits on its own slot
    ``(rank - 1) % W``, raised by the rank before it."""
    nxt = multicast_like(flags, table[(rank + 1) % W])
    mine = multicast_like(flags, table[rank])
    cp.signal(nxt[rank], value=1, wait_for=0)
    cp.wait(mine[(rank + W - 1) % W])


@triton.jit
def others(res, table, rank, n, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer but this rank's (``ptr_mask=tl.arange(0, WP) != rank``; entries past W are ignored): the
    stack loaded (WP, BLOCK), its sum and max, then ``rank + 100`` stored and 1 added into the others."""
    bufs = multicast_like(res, table[:W], shape=(n,), ptr_mask=tl.arange(0, WP) != rank)
    offs = tl.arange(0, BLOCK)
    rows = tl.arange(0, WP)
    tl.store(res + rows[:, None] * BLOCK + offs[None, :], bufs[offs])
    tl.store(res + WP * BLOCK + offs, tl.sum(bufs[offs], axis=0))
    tl.store(res + (WP + 1) * BLOCK + offs, tl.max(bufs[offs], axis=0))
    bufs[offs] = rank + 100
    tl.atomic_add(bufs[offs], 1, mask=offs < 2)


@triton.jit
def named_slice_with_mask(res, table, rank, LO: tl.constexpr, W: tl.constexpr, WP: tl.constexpr,
                          BLOCK: tl.constexpr):
    """A named slice ``table[LO:LO + W]`` with a ptr_mask held in a name: entries below ``rank`` only."""
    tile = table[LO:LO + W]
    below = tl.arange(0, WP) < rank
    bufs = multicast_like(res, tile, ptr_mask=below)
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, tl.min(tl.load(bufs[offs], mask=offs < 3, other=50), axis=0))
    old = tl.atomic_xchg(bufs[offs], offs)
    tl.store(res + BLOCK + offs, tl.sum(old, axis=0))  # of the old values: 0 in masked-off buffers


@triton.jit
def notify_others(flags, table, rank, W: tl.constexpr, WP: tl.constexpr):
    """Raise slot ``rank`` in every other rank's flags (a masked table slice), then wait on the W - 1 slots
    the others raised in this rank's (an element index over the padded extent: its own mask)."""
    pads = multicast_like(flags, table[:W], ptr_mask=tl.arange(0, WP) != rank)
    mine = multicast_like(flags, table[rank])
    cp.signal(pads[rank], value=1, wait_for=0)
    slots = tl.arange(0, WP)
    cp.wait(mine[slots], mask=(slots != rank) & (slots < W))


@triton.jit
def bf16_by_dtype(res, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """bfloat16 buffers named by their dtype (``tl.bfloat16``, no pointer): their stack sum in float32."""
    bufs = multicast_like(tl.bfloat16, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, tl.sum(bufs[offs].to(tl.float32), axis=0))


@triton.jit
def int32_by_dtype(res, table, rank, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """int32 buffers named ``int32`` (imported from triton.language) and ``triton.language.int32``: a
    compare-and-swap over a padded slice, and over one peer."""
    bufs = multicast_like(int32, table[:W], shape=(n,))
    one = multicast_like(triton.language.int32, table[rank], shape=(n,))
    offs = tl.arange(0, BLOCK)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * BLOCK + offs[None, :], tl.atomic_cas(bufs[offs], offs, offs + 40))
    tl.store(res + triton.next_power_of_2(W) * BLOCK + offs, tl.atomic_cas(one[offs], offs + 40, -1))


@triton.jit
def float32_tile_by_dtype(res, table, rank, n, BLOCK: tl.constexpr):
    """A rank-0 tensor tile with a dtype example: loads and a store."""
    one = multicast_like(tl.float32, tl.load(table + rank), shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, one[offs] + 1)
    one[offs] = 3.5
