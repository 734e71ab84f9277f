"""Kernels in the castpile language, one per access context (transpiled by tests/test_semantics.py)."""

import triton
import triton.language as tl

import castpile as cp
from castpile import multicast_like


@triton.jit
def load_stack(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """out[(P, BLOCK)] = bufs[offs] (padded rows and offs >= n are 0)."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * BLOCK + offs[None, :], bufs[offs])


@triton.jit
def reduce_stack(out, example, table, n, OP: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr):
    """out[offs] = sum/max/min over the stack of bufs[offs]."""
    bufs = multicast_like(example, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if OP == "sum":
        r = tl.sum(bufs[offs], axis=0)
    elif OP == "max":
        r = tl.max(bufs[offs], axis=0)
    elif OP == "min":
        r = tl.min(bufs[offs], 0)
    elif OP == "masked_max":
        r = tl.max(tl.load(bufs[offs], mask=offs < n - 3), axis=0)
    else:
        r = tl.sum(bufs[offs].to(tl.float32), axis=0)
    tl.store(out + offs, r, mask=offs < n)


@triton.jit
def store_row(src, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """bufs[offs] = row[None, :] writes the same row into every buffer."""
    bufs = cp.multicast_like(src, table[0:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    row = tl.load(src + offs, mask=offs < n)
    bufs[offs] = row[None, :]


@triton.jit
def store_full(src, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """bufs[offs] = vals with vals of shape (P, BLOCK): row j goes to buffer j."""
    bufs = multicast_like(src, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    rows = tl.arange(0, triton.next_power_of_2(W))
    vals = tl.load(src + rows[:, None] * BLOCK + offs[None, :])
    bufs[offs] = vals


@triton.jit
def scatter_rank(example, table, k, W: tl.constexpr):
    """bufs[k] = tl.arange(0, P): element k of buffer j becomes j."""
    bufs = multicast_like(example, table[:W])
    bufs[k] = tl.arange(0, triton.next_power_of_2(W))


@triton.jit
def augmented(src, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """bufs[offs] += row and bufs[offs] *= 2 (load, op, store)."""
    bufs = multicast_like(src, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    row = tl.load(src + offs, mask=offs < n)
    bufs[offs] += row[None, :]
    bufs[offs] *= 2


@triton.jit
def load_store_calls(out, table, n, m, W: tl.constexpr, BLOCK: tl.constexpr):
    """tl.load with mask/other and tl.store with a mask on multicast accesses."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    x = tl.load(bufs[offs], mask=offs < m, other=-1)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * BLOCK + offs[None, :], x)
    tl.store(bufs[offs], x + 100, mask=offs % 2 == 0, eviction_policy="evict_last")


@triton.jit
def atomics(out, table, n, OP: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr):
    """old = tl.atomic_<OP>(bufs[offs], value) on every buffer; old values stored in out."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    v = offs + 3
    if OP == "add":
        old = tl.atomic_add(bufs[offs], v, mask=offs < n - 1)
    elif OP == "max":
        old = tl.atomic_max(bufs[offs], v)
    elif OP == "min":
        old = tl.atomic_min(bufs[offs], v, sem="relaxed")
    elif OP == "and":
        old = tl.atomic_and(bufs[offs], v)
    elif OP == "or":
        old = tl.atomic_or(bufs[offs], v)
    elif OP == "xor":
        old = tl.atomic_xor(bufs[offs], v)
    elif OP == "xchg":
        old = tl.atomic_xchg(bufs[offs], v)
    else:
        old = tl.atomic_cas(bufs[offs], offs, v, sem="acq_rel", scope="gpu")
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * BLOCK + offs[None, :], old)


@triton.jit
def elements_2d(out, table, M, N, W: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """bufs[i[:, None], j[None, :]] of (M, N) buffers: (P, BI, BJ)."""
    bufs = multicast_like(out, table[:W], shape=(M, N))
    i = tl.arange(0, BI)
    j = tl.arange(0, BJ)
    x = bufs[i[:, None], j[None, :]]
    p = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + p[:, None, None] * (BI * BJ) + i[None, :, None] * BJ + j[None, None, :], x)


@triton.jit
def strided_2d(out, table, M, N, W: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """Column-major (M, N) buffers through strides=(1, M): x[p, i, j] = buf_p[i + j * M]."""
    bufs = multicast_like(out, table[:W], shape=(M, N), strides=(1, M))
    i = tl.arange(0, BI)
    j = tl.arange(0, BJ)
    x = bufs[i[:, None], j[None, :]]
    p = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + p[:, None, None] * (BI * BJ) + i[None, :, None] * BJ + j[None, None, :], x)


@triton.jit
def tile_2d(out, table, n, R: tl.constexpr, C: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr):
    """A (R, C) tensor tile of addresses (entries >= W masked by ptr_mask): (R, C, BLOCK)."""
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    flat = r[:, None] * C + c[None, :]
    valid = flat < W
    tile = tl.load(table + flat, mask=valid, other=0)
    bufs = multicast_like(out, tile, shape=(n,), ptr_mask=valid)
    offs = tl.arange(0, BLOCK)
    x = bufs[offs]
    tl.store(out + flat[:, :, None] * BLOCK + offs[None, None, :], x)
    bufs[offs] = x + 1


@triton.jit
def tile_1d_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """A 1-D tensor tile (tl.load of the table), reduced with tl.sum."""
    p = tl.arange(0, triton.next_power_of_2(W))
    bufs = multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W)
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


@triton.jit
def signal_then_wait(example, table, W: tl.constexpr):
    """Signal flag slot 1 of every buffer (CAS 0 -> 1), then wait for them and reset."""
    pads = multicast_like(example, table[:W])
    cp.signal(pads[1], wait_for=0)
    cp.wait(pads[1])


@triton.jit
def signal_exchange_wait_plain(example, table, W: tl.constexpr):
    """Signal flag 0 of every buffer by exchange, then wait on this rank's flags as plain pointers."""
    pads = multicast_like(example, table[:W])
    cp.signal(pads[0], value=7)
    first = tl.load(table).to(tl.pointer_type(tl.int32))
    cp.wait(first + tl.arange(0, 1), value=7, reset=0)
