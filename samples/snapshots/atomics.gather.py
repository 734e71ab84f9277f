"""Atomics on every peer's buffer.

``tl.atomic_add(bins[key], 1, mask=m)`` adds into element ``key`` of every
buffer (a histogram that every peer receives), ``tl.atomic_max(peaks[0], v)``
keeps a running maximum in every peer, and ``tl.atomic_cas`` claims a slot in
every peer where it is still free.  Each returns the old values, one row per
buffer.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def histogram(keys, n, dev_ptrs, NBINS, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Count the local int32 ``keys`` into the NBINS-bin int32 histogram of every buffer.

    Keys outside [0, NBINS) fall outside the buffers' shape and are dropped.
    """
    bins = dev_ptrs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    key = tl.load(keys + offs, mask=offs < n, other=-1)
    _castpile_atomic_gather(bins, WORLD, None, keys, key, (key >= 0) & (key < NBINS) & (offs < n), "add", 1)


@triton.jit
def peak(x, n, dev_ptrs, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Raise element 0 of every buffer to at least the maximum of the local ``x``."""
    peaks = dev_ptrs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.max(tl.load(x + offs, mask=offs < n, other=-float("inf")), axis=0)
    _castpile_atomic_gather(peaks, WORLD, None, x, 0, None, "max", v)


@triton.jit
def claim(owners_out, dev_ptrs, slot, ticket, WORLD: tl.constexpr):
    """Set element ``slot`` of every buffer to ``ticket`` where it is 0 (free).

    ``owners_out[w]`` receives buffer w's previous owner (0: the claim succeeded).
    """
    owners = dev_ptrs
    previous = _castpile_atomic_cas_gather(owners, WORLD, None, owners_out, slot, None, 0, ticket)  # (WORLD,)
    tl.store(owners_out + tl.arange(0, WORLD), previous)


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
def _castpile_cas(ptrs, mask, example, cmp, value, sem: tl.constexpr, scope: tl.constexpr):
    """``tl.atomic_cas`` that leaves masked-off lanes alone.

    ``tl.atomic_cas`` has no mask: masked-off lanes are pointed at ``example``
    (memory the kernel owns) and swap a value for itself, which never changes it.
    """
    cmp = _castpile_full(cmp, ptrs, example)
    value = _castpile_full(value, ptrs, example)
    if mask is None:
        return tl.atomic_cas(ptrs, cmp, value, sem=sem, scope=scope)
    else:
        return tl.atomic_cas(tl.where(mask, ptrs, example), tl.where(mask, cmp, value), value, sem=sem, scope=scope)


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
def _castpile_atomic_gather(src, count: tl.constexpr, smask, example, offs, mask, OP: tl.constexpr, value,
                            sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None):
    """An atomic read-modify-write on all P + I elements at once; the old values."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    return _castpile_atomic_op(OP, ptrs, _castpile_full(value, ptrs, example), valid, sem, scope)


@triton.jit
def _castpile_atomic_cas_gather(src, count: tl.constexpr, smask, example, offs, mask, cmp, value,
                                sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None):
    """Compare-and-swap on all P + I elements at once."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    return _castpile_cas(ptrs, valid, example, cmp, value, sem, scope)
