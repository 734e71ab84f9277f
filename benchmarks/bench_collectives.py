"""Two-GPU benchmark: castpile's collectives against NCCL and torch symmetric memory.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/bench_collectives.py --out results.json

bf16, message sizes 4 KB - 64 MB (bytes of each rank's input).  Every
competitor runs in this process on the same symmetric buffer, interleaved:
``--reps`` rounds, each a fixed number of back-to-back calls between two CUDA
events after ``dist.barrier()`` (the same count on every rank); the reported
time is the median over rounds of the slower rank.  ``graph`` times replay a
CUDA graph of 20 captured calls.  Each all-reduce is checked once per size on
integer data against the exact sum.

castpile competitors: ``*_wrapper`` go through ``castpile.gpu.collectives``
(prepared launches, or per-output graph replays when ``out`` is passed; the
tensor has push scratch, so ``castpile_two_shot_wrapper`` pushes above 4 MB and
``castpile_two_shot_pull_wrapper`` never does); ``*_bound`` launch the same compiled
kernels through ``castpile.gpu.launch.bind`` with the grid capped at
``symm.max_blocks`` and 4 warps; ``*_tuned`` bind them with the wrappers' launch
shape (``allreduce_variants.tuned_config``, recorded in each row); ``*_replay``
are the tuned launches bound with ``graph=True`` (one captured launch replayed).
(Earlier runs timed a copy of the kernels kept in benchmarks/; the library
has since taken over its changes.)

The torchrun harness here (``start_ranks``/``stop_ranks``, ``timed``,
``graph_timed``, ``host_times``, the integer test pattern, ``run_header`` and
``write_result``) serves the other two-GPU scripts too.
"""

import argparse
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
from torch.distributed import _symmetric_memory  # noqa: F401  (registers torch.ops.symm_mem)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import allreduce_variants as av  # noqa: E402
from castpile.gpu import collectives, runtime  # noqa: E402
from castpile.gpu.collectives import kernels_triton as lib  # noqa: E402
from castpile.gpu.launch import bind  # noqa: E402

SIZES = [4 << 10, 32 << 10, 256 << 10, 2 << 20, 32 << 20, 64 << 20]
GRAPH_CALLS = 20
#: How the two-GPU scripts' result files record their command line (``sys.argv`` follows).
TORCHRUN = "python3 -m torch.distributed.run --nproc_per_node 2 "


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


def start_ranks(timeout: float = None):
    """Join torchrun's process group on this rank's GPU: (rank, world size, device, a Watchdog or None).

    The watchdog ends the process after ``timeout`` seconds without a ``tick``;
    without ``timeout`` there is none.
    """
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    return rank, world, dev, None if timeout is None else Watchdog(timeout, rank)


def stop_ranks():
    """Wait for every rank, then leave the process group."""
    dist.barrier()
    dist.destroy_process_group()


def run_header(dev, **fields) -> dict:
    """A result file's head: command line, GPU, versions and the date now, then ``fields`` in order."""
    return {"command": TORCHRUN + " ".join(sys.argv), "gpu": torch.cuda.get_device_name(dev),
            "torch": torch.__version__, "triton": triton.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            **fields}


def write_result(path, result: dict):
    """``result`` as indented JSON at ``path`` (its folder made if missing)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1) + "\n")


def fill_pattern(x: torch.Tensor, rank: int, salt: int = 0):
    """This rank's test input into ``x``: ``arange % 13 + rank + salt``, integers bf16 and their sums hold exactly."""
    x.copy_((torch.arange(x.numel(), device=x.device) % 13 + rank + salt).to(x.dtype))


def pattern_sum(n: int, world: int, device, salt: int = 0) -> torch.Tensor:
    """The exact fp32 sum over ``world`` ranks of :func:`fill_pattern`'s inputs of ``n`` elements."""
    return sum((torch.arange(n, device=device) % 13 + r + salt).float() for r in range(world))


def max_abs_error(got: torch.Tensor, expect: torch.Tensor) -> float:
    """Largest absolute difference, in fp32 (the results' ``max_abs_error``)."""
    return float((got.float() - expect.float()).abs().max())


def timed(fns: dict, iters: int, reps: int, dog: Watchdog) -> dict:
    """Median over rounds of the slower rank's microseconds per call, rounds interleaved."""
    samples = {name: [] for name in fns}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
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
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1000 / iters)
            dog.tick(name)
    medians = torch.tensor([statistics.median(v) for v in samples.values()], device="cuda")
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    return dict(zip(fns, medians.tolist()))


def host_times(fns: dict, calls: int = 200) -> dict:
    """This rank's host microseconds per call, ``calls`` calls queued back to back."""
    out = {}
    for name, fn in fns.items():
        torch.cuda.synchronize()
        dist.barrier()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        out[name] = (time.perf_counter() - t) * 1e6 / calls
        torch.cuda.synchronize()
    return out


