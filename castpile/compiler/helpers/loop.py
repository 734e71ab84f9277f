"""``_loop`` helpers: the stack walked one buffer at a time (the ``loop`` strategy, and a table's reductions)."""

import triton
import triton.language as tl

from .common import (
    _castpile_atomic_op, _castpile_cas, _castpile_entry_valid, _castpile_fits, _castpile_lane_mask, _castpile_offsets,
    _castpile_positions, _castpile_prepend, _castpile_rebased, _castpile_slice, _castpile_stack_shape, _castpile_zeros,
)
from .reduction import _castpile_fold, _castpile_folded


@triton.jit
def _castpile_peer(src, smask, p: tl.constexpr, example, align: tl.constexpr):
    """Typed pointer to buffer ``p`` of the stack (``align`` bytes aligned if given), and whether it is valid
    (:func:`_castpile_entry_valid`)."""
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        ptr = tl.load(src + p).to(ptr_ty)
    elif len(src.shape) == 0:  # a rank-0 tile: the one buffer (a reduction of a scalar does not compile)
        ptr = src.to(ptr_ty)
    else:
        pos = tl.reshape(tl.arange(0, src.numel), src.shape)
        ptr = tl.sum(tl.where(pos == p, src, 0)).to(ptr_ty)
    valid = _castpile_entry_valid(smask, p)
    if align is not None:
        ptr = tl.multiple_of(ptr, align)
    return ptr, valid


@triton.jit
def _castpile_load_loop(src, count: tl.constexpr, smask, example, offs, bounds, mask=None, other=None,
                        cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                        volatile: tl.constexpr = False, align: tl.constexpr = None, base=None):
    """Load P + I elements, one buffer at a time."""
    offs = _castpile_offsets(offs, base)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    res = _castpile_zeros(pos, offs, dtype)
    if other is not None:
        res = res + tl.cast(other, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        v = tl.load(_castpile_rebased(peer, base) + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        res = tl.where(pos == p, _castpile_prepend(v, R), res)
    return res


@triton.jit
def _castpile_reduce_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                          other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                          keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                          return_indices_tie_break_left: tl.constexpr = True,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None, combine_fn: tl.constexpr = None,
                          base=None):
    """A reduction ``OP`` (see :mod:`.reduction`; ``combine_fn``: ``tl.reduce``'s) over axis 0 of a table's access,
    one buffer at a time, without the P + I tensor.

    Each valid buffer's elements are loaded, taken through ``steps`` (:func:`_castpile_apply`) and the
    conversion the reduction makes, and folded in stack order; ``return_indices``: and the positions (a tie goes
    to the first buffer, whichever ``return_indices_tie_break_left``).  Lanes the user's ``mask`` turns off take
    part as ``other``; a lane out of bounds gives 0 (position 0).
    """
    offs = _castpile_offsets(offs, base)
    acc = None  # the fold starts at buffer 0
    at = None
    seen = None
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        x = tl.load(_castpile_rebased(peer, base) + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=0 if other is None else other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        acc, at, seen = _castpile_fold(p, x, valid, acc, at, seen, OP, steps, operands, dtype, return_indices,
                                        combine_fn)
    return _castpile_folded(acc, at, seen, bounds, other, steps, keep_dims, return_indices, OP)


@triton.jit
def _castpile_store_loop(src, count: tl.constexpr, smask, example, offs, bounds, value, mask=None,
                         cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None,
                         base=None, site: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I), one buffer at a time; a value that does not broadcast is an error
    naming the store's ``site``."""
    offs = _castpile_offsets(offs, base)
    pos = _castpile_positions(src, count, offs)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    _castpile_fits(value.shape, _castpile_stack_shape(pos.shape, offs.shape), site)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        tl.store(_castpile_rebased(peer, base) + offs, _castpile_slice(value, pos, p, offs), mask=_castpile_lane_mask(valid, bounds, offs, mask),
                 cache_modifier=cache_modifier, eviction_policy=eviction_policy)


@triton.jit
def _castpile_atomic_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, value, mask=None,
                          sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                          base=None, keep_old: tl.constexpr = True):
    """An atomic read-modify-write on every addressed element; the old values (``None`` unless ``keep_old``)."""
    offs = _castpile_offsets(offs, base)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        lanes = _castpile_lane_mask(valid, bounds, offs, mask)
        old = _castpile_atomic_op(OP, _castpile_rebased(peer, base) + offs, _castpile_slice(value, pos, p, offs), lanes, sem, scope)
        if keep_old:  # masked-off lanes hold 0, as in a masked load
            res = tl.where((pos == p) & _castpile_prepend(lanes, R), _castpile_prepend(old, R), res)
    if keep_old:
        return res


@triton.jit
def _castpile_atomic_cas_loop(src, count: tl.constexpr, smask, example, offs, bounds, cmp, value,
                              sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                              base=None, keep_old: tl.constexpr = True):
    """Compare-and-swap on every addressed element, one buffer at a time; the old values (``None`` unless ``keep_old``)."""
    offs = _castpile_offsets(offs, base)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    cmp = tl.cast(cmp, dtype)
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        lanes = _castpile_lane_mask(valid, bounds, offs)
        old = _castpile_cas(_castpile_rebased(peer, base) + offs, lanes, example, _castpile_slice(cmp, pos, p, offs),
                            _castpile_slice(value, pos, p, offs), sem, scope)
        if keep_old:  # masked-off lanes hold 0, as in a masked load
            res = tl.where((pos == p) & _castpile_prepend(lanes, R), _castpile_prepend(old, R), res)
    if keep_old:
        return res
