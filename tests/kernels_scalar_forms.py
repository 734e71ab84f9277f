"""Kernels whose accesses are scalars or masked by scalars (transpiled by tests/test_scalar_forms.py).

Scalar flags (``castpile.wait(flags + pid)``), rank-0 tiles (``tl.load(table + peer)``: one
buffer, P = ()), scalar indices on them (P + I = ()), and masks that are a ``tl.constexpr``
(a Python bool when Triton compiles) or a scalar tensor.  Each kernel with ``SCALAR`` masks
its calls with ``tl.program_id(0) < live`` when ``SCALAR`` is true, else with ``EVEN``.
"""

import triton
import triton.language as tl

import castpile as cp
from castpile import multicast_like


@triton.jit
def wait_scalar_flags(flags, live, value, reset, N: tl.constexpr):
    """Program ``pid`` waits on flag ``pid`` (a scalar pointer), then on flag ``N + pid`` if ``pid < live``."""
    pid = tl.program_id(0)
    cp.wait(flags + pid, value=value, reset=reset)
    cp.wait(flags + N + pid, value=value, reset=reset, mask=pid < live)


@triton.jit
def wait_constexpr_mask(flags, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    """Waits masked by ``EVEN``: on BLOCK flags (value 0), then on the one flag after them (value 0)."""
    offs = tl.arange(0, BLOCK)
    cp.wait(flags + offs, value=0, reset=5, mask=EVEN)
    cp.wait(flags + BLOCK, value=0, reset=6, mask=EVEN)


@triton.jit
def table_masked_loads(out, table, n, live, W: tl.constexpr, EVEN: tl.constexpr, SCALAR: tl.constexpr,
                       BLOCK: tl.constexpr):
    """out[(P, BLOCK)] = tl.load(bufs[offs], mask=..., other=-1), then tl.store(bufs[offs], x + 100, mask=...)."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    rows = tl.arange(0, triton.next_power_of_2(W))
    if SCALAR:
        x = tl.load(bufs[offs], mask=tl.program_id(0) < live, other=-1)
        tl.store(bufs[offs], x + 100, mask=tl.program_id(0) < live)
    else:
        x = tl.load(bufs[offs], mask=EVEN, other=-1)
        tl.store(bufs[offs], x + 100, mask=EVEN)
    tl.store(out + rows[:, None] * BLOCK + offs[None, :], x)


@triton.jit
def table_masked_atomics(out, table, n, live, OP: tl.constexpr, W: tl.constexpr, EVEN: tl.constexpr,
                         SCALAR: tl.constexpr, BLOCK: tl.constexpr):
    """old = tl.atomic_<OP>(bufs[offs], offs + 3, mask=...) on every buffer; old values in out."""
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    v = offs + 3
    if SCALAR:
        old = tl.atomic_add(bufs[offs], v, mask=tl.program_id(0) < live)
    elif OP == "add":
        old = tl.atomic_add(bufs[offs], v, mask=EVEN)
    elif OP == "max":
        old = tl.atomic_max(bufs[offs], v, mask=EVEN)
    elif OP == "min":
        old = tl.atomic_min(bufs[offs], v, mask=EVEN)
    elif OP == "and":
        old = tl.atomic_and(bufs[offs], v, mask=EVEN)
    elif OP == "or":
        old = tl.atomic_or(bufs[offs], v, mask=EVEN)
    elif OP == "xor":
        old = tl.atomic_xor(bufs[offs], v, mask=EVEN)
    else:
        old = tl.atomic_xchg(bufs[offs], v, mask=EVEN)
    rows = tl.arange(0, triton.next_power_of_2(W))
    tl.store(out + rows[:, None] * BLOCK + offs[None, :], old)


@triton.jit
def table_masked_flags(example, table, live, W: tl.constexpr, EVEN: tl.constexpr, SCALAR: tl.constexpr,
                       BLOCK: tl.constexpr):
    """Flags of every buffer, masked: 1 <- 5; 2 and 4.. raised (wait_for=0) and waited on; 3 from 4 to 6."""
    pads = multicast_like(example, table[:W])
    offs = tl.arange(0, BLOCK)
    if SCALAR:
        cp.signal(pads[1], value=5, mask=tl.program_id(0) < live)
        cp.signal(pads[2], wait_for=0, mask=tl.program_id(0) < live)
        cp.wait(pads[2], mask=tl.program_id(0) < live)
        cp.wait(pads[3], value=4, reset=6, mask=tl.program_id(0) < live)
        cp.signal(pads[4 + offs], wait_for=0, mask=tl.program_id(0) < live)
        cp.wait(pads[4 + offs], mask=tl.program_id(0) < live)
    else:
        cp.signal(pads[1], value=5, mask=EVEN)
        cp.signal(pads[2], wait_for=0, mask=EVEN)
        cp.wait(pads[2], mask=EVEN)
        cp.wait(pads[3], value=4, reset=6, mask=EVEN)
        cp.signal(pads[4 + offs], wait_for=0, mask=EVEN)
        cp.wait(pads[4 + offs], mask=EVEN)


@triton.jit
def one_peer_loads(out, table, peer, n, m, k, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    """Loads from buffer ``peer`` alone (a rank-0 tile): at ``offs`` (shape I) and at ``k`` (shape ())."""
    one = multicast_like(out, tl.load(table + peer), shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, one[offs])
    tl.store(out + BLOCK + offs, tl.load(one[offs], mask=offs < m, other=-1))
    tl.store(out + 2 * BLOCK + offs, tl.load(one[offs], mask=EVEN, other=-2))
    tl.store(out + 3 * BLOCK, one[k])
    tl.store(out + 3 * BLOCK + 1, tl.load(one[k], mask=k < m, other=-1))
    tl.store(out + 3 * BLOCK + 2, tl.load(one[k], mask=EVEN, other=-2))
    tl.store(out + 3 * BLOCK + 3, one[0])


@triton.jit
def one_peer_stores(example, table, peer, n, m, k, v, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    """Stores into buffer ``peer`` alone: plain, augmented and tl.store with masks, at ``offs`` and at scalars."""
    one = multicast_like(example, tl.load(table + peer), shape=(n,))
    offs = tl.arange(0, BLOCK)
    one[offs] = offs * 10
    one[offs] += 1
    tl.store(one[BLOCK + offs], offs, mask=offs < m)
    tl.store(one[2 * BLOCK + offs], offs + 50, mask=EVEN)
    one[k] = v
    one[k] += 2
    tl.store(one[k + 1], v, mask=k < m)
    tl.store(one[k + 2], v + 1, mask=EVEN)


@triton.jit
def one_peer_atomics(out, table, peer, n, k, OP: tl.constexpr, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    """old = tl.atomic_<OP> on buffer ``peer`` at ``offs`` (with mask=EVEN) and at ``k``; the old values in out."""
    one = multicast_like(out, tl.load(table + peer), shape=(n,))
    offs = tl.arange(0, BLOCK)
    v = offs + 3
    if OP == "add":
        old = tl.atomic_add(one[offs], v, mask=EVEN)
        at_k = tl.atomic_add(one[k], 7)
    elif OP == "max":
        old = tl.atomic_max(one[offs], v, mask=EVEN)
        at_k = tl.atomic_max(one[k], 7)
    elif OP == "min":
        old = tl.atomic_min(one[offs], v, mask=EVEN)
        at_k = tl.atomic_min(one[k], 7)
    elif OP == "and":
        old = tl.atomic_and(one[offs], v, mask=EVEN)
        at_k = tl.atomic_and(one[k], 7)
    elif OP == "or":
        old = tl.atomic_or(one[offs], v, mask=EVEN)
        at_k = tl.atomic_or(one[k], 7)
    elif OP == "xor":
        old = tl.atomic_xor(one[offs], v, mask=EVEN)
        at_k = tl.atomic_xor(one[k], 7)
    elif OP == "xchg":
        old = tl.atomic_xchg(one[offs], v, mask=EVEN)
        at_k = tl.atomic_xchg(one[k], 7)
    else:
        old = tl.atomic_cas(one[offs], offs, v)
        at_k = tl.atomic_cas(one[k], k, 7)
    tl.store(out + offs, old)
    tl.store(out + BLOCK, at_k)
    tl.atomic_add(one[k + 1], 1)  # the old value unused


@triton.jit
def one_peer_flags(example, table, peer, k, EVEN: tl.constexpr, BLOCK: tl.constexpr):
    """Flags of buffer ``peer`` alone: k <- 5; k + 1 raised and waited on; k + 2 from 4 to 6; k + 3.. raised if EVEN."""
    one = multicast_like(example, tl.load(table + peer))
    cp.signal(one[k], value=5)
    cp.signal(one[k + 1], wait_for=0)
    cp.wait(one[k + 1])
    cp.wait(one[k + 2], value=4, reset=6)
    offs = tl.arange(0, BLOCK)
    cp.signal(one[k + 3 + offs], wait_for=0, mask=EVEN)


@triton.jit
def one_peer_ptr_mask(out, table, peer, n, live, BLOCK: tl.constexpr):
    """Buffer ``peer`` alone, valid only if ``peer < live`` (a rank-0 ptr_mask): loads, atomics, a store, flags."""
    maybe = multicast_like(out, tl.load(table + peer), shape=(n,), ptr_mask=peer < live)
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, maybe[offs])
    tl.store(out + BLOCK + offs, tl.atomic_add(maybe[offs], 1))
    tl.store(out + 2 * BLOCK, tl.atomic_cas(maybe[1], 1, 9))
    maybe[BLOCK + offs] = offs + 20
    cp.signal(maybe[2 * BLOCK + offs], value=2, wait_for=0)
    cp.wait(maybe[2 * BLOCK + offs], value=2, reset=5)
    cp.signal(maybe[n - 1], value=3)
