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
    bufs = buf_ptrs; bufs_shape0 = rows * D
    h_rows = residual if HAS_RESIDUAL else out
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    row = tl.program_id(0)
    while row < rows:
        base = row * D
        if ONE_PASS:
            cols = tl.arange(0, BLOCK)
            h = _castpile_reduce_loop(bufs, WORLD, None, buf, cols, _castpile_unbounded(bufs_shape0), "sum", cols < D, steps="to", operands=(tl.float32,), align=16, base=base)
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
                h = _castpile_reduce_loop(bufs, WORLD, None, buf, cols, _castpile_unbounded(bufs_shape0), "sum", cols < D, steps="to", operands=(tl.float32,), align=16, base=base)
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
    lls = ll_ptrs
    e = tl.load(epochs + tl.program_id(0)) + 1
    flag = e.to(tl.int64) << 32
    slot = (e % 2) * WORLD * m
    tile = tl.program_id(0)
    while tile < rows * per_row:
        at = tile // per_row * row_words + tile % per_row * WORDS + tl.arange(0, WORDS)
        ok = tile % per_row * WORDS + tl.arange(0, WORDS) < row_words
        x = tl.load(buf.to(tl.pointer_type(tl.int32)) + at, mask=ok)
        _castpile_atomic_loop(lls, WORLD, None, ll, at + m*rank + slot, None, "xchg", (flag | x.to(tl.uint32).to(tl.int64))[None, :], ok, sem="relaxed", scope="sys", align=16, keep_old=False
        )
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


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_leading_ones(shape, r):
    """True when the first ``r`` extents of ``shape`` are all 1."""
    return all(int(s) == 1 for s in list(shape)[:r])


@triton.jit
def _castpile_unbounded(extent):
    """Nothing (``None``), the bounds of an access whose mask proves it inside ``extent`` (castpile/compiler/mask_bounds.py): a
    proof for integer extents only, so a float one is an error when Triton compiles the access."""
    tl.static_assert((extent + tl.zeros([1], tl.int8)).dtype.is_int(),
                     "castpile: this access's mask proves it inside its binding's shape= only for an integer extent, "
                     "and the extent is not an integer")


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
def _castpile_zeros(pos, offs, dtype):
    """Zeros of shape P + I and type ``dtype``."""
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    return (pos * 0 + _castpile_prepend(offs, R) * 0).to(dtype)


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
def _castpile_reduce_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                          other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                          keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                          return_indices_tie_break_left: tl.constexpr = True,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None, combine_fn: tl.constexpr = None,
                          base=None):
    """A reduction ``OP`` (see :mod:`.reduction`; ``combine_fn``: ``tl.reduce``'s) over axis 0 of a table's access,
    one buffer at a time, without the P + I tensor.

    Each valid buffer's elements are loaded, taken through ``steps`` (:func:`_castpile_apply`) and the
    conversion the reduction makes, and folded in stack order; ``return_indices``: and the positions (a tie goes
    to the first buffer, whichever ``return_indices_tie_break_left``).  Lanes the user's ``mask`` turns off take
    part as ``other``; a lane out of bounds gives 0 (position 0).
    """
    offs = _castpile_offsets(offs, base)
    acc = None  # the fold starts at buffer 0
    at = None
    seen = None
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        x = tl.load(_castpile_rebased(peer, base) + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=0 if other is None else other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        acc, at, seen = _castpile_fold(p, x, valid, acc, at, seen, OP, steps, operands, dtype, return_indices,
                                        combine_fn)
    return _castpile_folded(acc, at, seen, bounds, other, steps, keep_dims, return_indices, OP)


@triton.jit
def _castpile_atomic_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, value, mask=None,
                          sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                          base=None, keep_old: tl.constexpr = True):
    """An atomic read-modify-write on every addressed element; the old values (``None`` unless ``keep_old``)."""
    offs = _castpile_offsets(offs, base)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        lanes = _castpile_lane_mask(valid, bounds, offs, mask)
        old = _castpile_atomic_op(OP, _castpile_rebased(peer, base) + offs, _castpile_slice(value, pos, p, offs), lanes, sem, scope)
        if keep_old:  # masked-off lanes hold 0, as in a masked load
            res = tl.where((pos == p) & _castpile_prepend(lanes, R), _castpile_prepend(old, R), res)
    if keep_old:
        return res


