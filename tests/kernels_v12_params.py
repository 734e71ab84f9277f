"""Kernels of tests/test_language_v12_params.py: multicast tensors passed to @triton.jit helpers through
parameters annotated castpile.Multicast (every import form), run on simulated ranks."""

import triton
import triton.language as tl

import castpile as cp
from castpile import Multicast
from castpile import Multicast as MC


@triton.jit
def meet(pads: cp.Multicast, pad, rank, WORLD: tl.constexpr):
    """Every rank's block 0 meets here: slot ``rank`` of every rank's pad set, then this rank's slots awaited."""
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    cp.signal(pads[rank], value=1, wait_for=0, sem="release", scope="sys")
    cp.wait(pad + peers, value=1, reset=0, sem="acquire", scope="sys", mask=peers < WORLD)


@triton.jit
def stack_total(bufs: Multicast, offs):
    """The sum over the valid buffers of ``bufs[offs]``, in fp32."""
    return tl.sum(bufs[offs].to(tl.float32), axis=0)


@triton.jit
def total_into(out, bufs: MC, n, BLOCK: tl.constexpr):
    """``out[:n]`` = the sum of the buffers' first ``n`` elements (``bufs`` passed on to another helper)."""
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, stack_total(bufs, offs), mask=offs < n)


@triton.jit
def push_row(rows: cp.Multicast, rank, row, BLOCK: tl.constexpr):
    """``row`` stored as row ``rank`` of every buffer (the stores' bounds: the binding's shape)."""
    rows[rank, tl.arange(0, BLOCK)] = row[None, :]


@triton.jit
def all_reduce_gather(x, buf, buf_ptrs, pad, pad_ptrs, sums, others, gathered, gathered_ptrs, rank, n,
                      WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``x`` written to this rank's ``buf``; once every rank has: ``sums`` = the sum of every rank's ``buf`` (a
    table), ``others`` = that of every other rank's (a tile and ptr_mask, through the same helper), and ``x`` as row
    ``rank`` of every rank's ``gathered`` (WORLD, n)."""
    cols = tl.arange(0, BLOCK)
    row = tl.load(x + cols, mask=cols < n)
    tl.store(buf + cols, row, mask=cols < n)
    pads = cp.multicast_like(pad, pad_ptrs[:WORLD])
    meet(pads, pad, rank, WORLD)
    bufs = cp.multicast_like(buf, buf_ptrs[:WORLD], shape=(n,))
    total_into(sums, bufs, n, BLOCK)
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tile = tl.load(buf_ptrs + peers, mask=peers < WORLD, other=0)
    rest = cp.multicast_like(buf, tile, shape=(n,), ptr_mask=(peers < WORLD) & (peers != rank))
    total_into(others, rest, n, BLOCK)
    outs = cp.multicast_like(gathered, gathered_ptrs[:WORLD], shape=(WORLD, n))
    push_row(outs, rank, row, BLOCK)


@triton.jit
def column_total(grid: cp.Multicast, j, m, BLOCK: tl.constexpr):
    """Column ``j`` of every buffer, summed over the buffers."""
    rows = tl.arange(0, BLOCK)
    return tl.sum(tl.load(grid[rows, j], mask=rows < m, other=0.0), axis=0)


@triton.jit
def count_into(counters: cp.Multicast, offs, v):
    """``v`` added to ``counters[offs]`` of every buffer; the old values."""
    return tl.atomic_add(counters[offs], v)


@triton.jit
def columns_and_counters(src, table, ctr, ctr_ptrs, out, rank, m, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``src`` holds an (n, m) array, bound as its (m, n) transpose: row j of ``out`` = column j of the transposed
    arrays, summed over the ranks; ``rank + 1`` added to every counter of ranks 1 .. WORLD - 1."""
    grid = cp.multicast_like(src, table[:WORLD], shape=(m, n), strides=(1, m))
    rows = tl.arange(0, BLOCK)
    j = 0
    while j < n:
        tl.store(out + j * BLOCK + rows, column_total(grid, j, m, BLOCK))
        j += 1
    counters = cp.multicast_like(ctr, ctr_ptrs[1:WORLD], shape=(BLOCK,))
    _old = count_into(counters, rows, rank + 1)


@triton.jit
def stamp_next(flags, table, rank, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``rank + 1`` into the next rank's ``flags``: one peer (a rank-0 tile), through a helper defined further on."""
    following = cp.multicast_like(flags, tl.load(table + (rank + 1) % WORLD))
    fill(following, rank + 1, BLOCK)


@triton.jit
def fill(one: cp.Multicast, value, BLOCK: tl.constexpr):
    """``value`` into the first ``BLOCK`` elements of the one buffer."""
    one[tl.arange(0, BLOCK)] = value


@triton.jit
def window_total(bufs: cp.Multicast, ctr, BLOCK: tl.constexpr):
    """The buffers' elements from ``*ctr`` on (read by an atomic: an index evaluated once), summed over the buffers."""
    return tl.sum(bufs[tl.arange(0, BLOCK) + tl.atomic_add(ctr, 0)], axis=0)


@triton.jit
def with_and_without_shape(src, table, ctr, out, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Row 0 of ``out``: ``window_total`` of the buffers bound with shape=(n,) (masked to n); row 1: bound without
    shape= (not masked), through the same helper."""
    lanes = tl.arange(0, BLOCK)
    shaped = cp.multicast_like(src, table[:WORLD], shape=(n,))
    tl.store(out + lanes, window_total(shaped, ctr, BLOCK))
    flat = cp.multicast_like(src, table[:WORLD])
    tl.store(out + BLOCK + lanes, window_total(flat, ctr, BLOCK))
