"""All-reduce fused with a residual add and RMSNorm, written with castpile multicast tensors.

Every rank holds ``buf`` (rows x D, its partial sums, e.g. a row-parallel
layer's output), the same ``residual`` and ``weight``; every rank computes, for
every row, in this order (so that all ranks write bitwise the same results)::

    h = (x_0 + x_1 + ... + x_{W-1}) + residual     # fp32, ranks in order
    residual <- hb = h rounded to the dtype          # updated in place (HAS_RESIDUAL)
    y = hb * (1 / sqrt(mean(hb * hb) + eps)) * weight  # fp32, rounded; sqrt and division IEEE-rounded

Without a residual ``h`` is the sum alone and ``hb`` goes to ``out`` before
being normalised there.  In the one-shot kernel a row that fits one ``BLOCK`` stays in registers; a longer one takes two
passes of ``BLOCK`` elements: the first sums, writes ``hb`` and accumulates
the squares; the second reads ``hb`` back (from cache) and writes ``y``.

Two kernels move the data: :func:`low_latency_rmsnorm` (no barrier; flags
travel inside the data, as in ``collectives.kernels.low_latency_all_reduce``,
sharing its scratch and epochs; rows cut into tiles over many blocks) for
tensors with the low-latency scratch, and
:func:`one_shot_rmsnorm` (every rank reads every rank's rows, between barriers)
for the rest.  Regenerate the plain-Triton module after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from castpile.gpu.collectives.kernels_triton import barrier

if TYPE_CHECKING:
    from castpile import multicast_like


@triton.jit
def inverse_rms(squares, D, eps):
    """``1 / sqrt(sum(squares) / D + eps)`` with IEEE-rounded division and square root."""
    mean = tl.math.div_rn(tl.sum(squares, axis=0), D.to(tl.float32))
    return tl.math.div_rn(1.0, tl.sqrt_rn(mean + eps))


@triton.jit
def normalize_row(h_row, weight, out_row, D, inv_rms, BLOCK: tl.constexpr):
    """``out_row = h_row * inv_rms * weight`` over one row of D elements, BLOCK at a time.

    ``h_row`` is read past the SM's L1 cache: other blocks may have written it.

    Loops are ``while`` loops: the Triton interpreter's ``range`` takes no runtime bound.
    """
    start = 0
    while start < D:
        cols = start + tl.arange(0, BLOCK)
        h = tl.load(h_row + cols, mask=cols < D, cache_modifier=".cg").to(tl.float32)
        w = tl.load(weight + cols, mask=cols < D).to(tl.float32)
        tl.store(out_row + cols, (h * inv_rms * w).to(out_row.dtype.element_ty), mask=cols < D)
        start += BLOCK


@triton.jit
def with_residual(h, residual_chunk, mask, HAS_RESIDUAL: tl.constexpr):
    """``h`` plus the residual's chunk in fp32 (``h`` alone without a residual)."""
    if HAS_RESIDUAL:
        h += tl.load(residual_chunk + tl.arange(0, h.shape[0]), mask=mask).to(tl.float32)
    return h


