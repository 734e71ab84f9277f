"""W ranks on one GPU: W host threads, each with its own CUDA stream, over symmetric memory that is all on that GPU.

The CPU simulator's calling style (:mod:`castpile.gpu.sim`), on a GPU::

    handles = one_gpu.symmetric_empty(4, (n,), torch.bfloat16)   # every rank's, before run
    def body(rank):
        handles[rank].tensor.copy_(inputs[rank])
        return collectives.all_reduce_one_shot(handles[rank])
    outs = one_gpu.run(body, 4, timeout=60)    # [rank 0's result, ..., rank 3's], on the GPU

Every rank's buffers, signal pads and scratch are allocations on the one GPU, and the
address tables hold their addresses, so a kernel's loads and stores to "peers" are loads
and stores to other allocations of the same device.  Fused ops' states come from
:func:`create_all` (``one_gpu.create_all(moe.MoE, 4, tokens=..., ...)``).  Each rank runs in
its own thread on its own stream; the library's host wrappers see ``1 / W`` of the GPU's
multiprocessors (:mod:`castpile.gpu.device_share`), so that the persistent and barriered grids
of all ranks are resident together.

What it proves: the kernels the GPU compiler made (not the interpreter's), running with
real concurrency between ranks and within each rank, under Hopper's memory model within
one device (every access is to device memory; the signals' system-scope atomics and fences
are the same instructions as across GPUs).  What it cannot: NVLink's timing and ordering
across devices, peer-to-peer mappings, anything about speed (ranks share one GPU's SMs and
memory bandwidth: nothing timed here is performance).  docs/one-gpu.md says more.

Rules that keep the ranks from deadlocking each other on one device, which :func:`run`
follows and a body must too: no device-wide synchronisation while ranks run
(``torch.cuda.synchronize``, CUDA-graph capture: the launch caches of tensors made here never
replay graphs), no kernel started while a peer still has to load it (every rank binds a new
launch before any starts it: :func:`launch_caches` for the library's launches, the launch
gate of :mod:`castpile.gpu.launch_gate` for a body's own ``kernel[grid]`` launches), and kernels loaded eagerly (``CUDA_MODULE_LOADING=EAGER``, set on import if
CUDA is not yet initialised: a lazily loaded kernel's first launch may wait for the whole
device).  A rank that waits for a signal no peer sends cannot be stopped: :func:`run`
raises :class:`RankTimeout`, and the GPU stays busy until the process exits; unless its kernels
were transpiled with ``CASTPILE_DEBUG_WAITS``: their waits give up, and :func:`run` raises
:class:`~castpile.gpu.wait_deadlines.HangError` naming each wait's ``path:line`` and the flag
(``rank 1's signal_pad[3]``: every rank's tensors made here are named).
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Sequence

import torch

from . import allocation_names, device_share, launch_gate, local_memory, rank_activity, wait_deadlines
from .launch_cache import LaunchCache
from .symmetric import (
    LowLatencyScratch,
    Scratch,
    SymmetricTensor,
    low_latency_blocks,
    low_latency_words,
    push_scratch_elements,
)

if not torch.cuda.is_initialized():
    os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")

#: Signal-pad slots (int32) per rank: a barriered kernel may launch ``PAD_SLOTS // world_size`` blocks at most.
PAD_SLOTS = 4096


class RankError(RuntimeError):
    """One or more ranks raised; ``errors`` maps rank -> traceback."""

    def __init__(self, errors: dict[int, str]):
        self.errors = errors
        super().__init__("\n".join(f"rank {r} raised:\n{tb}" for r, tb in sorted(errors.items())))


class RankTimeout(RuntimeError):
    """Some ranks did not finish in time; their kernels may still be spinning on the GPU.

    ``activities`` maps each hung rank to what it was doing (:mod:`castpile.gpu.rank_activity`,
    :meth:`castpile.gpu.launch_gate.LaunchGate.state`): compiling or loading a kernel, waiting at
    the launch gate for named peers, or waiting for its stream's kernels.
    """

    def __init__(self, hung: list[int], timeout: float, activities: dict[int, str] | None = None):
        self.hung = hung
        self.activities = activities or {}
        doing = "".join(f"\n  rank {r} {self.activities[r]}" for r in hung if r in self.activities)
        busy = any(a.startswith(("compiles", "loads", "prepares")) for a in self.activities.values())
        if busy:
            cause = (
                "a rank was still compiling or loading a kernel: give run() a longer timeout (the first call of a "
                "kernel compiles it), or launch each kernel once before run()"
            )
        else:
            cause = (
                "a rank that waits for a signal no peer sends (a missing or mismatched barrier, different grids "
                "on different ranks) hangs like this"
            )
        super().__init__(
            f"ranks {hung} did not finish within {timeout:g} s:{doing}\n{cause}.  A kernel already launched "
            "cannot be stopped: the GPU stays busy until this process exits"
        )


def _device(device) -> torch.device:
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"castpile.gpu.one_gpu runs ranks on a GPU, not on {device}")
    return device


def symmetric_scratch(world_size: int, shape, dtype: torch.dtype, device=None, name="scratch") -> list[Scratch]:
    """One zeroed tensor per rank on the GPU, each with every rank's address: ``sim.symmetric_scratch``'s twin
    (each named ``name`` in messages about its flags: ``rank 1's scratch[3]``)."""
    device = _device(device)
    tensors = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(world_size)]
    for rank, tensor in enumerate(tensors):
        allocation_names.name(tensor, rank, name)
    ptrs = [t.data_ptr() for t in tensors]
    return [Scratch(t, torch.tensor(ptrs, dtype=torch.int64, device=device)) for t in tensors]


