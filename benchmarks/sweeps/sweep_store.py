"""Broadcast store at 64M bf16 elements on one GPU: cache modifier and tile against a device copy.

    python benchmarks/sweeps/sweep_store.py --out docs/data/bench-sweep-store.json

The store kernel reads one row and writes it into W buffers ((W + 1) x 128 MB
moved).  Competitors, interleaved in ``--reps`` rounds of CUDA-event-timed
calls: hand-written Triton and castpile's loop strategy, each with default and
streaming (``cache_modifier=".cs"``) stores, at 1024-element tiles with 4 warps
(the benchmark's shape) and 4096 with 8; and a device copy of the same number
of bytes (half read, half written).  Every store variant is checked exact.
"""

import json

import torch
import triton

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from harness import run_header, timed_one_gpu, write_result
from kernels import hand_kernels as hand
from kernels.generated import stack_kernels_loop as cp

N = 64 << 20
SHAPES = {"b1024_w4": (1024, 4), "b4096_w8": (4096, 8)}


def main():
    args = sweepkit.command_line(__doc__, reps=7).parse_args()
    dev = torch.device("cuda", 0)
    rows = []
    for world in (2, 4, 8):
        bufs = [torch.empty(N, device=dev, dtype=torch.bfloat16) for _ in range(world)]
        table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
        src = torch.randn(N, device=dev, dtype=torch.bfloat16)
        moved = (world + 1) * N * 2
        copy_src = torch.empty(moved // 4, device=dev, dtype=torch.bfloat16)
        copy_dst = torch.empty_like(copy_src)
        fns = {"copy": lambda dst=copy_dst, src=copy_src: dst.copy_(src)}
        for shape, (block, warps) in SHAPES.items():
            grid = (triton.cdiv(N, block),)
            cfg = dict(W=world, BLOCK=block, num_warps=warps)
            for cache in ("", ".cs"):
                tag = f"{shape}{'_cs' if cache else ''}"
                fns[f"hand_{tag}"] = lambda g=grid, c=cfg, m=cache, out=bufs[0]: hand.hand_store[g](
                    out, table, src, N, ALIGN=True, CACHE=m, **c
                )
                kernel = cp.stack_store_cs if cache else cp.stack_store
                fns[f"castpile_{tag}"] = lambda g=grid, c=cfg, k=kernel, out=bufs[0]: k[g](out, table, src, N, **c)
        errors = {}
        for name, fn in fns.items():
            if name == "copy":
                continue
            for b in bufs:
                b.zero_()
            fn()
            torch.cuda.synchronize()
            errors[name] = max(float((b.float() - src.float()).abs().max()) for b in bufs)
        us = timed_one_gpu(fns, 5, args.reps)
        copy_tbps = moved / us["copy"] / 1e6
        rows.append(
            {
                "world": world,
                "elements": N,
                "bytes_moved": moved,
                "us": us,
                "max_abs_error": errors,
                "TBps": {k: moved / v / 1e6 for k, v in us.items()},
                "fraction_of_copy": {k: moved / v / 1e6 / copy_tbps for k, v in us.items()},
            }
        )
        print(json.dumps({k: rows[-1][k] for k in ("world", "fraction_of_copy")}), flush=True)
        del fns, bufs, copy_src, copy_dst
        torch.cuda.empty_cache()
    write_result(args.out, run_header(dev, launcher="python ", reps=args.reps, rows=rows))


if __name__ == "__main__":
    main()
