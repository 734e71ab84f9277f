"""A 2-D tile of device pointers with a 1-D element index.

The pointer tile is a Triton tensor of addresses, (R, C) — e.g. R nodes of C
GPUs each — so ``bufs[offs]`` loads an (R, C, BLOCK) tensor: entry [r, c, q] is
element offs[q] of the buffer at ``tile[r, c]``.
"""

import triton
import triton.language as tl

import castpile as cp


@triton.jit
def grid_copy(out, dev_ptrs, n, R: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):
    """out[r, c] = the buffer at dev_ptrs[r * C + c]; ``out`` is (R, C, n)."""
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    bufs = tl.load(dev_ptrs + r[:, None] * C + c[None, :])
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = _castpile_load_gather(bufs, bufs.numel, None, out, offs, (offs >= 0) & (offs < n))  # (R, C, BLOCK)
    dst = out + (r[:, None, None] * C + c[None, :, None]) * n + offs[None, None, :]
    tl.store(dst, x, mask=offs[None, None, :] < n)


@triton.jit
def row_sums(out, dev_ptrs, n, R: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):
    """out[r] = the sum of the C buffers of row r of the tile; ``out`` is (R, n)."""
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    bufs = tl.load(dev_ptrs + r[:, None] * C + c[None, :])
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(_castpile_load_gather(bufs, bufs.numel, None, out, offs, (offs >= 0) & (offs < n)), axis=1)  # (R, C, BLOCK) -> (R, BLOCK)
    tl.store(out + r[:, None] * n + offs[None, :], total, mask=offs[None, :] < n)


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
