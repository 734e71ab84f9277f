"""Tile, warp and grid sweep of the library's all-reduce kernels at 32 and 64 MB (2 ranks, bf16, eager).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_large.py --out docs/data/bench-sweep-large.json

Every configuration is checked once on integer data against the exact sum, then
timed (median over interleaved rounds of the slower rank) beside NCCL.
"""

import json

import torch
import torch.distributed as dist

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from harness import bound_one_shot, bound_two_shot, fill_pattern, pad_blocks, start_ranks, timed

SIZES = [32 << 20, 64 << 20]
# (tile elements, warps, blocks per SM)
CONFIGS = [(4096, 8, 2), (8192, 8, 2), (8192, 16, 1), (4096, 4, 4), (2048, 4, 4), (16384, 16, 1), (8192, 8, 1)]


def main(argv=None):
    args = sweepkit.command_line(__doc__, reps=5).parse_args(argv)
    rank, world, dev, dog = start_ranks(120)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    rows = []
    for nbytes in SIZES:
        symm, expect = sweepkit.bf16_case(nbytes, rank, world, dev)
        x, out, ref = symm.tensor, torch.empty_like(symm.tensor), torch.empty_like(symm.tensor)
        fns = {"nccl": lambda ref=ref: dist.all_reduce(ref)}
        for block, warps, per_sm in CONFIGS:
            blocks = min(per_sm * sms, pad_blocks(symm))
            fns[f"one_b{block}_w{warps}_x{per_sm}"] = bound_one_shot(symm, out, block=block, blocks=blocks, warps=warps)
            fns[f"two_b{block}_w{warps}_x{per_sm}"] = bound_two_shot(symm, block=block, blocks=blocks, warps=warps)

        def fresh(x=x, out=out):  # the two-shot sums in place: every check starts from the pattern
            fill_pattern(x, rank)
            out.zero_()

        errors = {}
        for name, fn in fns.items():
            if name == "nccl":
                continue
            errors[name] = sweepkit.checked(fn, out if name.startswith("one") else x, expect, prepare=fresh)
            dog.tick(f"check {name}")
        fill_pattern(x, rank)
        us = timed(fns, 10, args.reps, dog)
        rows.append({"bytes": nbytes, "eager_us": us, "max_abs_error": errors})
        if rank == 0:
            best = sorted((v, k) for k, v in us.items())[:4]
            print(
                json.dumps(
                    {"bytes": nbytes, "nccl": round(us["nccl"], 1), "best": best, "max_error": max(errors.values())}
                ),
                flush=True,
            )
        del fns, fresh, symm, x
        torch.cuda.synchronize()
    sweepkit.finish(args.out, dev, rank, configs=CONFIGS, rows=rows)


if __name__ == "__main__":
    main()
