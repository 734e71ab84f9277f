"""The two-shot all-reduce with a pushing reduce-scatter against the pulling one, 2 x H200.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_push.py --out docs/data/bench-sweep-push.json

bf16, 2 / 32 / 64 MB, eager, medians of interleaved rounds (harness.timed);
every variant is checked exact on integer data first.
"""

import json

import torch
import torch.distributed as dist

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from castpile.gpu import collectives
from harness import fill_pattern, start_ranks, timed

SIZES = [2 << 20, 32 << 20, 64 << 20]


def main():
    args = sweepkit.command_line(__doc__, reps=7).parse_args()
    rank, world, dev, dog = start_ranks(120)
    rows = []
    for nbytes in SIZES:
        symm, expect = sweepkit.bf16_case(nbytes, rank, world, dev, push_scratch=True)
        x = symm.tensor
        nccl_buf = torch.empty_like(x)
        fns = {
            "nccl": lambda nccl_buf=nccl_buf: dist.all_reduce(nccl_buf),
            "two_shot_pull": lambda symm=symm: collectives.all_reduce_two_shot(symm, push=False),
            "two_shot_push": lambda symm=symm: collectives.all_reduce_two_shot(symm, push=True),
        }

        def fresh(x=x, nccl_buf=nccl_buf):  # every variant sums in place: each check starts from the pattern
            fill_pattern(x, rank)
            nccl_buf.copy_(x)

        errors = {}
        for name, fn in fns.items():
            errors[name] = sweepkit.checked(fn, nccl_buf if name == "nccl" else x, expect, prepare=fresh)
            dog.tick(f"check {name}")
        us = timed(fns, 20, args.reps, dog)
        rows.append(
            {
                "bytes": nbytes,
                "us": us,
                "bus_GBps": {k: nbytes / v / 1e3 for k, v in us.items()},
                "max_abs_error": errors,
            }
        )
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
        del fns, fresh, symm, x
        torch.cuda.synchronize()
        dist.barrier()
    sweepkit.finish(args.out, dev, rank, reps=args.reps, rows=rows)


if __name__ == "__main__":
    main()
