"""Kernels for the stack reductions of language v1.3 (transpiled and run by tests/test_reductions_v13.py):
``tl.reduce`` with the module's own combine functions, ``tl.xor_sum``, ``tl.reduce_or``, ``tl.argmax`` and
``tl.argmin`` over axis 0 of an access, each over a table and a tile whose ``ptr_mask`` is a run-time bit set."""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def bit_and(a, b):
    return a & b


@triton.jit
def bit_or(a, b):
    return a | b


@triton.jit
def first(a, b):
    """Associative, not commutative: the reduction gives the first valid buffer's value."""
    return a


@triton.jit
def last(a, b):
    """Associative, not commutative: the reduction gives the last valid buffer's value."""
    return b


@triton.jit
def bitwise(out, table, bits, n, W: tl.constexpr, B: tl.constexpr):
    """Rows of ``out`` (int32 buffers): and, or, xor over the buffers whose bit of ``bits`` is set, in every
    spelling, for the table (rows 0-6) and a tile (rows 7-10)."""
    p = tl.arange(0, triton.next_power_of_2(W))
    chosen = ((bits >> p) & 1) != 0
    bufs = multicast_like(out, table[:W], shape=(n,), ptr_mask=chosen)
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=chosen & (p < W))
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.reduce(bufs[o], 0, bit_and))
    tl.store(out + 1 * B + o, tl.reduce(bufs[o], axis=0, combine_fn=bit_or))
    tl.store(out + 2 * B + o, tl.xor_sum(bufs[o], 0))
    tl.store(out + 3 * B + o, tl.reduce_or(bufs[o], axis=0))
    tl.store(out + 4 * B + o, bufs[o].reduce(0, bit_and))
    tl.store(out + 5 * B + o, bufs[o].xor_sum(axis=0))
    tl.store(out + 6 * B + o[None, :], tl.reduce(bufs[o], 0, bit_and, keep_dims=True))
    tl.store(out + 7 * B + o, tl.reduce(tile[o], 0, bit_and))
    tl.store(out + 8 * B + o, tl.xor_sum(tile[o], axis=0))
    tl.store(out + 9 * B + o, tile[o].reduce_or(0))
    tl.store(out + 10 * B + o[None, :], tl.reduce(input=tile[o], axis=0, combine_fn=bit_or, keep_dims=True))


@triton.jit
def ordered(out, table, bits, n, W: tl.constexpr, B: tl.constexpr):
    """Rows of ``out`` (float32 buffers): the first and the last valid buffer's values (through a cast and a
    scalar step, and of a masked load), for the table (rows 0-2) and a tile (rows 3-5)."""
    p = tl.arange(0, triton.next_power_of_2(W))
    chosen = ((bits >> p) & 1) != 0
    bufs = multicast_like(out, table[:W], shape=(n,), ptr_mask=chosen)
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=chosen & (p < W))
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.reduce(bufs[o], 0, first))
    tl.store(out + 1 * B + o, tl.reduce(bufs[o].to(tl.int32) * 2, 0, last))
    tl.store(out + 2 * B + o, tl.reduce(tl.load(bufs[o], mask=o < n - 2, other=-5.0), 0, last))
    tl.store(out + 3 * B + o, tl.reduce(tile[o], 0, first))
    tl.store(out + 4 * B + o, tl.reduce(tile[o].to(tl.int32) * 2, 0, last))
    tl.store(out + 5 * B + o, tl.reduce(tl.load(tile[o], mask=o < n - 2, other=-5.0), 0, last))


@triton.jit
def positions(out, table, bits, n, W: tl.constexpr, B: tl.constexpr):
    """Rows of ``out`` (float32 buffers): argmax and argmin over the valid buffers, for the table (rows 0-2) and a
    tile (rows 3-5), in positional, keyword, method and ``keep_dims`` spellings."""
    p = tl.arange(0, triton.next_power_of_2(W))
    chosen = ((bits >> p) & 1) != 0
    bufs = multicast_like(out, table[:W], shape=(n,), ptr_mask=chosen)
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=chosen & (p < W))
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.argmax(bufs[o], 0))
    tl.store(out + 1 * B + o, tl.argmin(bufs[o] * 2, axis=0, tie_break_left=True))
    tl.store(out + 2 * B + o[None, :], bufs[o].argmax(0, keep_dims=True))
    tl.store(out + 3 * B + o, tl.argmax(tile[o], 0))
    tl.store(out + 4 * B + o, tile[o].argmin(axis=0))
    tl.store(out + 5 * B + o[None, :], tl.argmin(tile[o], 0, True, True))


@triton.jit
def functions(out, table, bits, n, W: tl.constexpr, B: tl.constexpr):
    """Rows of ``out`` (float32 buffers): reductions of the access taken through Triton's elementwise math (a sum
    of exponentials, a max of negated absolute values of a masked load, a min of square roots after a step), for
    the table (rows 0-2) and a tile (rows 3-5): exp(0) = 1 of a padded or ``ptr_mask``-false buffer takes no part."""
    p = tl.arange(0, triton.next_power_of_2(W))
    chosen = ((bits >> p) & 1) != 0
    bufs = multicast_like(out, table[:W], shape=(n,), ptr_mask=chosen)
    tile = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=chosen & (p < W))
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.sum(tl.exp(bufs[o]), axis=0))
    tl.store(out + 1 * B + o, tl.max(-tl.abs(tl.load(bufs[o], mask=o < n, other=0)), axis=0))
    tl.store(out + 2 * B + o, tl.min(tl.sqrt(bufs[o] * 2.0 + 20.0), axis=0))
    tl.store(out + 3 * B + o, tl.sum(tl.exp(tile[o]), axis=0))
    tl.store(out + 4 * B + o, tl.max(-tl.abs(tl.load(tile[o], mask=o < n, other=0)), axis=0))
    tl.store(out + 5 * B + o, tl.min(tl.sqrt(tile[o] * 2.0 + 20.0), axis=0))


@triton.jit
def table_only(out, table, bits, n, W: tl.constexpr, B: tl.constexpr):
    """A table's reductions only (tests/test_reductions_v13.py also runs it with ``remote="nvshmem"``), rows of
    ``out`` (int32 buffers): and, xor, or, the last valid buffer's value doubled, argmax."""
    p = tl.arange(0, triton.next_power_of_2(W))
    bufs = multicast_like(out, table[:W], shape=(n,), ptr_mask=((bits >> p) & 1) != 0)
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.reduce(bufs[o], 0, bit_and))
    tl.store(out + 1 * B + o, tl.xor_sum(bufs[o], axis=0))
    tl.store(out + 2 * B + o, bufs[o].reduce_or(0))
    tl.store(out + 3 * B + o, tl.reduce(bufs[o] * 2, 0, last))
    tl.store(out + 4 * B + o, tl.argmax(bufs[o], 0))


@triton.jit
def tile_rows(out, table, bits, n, R: tl.constexpr, C: tl.constexpr, B: tl.constexpr):
    """An (R, C) tile of int32 buffers, entry (r, c) valid where bit r * C + c of ``bits`` is set: rows of ``out``
    get the and, then the xor, over axis 0 (the R dim), each (C, B)."""
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    tile = multicast_like(out, tl.load(table + r * C + c), shape=(n,), ptr_mask=((bits >> (r * C + c)) & 1) != 0)
    o = tl.arange(0, B)
    where = tl.arange(0, C)[:, None] * B + o[None, :]
    tl.store(out + where, tl.reduce(tile[o], 0, bit_and))
    tl.store(out + C * B + where, tl.xor_sum(tile[o], 0))
