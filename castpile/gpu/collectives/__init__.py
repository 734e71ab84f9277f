"""Collectives over symmetric memory: thin launchers for the kernels in ``kernels.py``.

Each function takes a :class:`castpile.gpu.symmetric.SymmetricTensor` (or the CPU
simulator's stand-in) and is collective: every rank of the group calls it with
the same sizes.  Inputs live in ``symm.tensor``; the kernels synchronise ranks
themselves (no host barrier) and leave the signal pads zero, so calls repeat
back to back and can be captured in CUDA graphs.  bf16 sums accumulate in fp32.

Launches are prepared once and kept in ``symm.launches``
(:mod:`castpile.gpu.launch`): a call issues one prebuilt launch, not
``kernel[grid](...)`` (:meth:`castpile.gpu.launch_cache.LaunchCache.issue`).  On a GPU, outside
CUDA-graph capture, a call whose output the caller passed (or that has none:
the in-place two-shot) replays a one-kernel CUDA graph captured for that output
address on first use; other calls launch a kernel bound once with the output
passed per call.  Either costs a fraction of the host time of ``kernel[grid](...)``
(``host_us_rank`` in docs/data/bench-collectives.json; the grid call's in
docs/data/probe-launch-bw.json).

:func:`all_reduce` picks the low-latency kernel where the tensor has its
scratch (at most 256 KB of bf16, fp16 or fp32) and the one-shot otherwise.

``barrier=False`` drops the in-kernel barriers; it exists to show (in tests)
that they are needed, and gives wrong results whenever ranks are not in step.
"""

import triton

from ..arguments import output
from ..launch import bind
from ..symmetric import LOW_LATENCY_BLOCK, PUSH_TILE
from . import kernels_triton

#: Elements per tile for messages up to SMALL_BYTES (4 warps, at most one block per SM); the
#: fastest of 256-4096 with 1, 2 or 4 warps at 4-256 KB in docs/data/bench-sweep-small.json.
BLOCK = 2048
#: Elements per tile above SMALL_BYTES (8 warps, up to ``symm.max_blocks``: two blocks per SM).
LARGE_BLOCK = 4096
SMALL_BYTES = 256 << 10
#: Above this many bytes ``all_reduce_two_shot`` pushes when the tensor has push scratch: pulling is faster
#: at 2 MB, pushing at 32 and 64 MB (docs/data/bench-sweep-push.json).
PUSH_MIN_BYTES = 4 << 20


