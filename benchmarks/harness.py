"""The benchmarks' shared harness: torchrun ranks, timing, the integer test pattern, result files.

The scripts under ``benchmarks/`` and ``benchmarks/sweeps/`` that import this module
put ``benchmarks/`` and the repository root on ``sys.path`` first (it imports
``castpile.gpu``; they import ``kernels``), so a script runs as ``python benchmarks/X.py`` or
``python benchmarks/sweeps/X.py`` from the repository root with triton and torch
only (no libcst: the kernels come from ``benchmarks/kernels/generated/``).

One GPU:
    :func:`timed_one_gpu` (with :func:`graphed` and :func:`host_times`), :data:`STACK_BLOCK` / :data:`STACK_WARPS` (the stack
    benchmarks' launch shape).
Both, the one timing loop under the others:
    :func:`calls_timed` with :func:`events`.
Several ranks under torchrun (one process per GPU):
    :func:`start_ranks` / :func:`stop_ranks` (with a :class:`Watchdog` against a
    hung barrier), :func:`timed`, :func:`graph_timed`, :func:`graphed`,
    :func:`host_times`, :func:`run_header`.
Both:
    :func:`fill_pattern` / :func:`pattern_sum` (integer data whose bf16 sums are
    exact), :func:`max_abs_error`, :func:`write_result`, :func:`record_row`.
Bound launches of the library's all-reduce kernels at a chosen launch shape
(bench_collectives.py, sweeps/sweep_small.py, sweeps/sweep_large.py):
    :func:`bound_one_shot`, :func:`bound_two_shot`, :func:`tuned_config`,
    :func:`pad_blocks`.
"""

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import triton

from castpile.gpu import collectives
from castpile.gpu.collectives import kernels_triton as lib
from castpile.gpu.launch import bind

#: Calls captured in each CUDA graph that :func:`graphed` replays.
GRAPH_CALLS = 20
#: How the two-GPU scripts' result files record their command line (``sys.argv`` follows).
TORCHRUN = "python3 -m torch.distributed.run --nproc_per_node 2 "
#: Tile and warps of the single-GPU stack benchmarks (bench_gpu.py, bench_atomics.py).
STACK_BLOCK, STACK_WARPS = 1024, 4


# One GPU ------------------------------------------------------------------------------------------------------


def events() -> tuple:
    """A pair of CUDA events that record times, for :func:`calls_timed`."""
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def calls_timed(fn, iters: int, start, end) -> float:
    """Microseconds per call of ``iters`` back-to-back calls of ``fn`` between the CUDA events ``start`` and ``end``."""
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / iters


def timed_one_gpu(fns: dict, iters: int, reps: int) -> dict:
    """Median microseconds per call of each callable on one GPU, rounds interleaved across callables."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    samples = {name: [] for name in fns}
    start, end = events()
    for _ in range(reps):
        for name, fn in fns.items():
            samples[name].append(calls_timed(fn, iters, start, end))
    return {name: statistics.median(v) for name, v in samples.items()}


# Ranks under torchrun -----------------------------------------------------------------------------------------


class Watchdog:
    """Ends the process if no progress is reported for ``limit`` seconds (a hung barrier)."""

    def __init__(self, limit: float, rank: int):
        self.limit, self.rank, self.last, self.what = limit, rank, time.monotonic(), "start"
        threading.Thread(target=self._watch, daemon=True).start()

    def tick(self, what: str):
        self.last, self.what = time.monotonic(), what

    def _watch(self):
        while True:
            time.sleep(1)
            if time.monotonic() - self.last > self.limit:
                print(f"rank {self.rank}: watchdog: no progress for {self.limit} s after {self.what}", flush=True)
                os._exit(3)


def start_ranks(timeout: float | None = None, share_gpus: bool = False):
    """Join torchrun's process group on this rank's GPU: (rank, world size, device, a Watchdog or None).

    The watchdog ends the process after ``timeout`` seconds without a ``tick``;
    without ``timeout`` there is none.  More ranks on a node than GPUs
    (``LOCAL_WORLD_SIZE`` above the GPUs present) is an error unless ``share_gpus``:
    then ranks share GPUs round-robin and the group is gloo's (NCCL refuses two
    ranks on one GPU), which the caller must check (``dist.get_backend()``) before
    timing anything against NCCL.
    """
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local, gpus = int(os.environ["LOCAL_RANK"]), torch.cuda.device_count()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if gpus == 0:
        raise RuntimeError("no CUDA device: the GPU benchmarks run on GPU machines")
    if per_node > gpus and not share_gpus:
        raise RuntimeError(f"{per_node} ranks per node but {gpus} GPU(s): start at most one rank per GPU")
    dev = torch.device("cuda", local % gpus)
    torch.cuda.set_device(dev)
    if per_node <= gpus:
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo")
    return rank, world, dev, None if timeout is None else Watchdog(timeout, rank)


def stop_ranks():
    """Wait for every rank, then leave the process group."""
    dist.barrier()
    dist.destroy_process_group()


def run_header(dev, launcher: str = TORCHRUN, **fields) -> dict:
    """A result file's head: ``launcher`` + the command line, GPU, versions and the date now, then ``fields``."""
    return {
        "command": launcher + " ".join(sys.argv),
        "gpu": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        **fields,
    }


