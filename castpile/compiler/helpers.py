"""The Triton helpers that lowered multicast accesses call.

This file is real Triton: it is imported by the tests and, function by
function, copied after the last line of every transpiled module (only the
helpers a module uses, with the helpers they call).  Every access helper takes
the *stack* first, in one of two forms that castpile's binding produces:

* table form: ``src`` is a pointer to ``count`` int64 addresses (the sugar
  ``table[lo:hi]``, with ``lo`` already added), ``smask`` is ``None``;
* tile form: ``src`` is an integer tensor of addresses of any rank P (rank 0:
  one buffer, P = ()), ``count`` is ``src.numel`` and ``smask`` is ``None`` or a
  boolean tensor of the same shape marking valid entries.

then ``example`` (a pointer whose element type the buffers have), ``offs`` (the
element offsets, shape I) and ``bounds`` (the bounds mask, shape I, or ``None``),
then the arguments of the user's call in the contract's order, the user's ``mask``
among them.  Results have shape P + I, with P padded to powers of two; padded or
masked entries are never read or written.  P + I may be ``()``, and a mask may be a
tensor, a scalar or a ``tl.constexpr`` bool: Triton compiles a scalar as a scalar (the
interpreter runs it as a NumPy array), so no helper reduces one (``tl.sum`` of a scalar
does not compile).  An access whose indices must be
evaluated once passes ``*_castpile_index(indices, extents, strides)`` for
``offs, bounds``.

``_loop`` helpers walk the stack one buffer at a time; ``_gather`` helpers build
the whole P + I pointer tensor and issue one memory operation.
"""

import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_leading_ones(shape, r):
    """True when the first ``r`` extents of ``shape`` are all 1."""
    return all(int(s) == 1 for s in list(shape)[:r])


@triton.constexpr_function
def _castpile_accumulator(dtype, OP, sum_dtype, indices):
    """The type Triton's ``tl.sum`` / ``max`` / ``min`` of ``dtype`` reduces in: ``tl.sum``'s ``dtype=``
    (``sum_dtype``), else int32 / uint32 for narrower integers; ``max`` / ``min``: float32 for bfloat16 and,
    without ``return_indices``, float32 / int32 for any narrower type."""
    if OP == "sum":
        if sum_dtype is not None:
            return sum_dtype
        if dtype.is_int_signed() and dtype.int_bitwidth < 32:
            return tl.int32
        if dtype.is_int_unsigned() and dtype.int_bitwidth < 32:
            return tl.uint32
        return dtype
    if dtype.is_bf16():
        return tl.float32
    if not indices and dtype.primitive_bitwidth < 32:
        return tl.float32 if dtype.is_floating() else tl.int32
    return dtype


@triton.constexpr_function
def _castpile_step_count(steps):
    """How many elementwise steps ``steps`` (their kinds, space-separated) names."""
    return len(steps.split())


@triton.constexpr_function
def _castpile_step(steps, k):
    """The kind of step ``k`` of ``steps``."""
    return steps.split()[k]


@triton.constexpr_function
def _castpile_operand(steps, k):
    """Where the operand of step ``k`` of ``steps`` sits among the steps' operands (``neg`` has none)."""
    return sum(1 for kind in steps.split()[:k] if kind != "neg")


@triton.constexpr_function
def _castpile_keeps_zero(steps):
    """Whether every step of ``steps`` turns 0 into 0, so that lanes whose loads gave 0 still hold 0."""
    return all(kind in ("to", "bitcast", "to_rtne", "to_rtz", "neg") for kind in steps.split())


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
def _castpile_index(indices, extents, strides):
    """``offs, bounds`` of an access from its indices, each evaluated once by the caller."""
    offs = _castpile_offsets(indices[0]) * strides[0]
    for d in tl.static_range(1, len(indices)):
        offs = offs + indices[d] * strides[d]
    if extents is None:  # no bounds: all true (a tuple with None does not compile)
        return offs, tl.full(offs.shape, 1, tl.int1)
    else:
        bounds = (indices[0] >= 0) & (indices[0] < extents[0])
        for d in tl.static_range(1, len(indices)):
            bounds = bounds & (indices[d] >= 0) & (indices[d] < extents[d])
        return offs, bounds


