"""``_remote`` helpers: ``remote="nvshmem"`` bindings (docs/nvshmem.md), one buffer at a time.

A table entry is an address (a load/store reachable buffer) or ``local_address | (pe + 1) << 48``
(a remote buffer: NVSHMEM names it by this rank's symmetric address and the PE).  Remote buffers
are reached with block-scoped NVSHMEM get/put through this program's slice of a local scratch,
whose address and size sit in the two int64 words before the table (``SymmetricTensor.remote_ptrs``).
"""

import triton
import triton.language as tl

from .common import (
    _castpile_cas, _castpile_entry_valid, _castpile_fits, _castpile_flag_options, _castpile_full, _castpile_holds, _castpile_lane_mask,
    _castpile_offsets, _castpile_positions, _castpile_prepend, _castpile_slice, _castpile_stack_shape,
    _castpile_wait_flags, _castpile_zeros,
)
from .reduction import _castpile_fold, _castpile_folded


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
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        lanes = _castpile_lane_mask(_castpile_entry_valid(smask, p), bounds, offs, mask)
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


@triton.jit
def _castpile_wait_remote(src, count: tl.constexpr, smask, example, offs, bounds, table, value=1, reset=0, mask=None,
                          cmp: tl.constexpr = tl.constexpr("eq"), sem: tl.constexpr = tl.constexpr("acquire"),
                          scope: tl.constexpr = tl.constexpr("sys"), align: tl.constexpr = None,
                          site: tl.constexpr = None):
    """``castpile.wait`` one buffer at a time; a remote flag is polled by gets until ``flag cmp value`` holds and
    reset by a put (none when ``reset`` is ``None``).  Its options are checked when Triton compiles it."""
    _castpile_flag_options(site, "wait", cmp, sem, scope)
    offs = _castpile_offsets(offs)
    flat = _castpile_flat(offs)  # flat: a spin needs a 1-D tensor to reduce
    for p in tl.static_range(count):
        addr, pe = _castpile_remote_entry(src, p)
        lanes = _castpile_flat(_castpile_lane_mask(_castpile_entry_valid(smask, p), bounds, offs, mask))
        if pe < 0:
            _castpile_wait_flags(_castpile_address(addr, example, align) + flat, value, reset, lanes, cmp, sem, scope)
        else:
            pending = lanes
            while tl.sum(pending.to(tl.int32)) > 0:
                seen = _castpile_remote_get(addr, pe, example, table, flat, pending, None)
                arrived = pending & _castpile_holds(seen, cmp, value)
                if reset is not None:
                    _castpile_remote_put(addr, pe, example, table, flat, arrived, reset)
                pending = pending & ~arrived
            _castpile_nvshmem.quiet()
