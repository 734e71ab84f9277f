"""All-gather + GEMM with the communication overlapped, written with castpile multicast tensors.

:func:`all_gather_matmul`: ``C = all_gather(A) @ B``.  The gathered A [W * Ms, K]
is a symmetric buffer whose rows ``rank * Ms ...`` this rank filled before the
call.  Blocks ``0 .. COMM_BLOCKS - 1`` push this rank's shard into every peer's
buffer chunk by chunk (``chunk_rows`` rows, or segments of ``K_SEGMENT``
columns) and raise one flag per (source, chunk, GEMM block) on that peer;
the other blocks compute tiles in an order that starts with the local shard
and goes on with the shards of ranks
``rank + 1, rank + 2, ...``, waiting (and resetting) the flags of the chunks a
tile covers before reading them.  Every GEMM block consumes every flag it was
sent, so flags end at zero.  Where a row tile holds a whole shard and every tile
has a block, one wave instead (:func:`one_wave_tile`).

Why this shape (see also the ``tp_gemm`` package): one kernel per op (no second
stream); communication blocks take the lowest program ids, so they are scheduled
first and never wait for GEMM blocks, and a block only ever waits for blocks of
other ranks: peers' communication blocks, which wait only for each other.  That
keeps a grid of at most one block per SM free of deadlock on a GPU and lets the
Triton interpreter, which runs a rank's blocks one after another, run the kernel
in the simulator.

Synchronisation: the communication blocks start with the barrier of
``collectives/kernels.py`` among themselves (a peer's previous GEMM has finished
reading its buffer before anyone writes into it).  Signals are releases and waits
acquires at system scope, each behind ``tl.debug_barrier()`` so the whole block's
stores and loads are ordered; ``PROXY_FENCE`` adds ``fence.proxy.async.global``
after a wait, before TMA (the async proxy) reads what peers wrote (set on GPUs;
the interpreter has no inline assembly).

The GEMM core is ``gemm_kernels`` (its docstring has the rule for loop bounds).
Regenerate the plain-Triton module after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from castpile.gpu.collectives.kernels_triton import barrier
from castpile.gpu.fused.tp_gemm.gemm_kernels import operand, span_product, store_tile, tile_position, tile_product

if TYPE_CHECKING:
    import castpile
    from castpile import multicast_like


@triton.jit
def proxy_fence(PROXY_FENCE: tl.constexpr):
    """Order this thread's earlier generic-proxy accesses before its later TMA reads (``fence.proxy.async.global``)."""
    if PROXY_FENCE:
        tl.inline_asm_elementwise("fence.proxy.async.global; mov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False,
                                  pack=1)


@triton.jit
def push_shard(a, a_peers, flags, flag_peers, pad, pad_ptrs, rank, Ms, chunk_rows, consumers, K: tl.constexpr,
               WORLD: tl.constexpr, COMM_BLOCKS: tl.constexpr, COPY_BLOCK: tl.constexpr, CONSUMERS: tl.constexpr,
               K_SEGMENT: tl.constexpr):
    """Communication block ``pid``: chunks pid, pid + COMM_BLOCKS, ... of this rank's shard to every peer.

    A chunk (:func:`chunk_runs`) is one or more runs of contiguous words of the
    shard (rows ``rank * Ms ...`` of the gathered buffer ``a``), each copied
    COPY_BLOCK at a time with the next piece's load in flight while this one is
    stored into every peer's buffer (``a_peers``: the peers' buffers, nearest
    rank first).  Then flag ``(rank, chunk, g)`` is raised on every peer for each
    of its ``consumers`` GEMM blocks g.
    """
    barrier(pad, pad_ptrs, rank, WORLD, True)  # every peer's previous GEMM is done with its buffer
    peer_flags = multicast_like(flags, flag_peers[:WORLD - 1])
    g = tl.arange(0, CONSUMERS)
    chunks = shard_chunks(Ms, chunk_rows, K, COMM_BLOCKS, K_SEGMENT)
    c = tl.program_id(0)
    while c < chunks:
        first, runs, length = chunk_runs(c, rank, Ms, chunk_rows, K, COMM_BLOCKS, K_SEGMENT)
        send_chunk(a, a_peers, first, runs * length if K_SEGMENT == 0 else runs * K_SEGMENT, length, K, WORLD,
                   COPY_BLOCK, K_SEGMENT)
        tl.debug_barrier()  # the whole block's stores come before the flags
        castpile.signal(peer_flags[(rank * chunks + c) * consumers + g], value=1, mask=g < consumers)
        c += COMM_BLOCKS