@triton.jit
def _castpile_in_order(values, ORDER: tl.constexpr):
    """``values``, evaluated in the order the user wrote them, in the order a helper takes them."""
    if len(ORDER) == 2:
        return values[ORDER[0]], values[ORDER[1]]
    else:
        return values[ORDER[0]], values[ORDER[1]], values[ORDER[2]]


@triton.jit
def _castpile_span(extent: tl.constexpr, d: tl.constexpr, r: tl.constexpr):
    """``tl.arange(0, extent)`` as dim ``d`` of ``r`` trailing dims (what ``...`` stands for)."""
    x = tl.arange(0, extent)
    for _ in tl.static_range(d):
        x = tl.expand_dims(x, 0)
    for _ in tl.static_range(r - 1 - d):
        x = tl.expand_dims(x, len(x.shape))
    return x


@triton.jit
def _castpile_trailing(x, r: tl.constexpr):
    """``x`` with ``r`` trailing unit dims (an explicit index before ``...``)."""
    x = _castpile_offsets(x)
    for _ in tl.static_range(r):
        x = tl.expand_dims(x, len(x.shape))
    return x


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
def _castpile_apply_one(v, KIND: tl.constexpr, x):
    """``v`` through one step of :func:`_castpile_apply` whose operand is ``x``."""
    if KIND == "to":
        r = v.to(x)
    elif KIND == "bitcast":
        r = v.to(x, bitcast=True)
    elif KIND == "to_rtne":
        r = v.to(x, fp_downcast_rounding="rtne")
    elif KIND == "to_rtz":
        r = v.to(x, fp_downcast_rounding="rtz")
    elif KIND == "add":
        r = v + x
    elif KIND == "radd":
        r = x + v
    elif KIND == "sub":
        r = v - x
    elif KIND == "rsub":
        r = x - v
    elif KIND == "mul":
        r = v * x
    elif KIND == "rmul":
        r = x * v
    elif KIND == "truediv":
        r = v / x
    elif KIND == "rtruediv":
        r = x / v
    elif KIND == "floordiv":
        r = v // x
    elif KIND == "rfloordiv":
        r = x // v
    elif KIND == "mod":
        r = v % x
    else:
        r = x % v
    return r


@triton.jit
def _castpile_apply(v, steps: tl.constexpr, operands):
    """``v`` through the elementwise steps that stand between an access and its reduction, in order: ``to``,
    ``bitcast``, ``to_rtne``, ``to_rtz`` (``.to(T, ...)``), an operator with a scalar operand on the right (``add``,
    ``sub``, ``mul``, ``truediv``, ``floordiv``, ``mod``) or on the left (``radd``, ``rsub``, ...), ``neg``."""
    for k in tl.static_range(_castpile_step_count(steps)):
        if _castpile_step(steps, k) == "neg":
            v = -v
        else:
            v = _castpile_apply_one(v, _castpile_step(steps, k), operands[_castpile_operand(steps, k)])
    return v


@triton.jit
def _castpile_fold(p: tl.constexpr, v, valid, acc, at, seen, OP: tl.constexpr, indices: tl.constexpr):
    """Buffer ``p``'s values ``v`` (of the accumulator's type) folded into ``acc``, the reduction of the buffers
    before it; ``at``: the position each lane's max / min comes from (``indices``; the first on a tie); ``seen``:
    the lanes some valid buffer reached.  ``valid`` says whether buffer ``p`` is; ``p == 0`` starts the fold."""
    v = tl.where(valid, v, _castpile_identity(v.dtype, OP))
    if p == 0:
        acc = v
        at = tl.zeros(v.shape, tl.int32)
        seen = _castpile_lane_mask(valid, None, v)
    elif indices:
        if OP == "max":
            better = v > acc
        else:
            better = v < acc
        take = valid & (better | ~seen)
        acc = tl.where(take, v, acc)
        at = tl.where(take, p, at)
        seen = seen | valid
    else:
        if OP == "sum":
            acc = acc + v
        elif OP == "max":
            acc = tl.maximum(acc, v)
        else:
            acc = tl.minimum(acc, v)
        seen = seen | valid
    return acc, at, seen


