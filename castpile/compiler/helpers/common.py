"""Shapes, offsets, masks and atomics that every family of helpers uses."""

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
def _castpile_table_entry(table, r):
    """The address in entry ``r`` of ``table``: one peer's buffer, ``table[r]`` (a rank-0 tile, P = ())."""
    return tl.load(table + r)


@triton.jit
def _castpile_typed(anchor, dtype: tl.constexpr):
    """The example pointer of a binding whose example is ``dtype``: a pointer to ``dtype`` at ``anchor`` (the
    binding's table, or address 0 for a tensor tile).  Accesses read only its type, except that a
    compare-and-swap points its masked-off lanes at it to swap a value for itself, which changes nothing."""
    if anchor is None:
        return tl.full((), 0, tl.int64).to(tl.pointer_type(dtype))
    else:
        return anchor.to(tl.pointer_type(dtype))


@triton.constexpr_function
def _castpile_fits_extent(shape, extent):
    """Whether a mask of ``shape`` is a scalar or has exactly the shape ``extent``."""
    return len(shape) == 0 or [int(s) for s in shape] == [int(s) for s in extent]


@triton.jit
def _castpile_slice_mask(mask, count: tl.constexpr):
    """A table slice's ``ptr_mask`` (a boolean scalar, or a tensor of the padded extent of ``count`` entries),
    checked when Triton compiles, as a tensor of that extent whose entries past ``count`` are false."""
    rows = tl.arange(0, triton.next_power_of_2(count))
    mask = tl.full((), 1, tl.int1) & mask  # a Python bool (a tl.constexpr) becomes a scalar
    tl.static_assert(_castpile_fits_extent(mask.shape, rows.shape),
                     "castpile: a table slice's ptr_mask= must be a boolean scalar or a boolean tensor of the slice's "
                     "padded extent (hi - lo rounded up to a power of two)")
    return (rows < count) & mask


@triton.constexpr_function
def _castpile_alignment(align, site):
    """True when a binding's ``align=`` given as a compile-time value (not a literal) is a power-of-two integer
    (bytes) or ``None``; else an error naming the binding's ``site`` (``"path:line"``)."""
    if align is None or (type(align) is int and align > 0 and align & (align - 1) == 0):
        return True
    where = "" if site is None else f"{site}: error: "
    given = repr(align) if isinstance(align, (bool, int, float, str)) else f"a {type(align).__name__}"
    raise ValueError(f"{where}multicast_like: align= must be a power-of-two integer (bytes) or None, not {given}")


@triton.jit
def _castpile_unbounded(extent):
    """Nothing (``None``), the bounds of an access whose mask proves it inside ``extent`` (castpile/compiler/mask_bounds.py): a
    proof for integer extents only, so a float one is an error when Triton compiles the access."""
    tl.static_assert((extent + tl.zeros([1], tl.int8)).dtype.is_int(),
                     "castpile: this access's mask proves it inside its binding's shape= only for an integer extent, "
                     "and the extent is not an integer")


@triton.jit
def _castpile_index(indices, extents, strides, lower=None):
    """``offs, bounds`` of an access from its indices, each evaluated once by the caller; ``lower``: for each dim,
    whether its bounds check ``index >= 0`` (not where castpile proved the index non-negative), else every dim's."""
    offs = _castpile_offsets(indices[0]) * strides[0]
    for d in tl.static_range(1, len(indices)):
        offs = offs + indices[d] * strides[d]
    if extents is None:  # no bounds: all true (a tuple with None does not compile)
        return offs, tl.full(offs.shape, 1, tl.int1)
    else:
        bounds = _castpile_bound(indices[0], extents[0], lower, 0)
        for d in tl.static_range(1, len(indices)):
            bounds = bounds & _castpile_bound(indices[d], extents[d], lower, d)
        return offs, bounds


@triton.jit
def _castpile_bound(index, extent, lower, d: tl.constexpr):
    """``0 <= index < extent``, or ``index < extent`` where ``lower`` (see :func:`_castpile_index`) says dim ``d``'s
    index is proven non-negative."""
    if lower is None:
        return (index >= 0) & (index < extent)
    elif lower[d]:
        return (index >= 0) & (index < extent)
    else:
        return index < extent


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
    """``x`` with ``r`` trailing unit dims (an explicit index before ``...``); a scalar as it is (it broadcasts
    alike, and stays one for a ``base=``, which joins the pointer where it is a scalar)."""
    x = _castpile_offsets(x)
    if len(x.shape) != 0:
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
def _castpile_zeros(pos, offs, dtype):
    """Zeros of shape P + I and type ``dtype``."""
    R: tl.constexpr = len(pos.shape) - len(offs.shape)
    return (pos * 0 + _castpile_prepend(offs, R) * 0).to(dtype)


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


@triton.jit
def _castpile_signal_lanes(ptrs, valid, example, value, wait_for, op: tl.constexpr, sem: tl.constexpr,
                           scope: tl.constexpr, site: tl.constexpr):
    """Set every flag at ``ptrs`` where ``valid`` to ``value`` (``op="add"``: add ``value`` to it).

    ``op="add"``: one atomic add.  Otherwise, without ``wait_for``: one atomic exchange.  With it: a
    compare-and-swap ``wait_for`` -> ``value``, retried on the lanes that have not succeeded yet
    (lanes that succeeded are masked off and stop touching their flag; masked-off lanes swap a value for
    itself at ``example``).  Its options are checked when Triton compiles it, errors naming the call's ``site``.
    """
    _castpile_flag_options(site, "signal", op, sem, scope, False, False, wait_for is not None)
    dtype = ptrs.dtype.element_ty
    if op == "add":
        tl.atomic_add(ptrs, _castpile_full(value, ptrs, example), mask=valid, sem=sem, scope=scope)
    elif wait_for is None:
        tl.atomic_xchg(ptrs, tl.cast(value, dtype), mask=valid, sem=sem, scope=scope)
    else:
        pending = valid
        while _castpile_any(pending):
            old = _castpile_cas(ptrs, pending, example, wait_for, value, sem, scope)
            pending = pending & (old != tl.cast(wait_for, dtype))


@triton.jit
def _castpile_signal_flags(ptrs, value=1, wait_for=None, mask=None, op: tl.constexpr = tl.constexpr("set"),
                           sem: tl.constexpr = tl.constexpr("release"), scope: tl.constexpr = tl.constexpr("sys"),
                           site: tl.constexpr = None):
    """``castpile.signal`` on plain pointers (a scalar or a tensor of them): a local or already-translated flag."""
    valid = _castpile_lane_mask(True, mask, ptrs)
    _castpile_signal_lanes(ptrs, valid, _castpile_anchored(ptrs, valid), value, wait_for, op, sem, scope, site)
