"""Kernels for binding time and strides (contract v1.2, transpiled and run by tests/test_binding_time.py).

A binding's arguments are evaluated once, where it stands: names they use and rebind
afterwards change nothing about it.  Strides may be 0 or make index terms cancel.
Each kernel writes what it loads to ``res``, viewed as (P, B) or (P, BI, BJ) with P the
stack padded to a power of two.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def shape_rebound(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """res[j, a] = buffer j at a for a < n (n as at the binding); then buffer j's first n elements += 1."""
    bufs = multicast_like(res, table[:W], shape=(n,))
    n = n + 4
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * B + a[None, :], bufs[a])
    bufs[a] += 1.0


@triton.jit
def shape_rebound_in_loop(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """res[j, a] = buffer j at a counted once for a < n and once for a < n + 2 (each pass's own n)."""
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    acc = tl.zeros((triton.next_power_of_2(W), B), tl.float32)
    for _ in range(2):
        bufs = multicast_like(res, table[:W], shape=(n,))
        n = n + 2
        acc += bufs[a]
    tl.store(res + rows[:, None] * B + a[None, :], acc)


@triton.jit
def strides_rebound(res, table, n, s, W: tl.constexpr, B: tl.constexpr):
    """res[j, a] = buffer j at a * s for a < n (s as at the binding)."""
    bufs = multicast_like(res, table[:W], shape=(n,), strides=(s,))
    s = s + 1
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * B + a[None, :], bufs[a])


@triton.jit
def count_rebound(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """The stack has W buffers (W as at the binding); res as in shape_rebound."""
    bufs = multicast_like(res, table[:W], shape=(n,))
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    W = W * 2
    tl.store(res + rows[:, None] * B + a[None, :], bufs[a])


@triton.jit
def count_in_static_loop(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """Pass r of a static_range loop binds buffers r..W-1; a later loop rebinds r, so the count W - r is copied
    at the binding, once per unrolled pass: res[r, a] = the sum of buffers r..W-1 at a, for a < n."""
    a = tl.arange(0, B)
    for r in tl.static_range(W):
        tail = multicast_like(res, table[r:W], shape=(n,))
        tl.store(res + r * B + a, tl.sum(tail[a], axis=0))
    for r in tl.static_range(1):
        tl.store(res + W * B + a, tl.zeros((B,), tl.float32) + r)


@triton.jit
def example_bound_to_its_own_name(res, x, table, n, W: tl.constexpr, B: tl.constexpr):
    """``x = multicast_like(x, ...)``: the buffers have x's element type; res as in shape_rebound."""
    x = multicast_like(x, table[:W], shape=(n,))
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * B + a[None, :], x[a])


@triton.jit
def example_rebound(res, x, table, n, W: tl.constexpr, B: tl.constexpr):
    """The example's name rebound to a pointer of another type after the binding; res as in shape_rebound."""
    bufs = multicast_like(x, table[:W], shape=(n,))
    x = table
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * B + a[None, :], bufs[a])


@triton.jit
def out_bound_to_its_own_name(out, src, table, n, W: tl.constexpr, B: tl.constexpr):
    """``out = multicast_like(out, ...)``; out's own buffer read before the binding: every buffer's first n
    elements become src's plus the first element of out's buffer."""
    first = tl.load(out)
    out = multicast_like(out, table[:W], shape=(n,))
    a = tl.arange(0, B)
    out[a] = tl.load(src + a, mask=a < n) + first


@triton.jit
def tile_bound_to_its_own_name(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """A tensor tile bound to its own name, its ptr_mask read from it first: res as in shape_rebound."""
    P: tl.constexpr = triton.next_power_of_2(W)
    rows = tl.arange(0, P)
    tile = tl.load(table + rows, mask=rows < W, other=0)
    tile = multicast_like(res, tile, shape=(n,), ptr_mask=tile != 0)
    a = tl.arange(0, B)
    tl.store(res + rows[:, None] * B + a[None, :], tile[a])


@triton.jit
def table_and_alias_rebound(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """The table and a named slice of it rebound after the bindings: res rows 0..P-1 through the slice,
    rows P..2P-1 through the table (as in shape_rebound)."""
    P: tl.constexpr = triton.next_power_of_2(W)
    tile = table[:W]
    named = multicast_like(res, tile, shape=(n,))
    direct = multicast_like(res, table[:W], shape=(n,))
    table = table + W
    tile = table
    a = tl.arange(0, B)
    rows = tl.arange(0, P)
    tl.store(res + rows[:, None] * B + a[None, :], named[a])
    tl.store(res + (rows[:, None] + P) * B + a[None, :], direct[a])


@triton.jit
def zero_stride(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """strides=(0,): res[j, a] = buffer j at 0 for a < n; rows P..2P-1 the same without shape (every a)."""
    P: tl.constexpr = triton.next_power_of_2(W)
    bounded = multicast_like(res, table[:W], shape=(n,), strides=(0,))
    free = multicast_like(res, table[:W], strides=(0,))
    a = tl.arange(0, B)
    rows = tl.arange(0, P)
    tl.store(res + rows[:, None] * B + a[None, :], bounded[a])
    tl.store(res + (rows[:, None] + P) * B + a[None, :], free[a])


@triton.jit
def zero_stride_sum_and_atomic(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """strides=(0,): res[a] = the sum over the stack of element 0 for a < n; then element 0 of every
    buffer += n (one atomic add per lane in bounds)."""
    bufs = multicast_like(res, table[:W], shape=(n,), strides=(0,))
    a = tl.arange(0, B)
    tl.store(res + a, tl.sum(bufs[a], axis=0))
    tl.atomic_add(bufs[a], 1.0)


@triton.jit
def cancelling_strides(res, table, W: tl.constexpr, B: tl.constexpr):
    """strides=(1, 1), bufs[3 - j, j]: res[p, j] = buffer p at 3 for j < 4 (shape (4, 4)), 0 after."""
    bufs = multicast_like(res, table[:W], shape=(4, 4), strides=(1, 1))
    j = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * B + j[None, :], bufs[3 - j, j])


@triton.jit
def zero_row_stride_2d(res, table, m, n, W: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """strides=(0, 1) on a 2-D index: res[p, i, j] = buffer p at j for i < m, j < n, 0 elsewhere."""
    bufs = multicast_like(res, table[:W], shape=(m, n), strides=(0, 1))
    i = tl.arange(0, BI)
    j = tl.arange(0, BJ)
    rows = tl.arange(0, triton.next_power_of_2(W))
    at = rows[:, None, None] * BI * BJ + i[None, :, None] * BJ + j[None, None, :]
    tl.store(res + at, bufs[i[:, None], j[None, :]])


@triton.jit
def broadcast_view(res, table, W: tl.constexpr):
    """shape=(4, 8), strides=(0, 1), read whole: res[p, r, c] = buffer p at c."""
    bufs = multicast_like(res, table[:W], shape=(4, 8), strides=(0, 1))
    r = tl.arange(0, 4)
    c = tl.arange(0, 8)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None, None] * 32 + r[None, :, None] * 8 + c[None, None, :], bufs[...])


@triton.jit
def align_none(res, table, n, W: tl.constexpr, B: tl.constexpr):
    """align=None is no alignment: res as in shape_rebound."""
    bufs = multicast_like(res, table[:W], shape=(n,), align=None)
    a = tl.arange(0, B)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(res + rows[:, None] * B + a[None, :], bufs[a])