@triton.jit
def _castpile_folded(acc, at, seen, bounds, zeroed: tl.constexpr, keep_dims: tl.constexpr, indices: tl.constexpr):
    """The result of a fold (:func:`_castpile_fold`): a lane that no valid buffer reached, or out of ``bounds``,
    gives 0 and position 0 (``zeroed``: its loads gave 0 and it holds 0 already); ``keep_dims`` keeps the stack
    dim as extent 1; with ``indices``, the values and their positions."""
    live = seen
    if bounds is not None and not zeroed:
        live = live & bounds
    acc = tl.where(live, acc, tl.zeros_like(acc))
    at = tl.where(live, at, tl.zeros_like(at))
    if keep_dims:
        acc = tl.expand_dims(acc, 0)
        at = tl.expand_dims(at, 0)
    if indices:
        return acc, at
    else:
        return acc


@triton.jit
def _castpile_first_max(v1, i1, v2, i2):
    """The combine of a max with positions: the larger value, on a tie the smaller position."""
    take = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take, v1, v2), tl.where(take, i1, i2)


@triton.jit
def _castpile_first_min(v1, i1, v2, i2):
    """The combine of a min with positions: the smaller value, on a tie the smaller position."""
    take = (v1 < v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take, v1, v2), tl.where(take, i1, i2)


@triton.jit
def _castpile_load_loop(src, count: tl.constexpr, smask, example, offs, bounds, mask=None, other=None,
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
        v = tl.load(peer + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        res = tl.where(pos == p, _castpile_prepend(v, R), res)
    return res


@triton.jit
def _castpile_reduce_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                          other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                          keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                          return_indices_tie_break_left: tl.constexpr = True,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None):
    """``tl.sum``/``max``/``min`` over axis 0 of a table's access, one buffer at a time, without the P + I tensor.

    Each valid buffer's elements are loaded, taken through ``steps`` (:func:`_castpile_apply`) and the
    conversion the reduction makes, and folded in stack order; ``return_indices``: and the positions (a tie goes
    to the first buffer, whichever ``return_indices_tie_break_left``).  Lanes the user's ``mask`` turns off take
    part as ``other``; a lane out of bounds gives 0 (position 0).
    """
    offs = _castpile_offsets(offs)
    acc = None  # the fold starts at buffer 0
    at = None
    seen = None
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        v = tl.load(peer + offs, mask=_castpile_lane_mask(valid, bounds, offs, mask), other=0 if other is None else other,
                    cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        v = _castpile_apply(v, steps, operands)
        v = v.to(_castpile_accumulator(v.dtype, OP, dtype, return_indices))
        acc, at, seen = _castpile_fold(p, v, valid, acc, at, seen, OP, return_indices)
    zeroed: tl.constexpr = other is None and _castpile_keeps_zero(steps)
    return _castpile_folded(acc, at, seen, bounds, zeroed, keep_dims, return_indices)


@triton.jit
def _castpile_reduce_gather(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                            other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                            keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                            return_indices_tie_break_left: tl.constexpr = True,
                            cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                            volatile: tl.constexpr = False, align: tl.constexpr = None):
    """``tl.sum``/``max``/``min`` over axis 0 of the P + I tensor of a tile's access, of its valid entries only.

    The tensor is loaded, taken through ``steps`` (:func:`_castpile_apply`) and the conversion the reduction
    makes; padded, ``ptr_mask``-false and out-of-bounds entries take no part, and a lane with no valid entry
    gives 0 (position 0).  ``return_indices``: and the positions along the stack dim (a tie goes to the first
    valid entry).  Lanes the user's ``mask`` turns off take part as ``other``.  A rank-0 tile (P = ()) has no
    stack dim: its reduction is Triton's own, over axis 0 of the elements (masked lanes hold 0 or ``other``).
    """
    offs = _castpile_offsets(offs)
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align)
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
        else:
            return tl.min(v, axis=0, return_indices=return_indices,
                          return_indices_tie_break_left=return_indices_tie_break_left, keep_dims=keep_dims)
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
def _castpile_store_loop(src, count: tl.constexpr, smask, example, offs, bounds, value, mask=None,
                         cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""), align: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I), one buffer at a time."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        tl.store(peer + offs, _castpile_slice(value, pos, p, offs), mask=_castpile_lane_mask(valid, bounds, offs, mask),
                 cache_modifier=cache_modifier, eviction_policy=eviction_policy)


