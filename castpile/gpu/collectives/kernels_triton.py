"""Collective kernels written with castpile multicast tensors.

Every rank launches the same kernel on its own GPU with the same grid.  A
multicast tensor over ``buf_ptrs[:WORLD]`` addresses every rank's symmetric
buffer at once; ``bufs[offs]`` loads a (WORLD padded, BLOCK) tile.

Each kernel starts and ends with :func:`barrier`: the first (relaxed) makes every
rank's input visible before anyone reads it, the second keeps a rank from returning
(and overwriting its buffer in a later call) while a peer still reads it or
writes into it.  Block ``b`` of every rank meets block ``b`` of every other
rank; each block walks the same tiles on every rank, so that is enough.

Buffers are declared 16-byte aligned (``align=16``: symmetric-memory buffers
are; the wrappers check it), which makes loads and stores 128 bits wide.

castpile's names are imported for the transpiler only (``TYPE_CHECKING``): the
plain-Triton module made from this file, the one the library imports, then needs
nothing of castpile at run time.  Regenerate it after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    import castpile
    from castpile import multicast_like


@triton.jit
def barrier(pad, pad_ptrs, rank, WORLD: tl.constexpr, ORDERED: tl.constexpr):
    """Block ``program_id`` of every rank meets here; signal pads are left zero.

    Signal: compare-and-swap 0 -> 1 (system scope) on slot ``(block, rank)`` of
    every rank's pad, retried while the peer has not yet consumed the previous
    signal.  Wait: until slot ``(block, peer)`` of this rank's pad is 1 for every
    peer, then reset it to 0.  ``ORDERED``: release on the signal and acquire on
    the wait, so accesses before the barrier on one rank happen before accesses
    after it on the others; otherwise relaxed atomics, for the barrier at a
    kernel's start, where the inputs were written by earlier kernels and the
    kernel boundary has made them visible (docs/collectives.md).
    """
    slot = tl.program_id(0) * WORLD
    pads = pad_ptrs
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    if ORDERED:
        _castpile_signal(pads, WORLD, None, pad, rank + slot, None, 1, 0, sem="release", scope="sys")
        _castpile_wait_flags(pad + slot + peers, 1, 0, peers < WORLD, sem="acquire", scope="sys")
    else:
        _castpile_signal(pads, WORLD, None, pad, rank + slot, None, 1, 0, sem="relaxed", scope="sys")
        _castpile_wait_flags(pad + slot + peers, 1, 0, peers < WORLD, sem="relaxed", scope="sys")
    tl.debug_barrier()


@triton.jit
def one_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, BARRIER: tl.constexpr, START_ORDERED: tl.constexpr = False):
    """``out = sum over ranks of buf``: every rank reads every rank's whole buffer.  ``START_ORDERED`` makes the
    barrier before the reads release/acquire (benchmarks/sweeps/sweep_barrier.py); the library's is relaxed: the
    kernel boundary has made the inputs visible."""
    bufs = buf_ptrs
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, START_ORDERED)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = _castpile_reduce_loop(bufs, WORLD, None, buf, offs, (offs < n), "sum", steps="to", operands=(tl.float32,), align=16)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def two_shot_all_reduce(buf, buf_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr,
                        BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``buf = sum over ranks of buf`` in place, each rank owning one chunk.

    Reduce-scatter: rank r sums chunk r of every buffer.  All-gather: it writes
    that sum into chunk r of every buffer.  Only rank r touches chunk r, so the
    two phases need no barrier between them.  Chunks are whole tiles, so that
    Triton can prove ``rank * chunk`` aligned and keep accesses 128 bits wide.
    """
    bufs = buf_ptrs
    chunk = tl.cdiv(n, WORLD * BLOCK) * BLOCK
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        offs = rank * chunk + local
        total = _castpile_reduce_loop(bufs, WORLD, None, buf, offs, (offs >= 0) & (offs < n), "sum", local < chunk, steps="to", operands=(tl.float32,), align=16)
        _castpile_store_loop(bufs, WORLD, None, buf, offs, (offs >= 0) & (offs < n), total[None, :], local < chunk, align=16, site='castpile/gpu/collectives/kernels.py:95')
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def two_shot_push_all_reduce(buf, buf_ptrs, scratch, scratch_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr,
                             BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``buf = sum over ranks of buf`` in place, every byte crossing NVLink as a write.

    Reduce-scatter by pushes: rank r writes chunk q of its input into row r of
    rank q's ``scratch`` (WORLD rows of one chunk; one (WORLD, BLOCK) store sends
    row q to rank q).  After a barrier rank q sums its scratch rows and writes
    the sum into chunk q of every buffer.  Over NVLink, pushes move more bytes
    per second than pulls (docs/data/probe-launch-bw.json).  No barrier is needed at the
    start: a rank reads only its own input, and writes into a peer's scratch
    only after that peer's previous call passed its closing barrier.
    """
    bufs = buf_ptrs
    scratches = scratch_ptrs
    chunk = tl.cdiv(n, WORLD * BLOCK) * BLOCK
    rows = tl.arange(0, triton.next_power_of_2(WORLD))[:, None]
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        at = rows * chunk + local[None, :]
        mine = tl.load(buf + at, mask=(rows < WORLD) & (at < n), other=0)
        _castpile_store_loop(scratches, WORLD, None, scratch, chunk*rank + local, None, mine, local < chunk, align=16, site='castpile/gpu/collectives/kernels.py:123')
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)
    tile = tl.program_id(0)
    while tile < tl.cdiv(chunk, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        rows_in = tl.load(scratch + rows * chunk + local[None, :], mask=rows < WORLD, other=0)
        total = tl.sum(rows_in.to(tl.float32), axis=0)
        _castpile_store_loop(bufs, WORLD, None, buf, chunk*rank + local, (chunk*rank + local >= 0) & (chunk*rank + local < n), total[None, :], local < chunk, align=16, site='castpile/gpu/collectives/kernels.py:132')
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def all_gather(buf, buf_ptrs, pad, pad_ptrs, out, rank, m, WORLD: tl.constexpr,
               BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``out[q, :] = buf of rank q`` for every rank q (``out`` is WORLD x m)."""
    bufs = buf_ptrs
    rows = tl.arange(0, triton.next_power_of_2(WORLD))[:, None]
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + rows * m + offs[None, :], _castpile_load_loop(bufs, WORLD, None, buf, offs, (offs < m), align=16), mask=(rows < WORLD) & (offs[None, :] < m))
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def reduce_scatter(buf, buf_ptrs, pad, pad_ptrs, out, rank, m, WORLD: tl.constexpr,
                   BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    """``out = sum over ranks of chunk `rank` of buf`` (buf holds WORLD chunks of m)."""
    bufs = buf_ptrs; bufs_shape0 = WORLD * m
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, False)
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        local = tile * BLOCK + tl.arange(0, BLOCK)
        total = _castpile_reduce_loop(bufs, WORLD, None, buf, local + m*rank, (local + m*rank >= 0) & (local + m*rank < bufs_shape0), "sum", local < m, steps="to", operands=(tl.float32,), align=16)
        tl.store(out + local, total.to(out.dtype.element_ty), mask=local < m)
        tile += tl.num_programs(0)
    if BARRIER:
        barrier(pad, pad_ptrs, rank, WORLD, True)


