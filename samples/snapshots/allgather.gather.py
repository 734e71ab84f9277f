"""An all-gather: every rank's buffer, gathered into a local (WORLD, n) output.

Each program gathers a CHUNK of elements, BLOCK at a time, so the register
tile stays (WORLD, BLOCK) however large the chunk; every step loads all
buffers at once with ``tl.load(bufs[offs], mask=...)``.
"""

import triton
import triton.language as tl

import castpile


@triton.jit
def allgather(out, dev_ptrs, n, WORLD: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """out[w, i] = buffer w's element i; ``out`` is (WORLD, n), row-major."""
    bufs = dev_ptrs
    w = tl.arange(0, triton.next_power_of_2(WORLD))[:, None]
    for start in range(0, CHUNK, BLOCK):
        offs = tl.program_id(0) * CHUNK + start + tl.arange(0, BLOCK)
        slab = _castpile_load_gather(bufs, WORLD, None, out, offs, offs < n)  # (WORLD padded to a power of two, BLOCK)
        tl.store(out + w * n + offs[None, :], slab, mask=(w < WORLD) & (offs[None, :] < n))


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