def graphed(fn):
    """Replay of a CUDA graph holding ``GRAPH_CALLS`` calls of ``fn``."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    dist.barrier()
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


def lib_bound(name, symm, out, work):
    """A library kernel (all_gather / reduce_scatter) bound as the ``*_bound`` all-reduces are.

    ``collectives.BLOCK``-element tiles, the grid capped at ``symm.max_blocks``, Triton's default 4 warps.
    """
    grid = (max(1, min(triton.cdiv(work, collectives.BLOCK), symm.max_blocks)),)
    return bind(getattr(lib, name), grid, symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs,
                out, symm.rank, work, WORLD=symm.world_size, BLOCK=collectives.BLOCK, BARRIER=True)


def size_case(nbytes, rank, world, sms, group_name, dog, reps):
    n = nbytes // 2
    symm = runtime.symmetric_empty((n,), torch.bfloat16, push_scratch=True)
    x = symm.tensor
    out = torch.empty_like(x)
    nccl_buf = torch.empty_like(x)
    cfg = av.tuned_config(nbytes, sms)
    expect = pattern_sum(n, world, x.device)
    fill_pattern(x, rank)
    nccl_buf.copy_(x)
    ar = {
        "nccl": lambda: dist.all_reduce(nccl_buf),
        "symm_mem_one_shot": lambda: torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group_name),
        "symm_mem_two_shot": lambda: torch.ops.symm_mem.two_shot_all_reduce_(x, "sum", group_name),
        "castpile_one_shot_wrapper": lambda: collectives.all_reduce_one_shot(symm, out),
        "castpile_two_shot_wrapper": lambda: collectives.all_reduce_two_shot(symm),
        "castpile_two_shot_pull_wrapper": lambda: collectives.all_reduce_two_shot(symm, push=False),
        "castpile_one_shot_bound": av.one_shot(symm, out),
        "castpile_two_shot_bound": av.two_shot(symm),
        "castpile_one_shot_tuned": av.one_shot(symm, out, **cfg),
        "castpile_two_shot_tuned": av.two_shot(symm, **cfg),
        "castpile_one_shot_replay": av.one_shot(symm, out, graph=True, **cfg),
        "castpile_two_shot_replay": av.two_shot(symm, graph=True, **cfg),
        "castpile_all_reduce_wrapper": lambda: collectives.all_reduce(symm, out),
    }
    if symm.low_latency is not None:
        ar["castpile_low_latency_wrapper"] = lambda: collectives.all_reduce_low_latency(symm, out)
    errors = {}
    for name, fn in ar.items():
        fill_pattern(x, rank)
        nccl_buf.copy_(x)
        out.zero_()
        torch.cuda.synchronize()
        dist.barrier()
        got = fn()
        torch.cuda.synchronize()
        if name == "nccl":
            got = nccl_buf
        elif "two_shot" in name:
            got = x
        elif not isinstance(got, torch.Tensor):
            got = out
        errors[name] = max_abs_error(got, expect)
        dog.tick(f"check {name}")
    iters = 200 if nbytes <= 2 << 20 else (30 if nbytes <= 32 << 20 else 20)
    eager = timed(ar, iters, reps, dog)
    host = host_times(ar) if nbytes <= 256 << 10 else {}
    graph_names = ["nccl", "symm_mem_one_shot", "castpile_one_shot_bound", "castpile_one_shot_tuned",
                   "castpile_two_shot_tuned", "castpile_two_shot_wrapper", "castpile_all_reduce_wrapper"]
    graph_names += ["castpile_low_latency_wrapper"] if "castpile_low_latency_wrapper" in ar else []
    graph = graph_timed({name: ar[name] for name in graph_names}, max(1, iters // GRAPH_CALLS), reps, dog)
    # all-gather and reduce-scatter: input of nbytes per rank.
    gathered = x.new_empty((world * n,))
    ours_ag = x.new_empty((world, n))
    scattered = x.new_empty((n // world,))
    ours_rs = x.new_empty((n // world,))
    fill_pattern(x, rank)
    others = {
        "all_gather_nccl": lambda: dist.all_gather_into_tensor(gathered, x),
        "all_gather_castpile_wrapper": lambda: collectives.all_gather(symm, ours_ag),
        "all_gather_castpile_bound": lib_bound("all_gather", symm, ours_ag, n),
        "reduce_scatter_nccl": lambda: dist.reduce_scatter_tensor(scattered, x),
        "reduce_scatter_castpile_wrapper": lambda: collectives.reduce_scatter(symm, ours_rs),
        "reduce_scatter_castpile_bound": lib_bound("reduce_scatter", symm, ours_rs, n // world),
    }
    for fn in others.values():
        fn()
    torch.cuda.synchronize()
    errors["all_gather"] = max_abs_error(ours_ag.flatten(), gathered)
    errors["reduce_scatter"] = max_abs_error(ours_rs, scattered)
    eager.update(timed(others, iters, reps, dog))
    row = {"bytes": nbytes, "elements": n, "iters": iters, "tuned_config": cfg, "max_blocks": symm.max_blocks,
           "pad_blocks": av.pad_blocks(symm), "eager_us": eager, "graph_us": graph, "host_us_rank": host, "max_abs_error": errors}
    del symm, x, out
    torch.cuda.synchronize()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/bench-collectives.json")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(args.timeout)
    group_name = dist.group.WORLD.group_name
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    # Not run_header: this file's own keys stand between the common ones (in docs/bench-collectives.json's order).
    result = {
        "command": TORCHRUN + " ".join(sys.argv),
        "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                                "NVSHMEM_DISABLE_NVLS")},
        "gpu": torch.cuda.get_device_name(dev), "world_size": world, "torch": torch.__version__,
        "triton": triton.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "reps": args.reps, "graph_calls_per_replay": GRAPH_CALLS,
        "dtype": "bf16", "rows": [],
    }
    for nbytes in SIZES:
        row = size_case(nbytes, rank, world, sms, group_name, dog, args.reps)
        result["rows"].append(row)
        if rank == 0:
            print(json.dumps(row), flush=True)
            write_result(args.out, result)
    stop_ranks()


if __name__ == "__main__":
    main()
