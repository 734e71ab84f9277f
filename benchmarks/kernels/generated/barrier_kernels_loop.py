"""One-shot all-reduce with a choice of start barrier (transpiled into ``generated/``), for sweeps/sweep_barrier.py.

``START_ORDERED`` picks the memory order of the library's barrier before the
reads: release/acquire, or relaxed (what the library does: the kernel boundary
has made the inputs visible).  The barrier after the reads is release/acquire.
"""

import triton
import triton.language as tl

from castpile import multicast_like
from castpile.gpu.collectives.kernels_triton import barrier


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, START_ORDERED: tl.constexpr):
    """``out = sum over ranks of buf``, as in castpile/gpu/collectives/kernels.py."""
    bufs = buf_ptrs
    barrier(pad, pad_ptrs, rank, WORLD, START_ORDERED)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = _castpile_reduce_loop(bufs, WORLD, None, buf, offs, (offs >= 0) & (offs < n), "sum", acc_dtype=tl.float32, align=16)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    barrier(pad, pad_ptrs, rank, WORLD, True)


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_accumulator(dtype, OP):
    """The type a reduction ``OP`` of ``dtype`` accumulates in: ``tl.sum``'s pick (int32 for small ints)."""
    if OP == "sum" and dtype.is_int() and dtype.primitive_bitwidth < 32:
        return tl.int32 if dtype.is_int_signed() else tl.uint32
    return dtype


@triton.jit
def _castpile_peer(src, smask, p: tl.constexpr, example, align: tl.constexpr):
    """Typed pointer to buffer ``p`` of the stack (``align`` bytes aligned if given), and whether it is valid."""
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        ptr = tl.load(src + p).to(ptr_ty)
        valid = True
    elif len(src.shape) == 0:  # a rank-0 tile: the one buffer (a reduction of a scalar does not compile)
        ptr = src.to(ptr_ty)
        if smask is None:
            valid = True
        else:
            valid = smask
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
def _castpile_lane_mask(valid, mask, offs, user_mask=None):
    """The mask of one buffer's lanes: ``valid`` (the buffer) ANDed with the element masks.

    Always a fresh tensor of the shape of ``offs`` (offsets, or the pointers of a wait): Triton
    3.6's interpreter reads atomic operands as contiguous arrays, so a broadcast or Python-bool
    mask would be misread.  Each mask may be a tensor, a scalar or a ``tl.constexpr`` bool.
    """
    lanes = tl.full(offs.shape, 1, tl.int1) & valid
    if mask is not None:
        lanes = lanes & mask
    if user_mask is not None:
        lanes = lanes & user_mask
    return lanes


@triton.jit
def _castpile_offsets(offs):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor)."""
    return offs + tl.zeros((), tl.int32)


@triton.jit
def _castpile_reduce_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                          other=None, acc_dtype: tl.constexpr = None, cache_modifier: tl.constexpr = tl.constexpr(""),
                          eviction_policy: tl.constexpr = tl.constexpr(""), volatile: tl.constexpr = False,
                          align: tl.constexpr = None, keep_dims: tl.constexpr = False):
    """``tl.sum``/``max``/``min`` over a table's buffers, one at a time, without the P + I tensor.

    Every buffer of a table is valid; lanes out of bounds have no valid entry and give 0.
    Lanes the user's ``mask`` turns off take part as ``other``.
    """
    offs = _castpile_offsets(offs)
    dtype = example.dtype.element_ty
    if acc_dtype is not None:
        dtype = acc_dtype
    ACC: tl.constexpr = _castpile_accumulator(dtype, OP)
    if other is None:
        other = 0
    acc = tl.zeros_like(offs).to(ACC)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        v = tl.load(peer + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        v = v.to(dtype).to(ACC)
        if p == 0:
            acc = v
        elif OP == "sum":
            acc = acc + v
        elif OP == "max":
            acc = tl.maximum(acc, v)
        else:
            acc = tl.minimum(acc, v)
    if bounds is not None:
        acc = tl.where(bounds, acc, tl.zeros_like(acc))
    if keep_dims:
        acc = tl.expand_dims(acc, 0)
    return acc
