"""Single-GPU benchmark of a scatter-add whose old values are unused: castpile (both strategies) against the hand loop.

    python benchmarks/bench_atomics.py --out docs/data/bench-atomics.json

``tl.atomic_add(bufs[offs], v[None, :], sem="relaxed")`` into W fp32 buffers of N
elements, as a statement (language v1.1 lowers it without assembling the old
values), against ``hand_scatter_add`` (a static loop over the W addresses, one
masked ``tl.atomic_add`` each).  Every competitor runs in this process on the same
buffers, interleaved (harness.timed_one_gpu); each result is checked against torch first.
"""

import argparse
import json
import platform
import sys
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from harness import STACK_BLOCK as BLOCK, STACK_WARPS as WARPS, run_header, timed_one_gpu, write_result
from kernels import hand_kernels as hand
from kernels.generated import (
    stack_kernels_gather as cp_gather,
    stack_kernels_loop as cp_loop,
)

WORLDS = (2, 4, 8)
N = 1 << 22


def competitors(world: int, dev):
    bufs = [torch.zeros(N, device=dev) for _ in range(world)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    vals = torch.randint(0, 4, (N,), device=dev).float()
    grid = (triton.cdiv(N, BLOCK),)
    return (
        bufs,
        vals,
        {
            "hand": lambda: hand.hand_scatter_add[grid](bufs[0], table, vals, N, world, BLOCK, True, num_warps=WARPS),
            "castpile_loop": lambda: cp_loop.stack_scatter_add[grid](
                bufs[0], table, vals, N, world, BLOCK, num_warps=WARPS
            ),
            "castpile_gather": lambda: cp_gather.stack_scatter_add[grid](
                bufs[0], table, vals, N, world, BLOCK, num_warps=WARPS
            ),
        },
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-atomics.json")
    parser.add_argument("--reps", type=int, default=11)
    args = parser.parse_args(argv)
    dev = torch.device("cuda", 0)
    meta = run_header(
        dev,
        launcher="python ",
        python=platform.python_version(),
        elements=N,
        block=BLOCK,
        num_warps=WARPS,
        reps=args.reps,
    )
    rows = []
    for world in WORLDS:
        bufs, vals, fns = competitors(world, dev)
        for name, fn in fns.items():  # one call each, checked against torch
            for b in bufs:
                b.zero_()
            fn()
            torch.cuda.synchronize()
            assert all(torch.equal(b, vals) for b in bufs), name
        us = timed_one_gpu(fns, 20, args.reps)
        row = {"W": world, "us": us, "ratio_to_hand": {k: v / us["hand"] for k, v in us.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    write_result(args.out, {**meta, "rows": rows})


if __name__ == "__main__":
    main()
