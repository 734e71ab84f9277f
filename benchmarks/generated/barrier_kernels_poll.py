"""One-shot all-reduce with barrier variants, for benchmarks/sweep_barrier.py (transpiled into ``generated/``).

``START_SEM`` picks the memory order of the barrier before the reads: the
library uses release/acquire; "relaxed" relies on the kernel boundary for the
inputs written before the launch (what torch's symm_mem one-shot does).  The
barrier after the reads stays release/acquire.
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def barrier(pad, pad_ptrs, rank, WORLD: tl.constexpr, RELAXED: tl.constexpr):
    """The library's barrier, with relaxed atomics when ``RELAXED``."""
    slot = tl.program_id(0) * WORLD
    pads = pad_ptrs
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    if RELAXED:
        _castpile_signal(pads, WORLD, None, pad, rank + slot, None, value=1, wait_for=0, sem="relaxed", scope="sys")
        _castpile_wait_flags(pad + slot + peers, peers < WORLD, value=1, sem="relaxed", scope="sys", reset=0)
    else:
        _castpile_signal(pads, WORLD, None, pad, rank + slot, None, value=1, wait_for=0, sem="release", scope="sys")
        _castpile_wait_flags(pad + slot + peers, peers < WORLD, value=1, sem="acquire", scope="sys", reset=0)
    tl.debug_barrier()


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, START_RELAXED: tl.constexpr):
    """``out = sum over ranks of buf``, as in castpile/collectives/kernels.py."""
    bufs = buf_ptrs
    barrier(pad, pad_ptrs, rank, WORLD, START_RELAXED)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = _castpile_reduce_loop(bufs, WORLD, None, buf, offs, (offs >= 0) & (offs < n), "sum", acc_dtype=tl.float32, align=16)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    barrier(pad, pad_ptrs, rank, WORLD, False)


# ---- castpile 0.1.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_sum_dtype(dtype):
    """The accumulator ``tl.sum`` picks for ``dtype`` (int32 for small ints)."""
    if dtype.is_int() and dtype.primitive_bitwidth < 32:
        return tl.int32 if dtype.is_int_signed() else tl.uint32
    return dtype


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
def _castpile_zeros(pos, offs, dtype):
    """Zeros of shape P + I and type ``dtype``."""
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    return (pos * 0 + _castpile_prepend(offs, R) * 0).to(dtype)


@triton.jit
def _castpile_offsets(offs):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor)."""
    return offs + tl.zeros((), tl.int32)


@triton.jit
def _castpile_load_loop(src, count: tl.constexpr, smask, example, offs, mask, other=None,
                        cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                        volatile: tl.constexpr = False, align: tl.constexpr = None):
    """Load P + I elements, one buffer at a time."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    res = _castpile_zeros(pos, offs, dtype)
    if other is not None:
        res = res + tl.cast(other, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        v = tl.load(peer + offs, mask=_castpile_lane_mask(valid, mask, offs), other=other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        res = tl.where(pos == p, _castpile_prepend(v, R), res)
    return res


@triton.jit
def _castpile_reduce_loop(src, count: tl.constexpr, smask, example, offs, mask, OP: tl.constexpr,
                          acc_dtype: tl.constexpr = None, align: tl.constexpr = None):
    """``tl.sum``/``max``/``min`` over the stack axis without the P + I tensor."""
    offs = _castpile_offsets(offs)
    dtype = example.dtype.element_ty
    if acc_dtype is not None:
        dtype = acc_dtype
    if OP == "sum":
        ACC: tl.constexpr = _castpile_sum_dtype(dtype)
    else:
        ACC: tl.constexpr = dtype
    acc = tl.zeros_like(offs).to(ACC)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        v = tl.load(peer + offs, mask=_castpile_lane_mask(valid, mask, offs), other=0).to(ACC)
        if p == 0:
            acc = v
        elif OP == "sum":
            acc = acc + v
        elif OP == "max":
            acc = tl.maximum(acc, v)
        else:
            acc = tl.minimum(acc, v)
    if triton.next_power_of_2(count) > count:
        # The padded entries of the P + I tensor are zeros: they take part.
        if OP == "max":
            acc = tl.maximum(acc, tl.zeros_like(acc))
        elif OP == "min":
            acc = tl.minimum(acc, tl.zeros_like(acc))
    return acc


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
def _castpile_signal(src, count: tl.constexpr, smask, example, offs, mask, value=1, wait_for=None,
                     sem: tl.constexpr = tl.constexpr("release"), scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None):
    """Set every addressed flag to ``value``.

    Without ``wait_for``: one atomic exchange.  With it: a compare-and-swap
    ``wait_for`` -> ``value``, retried on the lanes that have not succeeded yet
    (lanes that succeeded are masked off and stop touching their flag).
    """
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, mask, align)
    dtype = example.dtype.element_ty
    if wait_for is None:
        tl.atomic_xchg(ptrs, tl.cast(value, dtype), mask=valid, sem=sem, scope=scope)
    else:
        pending = valid
        while tl.sum(pending.to(tl.int32)) > 0:
            old = _castpile_cas(ptrs, pending, example, wait_for, value, sem, scope)
            pending = pending & (old != tl.cast(wait_for, dtype))


@triton.jit
def _castpile_wait_flags(ptrs, mask, value=1, sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"),
                         reset=0):
    """Spin until every flag at ``ptrs`` equals ``value``, then set it to ``reset``.

    A lane reads its flag with an atomic (``sem``, ``scope``) until it sees
    ``value``, resets it and is masked off from then on.
    """
    dtype = ptrs.dtype.element_ty
    if mask is None:
        pending = tl.full(ptrs.shape, 1, tl.int1)
    else:
        pending = tl.broadcast_to(mask, ptrs.shape) & tl.full(ptrs.shape, 1, tl.int1)
    while tl.sum(pending.to(tl.int32)) > 0:
        seen = tl.load(ptrs, mask=pending, other=0, volatile=True)  # experiment: plain polling, acquire on the xchg
        arrived = pending & (seen == tl.cast(value, dtype))
        tl.atomic_xchg(ptrs, tl.cast(reset, dtype) + tl.zeros(ptrs.shape, dtype), mask=arrived, sem=sem, scope=scope)
        pending = pending & ~arrived
