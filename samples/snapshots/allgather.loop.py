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
        slab = _castpile_load_loop(bufs, WORLD, None, out, offs, offs < n)  # (WORLD padded to a power of two, BLOCK)
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
