"""GEMM + reduce-scatter with the communication overlapped, written with castpile multicast tensors.

:func:`matmul_reduce_scatter`: ``out = rows chunk `rank` of sum_r A_r @ B_r``.
Tile j of owner o's rows is computed by block ``(o * T + j) % grid`` on every
rank (T tiles per owner), which does the tiles of the other owners first
(owner ``rank + 1`` first) and pushes each, rounded to the dtype, into the
owner's scratch slot for this source, raising that tile's flag there; then it
does its own rows' tiles, and for each waits for the peers' partial tiles and
adds them in fp32 to its own rounded partial, from rank + 1 on (a loop over the
peers, not unrolled: unrolled, all their loads were live at once and the wide
tile spilled).

Why this shape (see also the ``tp_gemm`` package): one kernel, no second stream,
and a block only ever waits for the block with its own program id on each peer,
which pushes everything it owes before it waits for anything.  That keeps a grid
of at most one block per SM free of deadlock on a GPU and lets the Triton
interpreter, which runs a rank's blocks one after another, run the kernel in the
simulator.

Synchronisation: every block starts with the barrier of ``collectives/kernels.py``
(block b of the owner has consumed the previous call's tiles that block b of each
peer is about to overwrite).  Signals are releases and waits acquires at system
scope, each behind ``tl.debug_barrier()`` so the whole block's stores and loads are
ordered.

The GEMM core is ``gemm_kernels`` (its docstring has the rule for loop bounds).
Regenerate the plain-Triton module after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from castpile.gpu.collectives.kernels_triton import barrier
from castpile.gpu.fused.tp_gemm.gemm_kernels import operand, store_tile, tile_position, tile_product

if TYPE_CHECKING:
    import castpile
    from castpile import multicast_like


@triton.jit
def matmul_reduce_scatter(a, b, out, scratch, scratch_ptrs, flags, flag_ptrs, pad, pad_ptrs, rank, Ms, N,
                          K: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr, TMA: tl.constexpr):
    """``out`` [Ms, N] = rows ``rank * Ms ...`` of the sum over ranks of ``a @ b`` (a [WORLD * Ms, K], b [K, N]).

    ``scratch`` [WORLD - 1, Ms, N] (symmetric): slot ``(source - owner - 1) %
    WORLD`` holds that source's partial of the owner's rows; ``flags`` int32
    [WORLD - 1, T]: one per (slot, tile), raised by the source, reset by the
    owner.  Owners are visited ``rank + 1, rank + 2, ..., rank``: every tile
    another rank owns is pushed and flagged before this block waits for anything.
    A tile's flag rises after the next tile is computed, just before that one
    is stored: the release then finds the tile's stores long arrived instead of
    waiting for them.
    """
    barrier(pad, pad_ptrs, rank, WORLD, True)  # block pid of every owner is done with the previous call's slots
    a_src = operand(a, WORLD * Ms, K, BM, BK, TMA)
    b_src = operand(b, K, N, BK, BN, TMA)
    out_dst = operand(out, Ms, N, BM, BN, TMA)
    row_tiles = tl.cdiv(Ms, BM)
    tiles_n = tl.cdiv(N, BN)
    T = row_tiles * tiles_n
    for step in tl.static_range(1, WORLD):
        owner = (rank + step) % WORLD
        slot = WORLD - 1 - step  # this rank's slot on the owner
        pending = -1
        t = first_tile(owner, T)
        while t < owner * T + T:
            j = t - owner * T
            r0, c0, part = owner_tile(a_src, b_src, owner, j, row_tiles, tiles_n, Ms, N, K, BM, BN, BK, GROUP_M, TMA)
            if pending >= 0:
                raise_flag(flags, flag_ptrs, owner, slot * T + pending)
            dest = _castpile_table_entry(scratch_ptrs, owner); dest_shape0 = WORLD - 1
            rows = r0 + tl.arange(0, BM)
            cols = c0 + tl.arange(0, BN)
            _castpile_store_loop(dest, 1, None, scratch, N*rows[:, None] + cols[None, :], (slot >= 0) & (slot < dest_shape0) & (rows[:, None] >= 0) & (rows[:, None] < Ms) & (cols[None, :] >= 0) & (cols[None, :] < N), part.to(out.dtype.element_ty), align=16, base=Ms*N*slot, site='castpile/gpu/fused/tp_gemm/reduce_scatter_kernels.py:78')
            pending = j
            t += tl.num_programs(0)
        if pending >= 0:
            raise_flag(flags, flag_ptrs, owner, slot * T + pending)
    slots = tl.arange(0, triton.next_power_of_2(WORLD - 1))
    t = first_tile(rank, T)
    while t < rank * T + T:
        j = t - rank * T
        r0, c0, part = owner_tile(a_src, b_src, rank, j, row_tiles, tiles_n, Ms, N, K, BM, BN, BK, GROUP_M, TMA)
        mine = part.to(out.dtype.element_ty)  # (rounded now: the fp32 tile need not stay in registers)
        _castpile_wait_flags(flags + slots * T + j, 1, 0, slots < WORLD - 1)
        tl.debug_barrier()  # every thread may read what the waiting threads acquired
        rows = r0 + tl.arange(0, BM)
        cols = c0 + tl.arange(0, BN)
        ok = (rows < Ms)[:, None] & (cols < N)[None, :]
        total = mine.to(tl.float32)
        for held in range(WORLD - 1):  # slot `held` holds the partial of source (rank + 1 + held) % WORLD
            at = (held * Ms + rows[:, None]).to(tl.int64) * N + cols[None, :]
            total += tl.load(scratch + at, mask=ok, other=0, cache_modifier=".cg").to(tl.float32)
        store_tile(out_dst, total, r0, c0, Ms, N, BM, BN, TMA)
        t += tl.num_programs(0)


@triton.jit
def first_tile(owner, T):
    """This block's first tile of owner's rows: tile j of owner o is tile ``o * T + j`` dealt round-robin to blocks."""
    G = tl.num_programs(0)
    return owner * T + (tl.program_id(0) - owner * T % G + G) % G


@triton.jit
def owner_tile(a_src, b_src, owner, j, row_tiles, tiles_n, Ms, N, K: tl.constexpr, BM: tl.constexpr,
               BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, TMA: tl.constexpr):
    """Tile j of the owner's rows of this rank's ``a @ b``: (first row within the owner's rows, first column, fp32)."""
    pm, pn = tile_position(j, row_tiles, tiles_n, GROUP_M)
    acc = tile_product(a_src, b_src, owner * Ms + pm * BM, pn * BN, owner * Ms + Ms, N, K, BM, BN, BK, TMA, TMA)
    return pm * BM, pn * BN, acc


@triton.jit
def raise_flag(flags, flag_ptrs, owner, index):
    """Set flag ``index`` on rank ``owner`` (release, system scope), after every store of the block so far."""
    tl.debug_barrier()
    flag = _castpile_table_entry(flag_ptrs, owner)
    _castpile_signal(flag, 1, None, flags, index, None, 1)


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
def _castpile_table_entry(table, r):
    """The address in entry ``r`` of ``table``: one peer's buffer, ``table[r]`` (a rank-0 tile, P = ())."""
    return tl.load(table + r)


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
def _castpile_signal(src, count: tl.constexpr, smask, example, offs, bounds, value=1, wait_for=None, mask=None,
                     op: tl.constexpr = tl.constexpr("set"), sem: tl.constexpr = tl.constexpr("release"),
                     scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None, site: tl.constexpr = None,
                     base=None):
    """``castpile.signal`` on a multicast access: every addressed flag set to ``value`` (``op="add"``: ``value``
    added), by :func:`_castpile_signal_lanes`."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    _castpile_signal_lanes(ptrs, valid, example, value, wait_for, op, sem, scope, site)


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
