"""2-D element tiles: a 1-D table of buffers, a 2-D index, a 3-D result.

With ``shape=(M, N)`` the access ``bufs[i[:, None], j[None, :]]`` loads a
(WORLD, BI, BJ) tile: entry [w, a, b] is element (i[a], j[b]) of buffer w,
masked to the M x N extent.  ``strides=`` reads a buffer through another
layout; here (1, M) reads each (N, M) row-major buffer as its transpose.
"""

import triton
import triton.language as tl

import castpile


@triton.jit
def stack_tiles(out, dev_ptrs, M, N, WORLD: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """out[w] = buffer w, each buffer (M, N) row-major; ``out`` is (WORLD, M, N)."""
    bufs = dev_ptrs
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    j = tl.program_id(1) * BJ + tl.arange(0, BJ)
    x = _castpile_load_gather(bufs, WORLD, None, out, N*i[:, None] + j[None, :], (i[:, None] >= 0) & (i[:, None] < M) & (j[None, :] >= 0) & (j[None, :] < N))  # (WORLD padded to a power of two, BI, BJ)
    w = tl.arange(0, triton.next_power_of_2(WORLD))[:, None, None]
    mask = (w < WORLD) & (i[None, :, None] < M) & (j[None, None, :] < N)
    tl.store(out + w * M * N + i[None, :, None] * N + j[None, None, :], x, mask=mask)


@triton.jit
def stack_transposed(out, dev_ptrs, M, N, WORLD: tl.constexpr, BI: tl.constexpr, BJ: tl.constexpr):
    """out[w] = buffer w transposed, each buffer (N, M) row-major; ``out`` is (WORLD, M, N)."""
    bufs = dev_ptrs
    i = tl.program_id(0) * BI + tl.arange(0, BI)
    j = tl.program_id(1) * BJ + tl.arange(0, BJ)
    x = _castpile_load_gather(bufs, WORLD, None, out, M*j[None, :] + i[:, None], (i[:, None] >= 0) & (i[:, None] < M) & (j[None, :] >= 0) & (j[None, :] < N))  # element (i, j) of the view is element (j, i) of the buffer
    w = tl.arange(0, triton.next_power_of_2(WORLD))[:, None, None]
    mask = (w < WORLD) & (i[None, :, None] < M) & (j[None, None, :] < N)
    tl.store(out + w * M * N + i[None, :, None] * N + j[None, None, :], x, mask=mask)


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
def _castpile_load_gather(src, count: tl.constexpr, smask, example, offs, mask, other=None,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None):
    """Load P + I elements with one gather."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    if other is None:
        other = 0
    return tl.load(ptrs, mask=valid, other=other, cache_modifier=cache_modifier,
                   eviction_policy=eviction_policy, volatile=volatile)