@triton.jit
def one_shot_rmsnorm(buf, buf_ptrs, pad, pad_ptrs, residual, weight, out, rank, rows, D, eps, WORLD: tl.constexpr,
                     BLOCK: tl.constexpr, HAS_RESIDUAL: tl.constexpr, ONE_PASS: tl.constexpr,
                     BARRIER: tl.constexpr):
    """Rows ``program_id, program_id + num_programs, ...``: every rank reads every rank's row and normalises it.

    The barriers are those of ``collectives.kernels.one_shot_all_reduce``: inputs
    visible before anyone reads them, and no rank returns while a peer still
    reads.  ``ONE_PASS`` (a row fits one BLOCK): the row stays in registers.
    """
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(rows * D,), align=16)
    h_rows = residual if HAS_RESIDUAL else out
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    row = tl.program_id(0)
    while row < rows:
        base = row * D
        if ONE_PASS:
            cols = tl.arange(0, BLOCK)
            h = tl.sum(tl.load(bufs[base + cols], mask=cols < D).to(tl.float32), axis=0)
            hb = with_residual(h, residual + base, cols < D, HAS_RESIDUAL).to(out.dtype.element_ty)
            if HAS_RESIDUAL:
                tl.store(residual + base + cols, hb, mask=cols < D)
            hb = hb.to(tl.float32)
            y = hb * inverse_rms(hb * hb, D, eps) * tl.load(weight + cols, mask=cols < D).to(tl.float32)
            tl.store(out + base + cols, y.to(out.dtype.element_ty), mask=cols < D)
        else:
            squares = tl.zeros([BLOCK], tl.float32)
            start = 0
            while start < D:
                cols = start + tl.arange(0, BLOCK)
                h = tl.sum(tl.load(bufs[base + cols], mask=cols < D).to(tl.float32), axis=0)
                hb = with_residual(h, residual + base + start, cols < D, HAS_RESIDUAL).to(out.dtype.element_ty)
                tl.store(h_rows + base + cols, hb, mask=cols < D)
                squares += hb.to(tl.float32) * hb.to(tl.float32)
                start += BLOCK
            tl.debug_barrier()  # the second pass reads what other threads of the block wrote
            normalize_row(h_rows + base, weight, out + base, D, inverse_rms(squares, D, eps), BLOCK)
        row += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def unpacked(words, DTYPE: tl.constexpr):
    """int32 words as fp32 ``(low, high)`` elements of DTYPE (16-bit: two per word; 32-bit: one, high is 0)."""
    if DTYPE.primitive_bitwidth == 32:
        low = words.to(DTYPE, bitcast=True).to(tl.float32)
        high = tl.zeros(words.shape, tl.float32)
    else:
        low = (words & 0xFFFF).to(tl.int16).to(DTYPE, bitcast=True).to(tl.float32)
        high = (words >> 16).to(tl.int16).to(DTYPE, bitcast=True).to(tl.float32)
    return low, high


@triton.jit
def packed(low, high, DTYPE: tl.constexpr):
    """fp32 ``(low, high)`` rounded to DTYPE and packed into int32 words (the inverse of :func:`unpacked`)."""
    if DTYPE.primitive_bitwidth == 32:
        words = low.to(DTYPE).to(tl.int32, bitcast=True)
    else:
        words = low.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
        words |= high.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) << 16
    return words


@triton.jit
def weight_halves(weight, words, ok, DTYPE: tl.constexpr):
    """fp32 ``(low, high)`` weights of the elements in row words ``words`` (as :func:`unpacked` splits a word)."""
    if DTYPE.primitive_bitwidth == 32:
        return tl.load(weight + words, mask=ok).to(tl.float32), tl.zeros(words.shape, tl.float32)
    return (tl.load(weight + 2 * words, mask=ok).to(tl.float32),
            tl.load(weight + 2 * words + 1, mask=ok).to(tl.float32))


@triton.jit
def arrived_sum(ll, slot, m, at, ok, flag, e, h_words, WORLD: tl.constexpr, DTYPE: tl.constexpr,
                HAS_RESIDUAL: tl.constexpr):
    """fp32 ``(low, high)`` halves of words ``at`` summed over every rank's row of the slot, plus the residual.

    Polls each rank's words until all carry epoch ``e`` (masked-off words count as arrived).
    """
    low = tl.zeros(at.shape, tl.float32)
    high = tl.zeros(at.shape, tl.float32)
    for r in tl.static_range(WORLD):
        got = tl.load(ll + slot + r * m + at, mask=ok, other=flag, volatile=True)
        while tl.sum(((got >> 32) != e).to(tl.int32), axis=0) > 0:
            got = tl.load(ll + slot + r * m + at, mask=ok, other=flag, volatile=True)
        x_low, x_high = unpacked(got.to(tl.int32), DTYPE)
        low += x_low
        high += x_high
    if HAS_RESIDUAL:
        r_low, r_high = unpacked(tl.load(h_words + at, mask=ok), DTYPE)
        low += r_low
        high += r_high
    return low, high


