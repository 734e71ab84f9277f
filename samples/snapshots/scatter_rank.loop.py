"""The reverse of stacking: one value per buffer.

``bufs[k] = tl.arange(0, WORLD)`` addresses a (WORLD,) tensor (a scalar
index adds no dims), so element k of buffer j becomes j.  A full
(WORLD, BLOCK) value stores a different row into each buffer.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def stamp_rank(dev_ptrs, k, example, WORLD: tl.constexpr):
    """Element k of buffer j = j."""
    bufs = dev_ptrs
    _castpile_store_loop(bufs, WORLD, None, example, k, None, tl.arange(0, WORLD))


@triton.jit
def scatter_rows(dev_ptrs, n, example, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Element i of buffer j = 1000 * j + i, for i < n."""
    bufs = dev_ptrs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    _castpile_store_loop(bufs, WORLD, None, example, offs, (offs >= 0) & (offs < n), tl.arange(0, WORLD)[:, None] * 1000 + offs[None, :])


# ---- castpile 0.1.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_leading_ones(shape, r):
    """True when the first ``r`` extents of ``shape`` are all 1."""
    return all(int(s) == 1 for s in list(shape)[:r])


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
def _castpile_peer(src, smask, p: tl.constexpr, example, align: tl.constexpr):
    """Typed pointer to buffer ``p`` of the stack (``align`` bytes aligned if given), and whether it is valid."""
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        ptr = tl.load(src + p).to(ptr_ty)
        valid = True
    else:
        pos = tl.reshape(tl.arange(0, src.numel), src.shape)
        ptr = tl.sum(tl.where(pos == p, src, 0)).to(ptr_ty)
        if smask is None:
            valid = True
        else:
            valid = tl.sum(tl.where(pos == p, smask.to(tl.int32), 0)) != 0
    if align is not None:
        ptr = tl.multiple_of(ptr, align)
    return ptr, valid


@triton.jit
def _castpile_lane_mask(valid, mask, offs):
    """The mask of one buffer's lanes: ``valid`` (the buffer) ANDed with the element mask.

    Always a fresh tensor of the offsets' shape: Triton 3.6's interpreter reads atomic
    operands as contiguous arrays, so a broadcast or Python-bool mask would be misread.
    """
    lanes = tl.full(offs.shape, 1, tl.int1) & valid
    if mask is not None:
        lanes = lanes & mask
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
def _castpile_offsets(offs):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor)."""
    return offs + tl.zeros((), tl.int32)


@triton.jit
def _castpile_store_loop(src, count: tl.constexpr, smask, example, offs, mask, value,
                         cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I), one buffer at a time."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        tl.store(peer + offs, _castpile_slice(value, pos, p, offs), mask=_castpile_lane_mask(valid, mask, offs),
                 cache_modifier=cache_modifier, eviction_policy=eviction_policy)
