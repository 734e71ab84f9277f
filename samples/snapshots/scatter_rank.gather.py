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
    _castpile_store_gather(bufs, WORLD, None, example, k, None, tl.arange(0, WORLD))


@triton.jit
def scatter_rows(dev_ptrs, n, example, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Element i of buffer j = 1000 * j + i, for i < n."""
    bufs = dev_ptrs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    _castpile_store_gather(bufs, WORLD, None, example, offs, (offs >= 0) & (offs < n), tl.arange(0, WORLD)[:, None] * 1000 + offs[None, :])


# ---- castpile 0.1.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.jit
def _castpile_prepend(x, r: tl.constexpr):
    """``x`` with ``r`` leading unit dims."""
    for _ in tl.static_range(r):
        x = tl.expand_dims(x, 0)
    return x


@triton.jit
def _castpile_offsets(offs):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor)."""
    return offs + tl.zeros((), tl.int32)


@triton.jit
def _castpile_pointers(src, count: tl.constexpr, smask, example, offs, mask, align: tl.constexpr = None):
    """The P + I pointer tensor of an access and its mask (never ``None``)."""
    offs = _castpile_offsets(offs)
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        rows = tl.arange(0, triton.next_power_of_2(count))
        valid = rows < count
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
    for _ in tl.static_range(len(offs.shape)):
        ptrs = tl.expand_dims(ptrs, len(ptrs.shape))
        valid = tl.expand_dims(valid, len(valid.shape))
    R: tl.constexpr = len(ptrs.shape) - len(offs.shape)
    ptrs = ptrs + _castpile_prepend(offs, R)
    if mask is not None:
        valid = valid & _castpile_prepend(mask, R)
    return ptrs, tl.broadcast_to(valid, ptrs.shape) & tl.full(ptrs.shape, 1, tl.int1)


@triton.jit
def _castpile_full(value, ptrs, example):
    """``value`` cast to the buffers' type and broadcast (NumPy-style) to the shape of ``ptrs``."""
    value = tl.cast(value, example.dtype.element_ty)
    value = tl.broadcast_to(_castpile_prepend(value, len(ptrs.shape) - len(value.shape)), ptrs.shape)
    # A select materialises the broadcast: Triton 3.6's interpreter reads atomic operands as
    # contiguous arrays (compiled code is unaffected; the select folds away).
    return tl.where(tl.full(ptrs.shape, 1, tl.int1), value, value)


@triton.jit
def _castpile_store_gather(src, count: tl.constexpr, smask, example, offs, mask, value,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I) with one scatter."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    tl.store(ptrs, _castpile_full(value, ptrs, example), mask=valid, cache_modifier=cache_modifier,
             eviction_policy=eviction_policy)