@triton.jit
def low_latency_rmsnorm(buf, ll, ll_ptrs, epochs, partials, arrivals, residual, weight, out, rank, rows, D, eps,
                        WORLD: tl.constexpr, BLOCK: tl.constexpr, SEGMENTS: tl.constexpr, NORM_BLOCK: tl.constexpr,
                        HAS_RESIDUAL: tl.constexpr, WHOLE_ROWS: tl.constexpr):
    """The fused op with no barrier: rows travel as epoch-tagged words through the low-latency scratch.

    The protocol of ``low_latency_all_reduce`` (same scratch, same per-block
    epochs, same grid): each row is cut into tiles of ``BLOCK`` elements, tile
    ``t`` goes to block ``t % grid`` on every rank, and a block sends its tiles
    to every rank, then sums the tiles every rank sent it.  Every call writes
    every word of its slot, whichever kernel made it, so the two kernels may be
    mixed on one tensor.  A block writes its tile's ``hb`` and sum of squares
    (``partials[t]``), then counts itself in ``arrivals[row]``; the block that
    arrives last (of a row's at most ``SEGMENTS`` tiles) adds the row's partial
    sums in tile order and normalises the row, ``NORM_BLOCK`` elements at a
    time, and sets the count back to zero.  ``WHOLE_ROWS`` (a tile holds a
    whole row): the block normalises its row from registers, with no partial
    sums, count or second read.  No block waits for another block of its rank.
    """
    DTYPE = out.dtype.element_ty
    PACK: tl.constexpr = 32 // DTYPE.primitive_bitwidth
    WORDS: tl.constexpr = BLOCK // PACK
    row_words = D // PACK
    per_row = tl.cdiv(row_words, WORDS)
    m = rows * row_words
    lls = multicast_like(ll, ll_ptrs[:WORLD], align=16)
    e = tl.load(epochs + tl.program_id(0)) + 1
    flag = e.to(tl.int64) << 32
    slot = (e % 2) * WORLD * m
    tile = tl.program_id(0)
    while tile < rows * per_row:
        at = tile // per_row * row_words + tile % per_row * WORDS + tl.arange(0, WORDS)
        ok = tile % per_row * WORDS + tl.arange(0, WORDS) < row_words
        x = tl.load(buf.to(tl.pointer_type(tl.int32)) + at, mask=ok)
        tl.atomic_xchg(lls[slot + rank * m + at], (flag | x.to(tl.uint32).to(tl.int64))[None, :], mask=ok,
                       sem="relaxed", scope="sys")
        tile += tl.num_programs(0)
    h_rows = residual if HAS_RESIDUAL else out
    tile = tl.program_id(0)
    while tile < rows * per_row:
        row = tile // per_row
        at = row * row_words + tile % per_row * WORDS + tl.arange(0, WORDS)
        ok = tile % per_row * WORDS + tl.arange(0, WORDS) < row_words
        low, high = arrived_sum(ll, slot, m, at, ok, flag, e, h_rows.to(tl.pointer_type(tl.int32)), WORLD, DTYPE,
                                HAS_RESIDUAL)
        hb = packed(low, high, DTYPE)
        if HAS_RESIDUAL or not WHOLE_ROWS:
            tl.store(h_rows.to(tl.pointer_type(tl.int32)) + at, hb, mask=ok)
        hb_low, hb_high = unpacked(hb, DTYPE)
        if WHOLE_ROWS:
            inv_rms = inverse_rms(hb_low * hb_low + hb_high * hb_high, D, eps)
            w_low, w_high = weight_halves(weight, at - row * row_words, ok, DTYPE)
            y = packed(hb_low * inv_rms * w_low, hb_high * inv_rms * w_high, DTYPE)
            tl.store(out.to(tl.pointer_type(tl.int32)) + at, y, mask=ok)
        else:
            tl.store(partials + tile, tl.sum(hb_low * hb_low + hb_high * hb_high, axis=0))
            tl.debug_barrier()  # the whole block's stores come before its arrival
            if tl.atomic_add(arrivals + row, 1, sem="acq_rel", scope="gpu") == per_row - 1:
                tl.atomic_xchg(arrivals + row, 0, sem="relaxed", scope="gpu")
                segments = tl.arange(0, SEGMENTS)
                squares = tl.load(partials + row * per_row + segments, mask=segments < per_row, other=0,
                                  cache_modifier=".cg")
                normalize_row(h_rows + row * D, weight, out + row * D, D, inverse_rms(squares, D, eps), NORM_BLOCK)
        tile += tl.num_programs(0)
    tl.store(epochs + tl.program_id(0), e)
