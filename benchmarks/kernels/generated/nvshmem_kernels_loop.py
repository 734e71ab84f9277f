"""Kernels written with remote="nvshmem" bindings (transpiled into ``generated/``), for check_nvshmem.py.

A one-shot all-reduce, a push all-gather and a fused all-reduce + residual + RMSNorm.
Peers whose table entries are addresses are read and written with loads and stores; the
others (remote, or tagged remote with ``force_remote``) with NVSHMEM gets and puts
(docs/nvshmem.md). Pass the tensor's ``remote_ptrs`` and ``signal_pad_remote_ptrs``
tables. Each block meets every rank's same block before reading (its peers' inputs are
written) and after (nobody overwrites an input a peer still reads).
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def remote_barrier(pad, pad_ptrs, rank, WORLD: tl.constexpr):
    """Block ``program_id`` of every rank meets here (the library's barrier, with its pads bound remote="nvshmem")."""
    slot = tl.program_id(0) * WORLD
    pads = pad_ptrs
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    _castpile_signal_remote(pads, WORLD, None, pad, rank + slot, None, pad_ptrs, 1, 0, sem="release", scope="sys")
    _castpile_wait_flags(pad + slot + peers, 1, 0, peers < WORLD, sem="acquire", scope="sys")
    tl.debug_barrier()


@triton.jit
def all_reduce_remote(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum over ranks of buf`` (fp32 accumulation), tiles strided over the grid."""
    bufs = buf_ptrs
    remote_barrier(pad, pad_ptrs, rank, WORLD)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = _castpile_reduce_remote(bufs, WORLD, None, buf, offs, (offs < n), buf_ptrs, "sum", steps="to", operands=(tl.float32,))
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    remote_barrier(pad, pad_ptrs, rank, WORLD)


@triton.jit
def all_reduce_residual_rmsnorm_remote(buf, buf_ptrs, pad, pad_ptrs, residual, weight, out, rank, m, d, eps,
                                       WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``residual += sum over ranks of buf`` (rows of ``d`` <= BLOCK, in bf16 as stored); ``out = rms_norm(residual)
    * weight`` in fp32, rows strided over the grid: the library's fused RMSNorm spelled with remote= bindings, with
    ``tl.rsqrt`` where the library divides and takes square roots IEEE-rounded (y agrees within one rounding)."""
    bufs = buf_ptrs
    remote_barrier(pad, pad_ptrs, rank, WORLD)
    cols = tl.arange(0, BLOCK)
    inside = cols < d
    w = tl.load(weight + cols, mask=inside, other=0.0).to(tl.float32)
    row = tl.program_id(0)
    while row < m:
        total = _castpile_reduce_remote(bufs, WORLD, None, buf, cols + d*row, (row < m) & (cols < d), buf_ptrs, "sum", steps="to", operands=(tl.float32,))
        h = (total + tl.load(residual + row * d + cols, mask=inside, other=0.0).to(tl.float32))
        h = h.to(residual.dtype.element_ty)
        tl.store(residual + row * d + cols, h, mask=inside)
        hf = h.to(tl.float32)
        scale = tl.rsqrt(tl.sum(hf * hf, axis=0) / d + eps)
        tl.store(out + row * d + cols, (hf * scale * w).to(out.dtype.element_ty), mask=inside)
        row += tl.num_programs(0)
    remote_barrier(pad, pad_ptrs, rank, WORLD)


@triton.jit
def all_gather_remote(buf, buf_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``buf`` [WORLD, n]: this rank's row ``rank`` stored into row ``rank`` of every rank's ``buf`` (a push
    all-gather: stores through the multicast tensor, puts for remote peers), tiles strided over the grid."""
    bufs = buf_ptrs
    remote_barrier(pad, pad_ptrs, rank, WORLD)  # no peer still reads the previous call's rows
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        _castpile_store_remote(bufs, WORLD, None, buf, cols + n*rank, (rank >= 0) & (rank < WORLD) & (cols < n), buf_ptrs, tl.load(buf + rank * n + cols, mask=cols < n)[None, :], site='benchmarks/kernels/nvshmem_kernels.py:77')
        tile += tl.num_programs(0)
    remote_barrier(pad, pad_ptrs, rank, WORLD)  # every row has arrived: a remote signal follows a quiet


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
import triton
import triton.language as tl


@triton.constexpr_function
def _castpile_leading_ones(shape, r):
    """True when the first ``r`` extents of ``shape`` are all 1."""
    return all(int(s) == 1 for s in list(shape)[:r])


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


@triton.constexpr_function
def _castpile_stack_shape(positions_shape, index_shape):
    """P + I from the shape of the stack positions (P + (1,) * len(I)) and I."""
    positions, index = list(positions_shape), list(index_shape)
    return tl.constexpr([int(s) for s in positions[: len(positions) - len(index)]] + [int(s) for s in index])


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
def _castpile_offsets(offs, base=None):
    """``offs`` as a tensor (a Python int index becomes a 0-d tensor), and ``base`` added to it where that is no
    scalar (a scalar ``base`` joins the pointer instead)."""
    offs = offs + tl.zeros((), tl.int32)
    if base is not None:
        if len((base + tl.zeros((), tl.int32)).shape) != 0:
            offs = offs + base
    return offs


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
def _castpile_full(value, ptrs, example):
    """``value`` cast to the buffers' type and broadcast (NumPy-style) to the shape of ``ptrs``."""
    value = tl.cast(value, example.dtype.element_ty)
    value = tl.broadcast_to(_castpile_prepend(value, len(ptrs.shape) - len(value.shape)), ptrs.shape)
    # A select materialises the broadcast: Triton 3.6's interpreter reads atomic operands as
    # contiguous arrays (compiled code is unaffected; the select folds away).
    return tl.where(tl.full(ptrs.shape, 1, tl.int1), value, value)


@triton.jit
def _castpile_any(lanes):
    """Whether any of ``lanes`` is true: a spin's condition (a scalar is its own: reducing one does not compile)."""
    if len(lanes.shape) == 0:
        return lanes
    else:
        return tl.sum(lanes.to(tl.int32)) > 0


@triton.jit
def _castpile_holds(flags, CMP: tl.constexpr, value):
    """Whether ``flags CMP value`` holds, lane by lane (the flag on the left: ``"ge"`` is ``flags >= value``)."""
    value = tl.cast(value, flags.dtype)
    if CMP == "eq":
        return flags == value
    elif CMP == "ne":
        return flags != value
    elif CMP == "ge":
        return flags >= value
    elif CMP == "gt":
        return flags > value
    elif CMP == "le":
        return flags <= value
    else:
        return flags < value


@triton.jit
def _castpile_anchored(ptrs, live):
    """``ptrs`` with each lane that is not ``live`` pointed at a live lane's flag (a scalar is its own).

    A compare-and-swap of a value for itself never changes memory, so such lanes may take part in one
    (``tl.atomic_cas`` has no mask) wherever they point, as long as it is memory the kernel may touch.
    """
    if len(ptrs.shape) == 0:
        return ptrs
    else:
        anchor = tl.max(tl.where(live, ptrs.to(tl.int64), 0))
        return tl.where(live, ptrs, anchor.to(ptrs.dtype))


@triton.constexpr_function
def _castpile_flag_options(site, call, kind, sem, scope, decrement=False, written="", wait_for_given=False,
                           ops="set add"):
    """True when the compile-time options of ``castpile.<call>`` are allowed: ``kind`` (a wait's ``cmp=``, a
    signal's ``op=``, one of ``ops``), ``sem=`` and ``scope=`` (or ``None``: Triton's default), a counting wait
    (``decrement``) without ``reset=`` or another ``cmp=`` than ``"ge"`` among the keywords ``written`` (names,
    space-separated), an add without ``wait_for=``; else an error naming the call's ``site`` (``"path:line"``) and
    what is allowed (a ``remote=`` signal's ``ops`` are ``"set"``)."""
    allowed = {
        "cmp": ("eq", "ne", "ge", "gt", "le", "lt"),
        "op": tuple(ops.split()),
        "sem": ("acquire", "release", "acq_rel", "relaxed"),
        "scope": ("gpu", "cta", "sys"),
    }
    where = "" if site is None else f"{site}: error: "
    for keyword, value in (("cmp" if call == "wait" else "op", kind), ("sem", sem), ("scope", scope)):
        if value is None and keyword in ("sem", "scope"):
            continue
        if value not in allowed[keyword]:
            spelled = ", ".join(f'"{name}"' for name in allowed[keyword])
            raise ValueError(f"{where}castpile.{call}: {keyword}= must be one of {spelled}, not {value!r}")
    if decrement not in (True, False):
        raise ValueError(f"{where}castpile.wait: decrement= must be True or False, not {decrement!r}")
    if decrement and ("reset" in written.split() or ("cmp" in written.split() and kind != "ge")):
        raise ValueError(f'{where}castpile.wait(decrement=True) is a counting semaphore: it takes cmp="ge" only and '
                         "no reset=")
    if kind == "add" and wait_for_given:
        raise ValueError(f'{where}castpile.signal: op="add" takes no wait_for= (an add never waits for a value)')
    return True


@triton.jit
def _castpile_arrive(ptrs, targets, pending, seen, value, reset, cmp: tl.constexpr, sem: tl.constexpr,
                     scope: tl.constexpr, decrement: tl.constexpr):
    """The lanes of ``pending`` whose flag, as the last poll ``seen`` it, satisfies the wait and was taken.

    Taken: reset to ``reset`` (``None``: left as it is), or with ``decrement`` (a counting semaphore, ``flag >=
    value``) lowered by ``value``, each by one compare-and-swap from the value seen at ``targets``
    (:func:`_castpile_anchored`), so that a flag that moved in between is polled again and no count is taken twice.
    """
    dtype = ptrs.dtype.element_ty
    if decrement:
        arrived = pending & _castpile_holds(seen, "ge", value)
        if _castpile_any(arrived):
            fresh = seen - tl.cast(value, dtype)
            old = tl.atomic_cas(targets, tl.where(arrived, seen, fresh), fresh, sem=sem, scope=scope)
            arrived = arrived & (old == seen)
    else:
        arrived = pending & _castpile_holds(seen, cmp, value)
        if reset is not None:
            if _castpile_any(arrived):  # polls that see nothing new touch the flags once, not twice
                fresh = tl.cast(reset, dtype) + tl.zeros(ptrs.shape, dtype)
                old = tl.atomic_cas(targets, tl.where(arrived, seen, fresh), fresh, sem=sem, scope=scope)
                arrived = arrived & (old == seen)
    return arrived


@triton.jit
def _castpile_wait_flags(ptrs, value=1, reset=0, mask=None, cmp: tl.constexpr = tl.constexpr("eq"),
                         sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"),
                         decrement: tl.constexpr = False, keep: tl.constexpr = False, site: tl.constexpr = None,
                         written: tl.constexpr = tl.constexpr("")):
    """Spin until every flag at ``ptrs`` satisfies ``flag cmp value``, then set it to ``reset`` (``None``: leave it);
    with ``decrement``, until every flag is ``>= value``, then take ``value`` from it.  With ``keep``, the values
    that satisfied the wait (0 where masked off).

    A lane reads its flag with an atomic (``sem``, ``scope``) until the value it sees satisfies the
    comparison and is taken (:func:`_castpile_arrive`), and is masked off from then on.  The one spin loop
    of every wait; its options are checked when Triton compiles it, errors naming the call's ``site``.
    """
    _castpile_flag_options(site, "wait", cmp, sem, scope, decrement, written)
    dtype = ptrs.dtype.element_ty
    pending = _castpile_lane_mask(True, mask, ptrs)
    targets = _castpile_anchored(ptrs, pending)
    if keep:
        got = tl.zeros(ptrs.shape, dtype)
    while _castpile_any(pending):
        seen = tl.atomic_add(ptrs, tl.zeros(ptrs.shape, dtype), mask=pending, sem=sem, scope=scope)
        arrived = _castpile_arrive(ptrs, targets, pending, seen, value, reset, cmp, sem, scope, decrement)
        if keep:
            got = tl.where(arrived, seen, got)
        pending = pending & ~arrived
    if keep:
        return got


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
    """Table entry ``p`` (``src`` points at the entries, or is one peer's entry, ``table[r]``): its address
    (48 bits) and its PE, -1 for a load/store reachable buffer."""
    if src.dtype.is_ptr():
        entry = tl.load(src + p)
    else:
        entry = src
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
def _castpile_reduce_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, OP: tl.constexpr, mask=None,
                            other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, dtype: tl.constexpr = None,
                            keep_dims: tl.constexpr = False, return_indices: tl.constexpr = False,
                            return_indices_tie_break_left: tl.constexpr = True,
                            cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                            volatile: tl.constexpr = False, align: tl.constexpr = None, combine_fn: tl.constexpr = None):
    """A reduction ``OP`` (see :mod:`.reduction`) over a table's buffers, one at a time (remote ones fetched by NVSHMEM gets), as
    :func:`_castpile_reduce_loop` does."""
    offs = _castpile_offsets(offs)
    fill = 0 if other is None else other
    acc = None  # the fold starts at buffer 0
    at = None
    seen = None
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        valid = _castpile_entry_valid(smask, p)
        lanes = _castpile_lane_mask(valid, bounds, offs, mask)
        if pe < 0:  # `x`, not `v`: a name both branches define keeps one type across the unrolled buffers
            x = tl.load(_castpile_address(addr, example, align) + offs, mask=lanes, other=fill,
                        cache_modifier=cache_modifier, eviction_policy=eviction_policy, volatile=volatile)
        else:
            x = _castpile_remote_get(addr, pe, example, table, offs, lanes, fill)
        acc, at, seen = _castpile_fold(p, x, valid, acc, at, seen, OP, steps, operands, dtype, return_indices,
                                        combine_fn)
    return _castpile_folded(acc, at, seen, bounds, other, steps, keep_dims, return_indices, OP)


@triton.jit
def _castpile_store_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, value, mask=None,
                           cache_modifier: tl.constexpr = tl.constexpr(""), eviction_policy: tl.constexpr = tl.constexpr(""),
                           align: tl.constexpr = None, site: tl.constexpr = None):
    """Store ``value`` (broadcast to P + I), one buffer at a time; remote buffers by NVSHMEM puts, complete
    (``quiet``) when the store returns; a value that does not broadcast is an error naming the store's ``site``."""
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    value = tl.cast(value, example.dtype.element_ty)
    _castpile_fits(value.shape, _castpile_stack_shape(pos.shape, offs.shape), site)
    remote = False
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        lanes = _castpile_lane_mask(_castpile_entry_valid(smask, p), bounds, offs, mask)
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
                            mask=None, op: tl.constexpr = tl.constexpr("set"), sem: tl.constexpr = tl.constexpr("release"),
                            scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None,
                            site: tl.constexpr = None):
    """``castpile.signal`` one buffer at a time.  A remote flag: earlier puts completed (``quiet``), then
    ``value`` put; with ``wait_for``, polled by gets until it holds ``wait_for``, then ``value`` put (no
    remote compare-and-swap: correct when one signaller owns each flag, as in a barrier).  ``op`` is
    ``"set"`` only (checked when Triton compiles, an error naming the call's ``site``)."""
    _castpile_flag_options(site, "signal", op, sem, scope, False, False, wait_for is not None, "set")
    offs = _castpile_offsets(offs)
    pos = _castpile_positions(src, count, offs)
    dtype = example.dtype.element_ty
    flat = _castpile_flat(offs)
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        # flat: a spin needs a 1-D tensor to reduce
        lanes = _castpile_flat(_castpile_lane_mask(_castpile_entry_valid(smask, p), bounds, offs, mask))
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


# ---- castpile 0.3.0 the kernels with remote= bindings, launched with NVSHMEM ----
remote_barrier = _castpile_remote_kernel(remote_barrier)
all_reduce_remote = _castpile_remote_kernel(all_reduce_remote)
all_reduce_residual_rmsnorm_remote = _castpile_remote_kernel(all_reduce_residual_rmsnorm_remote)
all_gather_remote = _castpile_remote_kernel(all_gather_remote)
