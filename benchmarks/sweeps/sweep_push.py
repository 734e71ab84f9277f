"""The two-shot all-reduce with a pushing reduce-scatter against the pulling one, 2 x H200.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_push.py --out docs/data/bench-sweep-push.json

bf16, 2 / 32 / 64 MB, eager, medians of interleaved rounds (harness.timed);
every variant is checked exact on integer data first.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

BENCH = Path(__file__).resolve().parents[1]  # benchmarks/, for harness and kernels
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from castpile.gpu import collectives, runtime  # noqa: E402
from harness import (fill_pattern, max_abs_error, pattern_sum, run_header, start_ranks, stop_ranks, timed,  # noqa: E402
                     write_result)

SIZES = [2 << 20, 32 << 20, 64 << 20]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    rank, world, dev, dog = start_ranks(120)
    rows = []
    for nbytes in SIZES:
        n = nbytes // 2
        symm = runtime.symmetric_empty((n,), torch.bfloat16, push_scratch=True)
        x = symm.tensor
        nccl_buf = torch.empty_like(x)
        fns = {"nccl": lambda: dist.all_reduce(nccl_buf),
               "two_shot_pull": lambda: collectives.all_reduce_two_shot(symm, push=False),
               "two_shot_push": lambda: collectives.all_reduce_two_shot(symm, push=True)}
        expect = pattern_sum(n, world, dev)
        errors = {}
        for name, fn in fns.items():
            fill_pattern(x, rank)
            nccl_buf.copy_(x)
            torch.cuda.synchronize()
            dist.barrier()
            fn()
            torch.cuda.synchronize()
            errors[name] = max_abs_error(nccl_buf if name == "nccl" else x, expect)
            dog.tick(f"check {name}")
        us = timed(fns, 20, args.reps, dog)
        rows.append({"bytes": nbytes, "us": us, "bus_GBps": {k: nbytes / v / 1e3 for k, v in us.items()},
                     "max_abs_error": errors})
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
        del symm, x, fns
        torch.cuda.synchronize()
        dist.barrier()
    if rank == 0:
        write_result(args.out, run_header(dev, reps=args.reps, rows=rows))
    stop_ranks()


if __name__ == "__main__":
    main()
