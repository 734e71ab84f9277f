"""Tile and warp sweep of the library's one-shot and two-shot all-reduce at small sizes, inside CUDA graphs.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_small.py --out docs/data/bench-sweep-small.json

bf16, 4 KB / 32 KB / 256 KB per rank.  Every configuration is checked once on
integer data against the exact sum, then timed as replays of a CUDA graph of
20 captured calls (median over interleaved rounds of the slower rank), beside
torch symmetric memory's one-shot in the same run.  It chooses the launch of
``castpile.gpu.collectives`` for small messages.
"""

import json

import torch

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from harness import GRAPH_CALLS, bound_one_shot, graph_timed, start_ranks

SIZES = [4 << 10, 32 << 10, 256 << 10]
CONFIGS = [(block, warps) for block in (256, 512, 1024, 2048, 4096) for warps in (1, 2, 4)]


def main(argv=None):
    args = sweepkit.command_line(__doc__, reps=7).parse_args(argv)
    rank, world, dev, dog = start_ranks(120)
    rows = []
    for nbytes in SIZES:
        symm, expect = sweepkit.bf16_case(nbytes, rank, world, dev)
        x, out = symm.tensor, torch.empty_like(symm.tensor)
        fns = {"symm_mem_one_shot": sweepkit.symm_mem_one_shot(x)}
        for block, warps in CONFIGS:
            fns[f"one_shot_b{block}_w{warps}"] = bound_one_shot(
                symm, out, block=block, blocks=symm.max_blocks, warps=warps
            )
        errors = {
            name: sweepkit.checked(fn, out, expect, prepare=out.zero_)
            for name, fn in fns.items()
            if name.startswith("one_shot")
        }
        dog.tick(f"checked {nbytes}")
        us = graph_timed(fns, 10, args.reps, dog)
        rows.append({"bytes": nbytes, "graph_us": us, "max_abs_error": errors})
        if rank == 0:
            best = min((v, k) for k, v in us.items() if k.startswith("one_shot"))
            print(
                json.dumps({"bytes": nbytes, "symm_mem": round(us["symm_mem_one_shot"], 2), "best": best}), flush=True
            )
        del fns, symm, x
        torch.cuda.synchronize()
    sweepkit.finish(args.out, dev, rank, graph_calls_per_replay=GRAPH_CALLS, rows=rows)


if __name__ == "__main__":
    main()