def timed(fns: dict, iters: int, reps: int, dog: Watchdog) -> dict:
    """Median over rounds of the slower rank's microseconds per call, rounds interleaved."""
    samples = {name: [] for name in fns}
    start, end = events()
    for name, fn in fns.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        dog.tick(f"warm-up {name}")
    for _ in range(reps):
        for name, fn in fns.items():
            torch.cuda.synchronize()
            dist.barrier()
            samples[name].append(calls_timed(fn, iters, start, end))
            dog.tick(name)
    medians = torch.tensor([statistics.median(v) for v in samples.values()], device="cuda")
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    return dict(zip(fns, medians.tolist()))


def ranks_barrier():
    """Wait for every rank when there are ranks (a torchrun process group), else nothing (one GPU)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def host_times(fns: dict, calls: int = 200) -> dict:
    """This process's host microseconds per call, ``calls`` calls queued back to back (launch cost: the GPU
    queue absorbs the kernels); ranks start each callable together."""
    out = {}
    for name, fn in fns.items():
        torch.cuda.synchronize()
        ranks_barrier()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        out[name] = (time.perf_counter() - t) * 1e6 / calls
        torch.cuda.synchronize()
    return out


def graphed(fn):
    """Replay of a CUDA graph holding ``GRAPH_CALLS`` calls of ``fn`` (on one GPU, or on every rank together)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    ranks_barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            fn()
    torch.cuda.synchronize()
    return graph.replay


def graph_timed(fns: dict, iters: int, reps: int, dog: Watchdog) -> dict:
    """Microseconds per call of each callable inside CUDA graphs: :func:`timed` over replays of :func:`graphed`."""
    graphs = {name: graphed(fn) for name, fn in fns.items()}
    return {name: us / GRAPH_CALLS for name, us in timed(graphs, iters, reps, dog).items()}


def load_variant(name: str, text: str, folder: Path):
    """Module ``name`` from ``text`` (a variant of a generated kernel module), written into ``folder`` and imported.

    The diagnostics (diag_*.py) make variants by replacing lines of a checked-in module;
    ``@triton.jit`` reads a kernel's source through its module, so the module is registered.
    """
    import importlib.util

    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def variant_outcomes(fns: dict, out: torch.Tensor, reference: torch.Tensor, untested=()) -> tuple[dict, dict, set]:
    """Each of a diagnostic's callables twice, ranks in step: (exact, errors, failed on any rank).

    ``exact[name]``: ``out`` equals ``reference`` after the second call (None for ``untested``, which
    write elsewhere); ``errors[name]``: why a callable raised (a variant that does not compile is
    reported, not fatal); ``failed``: every rank's failures, so that all ranks time the same set.
    """
    errors, exact = {}, {}
    for name, fn in fns.items():
        try:
            out.zero_()
            for _ in range(2):
                fn()
                torch.cuda.synchronize()
                dist.barrier()
            exact[name] = None if name in untested else bool(torch.equal(out, reference))
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, errors)
    return exact, errors, set().union(*every)


