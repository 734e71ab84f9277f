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
    total = _castpile_reduce_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), "sum", acc_dtype=tl.float32, align=16)
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
    """``stack_store`` with streaming stores (``cache_modifier=".cs"``), for benchmarks/sweeps/sweep_store.py."""
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
    total = _castpile_reduce_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), "sum", acc_dtype=tl.float32)
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


@triton.jit
def stack_scatter_add(ex, table, vals, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer ``+= vals`` with relaxed atomics whose old values are never used."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(vals + offs, mask=offs < n)
    _castpile_atomic_gather(bufs, W, None, ex, offs, (offs >= 0) & (offs < n), "add", v[None, :], sem="relaxed", align=16, keep_old=False)


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_accumulator(dtype, OP):
    """The type a reduction ``OP`` of ``dtype`` accumulates in: ``tl.sum``'s pick (int32 for small ints)."""
    if OP == "sum" and dtype.is_int() and dtype.primitive_bitwidth < 32:
        return tl.int32 if dtype.is_int_signed() else tl.uint32
    return dtype


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
def _castpile_reduce_gather(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                            other=None, acc_dtype: tl.constexpr = None, cache_modifier: tl.constexpr = tl.constexpr(""),
                            eviction_policy: tl.constexpr = tl.constexpr(""), volatile: tl.constexpr = False,
                            align: tl.constexpr = None, keep_dims: tl.constexpr = False):
    """``tl.sum``/``max``/``min`` over axis 0 of the P + I tensor, of its valid entries only.

    Padded, ``ptr_mask``-false and out-of-bounds entries take no part; a lane with no
    valid entry gives 0.  Lanes the user's ``mask`` turns off take part as ``other``.
    """
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align)
    dtype = example.dtype.element_ty
    if acc_dtype is not None:
        dtype = acc_dtype
    ACC: tl.constexpr = _castpile_accumulator(dtype, OP)
    if other is None:
        other = 0
    lanes = valid
    if mask is not None:
        lanes = lanes & _castpile_prepend(mask, len(ptrs.shape) - len(mask.shape))
    v = tl.load(ptrs, mask=lanes, other=other, cache_modifier=cache_modifier, eviction_policy=eviction_policy,
                volatile=volatile)
    v = tl.where(valid, v.to(dtype).to(ACC), _castpile_identity(ACC, OP))
    if OP == "sum":
        r = tl.sum(v, axis=0)
    elif OP == "max":
        r = tl.max(v, axis=0)
    else:
        r = tl.min(v, axis=0)
    anywhere = tl.max(valid.to(tl.int32), axis=0) > 0
    r = tl.where(anywhere, r, tl.zeros_like(r))
    if keep_dims:
        r = tl.expand_dims(r, 0)
    return r


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
def _castpile_pointers(src, count: tl.constexpr, smask, example, offs, mask, align: tl.constexpr = None, user_mask=None):
    """The P + I pointer tensor of an access and its mask (never ``None``): ``mask`` and ``user_mask`` (shape I) ANDed in."""
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
    if user_mask is not None:
        valid = valid & _castpile_prepend(user_mask, R)
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
def _castpile_load_gather(src, count: tl.constexpr, smask, example, offs, bounds, mask=None, other=None,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None):
    """Load P + I elements with one gather."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask)
    if other is None:
        other = 0
    return tl.load(ptrs, mask=valid, other=other, cache_modifier=cache_modifier,
                   eviction_policy=eviction_policy, volatile=volatile)


@triton.jit
def _castpile_store_gather(src, count: tl.constexpr, smask, example, offs, bounds, value, mask=None,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I) with one scatter."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask)
    tl.store(ptrs, _castpile_full(value, ptrs, example), mask=valid, cache_modifier=cache_modifier,
             eviction_policy=eviction_policy)


@triton.jit
def _castpile_atomic_gather(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, value, mask=None,
                            sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                            keep_old: tl.constexpr = True):
    """An atomic read-modify-write on all P + I elements at once; the old values."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask)
    old = _castpile_atomic_op(OP, ptrs, _castpile_full(value, ptrs, example), valid, sem, scope)
    return tl.where(valid, old, tl.zeros_like(old))  # masked-off lanes hold 0, as in a masked load
