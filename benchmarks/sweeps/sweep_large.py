"""Tile, warp and grid sweep of the library's all-reduce kernels at 32 and 64 MB (2 ranks, bf16, eager).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_large.py --out docs/data/bench-sweep-large.json

Every configuration is checked once on integer data against the exact sum, then
timed (median over interleaved rounds of the slower rank) beside NCCL.
"""

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

BENCH = Path(__file__).resolve().parents[1]  # benchmarks/, for harness and kernels
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from castpile.gpu import runtime  # noqa: E402
from harness import (bound_one_shot, bound_two_shot, fill_pattern, max_abs_error, pad_blocks, pattern_sum,  # noqa: E402
                     run_header, start_ranks, stop_ranks, timed, write_result)

SIZES = [32 << 20, 64 << 20]
# (tile elements, warps, blocks per SM)
CONFIGS = [(4096, 8, 2), (8192, 8, 2), (8192, 16, 1), (4096, 4, 4), (2048, 4, 4), (16384, 16, 1), (8192, 8, 1)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(120)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    rows = []
    for nbytes in SIZES:
        n = nbytes // 2
        symm = runtime.symmetric_empty((n,), torch.bfloat16)
        x, out, ref = symm.tensor, torch.empty(n, dtype=torch.bfloat16, device=dev), torch.empty(n, dtype=torch.bfloat16, device=dev)
        expect = pattern_sum(n, world, dev)
        fns = {"nccl": lambda: dist.all_reduce(ref)}
        for block, warps, per_sm in CONFIGS:
            blocks = min(per_sm * sms, pad_blocks(symm))
            fns[f"one_b{block}_w{warps}_x{per_sm}"] = bound_one_shot(symm, out, block=block, blocks=blocks,
                                                                     warps=warps)
            fns[f"two_b{block}_w{warps}_x{per_sm}"] = bound_two_shot(symm, block=block, blocks=blocks, warps=warps)
        errors = {}
        for name, fn in fns.items():
            if name == "nccl":
                continue
            fill_pattern(x, rank)
            out.zero_()
            torch.cuda.synchronize()
            dist.barrier()
            fn()
            torch.cuda.synchronize()
            got = out if name.startswith("one") else x
            errors[name] = max_abs_error(got, expect)
            dog.tick(f"check {name}")
        fill_pattern(x, rank)
        us = timed(fns, 10, args.reps, dog)
        rows.append({"bytes": nbytes, "eager_us": us, "max_abs_error": errors})
        if rank == 0:
            best = sorted((v, k) for k, v in us.items())[:4]
            print(json.dumps({"bytes": nbytes, "nccl": round(us["nccl"], 1), "best": best,
                              "max_error": max(errors.values())}), flush=True)
        del fns, symm, x
        torch.cuda.synchronize()
    if rank == 0:
        write_result(args.out, run_header(dev, configs=CONFIGS, rows=rows))
    stop_ranks()


if __name__ == "__main__":
    main()
