"""A DeepEP-style exchange of variable-length parts: the receiver takes each sender's count from its wait.

Each rank sends ``counts[dst]`` rows of ``H`` elements to every rank ``dst`` (itself included): it
writes them into slot ``rank`` of ``dst``'s receive buffer (up to ``CAP`` rows a slot), then sets
``dst``'s flag ``rank`` to the count plus one (0 means "not yet"), as DeepEP's low-latency dispatch
announces its counts.  The receiver waits until every sender's flag is at least 1 and takes the
counts from what the wait saw (``got = castpile.wait(...)``: the flags' values, read by the
acquiring load, before the wait resets them to 0), then packs the rows in sender order.
"""

import triton
import triton.language as tl

import castpile as cp


@triton.jit
def send(
    parts, counts, recv, recv_ptrs, pad, pad_ptrs, rank, H, W: tl.constexpr, CAP: tl.constexpr, BLOCK_H: tl.constexpr
):
    """Send ``counts[dst]`` rows of ``parts[dst]`` (W, CAP, H) to every rank ``dst``, then announce the count."""
    rows = tl.arange(0, CAP)
    cols = tl.arange(0, BLOCK_H)
    for dst in tl.static_range(W):
        box = cp.multicast_like(recv, recv_ptrs[dst], shape=(W, CAP, H))  # dst's receive buffer
        flags = cp.multicast_like(pad, pad_ptrs[dst], shape=(W,))  # dst's flags
        c = tl.load(counts + dst)
        live = (rows[:, None] < c) & (cols[None, :] < H)
        part = tl.load(parts + (dst * CAP + rows[:, None]) * H + cols[None, :], mask=live)
        tl.store(box[rank, rows[:, None], cols[None, :]], part, mask=live)
        tl.debug_barrier()
        cp.signal(flags[rank], c + 1)


@triton.jit
def receive(out, total, recv, pad, H, W: tl.constexpr, WP: tl.constexpr, CAP: tl.constexpr, BLOCK_H: tl.constexpr):
    """Wait for every sender's count, then pack their rows into ``out`` in sender order; ``total[0]``: how many."""
    senders = tl.arange(0, WP)
    got = cp.wait(pad + senders, 1, cmp="ge", mask=senders < W)  # count + 1 from each sender; flags reset to 0
    tl.debug_barrier()
    counts = tl.where(senders < W, got - 1, 0)
    starts = tl.cumsum(counts, axis=0) - counts
    tl.store(total, tl.sum(counts, axis=0))
    rows = tl.arange(0, CAP)
    cols = tl.arange(0, BLOCK_H)
    for src in tl.static_range(W):
        c = tl.sum(tl.where(senders == src, counts, 0), axis=0)
        start = tl.sum(tl.where(senders == src, starts, 0), axis=0)
        live = (rows[:, None] < c) & (cols[None, :] < H)
        part = tl.load(recv + (src * CAP + rows[:, None]) * H + cols[None, :], mask=live)
        tl.store(out + (start + rows[:, None]) * H + cols[None, :], part, mask=live)