@triton.jit
def _castpile_atomic_loop(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, value, mask=None,
                          sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                          keep_old: tl.constexpr = True):
    """An atomic read-modify-write on every addressed element; the old values (``None`` unless ``keep_old``)."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        lanes = _castpile_lane_mask(valid, bounds, offs, mask)
        old = _castpile_atomic_op(OP, peer + offs, _castpile_slice(value, pos, p, offs), lanes, sem, scope)
        if keep_old:  # masked-off lanes hold 0, as in a masked load
            res = tl.where((pos == p) & _castpile_prepend(lanes, R), _castpile_prepend(old, R), res)
    if keep_old:
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
def _castpile_atomic_cas_loop(src, count: tl.constexpr, smask, example, offs, bounds, cmp, value,
                              sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                              keep_old: tl.constexpr = True):
    """Compare-and-swap on every addressed element, one buffer at a time; the old values (``None`` unless ``keep_old``)."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    cmp = tl.cast(cmp, dtype)
    value = tl.cast(value, dtype)
    res = _castpile_zeros(pos, offs, dtype)
    for p in tl.static_range(count):
        peer, valid = _castpile_peer(src, smask, p, example, align)
        lanes = _castpile_lane_mask(valid, bounds, offs)
        old = _castpile_cas(peer + offs, lanes, example, _castpile_slice(cmp, pos, p, offs),
                            _castpile_slice(value, pos, p, offs), sem, scope)
        if keep_old:  # masked-off lanes hold 0, as in a masked load
            res = tl.where((pos == p) & _castpile_prepend(lanes, R), _castpile_prepend(old, R), res)
    if keep_old:
        return res


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


@triton.jit
def _castpile_atomic_cas_gather(src, count: tl.constexpr, smask, example, offs, bounds, cmp, value,
                                sem: tl.constexpr = None, scope: tl.constexpr = None, align: tl.constexpr = None,
                                keep_old: tl.constexpr = True):
    """Compare-and-swap on all P + I elements at once."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align)
    old = _castpile_cas(ptrs, valid, example, cmp, value, sem, scope)
    return tl.where(valid, old, tl.zeros_like(old))  # masked-off lanes hold 0, as in a masked load


@triton.jit
def _castpile_signal(src, count: tl.constexpr, smask, example, offs, bounds, value=1, wait_for=None, mask=None,
                     sem: tl.constexpr = tl.constexpr("release"), scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None):
    """Set every addressed flag to ``value``.

    Without ``wait_for``: one atomic exchange.  With it: a compare-and-swap
    ``wait_for`` -> ``value``, retried on the lanes that have not succeeded yet
    (lanes that succeeded are masked off and stop touching their flag).
    """
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask)
    dtype = example.dtype.element_ty
    if wait_for is None:
        tl.atomic_xchg(ptrs, tl.cast(value, dtype), mask=valid, sem=sem, scope=scope)
    else:
        pending = valid
        while _castpile_any(pending):
            old = _castpile_cas(ptrs, pending, example, wait_for, value, sem, scope)
            pending = pending & (old != tl.cast(wait_for, dtype))


@triton.jit
def _castpile_any(lanes):
    """Whether any of ``lanes`` is true: a spin's condition (a scalar is its own: reducing one does not compile)."""
    if len(lanes.shape) == 0:
        return lanes
    else:
        return tl.sum(lanes.to(tl.int32)) > 0