@triton.jit
def low_latency_all_reduce(buf, ll, ll_ptrs, epochs, out, rank, m, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum over ranks of buf`` with no barrier: flags travel inside the data.

    ``buf`` and ``out`` (bf16, fp16 or fp32) are read and written as m int32
    words.  Every word is sent to every rank's ``ll`` scratch as one int64: the
    call's epoch in the high half, the data in the low half, written with a
    single relaxed atomic exchange, so a reader that sees the epoch sees the data
    (an atomic, not a plain store: a volatile load polling a weak store is a data
    race under PTX's memory model, docs/races.md).  ``ll`` holds
    two slots (epoch parity) of WORLD rows of m words; a rank writes slot
    ``e % 2`` row ``rank`` of every rank, then polls its own rows until every
    word carries epoch ``e``.  Block ``b`` keeps its epoch in ``epochs[b]``; every
    call launches the same grid, so all blocks of all ranks count alike.  Two
    slots suffice: a rank starts call e + 2 only after every peer has finished
    reading call e (it needed their call e + 1 data).
    """
    DTYPE = out.dtype.element_ty
    words = buf.to(tl.pointer_type(tl.int32))
    results = out.to(tl.pointer_type(tl.int32))
    lls = ll_ptrs
    e = tl.load(epochs + tl.program_id(0)) + 1
    flag = e.to(tl.int64) << 32
    slot = (e % 2) * WORLD * m
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(words + offs, mask=offs < m)
        sent = flag | x.to(tl.uint32).to(tl.int64)
        _castpile_atomic_loop(lls, WORLD, None, ll, offs + slot, None, "xchg", sent[None, :], offs < m, sem="relaxed", scope="sys", align=16, base=m*rank, keep_old=False)
        tile += tl.num_programs(0)
    tile = tl.program_id(0)
    while tile < tl.cdiv(m, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        lo = tl.zeros([BLOCK], tl.float32)
        hi = tl.zeros([BLOCK], tl.float32)
        for r in tl.static_range(WORLD):
            row = ll + slot + r * m + offs
            got = tl.load(row, mask=offs < m, other=flag, volatile=True)
            while tl.sum(((got >> 32) != e).to(tl.int32), axis=0) > 0:
                got = tl.load(row, mask=offs < m, other=flag, volatile=True)
            v = got.to(tl.int32)
            if DTYPE.primitive_bitwidth == 32:
                lo += v.to(DTYPE, bitcast=True).to(tl.float32)
            else:
                lo += (v & 0xFFFF).to(tl.int16).to(DTYPE, bitcast=True).to(tl.float32)
                hi += (v >> 16).to(tl.int16).to(DTYPE, bitcast=True).to(tl.float32)
        if DTYPE.primitive_bitwidth == 32:
            res = lo.to(DTYPE).to(tl.int32, bitcast=True)
        else:
            low = lo.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
            res = low | (hi.to(DTYPE).to(tl.int16, bitcast=True).to(tl.int32) << 16)
        tl.store(results + offs, res, mask=offs < m)
        tile += tl.num_programs(0)
    tl.store(epochs + tl.program_id(0), e)


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