@triton.constexpr_function
def _castpile_accumulator(dtype, OP, sum_dtype, indices):
    """The type Triton's ``tl.sum`` / ``max`` / ``min`` of ``dtype`` reduces in: ``tl.sum``'s ``dtype=``
    (``sum_dtype``), else int32 / uint32 for narrower integers; ``max`` / ``min``: float32 for bfloat16 and,
    without ``return_indices``, float32 / int32 for any narrower type; a combine function's: ``dtype``."""
    if _castpile_combines(OP):
        return dtype
    if OP == "sum":
        if sum_dtype is not None:
            return sum_dtype
        if dtype.is_int_signed() and dtype.int_bitwidth < 32:
            return tl.int32
        if dtype.is_int_unsigned() and dtype.int_bitwidth < 32:
            return tl.uint32
        return dtype
    if dtype.is_bf16():
        return tl.float32
    if not indices and dtype.primitive_bitwidth < 32:
        return tl.float32 if dtype.is_floating() else tl.int32
    return dtype


@triton.constexpr_function
def _castpile_combines(OP):
    """Whether the reduction ``OP`` folds with a combine function (:func:`_castpile_combine`), without an identity."""
    return OP in ("reduce", "xor_sum", "reduce_or")


@triton.jit
def _castpile_combine(OP: tl.constexpr, combine_fn: tl.constexpr, a, b):
    """``a`` and ``b`` combined as the reduction ``OP`` combines, elementwise: xor, or, or ``combine_fn(a, b)``."""
    if OP == "xor_sum":
        r = a ^ b
    elif OP == "reduce_or":
        r = a | b
    else:
        r = combine_fn(a, b)
    return r


@triton.constexpr_function
def _castpile_step_count(steps):
    """How many elementwise steps ``steps`` (their kinds, space-separated) names."""
    return len(steps.split())


@triton.constexpr_function
def _castpile_step(steps, k):
    """The kind of step ``k`` of ``steps``."""
    return steps.split()[k]


@triton.constexpr_function
def _castpile_operand(steps, k):
    """Where the operand of step ``k`` of ``steps`` sits among the steps' operands (``neg`` and the math
    functions have none)."""
    arithmetic = ("add", "sub", "mul", "truediv", "floordiv", "mod")
    casts = ("to", "bitcast", "to_rtne", "to_rtz")
    return sum(1 for kind in steps.split()[:k] if kind in casts or kind in arithmetic or kind[1:] in arithmetic)


@triton.constexpr_function
def _castpile_is_math(steps, k):
    """Whether step ``k`` of ``steps`` is one of Triton's math functions (:func:`_castpile_math`; no operand)."""
    math = ("abs", "ceil", "cos", "erf", "exp", "exp2", "floor", "log", "log2", "rsqrt", "sigmoid", "sin", "sqrt")
    return steps.split()[k] in (*math, "sqrt_rn")


@triton.constexpr_function
def _castpile_keeps_zero(steps):
    """Whether every step of ``steps`` turns 0 into 0, so that lanes whose loads gave 0 still hold 0."""
    return all(kind in ("to", "bitcast", "to_rtne", "to_rtz", "neg") for kind in steps.split())


@triton.constexpr_function
def _castpile_identity(dtype, OP):
    """The value that takes no part in a ``max``/``min`` reduction of ``dtype``."""
    if OP == "sum":
        return 0
    if dtype.is_floating():
        return float("-inf") if OP == "max" else float("inf")
    bits = dtype.primitive_bitwidth
    if dtype.is_int_signed():
        return -(2 ** (bits - 1)) if OP == "max" else 2 ** (bits - 1) - 1
    return 0 if OP == "max" else 2**bits - 1


@triton.jit
def _castpile_apply_one(v, KIND: tl.constexpr, x):
    """``v`` through one step of :func:`_castpile_apply` whose operand is ``x``."""
    if KIND == "to":
        r = v.to(x)
    elif KIND == "bitcast":
        r = v.to(x, bitcast=True)
    elif KIND == "to_rtne":
        r = v.to(x, fp_downcast_rounding="rtne")
    elif KIND == "to_rtz":
        r = v.to(x, fp_downcast_rounding="rtz")
    elif KIND == "add":
        r = v + x
    elif KIND == "radd":
        r = x + v
    elif KIND == "sub":
        r = v - x
    elif KIND == "rsub":
        r = x - v
    elif KIND == "mul":
        r = v * x
    elif KIND == "rmul":
        r = x * v
    elif KIND == "truediv":
        r = v / x
    elif KIND == "rtruediv":
        r = x / v
    elif KIND == "floordiv":
        r = v // x
    elif KIND == "rfloordiv":
        r = x // v
    elif KIND == "mod":
        r = v % x
    else:
        r = x % v
    return r


@triton.jit
def _castpile_math(v, KIND: tl.constexpr):
    """``v`` through the Triton math function named ``KIND``."""
    if KIND == "abs":
        r = tl.abs(v)
    elif KIND == "ceil":
        r = tl.ceil(v)
    elif KIND == "cos":
        r = tl.cos(v)
    elif KIND == "erf":
        r = tl.erf(v)
    elif KIND == "exp":
        r = tl.exp(v)
    elif KIND == "exp2":
        r = tl.exp2(v)
    elif KIND == "floor":
        r = tl.floor(v)
    elif KIND == "log":
        r = tl.log(v)
    elif KIND == "log2":
        r = tl.log2(v)
    elif KIND == "rsqrt":
        r = tl.rsqrt(v)
    elif KIND == "sigmoid":
        r = tl.sigmoid(v)
    elif KIND == "sin":
        r = tl.sin(v)
    elif KIND == "sqrt":
        r = tl.sqrt(v)
    else:
        r = tl.sqrt_rn(v)
    return r