@triton.jit
def _castpile_wait_flags(ptrs, value=1, reset=0, mask=None, sem: tl.constexpr = tl.constexpr("acquire"),
                         scope: tl.constexpr = tl.constexpr("sys")):
    """Spin until every flag at ``ptrs`` equals ``value``, then set it to ``reset``.

    A lane reads its flag with an atomic (``sem``, ``scope``) until it sees
    ``value``, resets it and is masked off from then on.
    """
    dtype = ptrs.dtype.element_ty
    pending = _castpile_lane_mask(True, mask, ptrs)
    while _castpile_any(pending):
        seen = tl.atomic_add(ptrs, tl.zeros(ptrs.shape, dtype), mask=pending, sem=sem, scope=scope)
        arrived = pending & (seen == tl.cast(value, dtype))
        tl.atomic_xchg(ptrs, tl.cast(reset, dtype) + tl.zeros(ptrs.shape, dtype), mask=arrived, sem=sem, scope=scope)
        pending = pending & ~arrived


@triton.jit
def _castpile_wait(src, count: tl.constexpr, smask, example, offs, bounds, value=1, reset=0, mask=None,
                   sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None):
    """``castpile.wait`` on a multicast access."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask)
    _castpile_wait_flags(ptrs, value, reset, valid, sem, scope)


# ---- remote="nvshmem" bindings (docs/nvshmem.md) ---------------------------------------------------
# A table entry is an address (a load/store reachable buffer) or ``local_address | (pe + 1) << 48``
# (a remote buffer: NVSHMEM names it by this rank's symmetric address and the PE).  Remote buffers
# are reached with block-scoped NVSHMEM get/put through this program's slice of a local scratch,
# whose address and size sit in the two int64 words before the table (``SymmetricTensor.remote_ptrs``).


def _castpile_nvshmem_functions():
    """NVSHMEM's device functions: torch's (``_nvshmem_triton``), or under ``TRITON_INTERPRET=1`` the
    simulator's stand-ins (``castpile.gpu.sim_nvshmem``), which move bytes through its shared memory."""
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        from castpile.gpu import sim_nvshmem as functions
    else:
        from torch.distributed._symmetric_memory import _nvshmem_triton as functions
    return functions


_castpile_nvshmem = _castpile_nvshmem_functions()


def _castpile_remote_kernel(kernel):
    """``kernel``, launching with NVSHMEM's device library linked in and registered with torch's
    ``requires_nvshmem`` (each compiled module is initialised for NVSHMEM); unchanged under ``TRITON_INTERPRET=1``.

    The library is looked for at the first launch, not here: the module's other kernels import and run
    without it, and a launch without it raises torch's error then.  The kernel stays a JITFunction
    (``requires_nvshmem`` returns a launch-only wrapper), so other jit functions can still call it; a kernel
    that calls it without a ``remote=`` binding of its own needs the same wrapping.  Wrapping twice changes nothing.
    """
    import os

    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or hasattr(kernel, "_castpile_nvshmem_libs"):
        return kernel
    run = kernel.run
    kernel._castpile_nvshmem_libs = extern_libs = {}

    def run_with_nvshmem(*args, **kwargs):
        if not extern_libs:
            from torch.distributed._symmetric_memory._nvshmem_triton import requires_nvshmem

            extern_libs.update(requires_nvshmem(kernel).extern_libs)
        return run(*args, **kwargs, extern_libs=extern_libs)

    kernel.run = run_with_nvshmem
    return kernel


