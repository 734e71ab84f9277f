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
        dst = x_base + at * (ROW * XBYTES); dst_mask = go > 0
        for h0 in range(0, H, HB):
            cols = h0 + tl.arange(0, HB)
            row = tl.load(x + t.to(tl.int64)[:, None] * H + cols[None, :], mask=(t < hi)[:, None] & (cols < H)[None, :])
            _castpile_store_gather(dst, dst.numel, dst_mask, recv_x, cols, (cols < H), row[None, :, :], align=16, site='castpile/gpu/fused/moe_kernels.py:172')
        info = meta_base + at * (M * 4); info_mask = go > 0
        _castpile_store_gather(info, info.numel, info_mask, meta, 0, (0 < M), t[None, :], site='castpile/gpu/fused/moe_kernels.py:174')
        _castpile_store_gather(info, info.numel, info_mask, meta, ks + 1, (ks + 1 < M), e[None, :, :], ks < K, site='castpile/gpu/fused/moe_kernels.py:175')
        _castpile_store_gather(info, info.numel, info_mask, meta, K + ks + 1, (K + ks + 1 >= 0) & (K + ks + 1 < M), j[None, :, :], ks < K, site='castpile/gpu/fused/moe_kernels.py:176')
        _castpile_store_gather(info, info.numel, info_mask, meta, 2*K + ks + 1, (2*K + ks + 1 >= 0) & (2*K + ks + 1 < M), w.to(tl.int32, bitcast=True)[None, :, :], ks < K, site='castpile/gpu/fused/moe_kernels.py:177')
        t0 += TB
    spans = ranges_ptrs
    _castpile_store_gather(spans, WORLD, None, ranges, 2*WORLD*b + 2*rank, None, start, site='castpile/gpu/fused/moe_kernels.py:180')
    _castpile_store_gather(spans, WORLD, None, ranges, 2*WORLD*b + 2*rank + 1, None, pos - start, site='castpile/gpu/fused/moe_kernels.py:181')
    heads = counts_ptrs; heads_shape1 = E + 1
    es = tl.arange(0, triton.next_power_of_2(E))
    # Every block writes the same counts (block b of each rank reads what block b of every source wrote, after the
    # barrier they meet at): relaxed atomic exchanges, so that the blocks' equal writes do not race (docs/races.md).
    _castpile_atomic_gather(heads, WORLD, None, counts, es, (rank >= 0) & (rank < WORLD) & (es < heads_shape1), "xchg", pairs[None, :], es < E, sem="relaxed", scope="sys", base=heads_shape1*rank, keep_old=False)
    _castpile_atomic_gather(heads, WORLD, None, counts, E + heads_shape1*rank, (rank >= 0) & (rank < WORLD) & (E >= 0) & (E < heads_shape1), "xchg", rows, sem="relaxed", scope="sys", keep_old=False)
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
                back = tl.load(comb_ptrs + s) + (rank * T + token).to(tl.int64) * (ROW * XBYTES); back_mask = (live
                )
                for h0 in range(0, H, HB):
                    cols = h0 + tl.arange(0, HB)
                    _castpile_store_gather(back, back.numel, back_mask, comb, cols, (cols < H), _partial(expert_out, slot_positions, meta, r, live, cols, H, K), align=16, site='castpile/gpu/fused/moe_kernels.py:272')
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


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


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


@triton.jit
def _castpile_prepend(x, r: tl.constexpr):
    """``x`` with ``r`` leading unit dims."""
    for _ in tl.static_range(r):
        x = tl.expand_dims(x, 0)
    return x


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
def _castpile_atomic_op(OP: tl.constexpr, ptrs, value, mask, sem: tl.constexpr, scope: tl.constexpr):
    """``tl.atomic_<OP>`` with a mask."""
    if OP == "add":
        return tl.atomic_add(ptrs, value, mask=mask, sem=sem, scope=scope)
    elif OP == "max":
        return tl.atomic_max(ptrs, value, mask=mask, sem=sem, scope=scope)
    elif OP == "min":
        return tl.atomic_min(ptrs, value, mask=mask, sem=sem, scope=scope)
    elif OP == "and":
        return tl.atomic_and(ptrs, value, mask=mask, sem=sem, scope=scope)
    elif OP == "or":
        return tl.atomic_or(ptrs, value, mask=mask, sem=sem, scope=scope)
    elif OP == "xor":
        return tl.atomic_xor(ptrs, value, mask=mask, sem=sem, scope=scope)
    else:
        return tl.atomic_xchg(ptrs, value, mask=mask, sem=sem, scope=scope)


@triton.jit
def _castpile_full(value, ptrs, example):
    """``value`` cast to the buffers' type and broadcast (NumPy-style) to the shape of ``ptrs``."""
    value = tl.cast(value, example.dtype.element_ty)
    value = tl.broadcast_to(_castpile_prepend(value, len(ptrs.shape) - len(value.shape)), ptrs.shape)
    # A select materialises the broadcast: Triton 3.6's interpreter reads atomic operands as
    # contiguous arrays (compiled code is unaffected; the select folds away).
    return tl.where(tl.full(ptrs.shape, 1, tl.int1), value, value)


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
def _castpile_store_gather(src, count: tl.constexpr, smask, example, offs, bounds, value, mask=None,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None,
                           base=None, site: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I) with one scatter; a value that does not broadcast is an error
    naming the store's ``site``."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    _castpile_fits(tl.cast(value, example.dtype.element_ty).shape, ptrs.shape, site)
    tl.store(ptrs, _castpile_full(value, ptrs, example), mask=valid, cache_modifier=cache_modifier,
             eviction_policy=eviction_policy)


@triton.jit
def _castpile_atomic_gather(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, value, mask=None,
                            sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                            base=None, keep_old: tl.constexpr = True):
    """An atomic read-modify-write on all P + I elements at once; the old values."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    old = _castpile_atomic_op(OP, ptrs, _castpile_full(value, ptrs, example), valid, sem, scope)
    return tl.where(valid, old, tl.zeros_like(old))  # masked-off lanes hold 0, as in a masked load