def symmetric_empty(
    world_size: int, shape, dtype: torch.dtype, push_scratch=False, device=None
) -> list[SymmetricTensor]:
    """One :class:`SymmetricTensor` per rank, all on one GPU (call before :func:`run`).

    Buffers are uninitialised; signal pads (:data:`PAD_SLOTS` each) and scratch start zero.
    Small tensors get the low-latency scratch as on GPUs, ``push_scratch=True`` the pushing
    two-shot's.  ``max_blocks`` is this rank's share of the multiprocessors, one block each (on a GPU of
    its own a rank may launch two per multiprocessor: all ranks' grids then fill the device exactly,
    and one other kernel resident anywhere keeps a barriered block from starting).  From here on the library's wrappers in this process see ``1 / world_size`` of
    the device's multiprocessors (:func:`castpile.gpu.device_share.share_device`).
    """
    device = _device(device)
    device_share.share_device(device, world_size)
    sms = device_share.multiprocessors(device)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    bufs = [torch.empty(shape, dtype=dtype, device=device) for _ in range(world_size)]
    for rank, buf in enumerate(bufs):
        allocation_names.name(buf, rank, "tensor")
    buffer_ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64, device=device)
    pads = symmetric_scratch(world_size, (PAD_SLOTS,), torch.int32, device, "signal_pad")
    words = low_latency_words(bufs[0])
    low_latency: Sequence[LowLatencyScratch | None] = [None] * world_size
    if words is not None:
        slots = symmetric_scratch(world_size, (2 * world_size * words,), torch.int64, device, "low_latency.slots")
        low_latency = [
            LowLatencyScratch(
                slots=s,
                epochs=torch.zeros(low_latency_blocks(words, sms), dtype=torch.int32, device=device),
                words=words,
                tile_sums=torch.zeros(words, dtype=torch.float32, device=device),
                row_arrivals=torch.zeros(words, dtype=torch.int32, device=device),
            )
            for s in slots
        ]
    pushes: Sequence[Scratch | None] = [None] * world_size
    if push_scratch:
        elements = push_scratch_elements(bufs[0].numel(), world_size)
        pushes = symmetric_scratch(world_size, (elements,), dtype, device, "push_scratch")
    caches = launch_caches(world_size)
    return [
        SymmetricTensor(
            tensor=bufs[r],
            buffer_ptrs=buffer_ptrs.clone(),
            signal_pad=pads[r].tensor,
            signal_pad_ptrs=pads[r].ptrs,
            rank=r,
            world_size=world_size,
            max_blocks=min(sms, PAD_SLOTS // world_size),
            low_latency=low_latency[r],
            push_scratch=pushes[r],
            launches=caches[r],
        )
        for r in range(world_size)
    ]


#: Seconds a rank waits at the binding barrier for its peers (a rank that never binds: a mismatched call).
BIND_TIMEOUT_S = 300.0


def launch_caches(world_size: int) -> list[LaunchCache]:
    """One launch cache per rank: no graph replays, and a barrier of every rank after each new binding.

    Loading a kernel's module waits for the device, and so does growing the local memory a launch
    needs (:mod:`castpile.gpu.local_memory`): a rank that does either while a peer's kernel spins
    waiting for it would never finish.  The ranks make the same calls, so they bind the same launches
    in the same order; the barrier makes every rank load a kernel before any starts it, and, before
    releasing them, reserves the most local memory any rank's copy needs (the JIT specialises
    ``rank == 1``, whose copy may spill more).
    """
    needed: list[int] = []

    def reserve_local_memory() -> None:
        local_memory.reserve(max(needed))
        needed.clear()

    barrier = threading.Barrier(world_size, action=reserve_local_memory, timeout=BIND_TIMEOUT_S)

    def after_bind(launch) -> None:
        needed.append(local_memory.local_bytes(launch))
        barrier.wait()

    return [LaunchCache(replay=False, after_bind=after_bind) for _ in range(world_size)]


def create_all(state_class, world_size: int, device=None, **arguments) -> list:
    """Every rank's state of a fused op (``moe.MoE``, ``tp_gemm.AllGatherMatmul``, ...) on one GPU.

    Launch shapes are the op's GPU defaults for ``1 / world_size`` of the device's multiprocessors.
    """
    device = _device(device)
    device_share.share_device(device, world_size)
    states = state_class.create_all(
        world_size, device=device, alloc=lambda w, shape, dtype: symmetric_scratch(w, shape, dtype, device), **arguments
    )
    for state, cache in zip(states, launch_caches(world_size)):
        state.launches = cache
    return states


class _Kept:
    """Triton's allocator for one rank (TMA descriptors, scratch): allocations live until :func:`run` returns.

    Freeing device memory can synchronise the device, which would wait for peers' kernels that wait for this rank.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.held: list[torch.Tensor] = []

    def __call__(self, size: int, alignment: int, stream):
        self.held.append(torch.empty(size, dtype=torch.int8, device=self.device))
        return self.held[-1]


_STREAMS: dict[tuple[int, int], list] = {}


def streams(world_size: int, device=None) -> list:
    """The ranks' streams on ``device`` (the same ones on every :func:`run` of ``world_size`` ranks)."""
    device = _device(device)
    key = (device.index, world_size)
    if key not in _STREAMS:
        _STREAMS[key] = [torch.cuda.Stream(device) for _ in range(world_size)]
    return _STREAMS[key]


def run(fn, world_size: int, *, args=(), timeout: float = 120.0, device=None) -> list:
    """Run ``fn(rank, *args)`` in ``world_size`` threads at once, each on its own stream; return their results.

    Each thread makes ``device`` current and its rank's stream (:func:`streams`) the current
    stream, calls ``fn``, then waits for that stream alone.  Work queued before the call on the
    calling thread's stream is finished first.  :class:`RankError` carries the tracebacks of
    ranks that raised; :class:`RankTimeout` names ranks still running after ``timeout`` seconds;
    :class:`~castpile.gpu.wait_deadlines.HangError` names the debug-mode waits that gave up
    (recorded since the last check: they are cleared, and the GPU is free for the next call); when
    a rank raised too, the :class:`RankError` comes first, with that HangError as its cause.
    """
    import triton

    device = _device(device)
    torch.cuda.current_stream(device).synchronize()
    ranks = streams(world_size, device)
    results: dict[int, object] = {}
    errors: dict[int, str] = {}

    gate = launch_gate.LaunchGate(world_size)

    def body(rank: int) -> None:
        kept = _Kept(device)
        gate.enter(rank)
        try:
            torch.cuda.set_device(device)
            triton.set_allocator(kept)
            with torch.cuda.stream(ranks[rank]):
                results[rank] = fn(rank, *args)
            ranks[rank].synchronize()
        except BaseException:
            errors[rank] = traceback.format_exc()
        finally:
            gate.leave()

    threads = [
        threading.Thread(target=body, args=(r,), name=f"castpile-rank-{r}", daemon=True) for r in range(world_size)
    ]
    with launch_gate.installed(gate):
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, t in enumerate(threads) if t.is_alive()]
        activities = {r: gate.state(r) or rank_activity.describe(threads[r]) for r in hung}
        gate.break_()
    gave_up = None
    if not hung:  # every rank's kernels are done: the record holds all its waits that gave up
        try:
            wait_deadlines.check(allocation_names.name_of)
        except wait_deadlines.HangError as error:
            gave_up = error
    if errors:
        raise RankError(errors) from gave_up
    if hung:
        raise RankTimeout(hung, timeout, activities)
    if gave_up is not None:
        raise gave_up
    return [results[r] for r in range(world_size)]