# Test data and result files -----------------------------------------------------------------------------------


def fill_pattern(x: torch.Tensor, rank: int, salt: int = 0):
    """This rank's test input into ``x``: ``arange % 13 + rank + salt``, integers bf16 and their sums hold exactly."""
    x.copy_((torch.arange(x.numel(), device=x.device) % 13 + rank + salt).to(x.dtype))


def pattern_sum(n: int, world: int, device, salt: int = 0) -> torch.Tensor:
    """The exact fp32 sum over ``world`` ranks of :func:`fill_pattern`'s inputs of ``n`` elements."""
    return sum((torch.arange(n, device=device) % 13 + r + salt).float() for r in range(world))


def max_abs_error(got: torch.Tensor, expect: torch.Tensor) -> float:
    """Largest absolute difference, in fp32 (the results' ``max_abs_error``)."""
    return float((got.float() - expect.float()).abs().max())


def write_result(path, result: dict):
    """``result`` as indented JSON at ``path`` (its folder made if missing)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1) + "\n")


def record_row(result: dict, row: dict, rank: int, path) -> None:
    """Append ``row`` to ``result["rows"]``; rank 0 prints it and rewrites the result file (a run cut short keeps its rows)."""
    result["rows"].append(row)
    if rank == 0:
        print(json.dumps(row), flush=True)
        write_result(path, result)


# Bound all-reduce launches ------------------------------------------------------------------------------------
# A zero-argument callable bound once with castpile.gpu.launch.bind (graph=True: a replayed one-kernel CUDA graph)
# over castpile.gpu.collectives.kernels_triton.  By default the grid is capped at symm.max_blocks with 4 warps
# (bench_collectives' ``*_bound``); tuned_config gives the library wrappers' shape (``*_tuned``).


def pad_blocks(symm) -> int:
    """Blocks a barriered kernel may launch: one signal-pad slot per peer per block."""
    return symm.signal_pad.numel() // symm.world_size


def bound_one_shot(symm, out, block=collectives.BLOCK, blocks=None, warps=4, graph=False):
    """Bound one-shot all-reduce of ``symm.tensor`` into ``out``; grid capped at ``blocks`` or ``symm.max_blocks``."""
    n = symm.tensor.numel()
    cap = symm.max_blocks if blocks is None else min(blocks, pad_blocks(symm))
    grid = (max(1, min(triton.cdiv(n, block), cap)),)
    return bind(
        lib.one_shot_all_reduce,
        grid,
        symm.tensor,
        symm.buffer_ptrs,
        symm.signal_pad,
        symm.signal_pad_ptrs,
        out,
        symm.rank,
        n,
        WORLD=symm.world_size,
        BLOCK=block,
        BARRIER=True,
        num_warps=warps,
        graph=graph,
    )


def bound_two_shot(symm, block=collectives.BLOCK, blocks=None, warps=4, graph=False):
    """Bound in-place two-shot all-reduce of ``symm.tensor`` (pulling); grid as :func:`bound_one_shot`'s, per chunk."""
    n = symm.tensor.numel()
    cap = symm.max_blocks if blocks is None else min(blocks, pad_blocks(symm))
    grid = (max(1, min(triton.cdiv(triton.cdiv(n, symm.world_size), block), cap)),)
    return bind(
        lib.two_shot_all_reduce,
        grid,
        symm.tensor,
        symm.buffer_ptrs,
        symm.signal_pad,
        symm.signal_pad_ptrs,
        symm.rank,
        n,
        WORLD=symm.world_size,
        BLOCK=block,
        BARRIER=True,
        num_warps=warps,
        graph=graph,
    )


def tuned_config(nbytes: int, sms: int) -> dict:
    """The library wrappers' tile, warps and grid cap for an ``nbytes`` message (castpile.gpu.collectives)."""
    if nbytes <= collectives.SMALL_BYTES:
        return {"block": collectives.BLOCK, "warps": 4, "blocks": sms}
    return {"block": collectives.LARGE_BLOCK, "warps": 8, "blocks": 2 * sms}
