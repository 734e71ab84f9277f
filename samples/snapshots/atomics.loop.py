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
    _castpile_atomic_loop(bins, WORLD, None, keys, key, (key >= 0) & (key < NBINS) & (offs < n), "add", 1)


@triton.jit
def peak(x, n, dev_ptrs, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """Raise element 0 of every buffer to at least the maximum of the local ``x``."""
    peaks = dev_ptrs
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.max(tl.load(x + offs, mask=offs < n, other=-float("inf")), axis=0)
    _castpile_atomic_loop(peaks, WORLD, None, x, 0, None, "max", v)


@triton.jit
def claim(owners_out, dev_ptrs, slot, ticket, WORLD: tl.constexpr):
    """Set element ``slot`` of every buffer to ``ticket`` where it is 0 (free).

    ``owners_out[w]`` receives buffer w's previous owner (0: the claim succeeded).
    """
    owners = dev_ptrs
    previous = _castpile_atomic_cas_loop(owners, WORLD, None, owners_out, slot, None, 0, ticket)  # (WORLD,)
    tl.store(owners_out + tl.arange(0, WORLD), previous)


# ---- castpile 0.1.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_leading_ones(shape, r):
    """True when the first ``r`` extents of ``shape`` are all 1."""
    return all(int(s) == 1 for s in list(shape)[:r])


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
def _castpile_zeros(pos, offs, dtype):
    """Zeros of shape P + I and type ``dtype``."""
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    return (pos * 0 + _castpile_prepend(offs, R) * 0).to(dtype)


@triton.jit
def _castpile_offsets(offs):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor)."""
    return offs + tl.zeros((), tl.int32)


@triton.jit
def _castpile_atomic_loop(src, count: tl.constexpr, smask, example, offs, mask, OP: tl.constexpr, value,
                          sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None):
    """An atomic read-modify-write on every addressed element; the old values."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        old = _castpile_atomic_op(OP, peer + offs, _castpile_slice(value, pos, p, offs),
                                  _castpile_lane_mask(valid, mask, offs), sem, scope)
        res = tl.where(pos == p, _castpile_prepend(old, R), res)
    return res


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
def _castpile_atomic_cas_loop(src, count: tl.constexpr, smask, example, offs, mask, cmp, value,
                              sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None):
    """Compare-and-swap on every addressed element, one buffer at a time."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    cmp = tl.cast(cmp, dtype)
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        old = _castpile_cas(peer + offs, _castpile_lane_mask(valid, mask, offs), example,
                            _castpile_slice(cmp, pos, p, offs), _castpile_slice(value, pos, p, offs), sem, scope)
        res = tl.where(pos == p, _castpile_prepend(old, R), res)
    return res


@triton.jit
def _castpile_full(value, ptrs, example):
    """``value`` cast to the buffers' type and broadcast (NumPy-style) to the shape of ``ptrs``."""
    value = tl.cast(value, example.dtype.element_ty)
    value = tl.broadcast_to(_castpile_prepend(value, len(ptrs.shape) - len(value.shape)), ptrs.shape)
    # A select materialises the broadcast: Triton 3.6's interpreter reads atomic operands as
    # contiguous arrays (compiled code is unaffected; the select folds away).
    return tl.where(tl.full(ptrs.shape, 1, tl.int1), value, value)
