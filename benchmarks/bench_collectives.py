"""Two-GPU benchmark: castpile's collectives against NCCL and torch symmetric memory.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/bench_collectives.py --out docs/data/bench-collectives.json

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
shape (``harness.tuned_config``, recorded in each row); ``*_replay``
are the tuned launches bound with ``graph=True`` (one captured launch replayed).
(Earlier runs timed a copy of the kernels kept in benchmarks/; the library
has since taken over its changes.)

The torchrun harness, the integer test pattern and the bound launches are
benchmarks/harness.py's, shared with the other scripts.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import triton
from torch.distributed import _symmetric_memory  # noqa: F401  (registers torch.ops.symm_mem)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu import collectives, runtime
from castpile.gpu.collectives import kernels_triton as lib
from castpile.gpu.launch import bind
from harness import (
    GRAPH_CALLS,
    TORCHRUN,
    bound_one_shot,
    bound_two_shot,
    fill_pattern,
    graph_timed,
    host_times,
    max_abs_error,
    pad_blocks,
    pattern_sum,
    record_row,
    start_ranks,
    stop_ranks,
    timed,
    tuned_config,
)

SIZES = [4 << 10, 32 << 10, 256 << 10, 2 << 20, 32 << 20, 64 << 20]


def lib_bound(name, symm, out, work):
    """A library kernel (all_gather / reduce_scatter) bound as the ``*_bound`` all-reduces are.

    ``collectives.BLOCK``-element tiles, the grid capped at ``symm.max_blocks``, Triton's default 4 warps.
    """
    grid = (max(1, min(triton.cdiv(work, collectives.BLOCK), symm.max_blocks)),)
    return bind(
        getattr(lib, name),
        grid,
        symm.tensor,
        symm.buffer_ptrs,
        symm.signal_pad,
        symm.signal_pad_ptrs,
        out,
        symm.rank,
        work,
        WORLD=symm.world_size,
        BLOCK=collectives.BLOCK,
        BARRIER=True,
    )


def size_case(nbytes, rank, world, sms, group_name, dog, reps):
    n = nbytes // 2
    symm = runtime.symmetric_empty((n,), torch.bfloat16, push_scratch=True)
    x = symm.tensor
    out = torch.empty_like(x)
    nccl_buf = torch.empty_like(x)
    cfg = tuned_config(nbytes, sms)
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
        "castpile_one_shot_bound": bound_one_shot(symm, out),
        "castpile_two_shot_bound": bound_two_shot(symm),
        "castpile_one_shot_tuned": bound_one_shot(symm, out, **cfg),
        "castpile_two_shot_tuned": bound_two_shot(symm, **cfg),
        "castpile_one_shot_replay": bound_one_shot(symm, out, graph=True, **cfg),
        "castpile_two_shot_replay": bound_two_shot(symm, graph=True, **cfg),
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
    graph_names = [
        "nccl",
        "symm_mem_one_shot",
        "castpile_one_shot_bound",
        "castpile_one_shot_tuned",
        "castpile_two_shot_tuned",
        "castpile_two_shot_wrapper",
        "castpile_all_reduce_wrapper",
    ]
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
    row = {
        "bytes": nbytes,
        "elements": n,
        "iters": iters,
        "tuned_config": cfg,
        "max_blocks": symm.max_blocks,
        "pad_blocks": pad_blocks(symm),
        "eager_us": eager,
        "graph_us": graph,
        "host_us_rank": host,
        "max_abs_error": errors,
    }
    torch.cuda.synchronize()
    return row  # symm, x and out, which the closures above hold, go with this frame


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-collectives.json")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=90)
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(args.timeout)
    group_name = dist.group.WORLD.group_name
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    # Not run_header: this file's own keys stand between the common ones (in docs/data/bench-collectives.json's order).
    result = {
        "command": TORCHRUN + " ".join(sys.argv),
        "env": {
            k: os.environ.get(k)
            for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
        },
        "gpu": torch.cuda.get_device_name(dev),
        "world_size": world,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "reps": args.reps,
        "graph_calls_per_replay": GRAPH_CALLS,
        "dtype": "bf16",
        "rows": [],
    }
    for nbytes in SIZES:
        record_row(result, size_case(nbytes, rank, world, sms, group_name, dog, args.reps), rank, args.out)
    stop_ranks()


if __name__ == "__main__":
    main()