@triton.jit
def _castpile_apply(v, steps: tl.constexpr, operands):
    """``v`` through the elementwise steps that stand between an access and its reduction, in order: ``to``,
    ``bitcast``, ``to_rtne``, ``to_rtz`` (``.to(T, ...)``), an operator with a scalar operand on the right (``add``,
    ``sub``, ``mul``, ``truediv``, ``floordiv``, ``mod``) or on the left (``radd``, ``rsub``, ...), ``neg``, and
    Triton's elementwise math functions (``exp``: ``tl.exp(v)``, :func:`_castpile_math`)."""
    for k in tl.static_range(_castpile_step_count(steps)):
        if _castpile_step(steps, k) == "neg":
            v = -v
        elif _castpile_is_math(steps, k):
            v = _castpile_math(v, _castpile_step(steps, k))
        else:
            v = _castpile_apply_one(v, _castpile_step(steps, k), operands[_castpile_operand(steps, k)])
    return v


@triton.jit
def _castpile_fold(p: tl.constexpr, x, valid, acc, at, seen, OP: tl.constexpr, steps: tl.constexpr, operands,
                   dtype: tl.constexpr, indices: tl.constexpr, combine_fn: tl.constexpr = None):
    """Buffer ``p``'s loaded elements ``x``, taken through ``steps`` (:func:`_castpile_apply`) and the conversion
    the reduction makes (``dtype``: ``tl.sum``'s), folded into ``acc``, the reduction of the buffers before it;
    ``at``: the position each lane's max / min comes from (``indices``; the first on a tie); ``seen``: the lanes
    some valid buffer reached.  ``valid`` says whether buffer ``p`` is; ``p == 0`` starts the fold.  A
    reduction with a combine function (``combine_fn``: ``tl.reduce``'s) has no identity: a lane's first valid
    buffer starts it.  A table's reductions make this step per buffer, however they reach it."""
    v = _castpile_apply(x, steps, operands)
    v = v.to(_castpile_accumulator(v.dtype, OP, dtype, indices))
    if not _castpile_combines(OP):
        v = tl.where(valid, v, _castpile_identity(v.dtype, OP))
    if p == 0:
        if OP == "sum":  # from zero, as a hand-written loop sums (a sum of -0.0 gives 0.0): Triton schedules it better
            acc = tl.zeros(v.shape, v.dtype) + v
        else:
            acc = v
        at = tl.zeros(v.shape, tl.int32)
        seen = _castpile_lane_mask(valid, None, v)
    elif _castpile_combines(OP):
        acc = tl.where(valid, tl.where(seen, _castpile_combine(OP, combine_fn, acc, v), v), acc)
        seen = seen | valid
    elif indices:
        if OP == "max":
            better = v > acc
        else:
            better = v < acc
        take = valid & (better | ~seen)
        acc = tl.where(take, v, acc)
        at = tl.where(take, p, at)
        seen = seen | valid
    else:
        if OP == "sum":
            acc = acc + v
        elif OP == "max":
            acc = tl.maximum(acc, v)
        else:
            acc = tl.minimum(acc, v)
        seen = seen | valid
    return acc, at, seen


@triton.jit
def _castpile_folded(acc, at, seen, bounds, other, steps: tl.constexpr, keep_dims: tl.constexpr,
                     indices: tl.constexpr, OP: tl.constexpr):
    """The result of a fold (:func:`_castpile_fold`) of the reduction ``OP``: a lane that no valid buffer reached,
    or out of ``bounds``, gives 0 and position 0 (a lane out of bounds holds value 0 already when its loads gave 0,
    no ``other``, through ``steps`` that keep 0, and ``OP`` is a sum, max or min; its position may be that of a
    later buffer when ``ptr_mask`` left out the first); ``keep_dims`` keeps the stack dim as extent 1; with
    ``indices``, the values and their positions."""
    zeroed: tl.constexpr = (other is None and _castpile_keeps_zero(steps) and not _castpile_combines(OP)
                            and not indices)
    live = seen
    if bounds is not None and not zeroed:
        live = live & bounds
    acc = tl.where(live, acc, tl.zeros_like(acc))
    at = tl.where(live, at, tl.zeros_like(at))
    if keep_dims:
        acc = tl.expand_dims(acc, 0)
        at = tl.expand_dims(at, 0)
    if indices:
        return acc, at
    else:
        return acc
