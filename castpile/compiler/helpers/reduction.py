"""The arithmetic of a reduction: the elementwise steps before it, its accumulator and its fold over buffers.

``OP`` names the reduction: ``"sum"``, ``"max"``, ``"min"`` (``tl.argmax`` / ``argmin`` are ``max`` / ``min`` with
positions), or one that folds with a combine function and no identity: ``"reduce"`` (``tl.reduce``'s
``combine_fn``), ``"xor_sum"``, ``"reduce_or"``."""

import triton
import triton.language as tl

from .common import _castpile_lane_mask


@triton.constexpr_function
def _castpile_accumulator(dtype, OP, sum_dtype, indices):
    """The type Triton's ``tl.sum`` / ``max`` / ``min`` of ``dtype`` reduces in: ``tl.sum``'s ``dtype=``
    (``sum_dtype``), else int32 / uint32 for narrower integers; ``max`` / ``min``: float32 for bfloat16 and,
    without ``return_indices``, float32 / int32 for any narrower type; a combine function's: ``dtype``."""
    if _castpile_combines(OP):
        return dtype
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
def _castpile_combines(OP):
    """Whether the reduction ``OP`` folds with a combine function (:func:`_castpile_combine`), without an identity."""
    return OP in ("reduce", "xor_sum", "reduce_or")


@triton.jit
def _castpile_combine(OP: tl.constexpr, combine_fn: tl.constexpr, a, b):
    """``a`` and ``b`` combined as the reduction ``OP`` combines, elementwise: xor, or, or ``combine_fn(a, b)``."""
    if OP == "xor_sum":
        r = a ^ b
    elif OP == "reduce_or":
        r = a | b
    else:
        r = combine_fn(a, b)
    return r


@triton.constexpr_function
def _castpile_columns(shape):
    """The product of ``shape``'s extents after the first."""
    count = 1
    for extent in shape[1:]:
        count *= extent
    return count


@triton.constexpr_function
def _castpile_ended(shape):
    """``shape`` with its first extent moved last as 1."""
    return [*shape[1:], 1]


