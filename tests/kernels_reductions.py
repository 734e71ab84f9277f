"""Kernels for stack reductions (transpiled and run by tests/test_reductions.py): tl.sum's ``dtype=``,
``return_indices=``, constexpr masks, rank-0 tiles and scalar indices, and the elementwise steps that may
stand between an access and its reduction."""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def int8_sums(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """int32 buffers: rows of ``out`` get the stack sum of the values as int8 (wrapping) in int32, the sum in int8,
    the int8 values summed as tl.sum picks (int32), the max of the int8 values; then the first two over a tile."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    p = tl.arange(0, triton.next_power_of_2(W))
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W)
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.sum(bufs[o].to(tl.int8), axis=0, dtype=tl.int32))
    tl.store(out + 1 * B + o, tl.sum(bufs[o], axis=0, dtype=tl.int8))
    tl.store(out + 2 * B + o, tl.sum(bufs[o].to(tl.int8), axis=0))
    tl.store(out + 3 * B + o, tl.max(bufs[o].to(tl.int8), axis=0))
    tl.store(out + 4 * B + o, tl.sum(tile[o].to(tl.int8), axis=0, dtype=tl.int32))
    tl.store(out + 5 * B + o, tl.sum(tile[o], axis=0, dtype=tl.int8))


@triton.jit
def half_sum(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """float32 buffers rounded to float16, then summed in float32 (``.to`` then ``dtype=``), as a method too."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    o = tl.arange(0, B)
    tl.store(out + o, tl.sum(bufs[o].to(tl.float16), axis=0, dtype=tl.float32))
    tl.store(out + B + o, bufs[o].to(tl.float16).sum(axis=0, dtype=tl.float32))


@triton.jit
def extrema_indices(values, at, table, n, OP: tl.constexpr, LEFT: tl.constexpr, W: tl.constexpr, B: tl.constexpr):
    """Rows of ``values`` / ``at``: the max (or min) over the stack and the buffer position it comes from, for the
    table, for a tile whose position 0 ``ptr_mask`` turns off, then both with ``keep_dims=True``."""
    bufs = multicast_like(values, table[:W], shape=(n,))
    p = tl.arange(0, triton.next_power_of_2(W))
    tile = multicast_like(values, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=(p < W) & (p > 0))
    o = tl.arange(0, B)
    if OP == "max":
        v0, i0 = tl.max(bufs[o], axis=0, return_indices=True, return_indices_tie_break_left=LEFT)
        v1, i1 = tl.max(tile[o], axis=0, return_indices=True, return_indices_tie_break_left=LEFT)
        v2, i2 = tl.max(bufs[o], 0, True, LEFT, True)
        v3, i3 = tl.max(tile[o], axis=0, return_indices=True, return_indices_tie_break_left=LEFT, keep_dims=True)
    else:
        v0, i0 = tl.min(bufs[o], axis=0, return_indices=True, return_indices_tie_break_left=LEFT)
        v1, i1 = tl.min(tile[o], axis=0, return_indices=True, return_indices_tie_break_left=LEFT)
        v2, i2 = bufs[o].min(0, True, LEFT, True)
        v3, i3 = tile[o].min(0, True, LEFT, keep_dims=True)
    tl.store(values + o, v0)
    tl.store(at + o, i0)
    tl.store(values + B + o, v1)
    tl.store(at + B + o, i1)
    tl.store(values + 2 * B + o[None, :], v2)
    tl.store(at + 2 * B + o[None, :], i2)
    tl.store(values + 3 * B + o[None, :], v3)
    tl.store(at + 3 * B + o[None, :], i3)


@triton.jit
def constexpr_masks(out, table, n, EVEN: tl.constexpr, W: tl.constexpr, B: tl.constexpr):
    """Reductions of loads whose mask is a constexpr bool: table and tile, with and without ``keep_dims``."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    p = tl.arange(0, triton.next_power_of_2(W))
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W)
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.sum(tl.load(bufs[o], mask=EVEN), axis=0))
    tl.store(out + 1 * B + o, tl.max(tl.load(tile[o], mask=EVEN, other=-1), axis=0))
    tl.store(out + 2 * B + o[None, :], tl.sum(tl.load(bufs[o], mask=EVEN), axis=0, keep_dims=True))
    tl.store(out + 3 * B + o[None, :], tl.min(tl.load(tile[o], mask=EVEN), axis=0, keep_dims=True))


@triton.jit
def one_peer(out, table, r, n, W: tl.constexpr, B: tl.constexpr):
    """A rank-0 tile (P = ()): its axis-0 reductions are ordinary ones over the elements (lanes past n hold 0);
    scalar indices: a stack reduction of one element, for the table and a tile."""
    one = multicast_like(out, tl.load(table + r), shape=(n,))
    bufs = multicast_like(out, table[:W], shape=(n,))
    p = tl.arange(0, triton.next_power_of_2(W))
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W)
    o = tl.arange(0, B)
    tl.store(out + 0, tl.sum(one[o], axis=0))
    tl.store(out + 1, tl.max(one[o], axis=0))
    m, i = tl.min(one[o], axis=0, return_indices=True)
    tl.store(out + 2, m)
    tl.store(out + 3, i)
    tl.store(out + 4, tl.sum(bufs[3], axis=0))
    tl.store(out + 5, tl.max(tile[3], axis=0))
    tl.store(out + 6, tl.min(tl.load(bufs[2], mask=True), axis=0))


@triton.jit
def elementwise_steps(out, example, table, n, S: tl.constexpr, W: tl.constexpr, B: tl.constexpr):
    """Casts and arithmetic with literals and constexprs between an access and its reduction (rows of ``out``)."""
    bufs = multicast_like(example, table[:W], shape=(n,))
    p = tl.arange(0, triton.next_power_of_2(W))
    tile = multicast_like(example, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W)
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.sum(bufs[o].to(tl.float32) * 2.0 + 1, axis=0))
    tl.store(out + 1 * B + o, tl.max(-bufs[o], axis=0))
    tl.store(out + 2 * B + o, tl.min(S - bufs[o], axis=0))
    tl.store(out + 3 * B + o, tl.sum(3 * (tl.load(bufs[o], mask=o < n - 2, other=7) - 1), axis=0))
    tl.store(out + 4 * B + o, tl.sum(bufs[o] / 4, axis=0))
    tl.store(out + 5 * B + o, (-(tile[o] * S)).max(axis=0))


@triton.jit
def table_reductions(values, at, table, n, W: tl.constexpr, B: tl.constexpr):
    """A table's reductions only (tests/test_reductions.py also runs it with ``remote="nvshmem"``): a wrapping cast
    summed with ``dtype=``, and the max of the negated buffers with its positions."""
    bufs = multicast_like(values, table[:W], shape=(n,))
    o = tl.arange(0, B)
    tl.store(values + o, tl.sum((bufs[o] * 3).to(tl.int8), axis=0, dtype=tl.int32))
    v, i = tl.max(-bufs[o], axis=0, return_indices=True)
    tl.store(values + B + o, v)
    tl.store(at + o, i)
