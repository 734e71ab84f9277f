"""Collective kernels written with castpile multicast tensors.

Every rank launches the same kernel on its own GPU with the same grid.  A
multicast tensor over ``buf_ptrs[:WORLD]`` addresses every rank's symmetric
buffer at once; ``bufs[offs]`` loads a (WORLD padded, BLOCK) tile.

Each kernel starts and ends with :func:`barrier`: the first (relaxed) makes every
rank's input visible before anyone reads it, the second keeps a rank from returning
(and overwriting its buffer in a later call) while a peer still reads it or
writes into it.  Block ``b`` of every rank meets block ``b`` of every other
rank; each block walks the same tiles on every rank, so that is enough.

Buffers are declared 16-byte aligned (``align=16``: symmetric-memory buffers
are; the wrappers check it), which makes loads and stores 128 bits wide.

castpile's names are imported for the transpiler only (``TYPE_CHECKING``): the
plain-Triton module made from this file, the one the library imports, then needs
nothing of castpile at run time.  Regenerate it after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    import castpile
    from castpile import multicast_like


@triton.jit
def barrier(pad, pad_ptrs, rank, WORLD: tl.constexpr, ORDERED: tl.constexpr):
    """Block ``program_id`` of every rank meets here; signal pads are left zero.

    Signal: compare-and-swap 0 -> 1 (system scope) on slot ``(block, rank)`` of
    every rank's pad, retried while the peer has not yet consumed the previous
    signal.  Wait: until slot ``(block, peer)`` of this rank's pad is 1 for every
    peer, then reset it to 0.  ``ORDERED``: release on the signal and acquire on
    the wait, so accesses before the barrier on one rank happen before accesses
    after it on the others; otherwise relaxed atomics, for the barrier at a
    kernel's start, where the inputs were written by earlier kernels and the
    kernel boundary has made them visible (docs/collectives.md).
    """
    slot = tl.program_id(0) * WORLD
    pads = multicast_like(pad, pad_ptrs[:WORLD])
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    if ORDERED:
        castpile.signal(pads[slot + rank], value=1, wait_for=0, sem="release", scope="sys")
        castpile.wait(pad + slot + peers, value=1, reset=0, sem="acquire", scope="sys", mask=peers < WORLD)
    else:
        castpile.signal(pads[slot + rank], value=1, wait_for=0, sem="relaxed", scope="sys")
        castpile.wait(pad + slot + peers, value=1, reset=0, sem="relaxed", scope="sys", mask=peers < WORLD)
    tl.debug_barrier()


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, BARRIER: tl.constexpr, START_ORDERED: tl.constexpr = False):
    """``out = sum over ranks of buf``: every rank reads every rank's whole buffer.  ``START_ORDERED`` makes the
    barrier before the reads release/acquire (benchmarks/sweeps/sweep_barrier.py); the library's is relaxed: the
    kernel boundary has made the inputs visible."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, START_ORDERED)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs].to(tl.float32), axis=0)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def two_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``buf = sum over ranks of buf`` in place, each rank owning one chunk.

    Reduce-scatter: rank r sums chunk r of every buffer.  All-gather: it writes
    that sum into chunk r of every buffer.  Only rank r touches chunk r, so the
    two phases need no barrier between them.  Chunks are whole tiles, so that
    Triton can prove ``rank * chunk`` aligned and keep accesses 128 bits wide.
    """
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    chunk = tl.cdiv(n, WORLD * BLOCK) * BLOCK
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        offs = rank * chunk + local
        total = tl.sum(tl.load(bufs[offs], mask=local < chunk).to(tl.float32), axis=0)
        tl.store(bufs[offs], total[None, :], mask=local < chunk)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def two_shot_push_all_reduce(buf, buf_ptrs, scratch, scratch_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr,
                             BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``buf = sum over ranks of buf`` in place, every byte crossing NVLink as a write.

    Reduce-scatter by pushes: rank r writes chunk q of its input into row r of
    rank q's ``scratch`` (WORLD rows of one chunk; one (WORLD, BLOCK) store sends
    row q to rank q).  After a barrier rank q sums its scratch rows and writes
    the sum into chunk q of every buffer.  Over NVLink, pushes move more bytes
    per second than pulls (docs/data/probe-launch-bw.json).  No barrier is needed at the
    start: a rank reads only its own input, and writes into a peer's scratch
    only after that peer's previous call passed its closing barrier.
    """
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), align=16)
    scratches = multicast_like(scratch, scratch_ptrs[:WORLD], align=16)
    chunk = tl.cdiv(n, WORLD * BLOCK) * BLOCK
    rows = tl.arange(0, triton.next_power_of_2(WORLD))[:, None]
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        at = rows * chunk + local[None, :]
        mine = tl.load(buf + at, mask=(rows < WORLD) & (at < n), other=0)
        tl.store(scratches[rank * chunk + local], mine, mask=local < chunk)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        rows_in = tl.load(scratch + rows * chunk + local[None, :], mask=rows < WORLD, other=0)
        total = tl.sum(rows_in.to(tl.float32), axis=0)
        tl.store(bufs[rank * chunk + local], total[None, :], mask=local < chunk)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def all_gather(buf, buf_ptrs, pad, pad_ptrs, out, rank, m, WORLD: tl.constexpr,
               BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``out[q, :] = buf of rank q`` for every rank q (``out`` is WORLD x m)."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(m,), align=16)
    rows = tl.arange(0, triton.next_power_of_2(WORLD))[:, None]
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + rows * m + offs[None, :], bufs[offs], mask=(rows < WORLD) & (offs[None, :] < m))
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def reduce_scatter(buf, buf_ptrs, pad, pad_ptrs, out, rank, m, WORLD: tl.constexpr,
                   BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``out = sum over ranks of chunk `rank` of buf`` (buf holds WORLD chunks of m)."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(WORLD * m,), align=16)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(tl.load(bufs[rank * m + local], mask=local < m).to(tl.float32), axis=0)
        tl.store(out + local, total.to(out.dtype.element_ty), mask=local < m)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def low_latency_all_reduce(buf, ll, ll_ptrs, epochs, out, rank, m, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum over ranks of buf`` with no barrier: flags travel inside the data.

    ``buf`` and ``out`` (bf16, fp16 or fp32) are read and written as m int32
    words.  Every word is sent to every rank's ``ll`` scratch as one int64: the
    call's epoch in the high half, the data in the low half, written with a
    single relaxed atomic exchange, so a reader that sees the epoch sees the data
    (an atomic, not a plain store: a volatile load polling a weak store is a data
    race under PTX's memory model, docs/races.md).  ``ll`` holds
    two slots (epoch parity) of WORLD rows of m words; a rank writes slot
    ``e % 2`` row ``rank`` of every rank, then polls its own rows until every
    word carries epoch ``e``.  Block ``b`` keeps its epoch in ``epochs[b]``; every
    call launches the same grid, so all blocks of all ranks count alike.  Two
    slots suffice: a rank starts call e + 2 only after every peer has finished
    reading call e (it needed their call e + 1 data).
    """
    DTYPE = out.dtype.element_ty
    words = buf.to(tl.pointer_type(tl.int32))
    results = out.to(tl.pointer_type(tl.int32))
    lls = multicast_like(ll, ll_ptrs[:WORLD], align=16)
    e = tl.load(epochs + tl.program_id(0)) + 1
    flag = e.to(tl.int64) << 32
    slot = (e % 2) * WORLD * m
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(words + offs, mask=offs < m)
        sent = flag | x.to(tl.uint32).to(tl.int64)
        tl.atomic_xchg(lls[slot + rank * m + offs], sent[None, :], mask=offs < m, sem="relaxed", scope="sys")
        tile += tl.num_programs(0)
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        lo = tl.zeros([BLOCK], tl.float32)
        hi = tl.zeros([BLOCK], tl.float32)
        for r in tl.static_range(WORLD):
            row = ll + slot + r * m + offs
            got = tl.load(row, mask=offs < m, other=flag, volatile=True)
            while tl.sum(((got >> 32) != e).to(tl.int32), axis=0) > 0:
                got = tl.load(row, mask=offs < m, other=flag, volatile=True)
            v = got.to(tl.int32)
            if DTYPE.primitive_bitwidth == 32:
                lo += v.to(DTYPE, bitcast=True).to(tl.float32)
            else:
                lo += (v & 0xFFFF).to(tl.int16).to(DTYPE, bitcast=True).to(tl.float32)
                hi += (v >> 16).to(tl.int16).to(DTYPE, bitcast=True).to(tl.float32)
        if DTYPE.primitive_bitwidth == 32:
            res = lo.to(DTYPE).to(tl.int32, bitcast=True)
        else:
            low = lo.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
            res = low | (hi.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) << 16)
        tl.store(results + offs, res, mask=offs < m)
        tile += tl.num_programs(0)
    tl.store(epochs + tl.program_id(0), e)