@triton.constexpr_function
def _castpile_paired(shape):
    """``shape`` with its last extent ``n`` split into ``(n // 2, 2)``."""
    return [*shape[:-1], shape[-1] // 2, 2]


@triton.constexpr_function
def _castpile_halvings(n):
    """How many times a power of two ``n`` halves down to 1."""
    return int(n).bit_length() - 1


@triton.jit
def _castpile_keep_left(a, valid_a, b, valid_b):
    """The combine that keeps its left pair (what a reduction over an extent of 1 needs)."""
    return a, valid_a


@triton.jit
def _castpile_tree(v, valid, OP: tl.constexpr, combine_fn: tl.constexpr):
    """The reduction ``OP`` (:func:`_castpile_combine`) of ``v`` over dim 0 (a power of two), of the entries
    ``valid`` marks only, in stack order: neighbours are combined pairwise, level by level, an invalid entry
    leaving its neighbour as it is; and whether each lane had a valid entry.  The entries stand in columns (the
    other dims flattened, dim 0 last: Triton takes no computed permutation), then the lanes as they were."""
    ended: tl.constexpr = _castpile_ended(v.shape)
    last: tl.constexpr = len(v.shape) - 1
    rows: tl.constexpr = v.shape[0]
    v = tl.permute(tl.reshape(v, (rows, _castpile_columns(v.shape))), (1, 0))
    valid = tl.permute(tl.reshape(valid, (rows, _castpile_columns(valid.shape))), (1, 0))
    for _ in tl.static_range(_castpile_halvings(rows)):
        a, b = tl.split(tl.reshape(v, _castpile_paired(v.shape)))
        valid_a, valid_b = tl.split(tl.reshape(valid, _castpile_paired(valid.shape)))
        v = tl.where(valid_a & valid_b, _castpile_combine(OP, combine_fn, a, b), tl.where(valid_a, a, b))
        valid = valid_a | valid_b
    return tl.reduce((tl.reshape(v, ended), tl.reshape(valid, ended)), last, _castpile_keep_left)


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
    """Where the operand of step ``k`` of ``steps`` sits among the steps' operands (``neg`` and the math
    functions have none)."""
    arithmetic = ("add", "sub", "mul", "truediv", "floordiv", "mod")
    casts = ("to", "bitcast", "to_rtne", "to_rtz")
    return sum(1 for kind in steps.split()[:k] if kind in casts or kind in arithmetic or kind[1:] in arithmetic)


@triton.constexpr_function
def _castpile_is_math(steps, k):
    """Whether step ``k`` of ``steps`` is one of Triton's math functions (:func:`_castpile_math`; no operand)."""
    math = ("abs", "ceil", "cos", "erf", "exp", "exp2", "floor", "log", "log2", "rsqrt", "sigmoid", "sin", "sqrt")
    return steps.split()[k] in (*math, "sqrt_rn")


@triton.constexpr_function
def _castpile_other_axis(axis, name, site):
    """True when a multi-operand ``tl.reduce`` of an access of ``name`` reduces another axis than the stack's (0);
    else an error naming the call's ``site`` (``"path:line"``): the stack's padded and ``ptr_mask``-false buffers
    would take part."""
    if axis != 0:
        return True
    where = "" if site is None else f"{site}: error: "
    raise ValueError(f"{where}tl.reduce over axis 0 of '{name}' with several operands: castpile folds a stack's valid "
                     "buffers only for a reduction of one operand, and a tuple's padded or ptr_mask-false buffers would "
                     "take part (reduce the access alone, or use tl.max/tl.min(..., return_indices=True) for the "
                     "positions)")


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
def _castpile_math(v, KIND: tl.constexpr):
    """``v`` through the Triton math function named ``KIND``."""
    if KIND == "abs":
        r = tl.abs(v)
    elif KIND == "ceil":
        r = tl.ceil(v)
    elif KIND == "cos":
        r = tl.cos(v)
    elif KIND == "erf":
        r = tl.erf(v)
    elif KIND == "exp":
        r = tl.exp(v)
    elif KIND == "exp2":
        r = tl.exp2(v)
    elif KIND == "floor":
        r = tl.floor(v)
    elif KIND == "log":
        r = tl.log(v)
    elif KIND == "log2":
        r = tl.log2(v)
    elif KIND == "rsqrt":
        r = tl.rsqrt(v)
    elif KIND == "sigmoid":
        r = tl.sigmoid(v)
    elif KIND == "sin":
        r = tl.sin(v)
    elif KIND == "sqrt":
        r = tl.sqrt(v)
    else:
        r = tl.sqrt_rn(v)
    return r


@triton.jit
def _castpile_apply(v, steps: tl.constexpr, operands):
    """``v`` through the elementwise steps that stand between an access and its reduction, in order: ``to``,
    ``bitcast``, ``to_rtne``, ``to_rtz`` (``.to(T, ...)``), an operator with a scalar operand on the right (``add``,
    ``sub``, ``mul``, ``truediv``, ``floordiv``, ``mod``) or on the left (``radd``, ``rsub``, ...), ``neg``, and
    Triton's elementwise math functions (``exp``: ``tl.exp(v)``, :func:`_castpile_math`)."""
    for k in tl.static_range(_castpile_step_count(steps)):
        if _castpile_step(steps, k) == "neg":
            v = -v
        elif _castpile_is_math(steps, k):
            v = _castpile_math(v, _castpile_step(steps, k))
        else:
            v = _castpile_apply_one(v, _castpile_step(steps, k), operands[_castpile_operand(steps, k)])
    return v


@triton.jit
def _castpile_fold(p: tl.constexpr, x, valid, acc, at, seen, OP: tl.constexpr, steps: tl.constexpr, operands,
                   dtype: tl.constexpr, indices: tl.constexpr, combine_fn: tl.constexpr = None):
    """Buffer ``p``'s loaded elements ``x``, taken through ``steps`` (:func:`_castpile_apply`) and the conversion
    the reduction makes (``dtype``: ``tl.sum``'s), folded into ``acc``, the reduction of the buffers before it;
    ``at``: the position each lane's max / min comes from (``indices``; the first on a tie); ``seen``: the lanes
    some valid buffer reached.  ``valid`` says whether buffer ``p`` is; ``p == 0`` starts the fold.  A
    reduction with a combine function (``combine_fn``: ``tl.reduce``'s) has no identity: a lane's first valid
    buffer starts it.  A table's reductions make this step per buffer, however they reach it."""
    v = _castpile_apply(x, steps, operands)
    v = v.to(_castpile_accumulator(v.dtype, OP, dtype, indices))
    if not _castpile_combines(OP):
        v = tl.where(valid, v, _castpile_identity(v.dtype, OP))
    if p == 0:
        if OP == "sum":  # from zero, as a hand-written loop sums (a sum of -0.0 gives 0.0): Triton schedules it better
            acc = tl.zeros(v.shape, v.dtype) + v
        else:
            acc = v
        at = tl.zeros(v.shape, tl.int32)
        seen = _castpile_lane_mask(valid, None, v)
    elif _castpile_combines(OP):
        acc = tl.where(valid, tl.where(seen, _castpile_combine(OP, combine_fn, acc, v), v), acc)
        seen = seen | valid
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
def _castpile_folded(acc, at, seen, bounds, other, steps: tl.constexpr, keep_dims: tl.constexpr,
                     indices: tl.constexpr, OP: tl.constexpr):
    """The result of a fold (:func:`_castpile_fold`) of the reduction ``OP``: a lane that no valid buffer reached,
    or out of ``bounds``, gives 0 and position 0 (a lane out of bounds holds value 0 already when its loads gave 0,
    no ``other``, through ``steps`` that keep 0, and ``OP`` is a sum, max or min; its position may be that of a
    later buffer when ``ptr_mask`` left out the first); ``keep_dims`` keeps the stack dim as extent 1; with
    ``indices``, the values and their positions."""
    zeroed: tl.constexpr = (other is None and _castpile_keeps_zero(steps) and not _castpile_combines(OP)
                            and not indices)
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
