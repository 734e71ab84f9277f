"""``_gather`` helpers: the P + I pointer tensor built, one memory operation issued (the ``gather`` strategy)."""

import triton
import triton.language as tl

from .common import (
    _castpile_atomic_op, _castpile_cas, _castpile_fits, _castpile_full, _castpile_offsets, _castpile_prepend,
    _castpile_rebased, _castpile_signal_lanes, _castpile_wait_flags,
)
from .reduction import (
    _castpile_accumulator, _castpile_apply, _castpile_combines, _castpile_first_max, _castpile_first_min,
    _castpile_identity, _castpile_tree,
)


@triton.jit
def _castpile_reduce_gather(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                            other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                            keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                            return_indices_tie_break_left: tl.constexpr = True,
                            cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                            volatile: tl.constexpr = False, align: tl.constexpr = None, combine_fn: tl.constexpr = None,
                            base=None):
    """A reduction ``OP`` (see :mod:`.reduction`; ``combine_fn``: ``tl.reduce``'s) over axis 0 of the P + I tensor
    of a tile's access, of its valid entries only.

    The tensor is loaded, taken through ``steps`` (:func:`_castpile_apply`) and the conversion the reduction
    makes; padded, ``ptr_mask``-false and out-of-bounds entries take no part, and a lane with no valid entry
    gives 0 (position 0).  ``return_indices``: and the positions along the stack dim (a tie goes to the first
    valid entry).  Lanes the user's ``mask`` turns off take part as ``other``.  A rank-0 tile (P = ()) has no
    stack dim: its reduction is Triton's own, over axis 0 of the elements (masked lanes hold 0 or ``other``).
    """
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, base=base)
    offs = _castpile_offsets(offs, base)  # for its shape: _castpile_pointers added a base that is no scalar
    lanes = valid
    if mask is not None:
        lanes = lanes & mask
    v = tl.load(ptrs, mask=lanes, other=0 if other is None else other, cache_modifier=cache_modifier,
                eviction_policy=eviction_policy, volatile=volatile)
    v = _castpile_apply(v, steps, operands)
    if len(ptrs.shape) == len(offs.shape):
        if OP == "sum":
            return tl.sum(v, axis=0, keep_dims=keep_dims, dtype=dtype)
        elif OP == "max":
            return tl.max(v, axis=0, return_indices=return_indices,
                          return_indices_tie_break_left=return_indices_tie_break_left, keep_dims=keep_dims)
        elif OP == "min":
            return tl.min(v, axis=0, return_indices=return_indices,
                          return_indices_tie_break_left=return_indices_tie_break_left, keep_dims=keep_dims)
        elif OP == "xor_sum":
            return tl.xor_sum(v, axis=0, keep_dims=keep_dims)
        elif OP == "reduce_or":
            return tl.reduce_or(v, axis=0, keep_dims=keep_dims)
        else:
            return tl.reduce(v, 0, combine_fn, keep_dims=keep_dims)
    elif _castpile_combines(OP):  # no identity: the valid entries are combined, pairwise in stack order
        r, anywhere = _castpile_tree(v, valid, OP, combine_fn)
        r = tl.where(anywhere, r, tl.zeros_like(r))
        if keep_dims:
            r = tl.expand_dims(r, 0)
        return r
    else:
        v = v.to(_castpile_accumulator(v.dtype, OP, dtype, return_indices))
        v = tl.where(valid, v, _castpile_identity(v.dtype, OP))
        anywhere = tl.max(valid.to(tl.int32), axis=0, keep_dims=keep_dims) > 0
        if return_indices:
            pos = tl.arange(0, ptrs.shape[0])
            for _ in tl.static_range(len(ptrs.shape) - 1):
                pos = tl.expand_dims(pos, len(pos.shape))
            pos = tl.where(valid, pos, 2**31 - 1)
            if OP == "max":
                r, at = tl.reduce((v, pos), 0, _castpile_first_max, keep_dims=keep_dims)
            else:
                r, at = tl.reduce((v, pos), 0, _castpile_first_min, keep_dims=keep_dims)
            return tl.where(anywhere, r, tl.zeros_like(r)), tl.where(anywhere, at, tl.zeros_like(at))
        else:
            if OP == "sum":
                r = tl.sum(v, axis=0, keep_dims=keep_dims, dtype=v.dtype)
            elif OP == "max":
                r = tl.max(v, axis=0, keep_dims=keep_dims)
            else:
                r = tl.min(v, axis=0, keep_dims=keep_dims)
            return tl.where(anywhere, r, tl.zeros_like(r))


