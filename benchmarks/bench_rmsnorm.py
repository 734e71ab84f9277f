"""Two-GPU check and benchmark of the fused all-reduce + residual + RMSNorm against NCCL and torch symm_mem.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/bench_rmsnorm.py --out docs/data/bench-rmsnorm.json

bf16, D = 4096..16384, M = 1..8192 rows.  For each shape:

1. Check: ``--calls`` calls (default 1000) of ``all_reduce_residual_rmsnorm`` with
   new inputs each call and random skew (rank 1 sleeps 0-300 us before a third of
   the calls), each against a torch reference on the GPU: the new residual exact
   (integer data), y within one bf16 rounding of float32 torch (the reductions'
   order differs), y bitwise equal on both ranks; signal pads zero at the end.
2. Timing, every competitor in the same run, rounds interleaved, medians of the
   slower rank (benchmarks/harness.py), eager and inside CUDA graphs:
   ``nccl``: ``dist.all_reduce`` + ``residual.add_`` + ``F.rms_norm``;
   ``symm_mem``: ``torch.ops.symm_mem.one_shot_all_reduce`` + add + ``F.rms_norm``;
   ``castpile_fused``: ``all_reduce_residual_rmsnorm`` (the library's choice),
   ``castpile_fused_one_shot``: the one-shot kernel forced;
   ``castpile_unfused``: castpile's ``all_reduce`` + add + ``F.rms_norm``;
   ``castpile_all_reduce``: castpile's bare ``all_reduce`` of the same bytes.
"""

import argparse
import random
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed import _symmetric_memory  # noqa: F401  (registers torch.ops.symm_mem)

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu import collectives, runtime
from castpile.gpu.fused import rmsnorm
from harness import graph_timed, record_row, run_header, start_ranks, stop_ranks, timed

SHAPES = [
    (1, 4096),
    (1, 8192),
    (4, 8192),
    (16, 8192),
    (16, 16384),
    (64, 8192),
    (256, 8192),
    (1024, 8192),
    (4096, 8192),
    (8192, 8192),
]
EPS = 1e-6


def pattern(shape, seed, device, low=-8, high=9):
    """Integer-valued bf16 data from ``seed`` (the same on every rank for the same seed)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(low, high, shape, generator=gen, device=device).to(torch.bfloat16)


def reference(xs_sum, residual, weight):
    """(new residual, y) of the spec in float32 torch: y rounded from float32."""
    hb = (xs_sum + residual.float()).to(torch.bfloat16)
    h = hb.float()
    y = h * torch.rsqrt((h * h).mean(-1, keepdim=True) + EPS) * weight.float()
    return hb, y.to(torch.bfloat16)


def check(symm, rank, world, calls, dog):
    """``calls`` fused calls with new data and random skew: the counts of wrong results."""
    m, d = symm.tensor.shape
    dev = symm.tensor.device
    rng = random.Random(1234)  # the same choices on both ranks; only rank 1 sleeps
    wrong = {"residual": 0, "y": 0, "ranks_differ": 0}
    out = torch.empty_like(symm.tensor)
    for call in range(calls):
        xs = [pattern((m, d), 3 * call + r, dev) for r in range(world)]
        residual = pattern((m, d), 10_000 + call, dev)
        weight = (pattern((d,), 20_000 + call, dev, 1, 9).float() / 4).to(torch.bfloat16)
        symm.tensor.copy_(xs[rank])
        expect_residual, expect_y = reference(sum(x.float() for x in xs), residual, weight)
        skew = rng.random() < 1 / 3
        pause = rng.uniform(0, 300e-6)
        torch.cuda.synchronize()
        if skew and rank == 1:
            time.sleep(pause)
        rmsnorm.all_reduce_residual_rmsnorm(symm, residual, weight, EPS, out)
        torch.cuda.synchronize()
        wrong["residual"] += int(not torch.equal(residual, expect_residual))
        close = (out.float() - expect_y.float()).abs() <= 2**-7 * expect_y.float().abs() + 1e-30
        wrong["y"] += int(not bool(close.all()))
        digest = out.view(torch.int16).to(torch.int64).mul(torch.arange(1, out.numel() + 1, device=dev).view(m, d))
        digests = torch.stack([digest.sum(), -digest.sum()])
        dist.all_reduce(digests, op=dist.ReduceOp.MAX)
        wrong["ranks_differ"] += int(digests[0] != -digests[1])
        if call % 100 == 0:
            dog.tick(f"check call {call}")
    pads = torch.tensor([int(symm.signal_pad.abs().sum())], device=dev)
    dist.all_reduce(pads)
    return {"calls": calls, "wrong": wrong, "signal_pads_sum": int(pads.item())}


def shape_case(m, d, rank, world, group_name, dog, reps, calls):
    symm = runtime.symmetric_empty((m, d), torch.bfloat16)
    dev = symm.tensor.device
    row = {
        "rows": m,
        "D": d,
        "label": f"{m} x {d}",
        "bytes": m * d * 2,
        "method": "one_shot" if symm.low_latency is None else "low_latency",
        "check": check(symm, rank, world, calls, dog),
    }
    x = symm.tensor
    x.copy_(pattern((m, d), rank, dev))
    residual = pattern((m, d), 99, dev)
    weight = pattern((d,), 98, dev, 1, 9)
    out = torch.empty_like(x)
    nccl_buf = x.clone()

    def torch_norm(summed):
        residual.add_(summed)
        return F.rms_norm(residual, (d,), weight, EPS)

    fns = {
        "nccl": lambda: (dist.all_reduce(nccl_buf), torch_norm(nccl_buf)),
        "symm_mem": lambda: torch_norm(torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group_name)),
        "castpile_fused": lambda: rmsnorm.all_reduce_residual_rmsnorm(symm, residual, weight, EPS, out),
        "castpile_fused_one_shot": lambda: rmsnorm.all_reduce_residual_rmsnorm(
            symm, residual, weight, EPS, out, method="one_shot"
        ),
        "castpile_unfused": lambda: torch_norm(collectives.all_reduce(symm, out)),
        "castpile_all_reduce": lambda: collectives.all_reduce(symm, out),
    }
    nbytes = m * d * 2
    iters = 200 if nbytes <= 2 << 20 else (40 if nbytes <= 32 << 20 else 20)
    row["iters"] = iters
    row["eager_us"] = timed(fns, iters, reps, dog)
    row["graph_us"] = graph_timed(fns, max(1, iters // 20), reps, dog)
    torch.cuda.synchronize()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-rmsnorm.json")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--shapes", default=None, help="e.g. 1x4096,16x8192 (default: all)")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(args.timeout)
    group_name = dist.group.WORLD.group_name
    shapes = SHAPES if args.shapes is None else [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    result = run_header(dev, world_size=world, dtype="bf16", eps=EPS, reps=args.reps, rows=[])
    for m, d in shapes:
        record_row(result, shape_case(m, d, rank, world, group_name, dog, args.reps, args.calls), rank, args.out)
    stop_ranks()


if __name__ == "__main__":
    main()
