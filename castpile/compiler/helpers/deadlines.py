"""Debug-mode waits (``CASTPILE_DEBUG_WAITS``): spins that give up at a deadline and record where they were.

Each is its normal-mode counterpart with a deadline: it reads the GPU's global timer when it
starts and after each poll, and once ``deadline_ns`` have passed with lanes still pending it
writes one entry to the record of :mod:`castpile.gpu.wait_deadlines` (where: ``site``, the
``"path:line"`` of the user's call, and the program ids; on what: one pending flag, the value
last seen there, the value expected) and returns.  Only modules transpiled in debug mode call
them; normal-mode modules keep their helpers, text and PTX alike.  Under ``TRITON_INTERPRET=1``
there is no timer: they wait as the normal helpers do.
"""

import triton
import triton.language as tl

from .common import (
    _castpile_any, _castpile_anchored, _castpile_arrive, _castpile_cas, _castpile_flag_options, _castpile_holds,
    _castpile_lane_mask, _castpile_signal_lanes,
)
from .gather import _castpile_pointers
from .remote import (
    _castpile_address, _castpile_entry_valid, _castpile_flat, _castpile_offsets, _castpile_remote_entry,
    _castpile_remote_get, _castpile_remote_put, _castpile_nvshmem,
)


def _castpile_wait_deadlines_module():
    """castpile.gpu.wait_deadlines: the record the waits write to, made (pinned host memory) on import."""
    from castpile.gpu import wait_deadlines

    return wait_deadlines


_castpile_wait_deadlines = _castpile_wait_deadlines_module()
# constexpr globals: Triton keys a compiled kernel by their values, so a record elsewhere compiles anew
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
def _castpile_wait_until(src, count: tl.constexpr, smask, example, offs, bounds, value=1, reset=0, mask=None,
                         cmp: tl.constexpr = tl.constexpr("eq"), sem: tl.constexpr = tl.constexpr("acquire"),
                         scope: tl.constexpr = tl.constexpr("sys"), decrement: tl.constexpr = False,
                         keep: tl.constexpr = False, align: tl.constexpr = None, site: tl.constexpr = None,
                         written: tl.constexpr = tl.constexpr(""), deadline_ns: tl.constexpr = None, base=None):
    """``castpile.wait`` on a multicast access, giving up at its deadline."""
    ptrs, valid = _castpile_pointers(src, count, smask, example, offs, bounds, align, mask, base)
    return _castpile_wait_flags_until(ptrs, value, reset, valid, cmp, sem, scope, decrement, keep, site, written,
                                      deadline_ns)


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
def _castpile_signal_flags_until(ptrs, value=1, wait_for=None, mask=None, op: tl.constexpr = tl.constexpr("set"),
                                 sem: tl.constexpr = tl.constexpr("release"), scope: tl.constexpr = tl.constexpr("sys"),
                                 site: tl.constexpr = None, deadline_ns: tl.constexpr = None):
    """``castpile.signal`` on plain pointers, a spin with ``wait_for`` giving up at its deadline."""
    valid = _castpile_lane_mask(True, mask, ptrs)
    _castpile_signal_lanes_until(ptrs, valid, _castpile_anchored(ptrs, valid), value, wait_for, op, sem, scope, site,
                                 deadline_ns)


@triton.jit
def _castpile_wait_remote_until(src, count: tl.constexpr, smask, example, offs, bounds, table, value=1, reset=0,
                                mask=None, cmp: tl.constexpr = tl.constexpr("eq"),
                                sem: tl.constexpr = tl.constexpr("acquire"), scope: tl.constexpr = tl.constexpr("sys"),
                                align: tl.constexpr = None, site: tl.constexpr = None,
                                deadline_ns: tl.constexpr = None):
    """``castpile.wait`` through a ``remote=`` binding, each buffer's wait giving up at its deadline."""
    _castpile_flag_options(site, "wait", cmp, sem, scope)
    offs = _castpile_offsets(offs)
    flat = _castpile_flat(offs)  # flat: a spin needs a 1-D tensor to reduce
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        lanes = _castpile_flat(_castpile_lane_mask(_castpile_entry_valid(smask, p), bounds, offs, mask))
        if pe < 0:
            _castpile_wait_flags_until(_castpile_address(addr, example, align) + flat, value, reset, lanes, cmp, sem,
                                       scope, site=site, deadline_ns=deadline_ns)
        else:
            pending = lanes
            seen = tl.zeros(flat.shape, example.dtype.element_ty)
            start = _castpile_clock()
            late = tl.full((), 0, tl.int1)
            while (tl.sum(pending.to(tl.int32)) > 0) & ~late:
                seen = _castpile_remote_get(addr, pe, example, table, flat, pending, None)
                arrived = pending & _castpile_holds(seen, cmp, value)
                if reset is not None:
                    _castpile_remote_put(addr, pe, example, table, flat, arrived, reset)
                pending = pending & ~arrived
                late = _castpile_clock() - start > deadline_ns
            _castpile_nvshmem.quiet()
            if tl.sum(pending.to(tl.int32)) > 0:
                _castpile_give_up(_castpile_address(addr, example, None) + flat, pending, seen, value, cmp, site,
                                  deadline_ns, 0, pe)
