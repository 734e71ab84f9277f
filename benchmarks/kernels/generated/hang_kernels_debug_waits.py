"""A barrier that hangs when a peer stays away: the GPU proof of debug-mode waits (benchmarks/debug_waits_proof.py).

``generated/hang_kernels_debug_waits.py`` is this file transpiled with ``CASTPILE_DEBUG_WAITS=2``
(``make generated``): its waits give up after 2 s and record this file's lines.
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def barrier(pad, pad_ptrs, rank, W: tl.constexpr):
    """Raise flag ``rank`` on every rank's pad (once the last call's is lowered), then wait for every rank's flag
    on this one, lowering them: a rank that never calls it leaves its peers waiting."""
    pads = pad_ptrs
    _castpile_signal_until(pads, W, None, pad, rank, (rank >= 0) & (rank < W), 1, 0, site='benchmarks/kernels/hang_kernels.py:19', deadline_ns=2000000000)
    _castpile_wait_flags_until(pad + tl.arange(0, W), site='benchmarks/kernels/hang_kernels.py:20', deadline_ns=2000000000)


# ---- castpile 0.3.0 helpers: generated, called by the rewritten accesses above ----
# debug mode (CASTPILE_DEBUG_WAITS): the _until helpers give up at deadline_ns, recording their site; docs/one-gpu.md, "Hangs that name their line"
import triton
import triton.language as tl


@triton.jit
def _castpile_prepend(x, r: tl.constexpr):
    """``x`` with ``r`` leading unit dims."""
    for _ in tl.static_range(r):
        x = tl.expand_dims(x, 0)
    return x


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


def _castpile_wait_deadlines_module():
    """castpile.gpu.wait_deadlines: the record the waits write to, made (pinned host memory) on import."""
    from castpile.gpu import wait_deadlines

    return wait_deadlines


_castpile_wait_deadlines = _castpile_wait_deadlines_module()


_castpile_wait_timed = tl.constexpr(_castpile_wait_deadlines.timed())


_castpile_wait_record = tl.constexpr(_castpile_wait_deadlines.record_address())


_castpile_wait_capacity = tl.constexpr(_castpile_wait_deadlines.CAPACITY)


_castpile_wait_entry_words = tl.constexpr(_castpile_wait_deadlines.ENTRY_WORDS)


_castpile_wait_site_words = tl.constexpr(_castpile_wait_deadlines.SITE_WORDS)


@triton.constexpr_function
def _castpile_site_word(site, k, words):
    """Word ``k`` of ``site`` as an entry of ``words`` site words holds it: UTF-8, NUL-padded (``...`` and the
    tail when longer, from a whole character), little-endian, signed."""
    data = str(site).encode()
    room = 8 * words
    if len(data) > room:
        start = len(data) - room + 3
        while data[start] & 0xC0 == 0x80:  # a UTF-8 continuation byte: not a character's first
            start += 1
        data = b"..." + data[start:]
    word = 0
    for byte in reversed(data[8 * k : 8 * k + 8]):
        word = word * 256 + byte
    return word - (1 << 64) if word >= 1 << 63 else word


@triton.constexpr_function
def _castpile_comparison(cmp):
    """The index of ``cmp`` among the record's comparisons (wait_deadlines.COMPARISONS)."""
    names = ("eq", "ne", "ge", "gt", "le", "lt")
    return names.index(str(cmp))


@triton.jit
def _castpile_clock():
    """The GPU's global timer in nanoseconds (0 under ``TRITON_INTERPRET=1``), the same in every thread of the
    program: 1024 lanes, at least one in each thread of any program, read it and the latest reading is taken, so
    that every thread leaves a spin at the same poll."""
    if _castpile_wait_timed:
        readings = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [tl.arange(0, 1024)],
                                             dtype=tl.int64, is_pure=False, pack=1)
        return tl.max(readings)
    else:
        return tl.full((), 0, tl.int64)


@triton.jit
def _castpile_pending_lane(ptrs, pending, seen, value):
    """The address of one pending flag (the lowest), the value last seen there and the value expected, as int64."""
    flags = ptrs.to(tl.int64)
    saw = seen.to(tl.int64)
    expected = (tl.cast(value, seen.dtype) + tl.zeros(seen.shape, seen.dtype)).to(tl.int64)
    if len(ptrs.shape) == 0:
        return flags, saw, expected
    else:
        flag = tl.min(tl.where(pending, flags, 0x7FFFFFFFFFFFFFFF))
        lane = pending & (flags == flag)
        lowest = -0x7FFFFFFFFFFFFFFF
        return flag, tl.max(tl.where(lane, saw, lowest)), tl.max(tl.where(lane, expected, lowest))


