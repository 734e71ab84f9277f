"""The single-GPU benchmark kernels in the castpile language (transpiled into ``generated/``).

Each reads or writes W same-layout bf16 buffers named by a table of W
addresses.  The ``_u`` twins omit ``align=16``: Triton then cannot prove the
buffers' alignment and issues scalar 16-bit accesses.  ``stack_row_norm`` is the
row-normalising kernel whose stack sum converts each buffer to fp32 first.
"""

import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def stack_sum(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum of the W buffers`` (fp32 accumulation)."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = _castpile_reduce_loop(bufs, W, None, ex, offs, (offs < n), "sum", steps="to", operands=(tl.float32,), align=16)
    tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def stack_store(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer ``= src`` (broadcast store)."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    _castpile_store_gather(bufs, W, None, ex, offs, (offs < n), x[None, :], align=16, site='benchmarks/kernels/stack_kernels.py:29')


@triton.jit
def stack_store_cs(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_store`` with streaming stores (``cache_modifier=".cs"``), for benchmarks/sweeps/sweep_store.py."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    _castpile_store_gather(bufs, W, None, ex, offs, (offs < n), x[None, :], cache_modifier=".cs", align=16, site='benchmarks/kernels/stack_kernels.py:38')


@triton.jit
def stack_gather(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``out[w, :] = buffer w`` (out is W x n)."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, W)[:, None]
    tl.store(out + rows * n + offs[None, :], _castpile_load_gather(bufs, W, None, ex, offs, (offs < n), align=16), mask=offs[None, :] < n)


@triton.jit
def stack_sum_u(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_sum`` without ``align=``."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = _castpile_reduce_loop(bufs, W, None, ex, offs, (offs < n), "sum", steps="to", operands=(tl.float32,))
    tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)


@triton.jit
def stack_store_u(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_store`` without ``align=``."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n)
    _castpile_store_gather(bufs, W, None, ex, offs, (offs < n), x[None, :], site='benchmarks/kernels/stack_kernels.py:65')


@triton.jit
def stack_gather_u(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """``stack_gather`` without ``align=``."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, W)[:, None]
    tl.store(out + rows * n + offs[None, :], _castpile_load_gather(bufs, W, None, ex, offs, (offs < n)), mask=offs[None, :] < n)


@triton.jit
def stack_scatter_add(ex, table, vals, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Every buffer ``+= vals`` with relaxed atomics whose old values are never used."""
    bufs = table
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(vals + offs, mask=offs < n)
    _castpile_atomic_gather(bufs, W, None, ex, offs, (offs < n), "add", v[None, :], sem="relaxed", align=16, keep_old=False)


@triton.jit
def stack_row_norm(ex, table, out, M, D, eps, W: tl.constexpr, BLOCK_D: tl.constexpr):
    """Each row of ``out`` (M x D) = the row summed over the stack in fp32, over its root mean square; a
    persistent loop over the rows (BLOCK_D >= D)."""
    bufs = table
    cols = tl.arange(0, BLOCK_D)
    row = tl.program_id(0)
    while row < M:
        h = _castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", steps="to", operands=(tl.float32,), align=16, base=D*row)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=cols < D)
        row += tl.num_programs(0)


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_fits(value_shape, target_shape, site):
    """True when a value of ``value_shape`` broadcasts to ``target_shape`` (P + I); an error naming the
    store's ``site`` (``"path:line"``) when it does not."""
    value, target = [int(s) for s in list(value_shape)], [int(s) for s in list(target_shape)]
    if len(value) > len(target) or any(v not in (1, t) for v, t in zip(value[::-1], target[::-1])):
        where = "" if site is None else f"{site}: error: "
        raise ValueError(f"{where}a stored value of shape {tuple(value)} does not broadcast to the shape of "
                         f"the access, P + I = {tuple(target)}")
    return True


@triton.jit
def _castpile_prepend(x, r: tl.constexpr):
    """``x`` with ``r`` leading unit dims."""
    for _ in tl.static_range(r):
        x = tl.expand_dims(x, 0)
    return x


@triton.jit
def _castpile_entry_valid(smask, p: tl.constexpr):
    """Whether stack entry ``p`` is valid: entry ``p`` of ``smask`` (the ``ptr_mask``: of the tile's shape, entry
    ``p`` in row-major order; of a table slice's padded extent; a scalar for one buffer), or true without one."""
    if smask is None:
        valid = True
    elif len(smask.shape) == 0:
        valid = smask
    else:
        pos = tl.reshape(tl.arange(0, smask.numel), smask.shape)
        valid = tl.sum(tl.where(pos == p, smask.to(tl.int32), 0)) != 0
    return valid


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
def _castpile_offsets(offs, base=None):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor), and ``base`` added to it where that is no
    scalar (a scalar ``base`` joins the pointer instead)."""
    offs = offs + tl.zeros((), tl.int32)
    if base is not None:
        if len((base + tl.zeros((), tl.int32)).shape) != 0:
            offs = offs + base
    return offs


@triton.jit
def _castpile_rebased(ptr, base):
    """``ptr`` (one buffer's pointer, or a tile of them) advanced by ``base``: an access's index summands that castpile
    classed as scalars (``base=``; ``None``: none), which join the pointer before the tensor offsets do, as hand-written
    ``ptr + row * D + cols`` does.  A ``base`` that is no scalar after all is part of the offsets instead
    (:func:`_castpile_offsets`), and ``ptr`` is returned as it is."""
    if base is None:
        return ptr
    elif len((base + tl.zeros((), tl.int32)).shape) != 0:
        return ptr
    else:
        return ptr + base


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
def _castpile_full(value, ptrs, example):
    """``value`` cast to the buffers' type and broadcast (NumPy-style) to the shape of ``ptrs``."""
    value = tl.cast(value, example.dtype.element_ty)
    value = tl.broadcast_to(_castpile_prepend(value, len(ptrs.shape) - len(value.shape)), ptrs.shape)
    # A select materialises the broadcast: Triton 3.6's interpreter reads atomic operands as
    # contiguous arrays (compiled code is unaffected; the select folds away).
    return tl.where(tl.full(ptrs.shape, 1, tl.int1), value, value)


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
