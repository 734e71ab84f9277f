"""Kernels for the defects of language v1.1 (transpiled and run by tests/test_language_v11.py)."""

import triton
import triton.language as tl
from triton.language import atomic_add, load
from triton.language import sum as tl_sum

import castpile
from castpile import multicast_like


@triton.jit
def cube_load(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """out[j, a] = buffer j viewed as (n, n, n) at [1, 2, a], and at element (a // 2) * (a // 2)."""
    bufs = multicast_like(out, table[:W], shape=(n, n, n))
    flat = multicast_like(out, table[:W])
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * B + a[None, :], bufs[1, 2, a])
    h = a // 2
    tl.store(out + (rows[:, None] + triton.next_power_of_2(W)) * B + a[None, :], flat[h * h])


@triton.jit
def load_at_counter(out, table, ctr, n, W: tl.constexpr):
    """out[j] = buffer j at the slot one atomic_add on ctr hands out (bounds checked on that slot)."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows, bufs[tl.atomic_add(ctr, 1)])


@triton.jit
def flat_at_counter(out, table, ctr, W: tl.constexpr):
    """Without shape= (no bounds): out[j] = buffer j at the slot one atomic_add hands out."""
    bufs = multicast_like(out, table[:W])
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows, bufs[tl.atomic_add(ctr, 1)])


@triton.jit
def bump_at_counter(out, table, ctr, n, W: tl.constexpr):
    """bufs[slot] += 1 at one slot from ctr, then tl.load and tl.atomic_add at fresh slots."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    bufs[tl.atomic_add(ctr, 1)] += 1
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows, tl.load(bufs[tl.atomic_add(ctr, 1)], mask=tl.atomic_add(ctr, 100) >= 0))
    tl.atomic_add(bufs[tl.atomic_add(ctr, 1)], 5)