@triton.constexpr_function
def _castpile_numel(shape):
    """The number of elements of ``shape``."""
    n = 1
    for s in list(shape):
        n *= int(s)
    return n


@triton.jit
def _castpile_flat(x):
    """``x`` as a 1-D tensor (a 0-d tensor becomes one element)."""
    if len(x.shape) == 0:
        return tl.expand_dims(x, 0)
    else:
        return tl.reshape(x, (_castpile_numel(x.shape),))


@triton.jit
def _castpile_unflat(x, like):
    """``x`` (1-D) in the shape of ``like``."""
    if len(like.shape) == 0:
        return tl.max(x, axis=0)
    else:
        return tl.reshape(x, like.shape)


@triton.jit
def _castpile_remote_entry(src, p: tl.constexpr):
    """Table entry ``p``: its address (48 bits) and its PE, -1 for a load/store reachable buffer."""
    entry = tl.load(src + p)
    return entry & 0xFFFFFFFFFFFF, (entry >> 48).to(tl.int32) - 1


@triton.jit
def _castpile_remote_scratch(table, example):
    """This program's slice of the scratch named before ``table``: a typed pointer and its size in elements."""
    base = tl.load(table - 2)
    total = tl.load(table - 1)
    programs = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)
    slot = tl.program_id(0) + tl.num_programs(0) * (tl.program_id(1) + tl.num_programs(1) * tl.program_id(2))
    region = total // programs // 16 * 16
    chunk = region // (example.dtype.element_ty.primitive_bitwidth // 8)
    tl.device_assert(chunk > 0, "castpile: the remote scratch has no room for one element per program")
    scratch = (base + slot.to(tl.int64) * region).to(tl.pointer_type(example.dtype.element_ty))
    return scratch, chunk


@triton.jit
def _castpile_address(addr, example, align: tl.constexpr):
    """``addr`` as a pointer to the buffers' type (``align`` bytes aligned if given)."""
    ptr = addr.to(tl.pointer_type(example.dtype.element_ty))
    if align is not None:
        ptr = tl.multiple_of(ptr, align)
    return ptr


@triton.jit
def _castpile_remote_get(addr, pe, example, table, offs, lanes, other):
    """The elements ``offs`` of PE ``pe``'s buffer (``addr``: this rank's symmetric address of it) where ``lanes``;
    ``other`` (or 0) elsewhere.  One NVSHMEM get per scratch-sized chunk of the span of the lanes' offsets."""
    scratch, chunk = _castpile_remote_scratch(table, example)
    dtype = example.dtype.element_ty
    flat = _castpile_flat(offs).to(tl.int64)
    live = _castpile_flat(lanes)
    fill = tl.zeros(offs.shape, dtype)
    if other is not None:
        fill = tl.broadcast_to(_castpile_prepend(tl.cast(other, dtype), len(offs.shape) - len(tl.cast(other, dtype).shape)), offs.shape)
    res = _castpile_flat(fill)
    start = tl.min(tl.where(live, flat, 1 << 62))
    hi = tl.max(tl.where(live, flat, -(1 << 62)))
    buffer = _castpile_address(addr, example, None)
    while start <= hi:
        n = tl.minimum(chunk, hi - start + 1)
        tl.debug_barrier()
        _castpile_nvshmem.get(scratch, buffer + start, n, pe)
        tl.debug_barrier()
        inside = live & (flat >= start) & (flat < start + n)
        res = tl.where(inside, tl.load(scratch + (flat - start), mask=inside, volatile=True), res)
        start = start + n
    return _castpile_unflat(res, offs)


