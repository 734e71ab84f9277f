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
    peer_flags = flag_peers
    g = tl.arange(0, CONSUMERS)
    chunks = shard_chunks(Ms, chunk_rows, K, COMM_BLOCKS, K_SEGMENT)
    c = tl.program_id(0)
    while c < chunks:
        first, runs, length = chunk_runs(c, rank, Ms, chunk_rows, K, COMM_BLOCKS, K_SEGMENT)
        send_chunk(a, a_peers, first, runs * length if K_SEGMENT == 0 else runs * K_SEGMENT, length, K, WORLD,
                   COPY_BLOCK, K_SEGMENT)
        tl.debug_barrier()  # the whole block's stores come before the flags
        _castpile_signal(peer_flags, WORLD - 1, None, flags, consumers*(c + chunks*rank) + g, None, 1, None, g < consumers)
        c += COMM_BLOCKS


@triton.jit
def send_chunk(a, a_peers, first, end, length, K: tl.constexpr, WORLD: tl.constexpr, COPY_BLOCK: tl.constexpr,
               K_SEGMENT: tl.constexpr):
    """Words ``0 .. end - 1`` of a chunk of ``a`` (:func:`chunk_word`) into every peer's buffer (``a_peers``).

    COPY_BLOCK words a step, the next step's load in flight while this one is stored.
    """
    peers = a_peers
    lane = tl.arange(0, COPY_BLOCK)
    at = tl.cast(0, tl.int64)  # scalars: the loop carries no offset tensor
    x = tl.load(a + chunk_word(first, at + lane, K, K_SEGMENT), mask=chunk_lane(at + lane, end, length, K_SEGMENT))
    while at < end:
        ahead = at + COPY_BLOCK + lane
        y = tl.load(a + chunk_word(first, ahead, K, K_SEGMENT), mask=chunk_lane(ahead, end, length, K_SEGMENT))
        _castpile_store_loop(peers, WORLD - 1, None, a, *_castpile_index((chunk_word(first, at + lane, K, K_SEGMENT),), None, (1,)), x[None, :], chunk_lane(at + lane, end, length, K_SEGMENT), align=16, site='castpile/gpu/fused/tp_gemm/all_gather_kernels.py:97'
        )
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
            _castpile_wait_flags(flags + (src * chunks + chunk % chunks) * consumers + g, 1, 0, chunk < need)
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
            peer_flags = _castpile_table_entry(flag_peers, step - 1)
            j0 = (WORLD - 1 - step) * SENDERS
            _castpile_signal(peer_flags, 1, None, flags, SENDERS*(j0 + readers), None, 1, None, readers < SENDERS, base=pid)
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
            _castpile_wait_flags(flags + j * SENDERS + sender, 1, 0, (senders < SEGMENT) & (sender < SENDERS))
            tl.debug_barrier()  # what the waiting threads acquired, every thread may read
            proxy_fence(PROXY_FENCE)
            acc = span_product(acc, a_src, b_src, shard * Ms, pn * BN, segment * SEGMENT * STRIPE, shard * Ms + Ms,
                               N, K, SEGMENT * STRIPE // BK, BM, BN, BK, TMA, TMA_A)
    if TMA_STORE:  # shards are whole tiles
        store_tile(operand(out, M, N, BM, BN, True), acc, shard * Ms, pn * BN, M, N, BM, BN, True)
    else:
        store_tile(out + tl.cast(shard, tl.int64) * Ms * N, acc, 0, pn * BN, Ms, N, BM, BN, False)



# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_leading_ones(shape, r):
    """True when the first ``r`` extents of ``shape`` are all 1."""
    return all(int(s) == 1 for s in list(shape)[:r])


@triton.constexpr_function
def _castpile_fits(value_shape, target_shape, site):
    """True when a value of ``value_shape`` broadcasts to ``target_shape`` (P + I); an error naming the
    store's ``site`` (``"path:line"``) when it does not."""
    value, target = [int(s) for s in list(value_shape)], [int(s) for s in list(target_shape)]
    if len(value) > len(target) or any(v not in (1, t) for v, t in zip(value[::-1], target[::-1])):
        where = "" if site is None else f"{site}: error: "
        raise ValueError(f"{where}a stored value of shape {tuple(value)} does not broadcast to the shape of "
                         f"the access, P + I = {tuple(target)}")
    return True


@triton.constexpr_function
def _castpile_stack_shape(positions_shape, index_shape):
    """P + I from the shape of the stack positions (P + (1,) * len(I)) and I."""
    positions, index = list(positions_shape), list(index_shape)
    return tl.constexpr([int(s) for s in positions[: len(positions) - len(index)]] + [int(s) for s in index])


@triton.jit
def _castpile_table_entry(table, r):
    """The address in entry ``r`` of ``table``: one peer's buffer, ``table[r]`` (a rank-0 tile, P = ())."""
    return tl.load(table + r)


@triton.jit
def _castpile_index(indices, extents, strides, lower=None):
    """``offs, bounds`` of an access from its indices, each evaluated once by the caller; ``lower``: for each dim,
    whether its bounds check ``index >= 0`` (not where castpile proved the index non-negative), else every dim's."""
    offs = _castpile_offsets(indices[0]) * strides[0]
    for d in tl.static_range(1, len(indices)):
        offs = offs + indices[d] * strides[d]
    if extents is None:  # no bounds: all true (a tuple with None does not compile)
        return offs, tl.full(offs.shape, 1, tl.int1)
    else:
        bounds = _castpile_bound(indices[0], extents[0], lower, 0)
        for d in tl.static_range(1, len(indices)):
            bounds = bounds & _castpile_bound(indices[d], extents[d], lower, d)
        return offs, bounds


@triton.jit
def _castpile_bound(index, extent, lower, d: tl.constexpr):
    """``0 <= index < extent``, or ``index < extent`` where ``lower`` (see :func:`_castpile_index`) says dim ``d``'s
    index is proven non-negative."""
    if lower is None:
        return (index >= 0) & (index < extent)
    elif lower[d]:
        return (index >= 0) & (index < extent)
    else:
        return index < extent


@triton.jit
def _castpile_prepend(x, r: tl.constexpr):
    """``x`` with ``r`` leading unit dims."""
    for _ in tl.static_range(r):
        x = tl.expand_dims(x, 0)
    return x


@triton.jit
def _castpile_positions(src, count: tl.constexpr, offs):
    """Flat stack positions, shape P + (1,) * len(I)."""
    if src.dtype.is_ptr():
        pos = tl.arange(0, triton.next_power_of_2(count))
    else:
        pos = tl.reshape(tl.arange(0, count), src.shape)
    for _ in tl.static_range(len(offs.shape)):
        pos = tl.expand_dims(pos, len(pos.shape))
    return pos


@triton.jit
def _castpile_entry_valid(smask, p: tl.constexpr):
    """Whether stack entry ``p`` is valid: entry ``p`` of ``smask`` (the ``ptr_mask``: of the tile's shape, entry
    ``p`` in row-major order; of a table slice's padded extent; a scalar for one buffer), or true without one."""
    if smask is None:
        valid = True
    elif len(smask.shape) == 0:
        valid = smask
    else:
        pos = tl.reshape(tl.arange(0, smask.numel), smask.shape)
        valid = tl.sum(tl.where(pos == p, smask.to(tl.int32), 0)) != 0
    return valid


@triton.jit
def _castpile_lane_mask(valid, mask, offs, user_mask=None):
    """The mask of one buffer's lanes: ``valid`` (the buffer) ANDed with the element masks.

    Always a fresh tensor of the shape of ``offs`` (offsets, or the pointers of a wait): Triton
    3.6's interpreter reads atomic operands as contiguous arrays, so a broadcast or Python-bool
    mask would be misread.  Each mask may be a tensor, a scalar or a ``tl.constexpr`` bool.
    """
    lanes = tl.full(offs.shape, 1, tl.int1) & valid
    if mask is not None:
        lanes = lanes & mask
    if user_mask is not None:
        lanes = lanes & user_mask
    return lanes


@triton.jit
def _castpile_slice(v, pos, p: tl.constexpr, offs):
    """The part of ``v`` (broadcast to P + I) that belongs to buffer ``p``."""
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    if len(v.shape) <= len(offs.shape):
        return v
    elif _castpile_leading_ones(v.shape, len(v.shape) - len(offs.shape)):
        return tl.reshape(v, v.shape[len(v.shape) - len(offs.shape):])
    else:
        full = tl.where(pos == p, v, tl.zeros_like(v))
        for _ in tl.static_range(R):
            full = tl.sum(full, axis=0)
        return full


@triton.jit
def _castpile_offsets(offs, base=None):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor), and ``base`` added to it where that is no
    scalar (a scalar ``base`` joins the pointer instead)."""
    offs = offs + tl.zeros((), tl.int32)
    if base is not None:
        if len((base + tl.zeros((), tl.int32)).shape) != 0:
            offs = offs + base
    return offs


@triton.jit
def _castpile_rebased(ptr, base):
    """``ptr`` (one buffer's pointer, or a tile of them) advanced by ``base``: an access's index summands that castpile
    classed as scalars (``base=``; ``None``: none), which join the pointer before the tensor offsets do, as hand-written
    ``ptr + row * D + cols`` does.  A ``base`` that is no scalar after all is part of the offsets instead
    (:func:`_castpile_offsets`), and ``ptr`` is returned as it is."""
    if base is None:
        return ptr
    elif len((base + tl.zeros((), tl.int32)).shape) != 0:
        return ptr
    else:
        return ptr + base


@triton.jit
def _castpile_cas(ptrs, mask, example, cmp, value, sem: tl.constexpr, scope: tl.constexpr):
    """``tl.atomic_cas`` that leaves masked-off lanes alone.

    ``tl.atomic_cas`` has no mask: masked-off lanes are pointed at ``example``
    (memory the kernel owns) and swap a value for itself, which never changes it.
    """
    cmp = _castpile_full(cmp, ptrs, example)
    value = _castpile_full(value, ptrs, example)
    if mask is None:
        return tl.atomic_cas(ptrs, cmp, value, sem=sem, scope=scope)
    else:
        return tl.atomic_cas(tl.where(mask, ptrs, example), tl.where(mask, cmp, value), value, sem=sem, scope=scope)


@triton.jit
def _castpile_full(value, ptrs, example):
    """``value`` cast to the buffers' type and broadcast (NumPy-style) to the shape of ``ptrs``."""
    value = tl.cast(value, example.dtype.element_ty)
    value = tl.broadcast_to(_castpile_prepend(value, len(ptrs.shape) - len(value.shape)), ptrs.shape)
    # A select materialises the broadcast: Triton 3.6's interpreter reads atomic operands as
    # contiguous arrays (compiled code is unaffected; the select folds away).
    return tl.where(tl.full(ptrs.shape, 1, tl.int1), value, value)


@triton.jit
def _castpile_any(lanes):
    """Whether any of ``lanes`` is true: a spin's condition (a scalar is its own: reducing one does not compile)."""
    if len(lanes.shape) == 0:
        return lanes
    else:
        return tl.sum(lanes.to(tl.int32)) > 0


@triton.jit
def _castpile_holds(flags, CMP: tl.constexpr, value):
    """Whether ``flags CMP value`` holds, lane by lane (the flag on the left: ``"ge"`` is ``flags >= value``)."""
    value = tl.cast(value, flags.dtype)
    if CMP == "eq":
        return flags == value
    elif CMP == "ne":
        return flags != value
    elif CMP == "ge":
        return flags >= value
    elif CMP == "gt":
        return flags > value
    elif CMP == "le":
        return flags <= value
    else:
        return flags < value


@triton.jit
def _castpile_anchored(ptrs, live):
    """``ptrs`` with each lane that is not ``live`` pointed at a live lane's flag (a scalar is its own).

    A compare-and-swap of a value for itself never changes memory, so such lanes may take part in one
    (``tl.atomic_cas`` has no mask) wherever they point, as long as it is memory the kernel may touch.
    """
    if len(ptrs.shape) == 0:
        return ptrs
    else:
        anchor = tl.max(tl.where(live, ptrs.to(tl.int64), 0))
        return tl.where(live, ptrs, anchor.to(ptrs.dtype))


@triton.constexpr_function
def _castpile_flag_options(site, call, kind, sem, scope, decrement=False, written="", wait_for_given=False,
                           ops="set add"):
    """True when the compile-time options of ``castpile.<call>`` are allowed: ``kind`` (a wait's ``cmp=``, a
    signal's ``op=``, one of ``ops``), ``sem=`` and ``scope=`` (or ``None``: Triton's default), a counting wait
    (``decrement``) without ``reset=`` or another ``cmp=`` than ``"ge"`` among the keywords ``written`` (names,
    space-separated), an add without ``wait_for=``; else an error naming the call's ``site`` (``"path:line"``) and
    what is allowed (a ``remote=`` signal's ``ops`` are ``"set"``)."""
    allowed = {
        "cmp": ("eq", "ne", "ge", "gt", "le", "lt"),
        "op": tuple(ops.split()),
        "sem": ("acquire", "release", "acq_rel", "relaxed"),
        "scope": ("gpu", "cta", "sys"),
    }
    where = "" if site is None else f"{site}: error: "
    for keyword, value in (("cmp" if call == "wait" else "op", kind), ("sem", sem), ("scope", scope)):
        if value is None and keyword in ("sem", "scope"):
            continue
        if value not in allowed[keyword]:
            spelled = ", ".join(f'"{name}"' for name in allowed[keyword])
            raise ValueError(f"{where}castpile.{call}: {keyword}= must be one of {spelled}, not {value!r}")
    if decrement not in (True, False):
        raise ValueError(f"{where}castpile.wait: decrement= must be True or False, not {decrement!r}")
    if decrement and ("reset" in written.split() or ("cmp" in written.split() and kind != "ge")):
        raise ValueError(f'{where}castpile.wait(decrement=True) is a counting semaphore: it takes cmp="ge" only and '
                         "no reset=")
    if kind == "add" and wait_for_given:
        raise ValueError(f'{where}castpile.signal: op="add" takes no wait_for= (an add never waits for a value)')
    return True


@triton.jit
def _castpile_arrive(ptrs, targets, pending, seen, value, reset, cmp: tl.constexpr, sem: tl.constexpr,
                     scope: tl.constexpr, decrement: tl.constexpr):
    """The lanes of ``pending`` whose flag, as the last poll ``seen`` it, satisfies the wait and was taken.

    Taken: reset to ``reset`` (``None``: left as it is), or with ``decrement`` (a counting semaphore, ``flag >=
    value``) lowered by ``value``, each by one compare-and-swap from the value seen at ``targets``
    (:func:`_castpile_anchored`), so that a flag that moved in between is polled again and no count is taken twice.
    """
    dtype = ptrs.dtype.element_ty
    if decrement:
        arrived = pending & _castpile_holds(seen, "ge", value)
        if _castpile_any(arrived):
            fresh = seen - tl.cast(value, dtype)
            old = tl.atomic_cas(targets, tl.where(arrived, seen, fresh), fresh, sem=sem, scope=scope)
            arrived = arrived & (old == seen)
    else:
        arrived = pending & _castpile_holds(seen, cmp, value)
        if reset is not None:
            if _castpile_any(arrived):  # polls that see nothing new touch the flags once, not twice
                fresh = tl.cast(reset, dtype) + tl.zeros(ptrs.shape, dtype)
                old = tl.atomic_cas(targets, tl.where(arrived, seen, fresh), fresh, sem=sem, scope=scope)
                arrived = arrived & (old == seen)
    return arrived


@triton.jit
def _castpile_wait_flags(ptrs, value=1, reset=0, mask=None, cmp: tl.constexpr = tl.constexpr("eq"),
                         sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"),
                         decrement: tl.constexpr = False, keep: tl.constexpr = False, site: tl.constexpr = None,
                         written: tl.constexpr = tl.constexpr("")):
    """Spin until every flag at ``ptrs`` satisfies ``flag cmp value``, then set it to ``reset`` (``None``: leave it);
    with ``decrement``, until every flag is ``>= value``, then take ``value`` from it.  With ``keep``, the values
    that satisfied the wait (0 where masked off).

    A lane reads its flag with an atomic (``sem``, ``scope``) until the value it sees satisfies the
    comparison and is taken (:func:`_castpile_arrive`), and is masked off from then on.  The one spin loop
    of every wait; its options are checked when Triton compiles it, errors naming the call's ``site``.
    """
    _castpile_flag_options(site, "wait", cmp, sem, scope, decrement, written)
    dtype = ptrs.dtype.element_ty
    pending = _castpile_lane_mask(True, mask, ptrs)
    targets = _castpile_anchored(ptrs, pending)
    if keep:
        got = tl.zeros(ptrs.shape, dtype)
    while _castpile_any(pending):
        seen = tl.atomic_add(ptrs, tl.zeros(ptrs.shape, dtype), mask=pending, sem=sem, scope=scope)
        arrived = _castpile_arrive(ptrs, targets, pending, seen, value, reset, cmp, sem, scope, decrement)
        if keep:
            got = tl.where(arrived, seen, got)
        pending = pending & ~arrived
    if keep:
        return got


@triton.jit
def _castpile_signal_lanes(ptrs, valid, example, value, wait_for, op: tl.constexpr, sem: tl.constexpr,
                           scope: tl.constexpr, site: tl.constexpr):
    """Set every flag at ``ptrs`` where ``valid`` to ``value`` (``op="add"``: add ``value`` to it).

    ``op="add"``: one atomic add.  Otherwise, without ``wait_for``: one atomic exchange.  With it: a
    compare-and-swap ``wait_for`` -> ``value``, retried on the lanes that have not succeeded yet
    (lanes that succeeded are masked off and stop touching their flag; masked-off lanes swap a value for
    itself at ``example``).  Its options are checked when Triton compiles it, errors naming the call's ``site``.
    """
    _castpile_flag_options(site, "signal", op, sem, scope, False, False, wait_for is not None)
    dtype = ptrs.dtype.element_ty
    if op == "add":
        tl.atomic_add(ptrs, _castpile_full(value, ptrs, example), mask=valid, sem=sem, scope=scope)
    elif wait_for is None:
        tl.atomic_xchg(ptrs, tl.cast(value, dtype), mask=valid, sem=sem, scope=scope)
    else:
        pending = valid
        while _castpile_any(pending):
            old = _castpile_cas(ptrs, pending, example, wait_for, value, sem, scope)
            pending = pending & (old != tl.cast(wait_for, dtype))


@triton.jit
def _castpile_pointers(src, count: tl.constexpr, smask, example, offs, mask, align: tl.constexpr = None, user_mask=None,
                       base=None):
    """The P + I pointer tensor of an access and its mask (never ``None``): ``mask`` and ``user_mask`` (shape I) ANDed in;
    each buffer's pointer advanced by ``base`` before the offsets are added (:func:`_castpile_rebased`)."""
    offs = _castpile_offsets(offs, base)
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        rows = tl.arange(0, triton.next_power_of_2(count))
        valid = rows < count
        if smask is not None:  # a table slice's ptr_mask, of its padded extent
            valid = valid & smask
        tile = tl.load(src + rows, mask=valid, other=0)
    else:
        tile = src
        if smask is None:
            valid = tl.full(src.shape, 1, tl.int1)
        else:
            valid = smask
    ptrs = tile.to(ptr_ty)
    if align is not None:
        # Inline: multiple_of must annotate a value made here, not a parameter.
        if len(ptrs.shape) == 1:
            ptrs = tl.multiple_of(ptrs, [align])
        elif len(ptrs.shape) == 2:
            ptrs = tl.multiple_of(ptrs, [align, align])
        elif len(ptrs.shape) == 3:
            ptrs = tl.multiple_of(ptrs, [align, align, align])
    ptrs = _castpile_rebased(ptrs, base)
    for _ in tl.static_range(len(offs.shape)):
        ptrs = tl.expand_dims(ptrs, len(ptrs.shape))
        valid = tl.expand_dims(valid, len(valid.shape))
    R: tl.constexpr = len(ptrs.shape) - len(offs.shape)
    ptrs = ptrs + _castpile_prepend(offs, R)
    if mask is not None:
        valid = valid & _castpile_prepend(mask, R)
    if user_mask is not None:
        valid = valid & _castpile_prepend(user_mask, R)
    # The all-true mask on the left: Triton's interpreter gives a comparison's result the type of its operands,
    # so a scalar mask (pid < live) splatted to a block holds int32 lanes; `&` takes its left operand's type and
    # turns the lanes back to booleans, and Triton 3.9's interpreter refuses a mask that is not boolean.
    return ptrs, tl.full(ptrs.shape, 1, tl.int1) & tl.broadcast_to(valid, ptrs.shape)


@triton.jit
def _castpile_signal(src, count: tl.constexpr, smask, example, offs, bounds, value=1, wait_for=None, mask=None,
                     op: tl.constexpr = tl.constexpr("set"), sem: tl.constexpr = tl.constexpr("release"),
                     scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None, site: tl.constexpr = None,
                     base=None):
    """``castpile.signal`` on a multicast access: every addressed flag set to ``value`` (``op="add"``: ``value``
    added), by :func:`_castpile_signal_lanes`."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    _castpile_signal_lanes(ptrs, valid, example, value, wait_for, op, sem, scope, site)


@triton.jit
def _castpile_peer(src, smask, p: tl.constexpr, example, align: tl.constexpr):
    """Typed pointer to buffer ``p`` of the stack (``align`` bytes aligned if given), and whether it is valid
    (:func:`_castpile_entry_valid`)."""
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        ptr = tl.load(src + p).to(ptr_ty)
    elif len(src.shape) == 0:  # a rank-0 tile: the one buffer (a reduction of a scalar does not compile)
        ptr = src.to(ptr_ty)
    else:
        pos = tl.reshape(tl.arange(0, src.numel), src.shape)
        ptr = tl.sum(tl.where(pos == p, src, 0)).to(ptr_ty)
    valid = _castpile_entry_valid(smask, p)
    if align is not None:
        ptr = tl.multiple_of(ptr, align)
    return ptr, valid


@triton.jit
def _castpile_store_loop(src, count: tl.constexpr, smask, example, offs, bounds, value, mask=None,
                         cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None,
                         base=None, site: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I), one buffer at a time; a value that does not broadcast is an error
    naming the store's ``site``."""
    offs = _castpile_offsets(offs, base)
    pos = _castpile_positions(src, count, offs)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    _castpile_fits(value.shape, _castpile_stack_shape(pos.shape, offs.shape), site)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        tl.store(_castpile_rebased(peer, base) + offs, _castpile_slice(value, pos, p, offs), mask=_castpile_lane_mask(valid, bounds, offs, mask),
                 cache_modifier=cache_modifier, eviction_policy=eviction_policy)
