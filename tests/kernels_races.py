"""Kernels for the race checker's tests (tests/test_races.py): each is correct, or carries one ordering bug that
a constexpr turns on; the comments ``# race: ...`` mark the lines a race report must name (docs/races.md)."""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def meet(
    pad,
    pad_ptrs,
    slot,
    rank,
    WORLD: tl.constexpr,
    WP: tl.constexpr,
    SIGNAL_SEM: tl.constexpr,
    WAIT_SEM: tl.constexpr,
    SCOPE: tl.constexpr,
):
    """Every rank meets every other at flags ``slot .. slot + WORLD`` of the pads; they are left zero."""
    pads = multicast_like(pad, pad_ptrs[:WORLD])
    peers = tl.arange(0, WP)
    castpile.signal(pads[slot + rank], value=1, wait_for=0, sem=SIGNAL_SEM, scope=SCOPE)  # race: signal
    castpile.wait(pad + slot + peers, value=1, reset=0, sem=WAIT_SEM, scope=SCOPE, mask=peers < WORLD)  # race: wait


@triton.jit
def one_shot(
    buf,
    buf_ptrs,
    pad,
    pad_ptrs,
    out,
    n,
    rank,
    WORLD: tl.constexpr,
    WP: tl.constexpr,
    BLOCK: tl.constexpr,
    CLOSING: tl.constexpr,
):
    """``out = sum of every rank's buf``; without ``CLOSING`` a rank may return (and write its buffer for the next
    call) while a peer still reads it."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,))
    meet(pad, pad_ptrs, 0, rank, WORLD, WP, "relaxed", "relaxed", "sys")
    offs = tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs], axis=0)  # race: one-shot load
    tl.store(out + offs, total, mask=offs < n)
    if CLOSING:
        meet(pad, pad_ptrs, WORLD, rank, WORLD, WP, "release", "acquire", "sys")


@triton.jit
def publish(
    buf,
    buf_ptrs,
    pad,
    pad_ptrs,
    x,
    out,
    n,
    rank,
    WORLD: tl.constexpr,
    WP: tl.constexpr,
    BLOCK: tl.constexpr,
    SIGNAL_SEM: tl.constexpr,
    SCOPE: tl.constexpr,
    EARLY: tl.constexpr,
):
    """Every rank writes its row ``x`` into row ``rank`` of every rank's buffer, signals, waits for every peer and
    copies the rows it received to ``out``.  ``SIGNAL_SEM`` other than release, ``SCOPE`` narrower than sys, or the
    signal ``EARLY`` (before the store it announces) leave the store and the peers' loads unordered."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(WORLD, n))
    pads = multicast_like(pad, pad_ptrs[:WORLD])
    peers = tl.arange(0, WP)
    offs = tl.arange(0, BLOCK)
    row = tl.load(x + offs, mask=offs < n)
    if EARLY:
        castpile.signal(pads[rank], value=1, wait_for=0, sem=SIGNAL_SEM, scope=SCOPE)  # race: early signal
        bufs[rank, offs] = row[None, :]  # race: late store
    else:
        bufs[rank, offs] = row[None, :]  # race: publish store
        castpile.signal(pads[rank], value=1, wait_for=0, sem=SIGNAL_SEM, scope=SCOPE)  # race: publish signal
    castpile.wait(pad + peers, value=1, reset=0, sem="acquire", scope=SCOPE, mask=peers < WORLD)  # race: publish wait
    rows = peers[:, None]
    got = tl.load(buf + rows * n + offs[None, :], mask=(rows < WORLD) & (offs[None, :] < n))  # race: publish load
    tl.store(out + rows * n + offs[None, :], got, mask=(rows < WORLD) & (offs[None, :] < n))
    meet(pad, pad_ptrs, WORLD, rank, WORLD, WP, "release", "acquire", "sys")


@triton.jit
def push_sum(
    buf,
    buf_ptrs,
    scratch,
    scratch_ptrs,
    pad,
    pad_ptrs,
    x,
    n,
    rank,
    WORLD: tl.constexpr,
    WP: tl.constexpr,
    BLOCK: tl.constexpr,
    MIDDLE: tl.constexpr,
):
    """A two-shot all-reduce by pushes: ``x`` holds WORLD chunks of n; chunk q goes to row ``rank`` of rank q's
    scratch, rank q sums its rows and writes the sum into chunk q of every rank's ``buf``.  Without ``MIDDLE``, the
    barrier between the phases, a rank sums its rows before its peers' pushes are ordered before it."""
    scratches = multicast_like(scratch, scratch_ptrs[:WORLD], shape=(WORLD, n))
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(WORLD, n))
    rows = tl.arange(0, WP)[:, None]
    offs = tl.arange(0, BLOCK)
    live = (rows < WORLD) & (offs[None, :] < n)
    chunks = tl.load(x + rows * n + offs[None, :], mask=live)
    scratches[rank, offs] = chunks  # race: push store
    if MIDDLE:
        meet(pad, pad_ptrs, 0, rank, WORLD, WP, "release", "acquire", "sys")
    mine = tl.load(scratch + rows * n + offs[None, :], mask=live, other=0.0)  # race: push load
    bufs[rank, offs] = tl.sum(mine, axis=0)[None, :]
    meet(pad, pad_ptrs, WORLD, rank, WORLD, WP, "release", "acquire", "sys")


@triton.jit
def neighbour_put(
    buf,
    buf_ptrs,
    pad,
    pad_ptrs,
    n,
    rank,
    WORLD: tl.constexpr,
    WP: tl.constexpr,
    BLOCK: tl.constexpr,
    SPLIT: tl.constexpr,
):
    """Two programs write ``rank + 1`` into the next rank's buffer: halves of it with ``SPLIT``, else both the same
    elements."""
    peer = (rank + 1) % WORLD
    dst = tl.load(buf_ptrs + peer).to(tl.pointer_type(tl.float32))
    offs = tl.arange(0, BLOCK)
    start = tl.program_id(0) * BLOCK if SPLIT else 0
    value = tl.zeros([BLOCK], tl.float32) + (rank + 1)
    tl.store(dst + start + offs, value, mask=start + offs < n)  # race: neighbour store
    meet(pad, pad_ptrs, tl.program_id(0) * WORLD, rank, WORLD, WP, "release", "acquire", "sys")


@triton.jit
def epoch_ring(
    buf, buf_ptrs, pad, pad_ptrs, x, out, epoch, n, rank, WORLD: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr
):
    """Each rank writes ``x`` into the next rank's buffer and raises that rank's flag 0 to ``epoch``; it waits for
    its own flag 0 to reach ``epoch`` (left as it is), copies its buffer to ``out``, and meets every rank.  An epoch
    not advanced between calls lets the wait pass on the last call's value."""
    peer = (rank + 1) % WORLD
    dst = tl.load(buf_ptrs + peer).to(tl.pointer_type(tl.float32))
    flag = tl.load(pad_ptrs + peer).to(tl.pointer_type(tl.int32))
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)  # race: ring store
    castpile.signal(flag, value=epoch, op="set")
    castpile.wait(pad, value=epoch, cmp="ge", reset=None)
    got = tl.load(buf + offs, mask=offs < n)  # race: ring load
    tl.store(out + offs, got, mask=offs < n)
    meet(pad, pad_ptrs, 1, rank, WORLD, WP, "release", "acquire", "sys")