@triton.jit
def store_value_first(out, table, ctr, n, W: tl.constexpr):
    """bufs[i] = v with side effects in both: v is evaluated first, as Python does."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    bufs[tl.atomic_add(ctr, 1)] = tl.atomic_add(ctr, 10)


@triton.jit
def lookalike_names(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """Indices that use names like castpile's own."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    _cp0 = 1
    _cp1 = 2
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * B + a[None, :], bufs[(a // 2) + _cp0 * _cp1])


@triton.jit
def _castpile_load_loop(x):
    """A user function with the name of a castpile helper."""
    return x + 1


@triton.jit
def helper_lookalike(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows, _castpile_load_loop(bufs[0]))


def make_kernel():
    """A kernel made by a factory, castpile imported inside it."""
    from castpile import multicast_like as mcl

    @triton.jit
    def made(out, table, W: tl.constexpr):
        bufs = mcl(out, table[:W])
        rows = tl.arange(0, triton.next_power_of_2(W))
        tl.store(out + rows, bufs[1])

    return made


@triton.jit
def full_extent(out, table, M: tl.constexpr, N: tl.constexpr, W: tl.constexpr):
    """out = bufs[...] (P, M, N) then bufs[1, ...] (P, N) after it."""
    bufs = multicast_like(out, table[:W], shape=(M, N))
    P: tl.constexpr = triton.next_power_of_2(W)
    p = tl.arange(0, P)
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    tl.store(out + p[:, None, None] * M * N + m[None, :, None] * N + n[None, None, :], bufs[...])
    tl.store(out + P * M * N + p[:, None] * N + n[None, :], bufs[1, ...])


@triton.jit
def named_slice(out, table, W: tl.constexpr):
    """A table slice bound to a name first, then passed as ptr_tile."""
    tile = table[1:W]
    bufs = multicast_like(out, tile)
    rows = tl.arange(0, triton.next_power_of_2(W - 1))
    tl.store(out + rows, bufs[0])


@triton.jit
def group_sums(out, table, n, R: tl.constexpr, C: tl.constexpr, B: tl.constexpr):
    """out[r, a] = sum of buffers r*C .. (r+1)*C - 1 at a: slice bounds from a static_range variable."""
    a = tl.arange(0, B)
    for r in tl.static_range(R):
        group = multicast_like(out, table[r * C:(r + 1) * C], shape=(n,))
        tl.store(out + r * B + a, tl.sum(group[a], axis=0))


@triton.jit
def stack_extrema(out, example, table, n, OP: tl.constexpr, W: tl.constexpr, B: tl.constexpr):
    """tl.max / tl.min over the stack: table form, and a tile form with ptr_mask."""
    bufs = multicast_like(example, table[:W], shape=(n,))
    p = tl.arange(0, triton.next_power_of_2(W))
    tile = multicast_like(example, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W)
    a = tl.arange(0, B)
    if OP == "max":
        tl.store(out + a, tl.max(bufs[a], axis=0))
        tl.store(out + B + a, tl.max(tile[a], axis=0))
    else:
        tl.store(out + a, tl.min(bufs[a], axis=0))
        tl.store(out + B + a, tl.min(tile[a], axis=0))


@triton.jit
def scatter_add_unused(example, table, n, W: tl.constexpr, B: tl.constexpr):
    """A scatter-add whose old values are never used."""
    bufs = multicast_like(example, table[:W], shape=(W, n))
    cols = tl.arange(0, B)
    for r in tl.static_range(W):
        tl.atomic_add(bufs[r, cols], 1.0, mask=cols < n, sem="relaxed")


@triton.jit
def scatter_add_by_hand(example, table, n, W: tl.constexpr, B: tl.constexpr):
    """The same scatter-add written by hand: a loop over the peers' addresses."""
    cols = tl.arange(0, B)
    for r in tl.static_range(W):
        for p in tl.static_range(W):
            peer = tl.load(table + p).to(tl.pointer_type(tl.float32))
            tl.atomic_add(peer + r * n + cols, 1.0, mask=cols < n, sem="relaxed")


@triton.jit
def bump_multiline(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """bufs[o] -= (o - 5) with the value over two lines: its parentheses stay."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    o = tl.arange(0, B)
    bufs[o] -= (o -
                5)


@triton.jit
def extrema_spellings(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """Every spelling of a stack max: each row of out gets the max over the W valid buffers."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.max(bufs[o].to(dtype=tl.float32), axis=0))
    tl.store(out + 1 * B + o, tl.max(bufs[o].to(tl.float32, bitcast=False), axis=0))
    tl.store(out + 2 * B + o, tl.max(input=bufs[o], axis=0))
    tl.store(out + 3 * B + o, bufs[o].max(axis=0))
    tl.store(out + 4 * B + o[None, :], tl.max(bufs[o], axis=0, keep_dims=True))
    tl.store(out + 5 * B + o, tl.sum(bufs[o], 0, dtype=tl.float32))
    tl.store(out + 6 * B + o, tl_sum(bufs[o], axis=0))


@triton.jit
def direct_imports(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """triton.language functions imported by name: load, atomic_add."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    o = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * B + o[None, :], load(bufs[o], mask=o < 3, other=-1.0))
    atomic_add(bufs[o], 1.0, mask=o < 2)


@triton.jit
def masked_old_values(out, table, n, W: tl.constexpr, B: tl.constexpr):
    """The old values an atomic returns: 0 in masked-off lanes, under both strategies."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    o = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * B + o[None, :], tl.atomic_add(bufs[o], 1.0, mask=o < 2))


@triton.jit
def keywords_in_source_order(out, table, ctr, n, W: tl.constexpr, B: tl.constexpr):
    """Keyword arguments with side effects, written out of the contract's order, run in the order written."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    o = tl.arange(0, B)
    tl.atomic_add(bufs[o], mask=o < tl.atomic_add(ctr, 1), val=tl.atomic_add(ctr, 1).to(tl.float32))


@triton.jit
def flags_in_source_order(flags, table, ctr, W: tl.constexpr):
    """signal and wait with side-effecting keywords written out of the helper's order, a default between them:
    each runs once, in the order written (ctr counts 0, 1, ... through them)."""
    f = multicast_like(flags, table[:W], shape=(4,))
    castpile.signal(f[0], mask=tl.atomic_add(ctr, 1) == 0, value=tl.atomic_add(ctr, 1) + 10)  # 0 == 0; 1 + 10
    castpile.signal(f[1], mask=tl.atomic_add(ctr, 1) == 2, wait_for=tl.atomic_add(ctr, 1) - 3)  # 2 == 2; 3 - 3
    castpile.wait(f[2], mask=tl.atomic_add(ctr, 1) == 4, value=tl.atomic_add(ctr, 1) + 2)  # 4 == 4; 5 + 2