@triton.jit
def _castpile_pointers(src, count: tl.constexpr, smask, example, offs, mask, align: tl.constexpr = None, user_mask=None,
                       base=None):
    """The P + I pointer tensor of an access and its mask (never ``None``): ``mask`` and ``user_mask`` (shape I) ANDed in;
    each buffer's pointer advanced by ``base`` before the offsets are added (:func:`_castpile_rebased`)."""
    offs = _castpile_offsets(offs, base)
    ptr_ty = tl.pointer_type(example.dtype.element_ty)
    if src.dtype.is_ptr():
        rows = tl.arange(0, triton.next_power_of_2(count))
        valid = rows < count
        if smask is not None:  # a table slice's ptr_mask, of its padded extent
            valid = valid & smask
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
    ptrs = _castpile_rebased(ptrs, base)
    for _ in tl.static_range(len(offs.shape)):
        ptrs = tl.expand_dims(ptrs, len(ptrs.shape))
        valid = tl.expand_dims(valid, len(valid.shape))
    R: tl.constexpr = len(ptrs.shape) - len(offs.shape)
    ptrs = ptrs + _castpile_prepend(offs, R)
    if mask is not None:
        valid = valid & _castpile_prepend(mask, R)
    if user_mask is not None:
        valid = valid & _castpile_prepend(user_mask, R)
    # The all-true mask on the left: Triton's interpreter gives a comparison's result the type of its operands,
    # so a scalar mask (pid < live) splatted to a block holds int32 lanes; `&` takes its left operand's type and
    # turns the lanes back to booleans, and Triton 3.9's interpreter refuses a mask that is not boolean.
    return ptrs, tl.full(ptrs.shape, 1, tl.int1) & tl.broadcast_to(valid, ptrs.shape)


@triton.jit
def _castpile_load_gather(src, count: tl.constexpr, smask, example, offs, bounds, mask=None, other=None,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None, base=None):
    """Load P + I elements with one gather."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    if other is None:
        other = 0
    return tl.load(ptrs, mask=valid, other=other, cache_modifier=cache_modifier,
                   eviction_policy=eviction_policy, volatile=volatile)


@triton.jit
def _castpile_store_gather(src, count: tl.constexpr, smask, example, offs, bounds, value, mask=None,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None,
                           base=None, site: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I) with one scatter; a value that does not broadcast is an error
    naming the store's ``site``."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    _castpile_fits(tl.cast(value, example.dtype.element_ty).shape, ptrs.shape, site)
    tl.store(ptrs, _castpile_full(value, ptrs, example), mask=valid, cache_modifier=cache_modifier,
             eviction_policy=eviction_policy)


@triton.jit
def _castpile_atomic_gather(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, value, mask=None,
                            sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                            base=None, keep_old: tl.constexpr = True):
    """An atomic read-modify-write on all P + I elements at once; the old values."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    old = _castpile_atomic_op(OP, ptrs, _castpile_full(value, ptrs, example), valid, sem, scope)
    return tl.where(valid, old, tl.zeros_like(old))  # masked-off lanes hold 0, as in a masked load


@triton.jit
def _castpile_atomic_cas_gather(src, count: tl.constexpr, smask, example, offs, bounds, cmp, value,
                                sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                                base=None, keep_old: tl.constexpr = True):
    """Compare-and-swap on all P + I elements at once."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, base=base)
    old = _castpile_cas(ptrs, valid, example, cmp, value, sem, scope)
    return tl.where(valid, old, tl.zeros_like(old))  # masked-off lanes hold 0, as in a masked load


@triton.jit
def _castpile_signal(src, count: tl.constexpr, smask, example, offs, bounds, value=1, wait_for=None, mask=None,
                     op: tl.constexpr = tl.constexpr("set"), sem: tl.constexpr = tl.constexpr("release"),
                     scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None, site: tl.constexpr = None,
                     base=None):
    """``castpile.signal`` on a multicast access: every addressed flag set to ``value`` (``op="add"``: ``value``
    added), by :func:`_castpile_signal_lanes`."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    _castpile_signal_lanes(ptrs, valid, example, value, wait_for, op, sem, scope, site)


@triton.jit
def _castpile_wait(src, count: tl.constexpr, smask, example, offs, bounds, value=1, reset=0, mask=None,
                   cmp: tl.constexpr = tl.constexpr("eq"), sem: tl.constexpr = tl.constexpr("acquire"),
                   scope: tl.constexpr = tl.constexpr("sys"), decrement: tl.constexpr = False,
                   keep: tl.constexpr = False, align: tl.constexpr = None, site: tl.constexpr = None,
                   written: tl.constexpr = tl.constexpr(""), base=None):
    """``castpile.wait`` on a multicast access; with ``keep``, the values that satisfied it, shape P + I."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    return _castpile_wait_flags(ptrs, value, reset, valid, cmp, sem, scope, decrement, keep, site, written)
