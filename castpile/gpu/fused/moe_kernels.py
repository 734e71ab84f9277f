"""MoE token dispatch and combine (expert-parallel all-to-all) written with castpile multicast tensors.

Three kernels, launched with the same grid of G blocks on every rank (``moe.py``
has the semantics and the buffers; names below are its state's):

- :func:`moe_route` (local): block b counts the routes of its tokens, per
  expert and per destination rank, into row b of ``hist``.
- :func:`moe_dispatch`: block b sends its tokens' rows (and their metadata) to
  the ranks that own their experts with one store through a (ranks, tokens)
  pointer tile, then groups the rows that block b of every source sent here by
  local expert.
- :func:`moe_combine`: block b weighs the expert outputs of the rows that block b
  of every source sent here, pushes each row's partial back to its source, then
  sums the partials of its own tokens.

Block b of a rank only ever waits for block b of the other ranks (the barrier
of ``collectives/kernels.py``, on the state's signal pad): every block of
every rank walks the same token ranges, so that is all the synchronisation
there is.  Each kernel that writes into peers starts with a relaxed barrier, so
that no peer is still reading what the previous call left there.

The file is transpiled with ``--strategy gather``: its stores through tensor
pointer tiles are one scatter each (the loop strategy would pick every tile
entry out with a masked sum).  Regenerate after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from castpile.gpu.collectives.kernels_triton import barrier

if TYPE_CHECKING:
    from castpile import multicast_like


@triton.jit
def _token_range(T):
    """The tokens block ``program_id`` handles: ``[lo, hi)``, a contiguous share of the T tokens."""
    chunk = tl.cdiv(T, tl.num_programs(0))
    lo = tl.program_id(0) * chunk
    return lo, tl.minimum(lo + chunk, T)


@triton.jit
def _routes(topk_idx, t, hi, K: tl.constexpr, E: tl.constexpr):
    """Expert ids of tokens ``t``: (tokens, next_power_of_2(K)) int32, -1 where none (padding, ids outside [0, E))."""
    ks = tl.arange(0, triton.next_power_of_2(K))
    e = tl.load(topk_idx + t[:, None] * K + ks[None, :], mask=(t < hi)[:, None] & (ks < K)[None, :], other=-1)
    e = e.to(tl.int32)
    return tl.where((e >= 0) & (e < E), e, -1)


@triton.jit
def _destinations(e, EL: tl.constexpr, WORLD: tl.constexpr):
    """(ranks, tokens) int32: 1 where a token has an expert on that rank (rank d owns experts d*EL .. d*EL+EL-1)."""
    ds = tl.arange(0, triton.next_power_of_2(WORLD))
    hit = (e >= 0)[None, :, :] & ((e // EL)[None, :, :] == ds[:, None, None])
    return tl.max(hit.to(tl.int32), axis=2)


@triton.jit
def _pair_ranks(e, carry, EB: tl.constexpr):
    """For each (token, slot) pair of a tile: the earlier pairs of this rank with the same expert, and the new carry.

    Pairs are ordered token-major (token, then slot); ``carry[x]`` counts the pairs
    of expert x before the tile.  One-hot over the experts, exclusive prefix sum
    down the pairs.
    """
    TB: tl.constexpr = e.shape[0]
    KB: tl.constexpr = e.shape[1]
    hot = (tl.reshape(e, (TB * KB,))[:, None] == tl.arange(0, EB)[None, :]).to(tl.int32)
    before = tl.cumsum(hot, axis=0) - hot + carry[None, :]
    return tl.reshape(tl.sum(hot * before, axis=1), (TB, KB)), carry + tl.sum(hot, axis=0)


@triton.jit
def moe_route(topk_idx, hist, T, K: tl.constexpr, E: tl.constexpr, EL: tl.constexpr, WORLD: tl.constexpr,
              TB: tl.constexpr):
    """Count block b's routes: ``hist[b, x]``, its (token, slot) pairs of expert x; ``hist[b, E + d]``, its rows for d.

    Local (no peer access).  ``moe_dispatch`` turns the rows of all blocks into
    prefix sums, so that every block knows where its rows go without waiting
    for the blocks before it.
    """
    lo, hi = _token_range(T)
    EB: tl.constexpr = triton.next_power_of_2(E)
    es = tl.arange(0, EB)
    ds = tl.arange(0, triton.next_power_of_2(WORLD))
    per_expert = tl.zeros([EB], tl.int32)
    per_rank = tl.zeros([triton.next_power_of_2(WORLD)], tl.int32)
    t0 = lo
    while t0 < hi:
        e = _routes(topk_idx, t0 + tl.arange(0, TB), hi, K, E)
        per_rank += tl.sum(_destinations(e, EL, WORLD), axis=1)
        per_expert += tl.sum(tl.sum((e[:, :, None] == es[None, None, :]).to(tl.int32), axis=1), axis=0)
        t0 += TB
    row = hist + tl.program_id(0) * (E + WORLD)
    tl.store(row + es, per_expert, mask=es < E)
    tl.store(row + E + ds, per_rank, mask=ds < WORLD)


@triton.jit
def _carries(hist, E: tl.constexpr, WORLD: tl.constexpr):
    """From every block's ``hist`` row: (pairs per expert, rows per rank) of the blocks before this one, and of all.

    Reads the rows 32 blocks at a time.
    """
    es = tl.arange(0, triton.next_power_of_2(E))
    ds = tl.arange(0, triton.next_power_of_2(WORLD))
    pairs_before = tl.zeros(es.shape, tl.int32)
    pairs = tl.zeros(es.shape, tl.int32)
    rows_before = tl.zeros(ds.shape, tl.int32)
    rows = tl.zeros(ds.shape, tl.int32)
    g = tl.arange(0, 32)
    while tl.min(g, axis=0) < tl.num_programs(0):
        row = hist + g[:, None] * (E + WORLD)
        have = (g < tl.num_programs(0))[:, None]
        before = (g < tl.program_id(0))[:, None]
        p = tl.load(row + es[None, :], mask=have & (es < E)[None, :], other=0)
        r = tl.load(row + E + ds[None, :], mask=have & (ds < WORLD)[None, :], other=0)
        pairs_before += tl.sum(tl.where(before, p, 0), axis=0)
        pairs += tl.sum(p, axis=0)
        rows_before += tl.sum(tl.where(before, r, 0), axis=0)
        rows += tl.sum(r, axis=0)
        g += 32
    return pairs_before, rows_before, pairs, rows


@triton.jit
def moe_dispatch(x, topk_idx, topk_weights, hist, sends, recv_x, recv_x_ptrs, meta, meta_ptrs, counts, counts_ptrs,
                 ranges, ranges_ptrs, pad, pad_ptrs, grouped_rows, slot_positions, expert_counts, expert_offsets,
                 recv_counts, rank, T, H: tl.constexpr, ROW: tl.constexpr, K: tl.constexpr, E: tl.constexpr,
                 WORLD: tl.constexpr, TB: tl.constexpr, HB: tl.constexpr):
    """Send each token once to every rank that owns one of its experts, then group what arrived by local expert.

    Send: token t goes to row ``rank * T + pos[d, t]`` of rank d's ``recv_x`` and
    ``meta`` (pos: the tokens before t that go to d), by one store of a (ranks,
    tokens, hidden) tile through a pointer tile of row addresses whose mask is
    "t goes to d".  ``meta`` rows: token id, K expert ids, K pair ranks j (the
    earlier pairs of this rank with that expert), K weights (as int32 bits).
    Then this block's (first row, rows) per rank go into every rank's ``ranges``,
    this rank's pairs per expert and rows per rank into its ``counts``, and
    block b of every rank meets (ordered).  Receive: :func:`_group`.
    """
    M: tl.constexpr = 1 + 3 * K
    XBYTES: tl.constexpr = recv_x.dtype.element_ty.primitive_bitwidth // 8
    ds = tl.arange(0, triton.next_power_of_2(WORLD))
    ks = tl.arange(0, triton.next_power_of_2(K))
    b = tl.program_id(0)
    carry, start, pairs, rows = _carries(hist, E, WORLD)
    barrier(pad, pad_ptrs, rank, WORLD, False)  # no peer still reads what the previous call sent it
    x_base = tl.load(recv_x_ptrs + ds, mask=ds < WORLD, other=0)[:, None]
    meta_base = tl.load(meta_ptrs + ds, mask=ds < WORLD, other=0)[:, None]
    lo, hi = _token_range(T)
    pos = start
    t0 = lo
    while t0 < hi:
        t = t0 + tl.arange(0, TB)
        e = _routes(topk_idx, t, hi, K, E)
        go = _destinations(e, E // WORLD, WORLD)
        at = (rank * T + pos[:, None] + tl.cumsum(go, axis=1) - go).to(tl.int64)  # (ranks, tokens): row on each rank
        pos += tl.sum(go, axis=1)
        tl.store(sends + t[None, :] * WORLD + ds[:, None], go, mask=(ds < WORLD)[:, None] & (t < hi)[None, :])
        j, carry = _pair_ranks(e, carry, triton.next_power_of_2(E))
        w = tl.load(topk_weights + t[:, None] * K + ks[None, :], mask=(t < hi)[:, None] & (ks < K)[None, :])
        dst = multicast_like(recv_x, x_base + at * (ROW * XBYTES), shape=(H,), ptr_mask=go > 0, align=16)
        for h0 in range(0, H, HB):
            cols = h0 + tl.arange(0, HB)
            row = tl.load(x + t.to(tl.int64)[:, None] * H + cols[None, :], mask=(t < hi)[:, None] & (cols < H)[None, :])
            dst[cols] = row[None, :, :]
        info = multicast_like(meta, meta_base + at * (M * 4), shape=(M,), ptr_mask=go > 0)
        info[0] = t[None, :]
        tl.store(info[1 + ks], e[None, :, :], mask=ks < K)
        tl.store(info[1 + K + ks], j[None, :, :], mask=ks < K)
        tl.store(info[1 + 2 * K + ks], w.to(tl.int32, bitcast=True)[None, :, :], mask=ks < K)
        t0 += TB
    spans = multicast_like(ranges, ranges_ptrs[:WORLD])
    spans[(b * WORLD + rank) * 2] = start
    spans[(b * WORLD + rank) * 2 + 1] = pos - start
    heads = multicast_like(counts, counts_ptrs[:WORLD], shape=(WORLD, E + 1))
    es = tl.arange(0, triton.next_power_of_2(E))
    # Every block writes the same counts (block b of each rank reads what block b of every source wrote, after the
    # barrier they meet at): relaxed atomic exchanges, so that the blocks' equal writes do not race (docs/races.md).
    tl.atomic_xchg(heads[rank, es], pairs[None, :], mask=es < E, sem="relaxed", scope="sys")
    tl.atomic_xchg(heads[rank, E], rows, sem="relaxed", scope="sys")
    barrier(pad, pad_ptrs, rank, WORLD, True)  # block b of every source has sent
    _group(counts, ranges, meta, grouped_rows, slot_positions, expert_counts, expert_offsets, recv_counts, rank, T,
           K, E, WORLD, TB)


@triton.jit
def _group(counts, ranges, meta, grouped_rows, slot_positions, expert_counts, expert_offsets, recv_counts, rank, T,
           K: tl.constexpr, E: tl.constexpr, WORLD: tl.constexpr, TB: tl.constexpr):
    """Place the (row, local expert) pairs of the rows that block b of every source sent here (local).

    Pair (row of source s, slot k) of local expert l goes to ``grouped_rows[
    offsets[l] + (pairs of l from sources before s) + j]``; ``slot_positions``
    records it (-1 for slots of other ranks).  Block 0 also writes the counts
    per local expert, their offsets and the rows per source.
    """
    EL: tl.constexpr = E // WORLD
    M: tl.constexpr = 1 + 3 * K
    ds = tl.arange(0, triton.next_power_of_2(WORLD))
    ls = tl.arange(0, triton.next_power_of_2(EL))
    ks = tl.arange(0, triton.next_power_of_2(K))
    b = tl.program_id(0)
    got = tl.load(counts + ds[:, None] * (E + 1) + rank * EL + ls[None, :],
                  mask=(ds < WORLD)[:, None] & (ls < EL)[None, :], other=0)  # (source, local expert): pairs
    per_expert = tl.sum(got, axis=0)
    offsets = tl.cumsum(per_expert, axis=0) - per_expert
    first = offsets[None, :] + tl.cumsum(got, axis=0) - got  # where each source's pairs of each expert begin
    if b == 0:
        tl.store(expert_counts + ls, per_expert, mask=ls < EL)
        tl.store(expert_offsets + ls, offsets, mask=ls < EL)
        tl.store(expert_offsets + EL, tl.sum(per_expert, axis=0))
        tl.store(recv_counts + ds, tl.load(counts + ds * (E + 1) + E, mask=ds < WORLD), mask=ds < WORLD)
    for s in range(WORLD):
        first_s = tl.sum(tl.where(ds[:, None] == s, first, 0), axis=0)
        p = tl.load(ranges + (b * WORLD + s) * 2)
        end = p + tl.load(ranges + (b * WORLD + s) * 2 + 1)
        while p < end:
            r = s * T + p + tl.arange(0, TB)
            live = (p + tl.arange(0, TB) < end)[:, None] & (ks < K)[None, :]
            e = tl.load(meta + r[:, None] * M + 1 + ks[None, :], mask=live, other=-1)
            j = tl.load(meta + r[:, None] * M + 1 + K + ks[None, :], mask=live, other=0)
            local = tl.where(e >= 0, e - rank * EL, -1)
            mine = live & (local >= 0) & (local < EL)
            place = tl.sum(tl.where(local[:, :, None] == ls[None, None, :], first_s[None, None, :], 0), axis=2) + j
            tl.store(grouped_rows + place, r[:, None] + 0 * ks[None, :], mask=mine)
            tl.store(slot_positions + r[:, None] * K + ks[None, :], tl.where(mine, place, -1), mask=live)
            p += TB


@triton.jit
def moe_combine(expert_out, out, slot_positions, sends, meta, ranges, comb, comb_ptrs, pad, pad_ptrs, rank, T,
                H: tl.constexpr, ROW: tl.constexpr, K: tl.constexpr, WORLD: tl.constexpr, TB: tl.constexpr,
                HB: tl.constexpr):
    """Weigh the expert outputs of every received row, push each row's partial to its source, sum per token there.

    Block b takes the rows block b of each source s sent here (``ranges``):
    their partials (:func:`_partial`) go to rows ``(rank, token)`` of source
    s's ``comb``, by a store through a pointer tile of one address per row.
    The sources take turns, ``TB`` rows each, the next rank first and this
    rank last, so that pushes over NVLink start at once and the local gathers
    of this rank's own rows overlap them.  After block b of every rank has
    pushed (an ordered barrier), block b sums the partials of its own tokens
    (:func:`_sum_partials`).
    """
    M: tl.constexpr = 1 + 3 * K
    XBYTES: tl.constexpr = comb.dtype.element_ty.primitive_bitwidth // 8
    b = tl.program_id(0)
    barrier(pad, pad_ptrs, rank, WORLD, False)  # every source has finished reading the previous call's partials
    longest = 0
    for s in range(WORLD):
        longest = tl.maximum(longest, tl.load(ranges + (b * WORLD + s) * 2 + 1))
    j = 0
    while j < longest:
        for i in range(WORLD):
            s = (rank + 1 + i) % WORLD
            rows = tl.load(ranges + (b * WORLD + s) * 2 + 1)
            if j < rows:
                p = tl.load(ranges + (b * WORLD + s) * 2) + j
                r = s * T + p + tl.arange(0, TB)
                live = j + tl.arange(0, TB) < rows
                token = tl.load(meta + r * M, mask=live, other=0)
                back = multicast_like(comb, tl.load(comb_ptrs + s) + (rank * T + token).to(tl.int64) * (ROW * XBYTES),
                                      shape=(H,), ptr_mask=live, align=16)
                for h0 in range(0, H, HB):
                    cols = h0 + tl.arange(0, HB)
                    back[cols] = _partial(expert_out, slot_positions, meta, r, live, cols, H, K)
        j += TB
    barrier(pad, pad_ptrs, rank, WORLD, True)  # block b of every rank has pushed its partials for these tokens
    _sum_partials(comb, sends, out, T, H, ROW, WORLD, TB, HB)


@triton.jit
def _partial(expert_out, slot_positions, meta, r, live, cols, H: tl.constexpr, K: tl.constexpr):
    """(rows, cols) fp32 partials of received rows ``r``: over slots k in order, weight k times its expert's row."""
    acc = tl.zeros([r.shape[0], cols.shape[0]], tl.float32)
    for k in tl.static_range(K):
        at = tl.load(slot_positions + r * K + k, mask=live, other=-1)
        w = tl.load(meta + r * (1 + 3 * K) + 1 + 2 * K + k, mask=live, other=0).to(tl.float32, bitcast=True)
        v = tl.load(expert_out + at.to(tl.int64)[:, None] * H + cols[None, :],
                    mask=(at >= 0)[:, None] & (cols < H)[None, :], other=0)
        acc += tl.where(at >= 0, w, 0)[:, None] * v.to(tl.float32)
    return acc


@triton.jit
def _sum_partials(comb, sends, out, T, H: tl.constexpr, ROW: tl.constexpr, WORLD: tl.constexpr, TB: tl.constexpr,
                  HB: tl.constexpr):
    """``out`` for this block's tokens: the partials of the ranks each token went to, in rank order, in fp32."""
    lo, hi = _token_range(T)
    t0 = lo
    while t0 < hi:
        t = t0 + tl.arange(0, TB)
        for h0 in range(0, H, HB):
            cols = h0 + tl.arange(0, HB)
            acc = tl.zeros([TB, HB], tl.float32)
            for d in tl.static_range(WORLD):
                went = tl.load(sends + t * WORLD + d, mask=t < hi, other=0) != 0
                part = tl.load(comb + (d * T + t).to(tl.int64)[:, None] * ROW + cols[None, :],
                               mask=went[:, None] & (cols < H)[None, :], other=0)
                acc += part.to(tl.float32)
            tl.store(out + t[:, None] * H + cols[None, :], acc.to(out.dtype.element_ty),
                     mask=(t < hi)[:, None] & (cols < H)[None, :])
        t0 += TB