@triton.jit
def send_chunk(a, a_peers, first, end, length, K: tl.constexpr, WORLD: tl.constexpr, COPY_BLOCK: tl.constexpr,
               K_SEGMENT: tl.constexpr):
    """Words ``0 .. end - 1`` of a chunk of ``a`` (:func:`chunk_word`) into every peer's buffer (``a_peers``).

    COPY_BLOCK words a step, the next step's load in flight while this one is stored.
    """
    peers = multicast_like(a, a_peers[:WORLD - 1], align=16)
    lane = tl.arange(0, COPY_BLOCK)
    at = tl.cast(0, tl.int64)  # scalars: the loop carries no offset tensor
    x = tl.load(a + chunk_word(first, at + lane, K, K_SEGMENT), mask=chunk_lane(at + lane, end, length, K_SEGMENT))
    while at < end:
        ahead = at + COPY_BLOCK + lane
        y = tl.load(a + chunk_word(first, ahead, K, K_SEGMENT), mask=chunk_lane(ahead, end, length, K_SEGMENT))
        tl.store(peers[chunk_word(first, at + lane, K, K_SEGMENT)], x[None, :],
                 mask=chunk_lane(at + lane, end, length, K_SEGMENT))
        x = y
        at += COPY_BLOCK


@triton.jit
def chunk_word(first, i, K: tl.constexpr, K_SEGMENT: tl.constexpr):
    """Where word ``i`` of a chunk of :func:`chunk_runs` is: its runs laid end to end (K_SEGMENT words each if set)."""
    if K_SEGMENT > 0:
        return first + i // K_SEGMENT * K + i % K_SEGMENT
    else:
        return first + i


@triton.jit
def chunk_lane(i, end, length, K_SEGMENT: tl.constexpr):
    """Whether word ``i`` of a chunk of ``end`` words exists (a last segment's runs are shorter than K_SEGMENT)."""
    if K_SEGMENT > 0:
        return (i < end) & (i % K_SEGMENT < length)
    else:
        return i < end