@triton.jit
def _castpile_remote_put(addr, pe, example, table, offs, lanes, value):
    """Write ``value`` (broadcast to the offsets' shape) to the elements ``offs`` of PE ``pe``'s buffer where
    ``lanes``, and nowhere else: one NVSHMEM put when the lanes' offsets are exactly one contiguous run that fits
    the scratch, else one put per element (in lane order)."""
    scratch, chunk = _castpile_remote_scratch(table, example)
    dtype = example.dtype.element_ty
    flat = _castpile_flat(offs).to(tl.int64)
    live = _castpile_flat(lanes)
    value = tl.cast(value, dtype)
    vals = _castpile_flat(tl.broadcast_to(_castpile_prepend(value, len(offs.shape) - len(value.shape)), offs.shape))
    N: tl.constexpr = _castpile_numel(flat.shape)
    idx = tl.arange(0, N)
    buffer = _castpile_address(addr, example, None)
    count = tl.sum(live.to(tl.int32))
    lo = tl.min(tl.where(live, flat, 1 << 62))
    rel = tl.where(live, flat - lo, 1 << 62)
    ordered = tl.sort(rel)
    run = tl.sum(((idx < count) & (ordered != idx)).to(tl.int32)) == 0  # the offsets are lo, lo + 1, ..., once each
    if (count > 0) & run & (count <= chunk):
        tl.debug_barrier()
        tl.store(scratch + rel, vals, mask=live)
        tl.debug_barrier()
        _castpile_nvshmem.put(buffer + lo, scratch, count.to(tl.int64), pe)
        tl.debug_barrier()
    elif count > 0:
        g = chunk * 0
        while g < N:
            tl.debug_barrier()
            part = live & (idx >= g) & (idx < g + chunk)
            tl.store(scratch + (idx - g), vals, mask=part)
            tl.debug_barrier()
            q = g
            while (q < N) & (q < g + chunk):
                if tl.sum(tl.where(idx == q, part.to(tl.int32), 0)) != 0:
                    at = tl.sum(tl.where(idx == q, flat, 0))
                    _castpile_nvshmem.put(buffer + at, scratch + (q - g), 1, pe)
                q += 1
            g += chunk
        tl.debug_barrier()