def _launch(symm, elements, block):
    """Grid and launch options: small messages use few 2048-element tiles, large ones wide tiles on every SM.

    Large messages take 4096-element tiles, 8 warps and two blocks per SM: the shape
    that made the one-shot and two-shot fast at 32 and 64 MB (docs/perf-findings.md),
    and no other in benchmarks/sweeps/sweep_large.py's sweep moves them much
    (docs/data/bench-sweep-large.json).
    """
    if symm.tensor.data_ptr() % 16:
        raise ValueError(
            "castpile collectives need 16-byte aligned buffers (the kernels declare align=16); "
            f"this rank's tensor starts at {symm.tensor.data_ptr():#x}"
        )
    large = block is None and symm.tensor.numel() * symm.tensor.element_size() > SMALL_BYTES
    cap = symm.max_blocks if large else max(1, symm.max_blocks // 2)
    block = (LARGE_BLOCK if large else BLOCK) if block is None else block
    grid = (max(1, min(triton.cdiv(elements, block), cap)),)
    return grid, block, {"num_warps": 8 if large else 4}


def _issue(symm, key, bind_for, out=None, owned=True):
    """Issue the collective cached under ``key`` with ``out`` as its per-call tensor (if any)."""
    symm.require_all_reachable(key if isinstance(key, str) else key[0])
    symm.launches.issue(key, bind_for, {} if out is None else {"out": out}, owned, symm.tensor)


def _barriered(symm, kernel, work, block, barrier, chunks=1):
    """``bind_for`` of a barriered library kernel over ``work`` elements (split in ``chunks`` for the grid)."""

    def bind_for(tensors, **extra):
        grid, tile, options = _launch(symm, work, block)
        tail = (symm.rank, work) if not tensors else (tensors["out"], symm.rank, work)
        return bind(
            kernel,
            (min(grid[0], triton.cdiv(work, chunks * tile)),),
            symm.tensor,
            symm.buffer_ptrs,
            symm.signal_pad,
            symm.signal_pad_ptrs,
            *tail,
            WORLD=symm.world_size,
            BLOCK=tile,
            BARRIER=barrier,
            **options,
            **extra,
        )

    return bind_for


def all_reduce_one_shot(symm, out=None, *, block=None, barrier=True):
    """Sum of every rank's ``symm.tensor``, written to ``out`` (new if None); every rank reads all inputs."""
    owned = out is not None
    out = output(symm.tensor, out, symm.tensor.shape, "all_reduce_one_shot")
    _issue(
        symm,
        ("one_shot", block, barrier),
        _barriered(symm, kernels_triton.one_shot_all_reduce, symm.tensor.numel(), block, barrier),
        out,
        owned,
    )
    return out


def all_reduce_two_shot(symm, *, block=None, barrier=True, push=None):
    """Sum of every rank's ``symm.tensor``, in place: reduce-scatter, then all-gather by writes to peers.

    ``push``: reduce-scatter by writes into ``symm.push_scratch`` too (allocate
    with ``push_scratch=True``); None pushes when the scratch exists and the
    tensor exceeds :data:`PUSH_MIN_BYTES` (below it pulling is faster).
    """
    n = symm.tensor.numel()
    if push is None:
        push = symm.push_scratch is not None and n * symm.tensor.element_size() > PUSH_MIN_BYTES
    if not push:
        # The grid covers the tiles of one rank's chunk.
        _issue(
            symm,
            ("two_shot", block, barrier),
            _barriered(symm, kernels_triton.two_shot_all_reduce, n, block, barrier, chunks=symm.world_size),
        )
        return symm.tensor
    scratch = symm.push_scratch
    if scratch is None:
        raise ValueError(
            "all_reduce_two_shot(push=True): this tensor has no push scratch; allocate it with "
            "runtime.symmetric_empty(..., push_scratch=True)"
        )

    def bind_for(tensors, **extra):
        grid, tile, options = _launch(symm, n, block)
        chunk = triton.cdiv(n, symm.world_size * tile) * tile
        if symm.world_size * chunk > scratch.tensor.numel():
            raise ValueError(
                f"all_reduce_two_shot(push=True): tiles of {tile} elements need a scratch of "
                f"{symm.world_size * chunk} elements, this one has {scratch.tensor.numel()} "
                f"(tiles must be powers of two up to {PUSH_TILE})"
            )
        return bind(
            kernels_triton.two_shot_push_all_reduce,
            (min(grid[0], triton.cdiv(chunk, tile)),),
            symm.tensor,
            symm.buffer_ptrs,
            scratch.tensor,
            scratch.ptrs,
            symm.signal_pad,
            symm.signal_pad_ptrs,
            symm.rank,
            n,
            WORLD=symm.world_size,
            BLOCK=tile,
            BARRIER=barrier,
            **options,
            **extra,
        )

    _issue(symm, ("two_shot_push", block, barrier), bind_for)
    return symm.tensor


def all_reduce_low_latency(symm, out=None):
    """Sum of every rank's ``symm.tensor`` into ``out`` (new if None), with no barrier: the fastest for small tensors.

    Every rank writes its input, tagged with the call's epoch, into every rank's
    scratch and sums what arrives (``kernels.low_latency_all_reduce``).  Needs
    the scratch that ``symmetric_empty``/``rendezvous`` give tensors of at most
    256 KB of bf16, fp16 or fp32 (``symm.low_latency``); raises ValueError
    without it.  Sums accumulate in fp32 in rank order, the same on every rank.
    Every rank must make the same sequence of calls on ``symm``.
    """
    scratch = symm.low_latency
    if scratch is None:
        raise ValueError(
            "all_reduce_low_latency: this tensor has no low-latency scratch (it needs a contiguous "
            "bf16, fp16 or fp32 tensor of at most 256 KB, a whole number of 4-byte words); "
            "use all_reduce_one_shot"
        )
    owned = out is not None
    out = output(symm.tensor, out, symm.tensor.shape, "all_reduce_low_latency")

    def bind_for(tensors, **extra):
        return bind(
            kernels_triton.low_latency_all_reduce,
            (scratch.epochs.numel(),),
            symm.tensor,
            scratch.slots.tensor,
            scratch.slots.ptrs,
            scratch.epochs,
            tensors["out"],
            symm.rank,
            scratch.words,
            WORLD=symm.world_size,
            BLOCK=LOW_LATENCY_BLOCK,
            num_warps=4,
            **extra,
        )

    _issue(symm, "low_latency", bind_for, out, owned)
    return out


def all_reduce(symm, out=None):
    """Sum of every rank's ``symm.tensor`` into ``out``: low-latency where the tensor has its scratch, else one-shot."""
    if symm.low_latency is not None:
        return all_reduce_low_latency(symm, out)
    return all_reduce_one_shot(symm, out)


def all_gather(symm, out=None, *, block=None, barrier=True):
    """Every rank's ``symm.tensor`` stacked: ``out`` has shape (world_size, *symm.tensor.shape)."""
    owned = out is not None
    out = output(symm.tensor, out, (symm.world_size, *symm.tensor.shape), "all_gather")
    _issue(
        symm,
        ("all_gather", block, barrier),
        _barriered(symm, kernels_triton.all_gather, symm.tensor.numel(), block, barrier),
        out,
        owned,
    )
    return out


def reduce_scatter(symm, out=None, *, block=None, barrier=True):
    """Chunk ``rank`` of the sum of every rank's ``symm.tensor`` (split into world_size equal chunks along dim 0)."""
    if symm.tensor.shape[0] % symm.world_size:
        raise ValueError(f"reduce_scatter: dim 0 ({symm.tensor.shape[0]}) is not a multiple of {symm.world_size} ranks")
    owned = out is not None
    out = output(symm.tensor, out, (symm.tensor.shape[0] // symm.world_size, *symm.tensor.shape[1:]), "reduce_scatter")
    m = symm.tensor.numel() // symm.world_size
    _issue(
        symm,
        ("reduce_scatter", block, barrier),
        _barriered(symm, kernels_triton.reduce_scatter, m, block, barrier),
        out,
        owned,
    )
    return out


__all__ = [
    "BLOCK",
    "LARGE_BLOCK",
    "PUSH_MIN_BYTES",
    "SMALL_BYTES",
    "all_gather",
    "all_reduce",
    "all_reduce_low_latency",
    "all_reduce_one_shot",
    "all_reduce_two_shot",
    "reduce_scatter",
]