@triton.jit
def shard_chunks(Ms, chunk_rows, K: tl.constexpr, COMM_BLOCKS: tl.constexpr, K_SEGMENT: tl.constexpr):
    """Chunks per shard: ``chunk_rows`` rows each, or with ``K_SEGMENT`` one per (segment of columns, sender)."""
    if K_SEGMENT > 0:
        return tl.cast((K + K_SEGMENT - 1) // K_SEGMENT * COMM_BLOCKS, tl.int32)
    else:
        return tl.cdiv(Ms, chunk_rows)


@triton.jit
def chunk_runs(c, rank, Ms, chunk_rows, K: tl.constexpr, COMM_BLOCKS: tl.constexpr, K_SEGMENT: tl.constexpr):
    """Chunk ``c`` of this rank's shard as runs of words ``a[first + i * K ...][:length]``: (first, runs, length).

    Without ``K_SEGMENT``: rows ``c * chunk_rows ...``, one run.  With it: the
    columns of segment ``c // COMM_BLOCKS`` (K_SEGMENT wide) in the rows of part
    ``c % COMM_BLOCKS`` (the shard's rows cut into COMM_BLOCKS parts), a run per
    row, so that every sender works on the first segment first.
    """
    shard = tl.cast(rank, tl.int64) * Ms * K
    if K_SEGMENT > 0:
        part_rows = tl.cdiv(Ms, COMM_BLOCKS)
        lo = c % COMM_BLOCKS * part_rows
        k0 = c // COMM_BLOCKS * K_SEGMENT
        runs = tl.maximum(tl.minimum(lo + part_rows, Ms) - lo, 0)
        return shard + tl.cast(lo, tl.int64) * K + k0, runs, tl.cast(tl.minimum(K_SEGMENT, K - k0), tl.int64)
    else:
        rows = tl.minimum(c * chunk_rows + chunk_rows, Ms) - c * chunk_rows
        return shard + tl.cast(c * chunk_rows, tl.int64) * K, tl.cast(1, tl.int32), tl.cast(rows, tl.int64) * K


@triton.jit
def gathered_tiles(a, b, out, flags, rank, Ms, N, chunk_rows, K: tl.constexpr, WORLD: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   COMM_BLOCKS: tl.constexpr, TMA: tl.constexpr, TMA_STORE: tl.constexpr, PROXY_FENCE: tl.constexpr,
                   K_SEGMENT: tl.constexpr, TMA_A: tl.constexpr):
    """GEMM block ``g = pid - COMM_BLOCKS`` of ``grid - COMM_BLOCKS``: tiles g, g + that, ... in arrival order.

    Virtual row tile ``v`` is row tile ``v % row_tiles`` of shard ``(rank + v //
    row_tiles) % WORLD``: the local shard first.  Chunks are numbered in the same
    order (the local shard's first, never waited for).  The block counts the
    chunks it has waited for (``ready``, which only grows, :func:`wait_chunks`).
    Chunks of rows: before a tile it waits for every chunk up to the last one
    the tile's rows cover.  Chunks arrive about in that order, so waiting for the
    earlier ones costs little; a group of row tiles may straddle shards.  Chunks
    of K_SEGMENT columns (for shards of at most a row tile, where every peer tile
    needs the whole shard): a peer's tile is multiplied segment by segment, each
    after the chunks of that segment, so it starts when the first segment has
    arrived instead of the whole shard.  At the end the block waits for the
    rest, so that every flag it was sent is reset.  A tile reads rows of its own
    shard only: through TMA where shards are whole row tiles (``TMA_A``), else
    through pointers masked at the shard's end (a box would reach into the next
    shard, which may not have arrived).
    """
    g = tl.program_id(0) - COMM_BLOCKS
    consumers = tl.num_programs(0) - COMM_BLOCKS
    M = WORLD * Ms
    a_src = operand(a, M, K, BM, BK, TMA_A)
    b_src = operand(b, K, N, BK, BN, TMA)
    out_dst = operand(out, M, N, BM, BN, TMA_STORE)
    row_tiles = tl.cdiv(Ms, BM)
    tiles_m = WORLD * row_tiles
    tiles_n = tl.cdiv(N, BN)
    chunks = shard_chunks(Ms, chunk_rows, K, COMM_BLOCKS, K_SEGMENT)
    WAIT_WIDTH: tl.constexpr = triton.next_power_of_2(COMM_BLOCKS)
    ready = chunks
    t = g
    while t < tiles_m * tiles_n:
        v, pn = tile_position(t, tiles_m, tiles_n, GROUP_M)
        shard = (rank + v // row_tiles) % WORLD
        local = v % row_tiles * BM
        if K_SEGMENT > 0:
            if v // row_tiles == 0:
                acc = tile_product(a_src, b_src, shard * Ms + local, pn * BN, shard * Ms + Ms, N, K, BM, BN, BK, TMA,
                                   TMA_A)
            else:
                acc = tl.zeros((BM, BN), tl.float32)
                for segment in range((K + K_SEGMENT - 1) // K_SEGMENT):
                    ready = wait_chunks(flags, ready, v // row_tiles * chunks + (segment + 1) * COMM_BLOCKS, rank,
                                        chunks, consumers, g, WORLD, WAIT_WIDTH, PROXY_FENCE)
                    acc = span_product(acc, a_src, b_src, shard * Ms + local, pn * BN, segment * K_SEGMENT,
                                       shard * Ms + Ms, N, K, K_SEGMENT // BK, BM, BN, BK, TMA, TMA_A)
        else:
            need = v // row_tiles * chunks + (tl.minimum(local + BM, Ms) - 1) // chunk_rows + 1
            ready = wait_chunks(flags, ready, need, rank, chunks, consumers, g, WORLD, WAIT_WIDTH, PROXY_FENCE)
            acc = tile_product(a_src, b_src, shard * Ms + local, pn * BN, shard * Ms + Ms, N, K, BM, BN, BK, TMA,
                               TMA_A)
        if TMA_STORE:  # shards are whole tiles
            store_tile(out_dst, acc, shard * Ms + local, pn * BN, M, N, BM, BN, True)
        else:
            store_tile(out + tl.cast(shard, tl.int64) * Ms * N, acc, local, pn * BN, Ms, N, BM, BN, False)
        t += consumers
    wait_chunks(flags, ready, WORLD * chunks, rank, chunks, consumers, g, WORLD, WAIT_WIDTH, False)


@triton.jit
def wait_chunks(flags, ready, need, rank, chunks, consumers, g, WORLD: tl.constexpr, WIDTH: tl.constexpr,
                PROXY_FENCE: tl.constexpr):
    """Wait for (and reset) GEMM block g's flags of chunks ``ready .. need - 1`` in arrival order; the new ``ready``.

    Arrival order numbers the chunks of shard ``rank``, then ``rank + 1``, ...
    WIDTH flags are waited for at once (one round trip for the chunks of a
    column segment, which the senders raise together).
    """
    if ready < need:
        while ready < need:
            chunk = ready + tl.arange(0, WIDTH)
            src = (rank + chunk // chunks) % WORLD
            castpile.wait(flags + (src * chunks + chunk % chunks) * consumers + g, mask=chunk < need)
            ready = tl.minimum(ready + WIDTH, need)
        tl.debug_barrier()  # what the waiting threads acquired, every thread may read
        proxy_fence(PROXY_FENCE)
    return ready


@triton.jit
def all_gather_matmul(a, a_peers, b, out, flags, flag_peers, pad, pad_ptrs, rank, Ms, N, chunk_rows,
                      K: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP_M: tl.constexpr, COMM_BLOCKS: tl.constexpr, COPY_BLOCK: tl.constexpr,
                      CONSUMERS: tl.constexpr, TMA: tl.constexpr, TMA_STORE: tl.constexpr,
                      PROXY_FENCE: tl.constexpr, K_SEGMENT: tl.constexpr = 0, ONE_WAVE: tl.constexpr = False,
                      STRIPE: tl.constexpr = 0, SEGMENT: tl.constexpr = 1, TMA_A: tl.constexpr = False):
    """``out = all_gather(shards) @ b``: the first COMM_BLOCKS blocks push this rank's shard, the rest multiply.

    ``a`` [WORLD * Ms, K]: this rank's gathered buffer (symmetric; its shard
    already in rows ``rank * Ms ...``); ``a_peers``/``flag_peers``: the peers'
    buffer and flag addresses, rank + 1 first; ``flags`` int32 [WORLD * chunks *
    consumers]; ``pad``: the communication blocks' barrier slots.  ``K_SEGMENT``
    (a multiple of BK, or 0): chunks of columns instead of rows (:func:`chunk_runs`).
    ``ONE_WAVE``: every block has one tile and the first COMM_BLOCKS send a
    stripe of STRIPE columns each and multiply; the others multiply a peer's
    tile SEGMENT stripes at a time as they arrive (:func:`one_wave_tile`).
    ``TMA_A``: A through TMA too (give it with ``TMA`` where shards are whole
    row tiles), else through pointers that stop at each shard's end.
    """
    if ONE_WAVE:
        one_wave_tile(a, a_peers, b, out, flags, flag_peers, pad, pad_ptrs, rank, Ms, N, K, WORLD, BM, BN, BK,
                      COMM_BLOCKS, COPY_BLOCK, STRIPE, SEGMENT, TMA, TMA_STORE, PROXY_FENCE, TMA_A)
    elif tl.program_id(0) < COMM_BLOCKS:
        push_shard(a, a_peers, flags, flag_peers, pad, pad_ptrs, rank, Ms, chunk_rows,
                   tl.num_programs(0) - COMM_BLOCKS, K, WORLD, COMM_BLOCKS, COPY_BLOCK, CONSUMERS, K_SEGMENT)
    else:
        gathered_tiles(a, b, out, flags, rank, Ms, N, chunk_rows, K, WORLD, BM, BN, BK, GROUP_M, COMM_BLOCKS, TMA,
                       TMA_STORE, PROXY_FENCE, K_SEGMENT, TMA_A)


@triton.jit
def one_wave_tile(a, a_peers, b, out, flags, flag_peers, pad, pad_ptrs, rank, Ms, N, K: tl.constexpr,
                  WORLD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SENDERS: tl.constexpr,
                  COPY_BLOCK: tl.constexpr, STRIPE: tl.constexpr, SEGMENT: tl.constexpr, TMA: tl.constexpr,
                  TMA_STORE: tl.constexpr, PROXY_FENCE: tl.constexpr, TMA_A: tl.constexpr):
    """Block pid's one tile, where a row tile holds a whole shard and the grid has a block per tile.

    SENDERS is the number of column tiles.  Blocks ``0 .. SENDERS - 1`` each
    send stripe pid of this rank's shard (columns ``pid * STRIPE ...`` of all
    its rows) to every peer, raise their flag for each peer block that reads
    this shard, then multiply tile pid of the local shard.  Block ``SENDERS +
    j`` multiplies column tile ``j % SENDERS`` of the shard of rank ``rank + 1
    + j // SENDERS`` SEGMENT stripes at a time, each segment after one wait for
    those stripes' flags, so it starts when the first segment has arrived.  The
    shard moves over as many SMs as there are column tiles while half the grid
    already multiplies; a block waits only for lower program ids of other
    ranks.  ``flags`` int32 [(WORLD - 1) * SENDERS * SENDERS]: flag ``j *
    SENDERS + p`` is sender p's for reading block j; ``pad``: the senders' barrier.
    """
    pid = tl.program_id(0)
    M = WORLD * Ms
    a_src = operand(a, M, K, BM, BK, TMA_A)
    b_src = operand(b, K, N, BK, BN, TMA)
    if pid < SENDERS:
        barrier(pad, pad_ptrs, rank, WORLD, True)  # every peer's previous call is done with its buffer
        length = tl.minimum(STRIPE, K - pid * STRIPE)  # the last stripes may be short or empty
        send_chunk(a, a_peers, tl.cast(rank, tl.int64) * Ms * K + pid * STRIPE, tl.cast(Ms, tl.int64) * STRIPE,
                   length, K, WORLD, COPY_BLOCK, STRIPE)
        tl.debug_barrier()  # the whole block's stores come before the flags
        readers = tl.arange(0, triton.next_power_of_2(SENDERS))
        for step in tl.static_range(1, WORLD):  # on rank + step, the blocks that read this shard
            peer_flags = multicast_like(flags, flag_peers[step - 1])
            j0 = (WORLD - 1 - step) * SENDERS
            castpile.signal(peer_flags[(j0 + readers) * SENDERS + pid], value=1, mask=readers < SENDERS)
        shard = tl.cast(rank, tl.int32)  # (rank 1 is a constexpr: both branches must give a tensor)
        pn = pid
        acc = tile_product(a_src, b_src, shard * Ms, pn * BN, shard * Ms + Ms, N, K, BM, BN, BK, TMA, TMA_A)
    else:
        j = pid - SENDERS
        shard = (rank + 1 + j // SENDERS) % WORLD
        pn = j % SENDERS
        senders = tl.arange(0, triton.next_power_of_2(SEGMENT))
        acc = tl.zeros((BM, BN), tl.float32)
        for segment in range((SENDERS + SEGMENT - 1) // SEGMENT):
            sender = segment * SEGMENT + senders
            castpile.wait(flags + j * SENDERS + sender, mask=(senders < SEGMENT) & (sender < SENDERS))
            tl.debug_barrier()  # what the waiting threads acquired, every thread may read
            proxy_fence(PROXY_FENCE)
            acc = span_product(acc, a_src, b_src, shard * Ms, pn * BN, segment * SEGMENT * STRIPE, shard * Ms + Ms,
                               N, K, SEGMENT * STRIPE // BK, BM, BN, BK, TMA, TMA_A)
    if TMA_STORE:  # shards are whole tiles
        store_tile(operand(out, M, N, BM, BN, True), acc, shard * Ms, pn * BN, M, N, BM, BN, True)
    else:
        store_tile(out + tl.cast(shard, tl.int64) * Ms * N, acc, 0, pn * BN, Ms, N, BM, BN, False)