@triton.jit
def _castpile_load_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, mask=None, other=None,
                          cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                          volatile: tl.constexpr = False, align: tl.constexpr = None):
    """Load P + I elements, one buffer at a time: loads from a reachable buffer, NVSHMEM gets from a remote one."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    dtype = example.dtype.element_ty
    res = _castpile_zeros(pos, offs, dtype)
    if other is not None:
        res = res + tl.cast(other, dtype)
    lanes = _castpile_lane_mask(True, bounds, offs, mask)
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        if pe < 0:
            v = tl.load(_castpile_address(addr, example, align) + offs, mask=lanes, other=other,
                        cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        else:
            v = _castpile_remote_get(addr, pe, example, table, offs, lanes, other)
        res = tl.where(pos == p, _castpile_prepend(v, R), res)
    return res


@triton.jit
def _castpile_reduce_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, OP: tl.constexpr, mask=None,
                            other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                            keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                            return_indices_tie_break_left: tl.constexpr = True,
                            cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                            volatile: tl.constexpr = False, align: tl.constexpr = None):
    """``tl.sum``/``max``/``min`` over a table's buffers, one at a time (remote ones fetched by NVSHMEM gets), as
    :func:`_castpile_reduce_loop` does."""
    offs = _castpile_offsets(offs)
    lanes = _castpile_lane_mask(True, bounds, offs, mask)
    fill = 0 if other is None else other
    acc = None  # the fold starts at buffer 0
    at = None
    seen = None
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        if pe < 0:  # `x`, not `v`: a name both branches define keeps one type across the unrolled buffers
            x = tl.load(_castpile_address(addr, example, align) + offs, mask=lanes, other=fill,
                        cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        else:
            x = _castpile_remote_get(addr, pe, example, table, offs, lanes, fill)
        v = _castpile_apply(x, steps, operands)
        v = v.to(_castpile_accumulator(v.dtype, OP, dtype, return_indices))
        acc, at, seen = _castpile_fold(p, v, True, acc, at, seen, OP, return_indices)
    zeroed: tl.constexpr = other is None and _castpile_keeps_zero(steps)
    return _castpile_folded(acc, at, seen, bounds, zeroed, keep_dims, return_indices)


@triton.jit
def _castpile_store_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, value, mask=None,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                           align: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I), one buffer at a time; remote buffers by NVSHMEM puts, complete
    (``quiet``) when the store returns."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    value = tl.cast(value, example.dtype.element_ty)
    lanes = _castpile_lane_mask(True, bounds, offs, mask)
    remote = False
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        part = _castpile_slice(value, pos, p, offs)
        if pe < 0:
            tl.store(_castpile_address(addr, example, align) + offs, part, mask=lanes,
                     cache_modifier=cache_modifier, eviction_policy=eviction_policy)
        else:
            _castpile_remote_put(addr, pe, example, table, offs, lanes, part)
        remote = remote | (pe >= 0)
    if remote:
        _castpile_nvshmem.quiet()


@triton.jit
def _castpile_signal_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, value=1, wait_for=None,
                            mask=None, sem: tl.constexpr = tl.constexpr("release"), scope: tl.constexpr = tl.constexpr("sys"),
                            align: tl.constexpr = None):
    """``castpile.signal`` one buffer at a time.  A remote flag: earlier puts completed (``quiet``), then
    ``value`` put; with ``wait_for``, polled by gets until it holds ``wait_for``, then ``value`` put (no
    remote compare-and-swap: correct when one signaller owns each flag, as in a barrier)."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    dtype = example.dtype.element_ty
    lanes = _castpile_flat(_castpile_lane_mask(True, bounds, offs, mask))  # flat: a spin needs a 1-D tensor to reduce
    flat = _castpile_flat(offs)
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        part = _castpile_flat(_castpile_full(_castpile_slice(tl.cast(value, dtype), pos, p, offs), offs, example))
        if pe < 0:
            ptrs = _castpile_address(addr, example, align) + flat
            if wait_for is None:
                tl.atomic_xchg(ptrs, _castpile_full(part, ptrs, example), mask=lanes, sem=sem, scope=scope)
            else:
                pending = lanes
                while tl.sum(pending.to(tl.int32)) > 0:
                    old = _castpile_cas(ptrs, pending, example, wait_for, part, sem, scope)
                    pending = pending & (old != tl.cast(wait_for, dtype))
        else:
            _castpile_nvshmem.quiet()
            if wait_for is None:
                _castpile_remote_put(addr, pe, example, table, flat, lanes, part)
            else:
                pending = lanes
                while tl.sum(pending.to(tl.int32)) > 0:
                    seen = _castpile_remote_get(addr, pe, example, table, flat, pending, None)
                    free = pending & (seen == tl.cast(wait_for, dtype))
                    _castpile_remote_put(addr, pe, example, table, flat, free, part)
                    pending = pending & ~free
            _castpile_nvshmem.quiet()


@triton.jit
def _castpile_wait_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, value=1, reset=0, mask=None,
                          sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"),
                          align: tl.constexpr = None):
    """``castpile.wait`` one buffer at a time; a remote flag is polled by gets and reset by a put."""
    lanes = _castpile_flat(_castpile_lane_mask(True, bounds, _castpile_offsets(offs), mask))
    offs = _castpile_flat(_castpile_offsets(offs))  # flat: a spin needs a 1-D tensor to reduce
    dtype = example.dtype.element_ty
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        if pe < 0:
            _castpile_wait_flags(_castpile_address(addr, example, align) + offs, value, reset, lanes, sem, scope)
        else:
            pending = lanes
            while tl.sum(pending.to(tl.int32)) > 0:
                seen = _castpile_remote_get(addr, pe, example, table, offs, pending, None)
                arrived = pending & (seen == tl.cast(value, dtype))
                _castpile_remote_put(addr, pe, example, table, offs, arrived, reset)
                pending = pending & ~arrived
            _castpile_nvshmem.quiet()