@triton.jit
def _castpile_give_up(ptrs, pending, seen, value, cmp: tl.constexpr, site: tl.constexpr, deadline_ns: tl.constexpr,
                      kind: tl.constexpr, pe):
    """Claim an entry of the record and write to it what a wait still ``pending`` at its deadline was at (nothing
    but the count when the record is full)."""
    record = tl.full((), _castpile_wait_record, tl.int64).to(tl.pointer_type(tl.int64))
    slot = tl.atomic_add(record, 1, sem="relaxed", scope="sys")
    if slot < _castpile_wait_capacity:
        entry = record + 1 + slot.to(tl.int64) * _castpile_wait_entry_words
        flag, saw, expected = _castpile_pending_lane(ptrs, pending, seen, value)
        tl.store(entry, flag)
        tl.store(entry + 1, saw)
        tl.store(entry + 2, expected)
        tl.store(entry + 3, _castpile_comparison(cmp))
        tl.store(entry + 4, deadline_ns)
        tl.store(entry + 5, tl.program_id(0))
        tl.store(entry + 6, tl.program_id(1))
        tl.store(entry + 7, tl.program_id(2))
        tl.store(entry + 8, pe)
        tl.store(entry + 9, kind)
        for k in tl.static_range(_castpile_wait_site_words):
            tl.store(entry + 10 + k, _castpile_site_word(site, k, _castpile_wait_site_words))


@triton.jit
def _castpile_wait_flags_until(ptrs, value=1, reset=0, mask=None, cmp: tl.constexpr = tl.constexpr("eq"),
                               sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"),
                               decrement: tl.constexpr = False, keep: tl.constexpr = False, site: tl.constexpr = None,
                               written: tl.constexpr = tl.constexpr(""), deadline_ns: tl.constexpr = None):
    """Spin until every flag at ``ptrs`` satisfies the wait and take it (reset or decrement), as a normal-mode
    wait does; give up ``deadline_ns`` after the spin starts, recording the lanes still pending
    (the values of a wait that gave up hold 0 there)."""
    _castpile_flag_options(site, "wait", cmp, sem, scope, decrement, written)
    dtype = ptrs.dtype.element_ty
    pending = _castpile_lane_mask(True, mask, ptrs)
    targets = _castpile_anchored(ptrs, pending)
    seen = tl.zeros(ptrs.shape, dtype)
    if keep:
        got = tl.zeros(ptrs.shape, dtype)
    start = _castpile_clock()
    late = tl.full((), 0, tl.int1)
    while _castpile_any(pending) & ~late:
        seen = tl.atomic_add(ptrs, tl.zeros(ptrs.shape, dtype), mask=pending, sem=sem, scope=scope)
        arrived = _castpile_arrive(ptrs, targets, pending, seen, value, reset, cmp, sem, scope, decrement)
        if keep:
            got = tl.where(arrived, seen, got)
        pending = pending & ~arrived
        late = _castpile_clock() - start > deadline_ns
    if _castpile_any(pending):
        _castpile_give_up(ptrs, pending, seen, value, "ge" if decrement else cmp, site, deadline_ns, 0, -1)
    if keep:
        return got


@triton.jit
def _castpile_signal_lanes_until(ptrs, valid, example, value, wait_for, op: tl.constexpr, sem: tl.constexpr,
                                 scope: tl.constexpr, site: tl.constexpr, deadline_ns: tl.constexpr):
    """:func:`_castpile_signal_lanes`; with ``wait_for`` (and no ``op="add"``), its compare-and-swap spin gives up at
    its deadline (the flags still not ``wait_for`` recorded, none set)."""
    if (op == "add") or (wait_for is None):
        _castpile_signal_lanes(ptrs, valid, example, value, wait_for, op, sem, scope, site)
    else:
        _castpile_flag_options(site, "signal", op, sem, scope)
        pending = valid
        seen = tl.zeros(ptrs.shape, ptrs.dtype.element_ty)
        start = _castpile_clock()
        late = tl.full((), 0, tl.int1)
        while _castpile_any(pending) & ~late:
            seen = _castpile_cas(ptrs, pending, example, wait_for, value, sem, scope)
            pending = pending & (seen != tl.cast(wait_for, seen.dtype))
            late = _castpile_clock() - start > deadline_ns
        if _castpile_any(pending):
            _castpile_give_up(ptrs, pending, seen, wait_for, "eq", site, deadline_ns, 1, -1)


@triton.jit
def _castpile_signal_until(src, count: tl.constexpr, smask, example, offs, bounds, value=1, wait_for=None, mask=None,
                           op: tl.constexpr = tl.constexpr("set"), sem: tl.constexpr = tl.constexpr("release"),
                           scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None,
                           site: tl.constexpr = None, deadline_ns: tl.constexpr = None, base=None):
    """``castpile.signal`` on a multicast access, a spin with ``wait_for`` giving up at its deadline."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    _castpile_signal_lanes_until(ptrs, valid, example, value, wait_for, op, sem, scope, site, deadline_ns)


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
