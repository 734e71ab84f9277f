"""Rows read in column blocks, with ragged rows, exact on one GPU: castpile's kernels against torch and their hand twins.

    python benchmarks/check_column_blocks.py --out docs/data/check-column-blocks.json
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python benchmarks/check_column_blocks.py ...

The kernels of benchmarks/kernels/column_blocks.py, transpiled under both strategies (1-D bindings: the mask rule
drops their bounds), on W buffers of M x D bf16 integers, D not a multiple of BLOCK_D (the last column block runs
past the row; past the last row, the extent).  Each buffer sits between two margins of sentinels (1e4), so a lane
that read past the extent would show in the sums.  ``sum`` must equal torch's sum of the buffers exactly (small
integers); ``norm`` must equal the hand twin's output bit for bit.  Under compute-sanitizer with the caching
allocator off, each buffer (margins included) is its own allocation.
"""

import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "sweeps"), str(HERE.parent)]

from sweep_column_blocks import BINDINGS, BODIES, modules
from sweep_row_bodies import ALPHA, EPS

from harness import load_variant, run_header, write_result

MARGIN = 4096


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/check-column-blocks.json")
    parser.add_argument("--worlds", nargs="+", type=int, default=[2, 3, 8])
    parser.add_argument("--shapes", nargs="+", default=["7x3000", "5x4104"])
    parser.add_argument("--block", type=int, default=1024)
    args = parser.parse_args(argv)
    folder = Path("/tmp/check_column_blocks")
    folder.mkdir(parents=True, exist_ok=True)
    paths = modules(folder)
    loaded = {label: load_variant(path.stem, path.read_text(), folder) for label, path in paths.items()}
    dev = torch.device("cuda", 0)
    result = run_header(dev, launcher="python ", block=args.block, margin=MARGIN, rows=[])
    for W in args.worlds:
        for shape in args.shapes:
            M, D = map(int, shape.split("x"))
            padded = [torch.full((2 * MARGIN + M * D,), 1e4, device=dev, dtype=torch.bfloat16) for _ in range(W)]
            stacks = [p[MARGIN : MARGIN + M * D].view(M, D) for p in padded]
            for s in stacks:
                s.copy_(torch.randint(-8, 9, (M, D), device=dev).to(torch.bfloat16))
            table = torch.tensor([s.data_ptr() for s in stacks], device=dev, dtype=torch.int64)
            res, w = (
                torch.zeros(M, D, device=dev, dtype=torch.bfloat16),
                torch.zeros(D, device=dev, dtype=torch.bfloat16),
            )
            stats = torch.zeros(M, device=dev)
            want_sum = torch.stack(stacks).float().sum(0).to(torch.bfloat16)
            outs = {}
            for body in BODIES:
                labels = [("hand", "castpile_loop", f"hand_{body}")] + [
                    (f"{strategy} {binding}", strategy, f"cp_{body}_{binding}")
                    for strategy in ("castpile_loop", "castpile_gather")
                    for binding in BINDINGS
                ]
                for label, module, name in labels:
                    out = torch.full((M, D), -1.0, device=dev, dtype=torch.bfloat16)
                    kargs = (stacks[0], table, table, res, w, out, stats, M, D, EPS, ALPHA)
                    getattr(loaded[module], name)[(3,)](*kargs, W=W, BLOCK_D=args.block, num_warps=8)
                    torch.cuda.synchronize()
                    outs[body, label] = out
                for label, _, _ in labels[1:]:
                    out = outs[body, label]
                    exact = torch.equal(out, want_sum) if body == "sum" else torch.equal(out, outs[body, "hand"])
                    row = {"W": W, "M": M, "D": D, "body": body, "kernel": label, "exact": exact,
                           "max_abs_error": float((out.float() - outs[body, "hand"].float()).abs().max())}  # fmt: skip
                    result["rows"].append(row)
                    print(json.dumps(row), flush=True)
            intact = all(bool((p[:MARGIN] == 1e4).all() and (p[MARGIN + M * D :] == 1e4).all()) for p in padded)
            result["rows"].append({"W": W, "M": M, "D": D, "margins_intact": intact})
    result["all_exact"] = all(r.get("exact", r.get("margins_intact")) for r in result["rows"])
    write_result(args.out, result)
    print("all exact:", result["all_exact"])
    return 0 if result["all_exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
