"""The single-GPU benchmark kernels in the castpile language (transpiled into ``generated/``).

Each reads or writes W same-layout bf16 buffers named by a table of W
addresses.  The ``_u`` twins omit ``align=16``: Triton then cannot prove the
buffers' alignment and issues scalar 16-bit accesses.
"""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def stack_sum(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum of the W buffers`` (fp32 accumulation)."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(_castpile_load_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), align=16).to(tl.float32), axis=0)
    tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def stack_store(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer ``= src`` (broadcast store)."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    _castpile_store_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), x[None, :], align=16)


@triton.jit
def stack_store_cs(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_store`` with streaming stores (``cache_modifier=".cs"``), for benchmarks/sweep_store.py."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    _castpile_store_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), x[None, :], cache_modifier=".cs", align=16)


@triton.jit
def stack_gather(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``out[w, :] = buffer w`` (out is W x n)."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, W)[:, None]
    tl.store(out + rows * n + offs[None, :], _castpile_load_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), align=16), mask=offs[None, :] < n)


@triton.jit
def stack_sum_u(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_sum`` without ``align=``."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(_castpile_load_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n)).to(tl.float32), axis=0)
    tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def stack_store_u(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_store`` without ``align=``."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    _castpile_store_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), x[None, :])


@triton.jit
def stack_gather_u(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_gather`` without ``align=``."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, W)[:, None]
    tl.store(out + rows * n + offs[None, :], _castpile_load_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n)), mask=offs[None, :] < n)


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
def _castpile_load_gather(src, count: tl.constexpr, smask, example, offs, mask, other=None,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None):
    """Load P + I elements with one gather."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    if other is None:
        other = 0
    return tl.load(ptrs, mask=valid, other=other, cache_modifier=cache_modifier,
                   eviction_policy=eviction_policy, volatile=volatile)


@triton.jit
def _castpile_store_gather(src, count: tl.constexpr, smask, example, offs, mask, value,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I) with one scatter."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    tl.store(ptrs, _castpile_full(value, ptrs, example), mask=valid, cache_modifier=cache_modifier,
             eviction_policy=eviction_policy)
