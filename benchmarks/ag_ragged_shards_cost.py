"""What reading A through masked pointers costs the all-gather GEMM where shards are not whole row tiles (one GPU).

Where a shard's rows are not a whole number of row tiles, the library reads A through pointers
masked at the shard's end (``TMA_A=False``; B stays on TMA), since a TMA box of the shard's
last row tile would reach into the next shard's rows before that shard was waited for (a race
the simulator's checker named).  This times the library's launch at W = 2 ranks on one GPU
(one_gpu) as the library sets it and with A forced back onto TMA (the kernel before, which
races), in the same run, alternating, for the three ways the shard travels (one wave, column
segments, chunks of rows).  Ranks share the GPU, so the times are not the op's speed on two
GPUs: only the ratio means something.

    python benchmarks/ag_ragged_shards_cost.py --out docs/data/ag-ragged-shards-cost.json

Times: per call, CUDA events around ``--calls`` back-to-back calls on each rank's stream, the
slower rank, median of ``--rounds`` rounds.  ``exact``: the outputs equal torch's product
rounded to bf16 once (integer data, fp32 sums exact).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from castpile.gpu import one_gpu
from castpile.gpu.fused import tp_gemm
from castpile.gpu.fused.tp_gemm import all_gather as all_gather_module
from harness import run_header

#: name -> (shard rows, K, N, AllGatherMatmul options): decode-sized shards smaller than a row tile (in one
#: wave, and in column segments, which one_gpu's share of the SMs would otherwise run in one wave), and a
#: shard of 200 rows.
SHAPES = {
    "one_wave": (32, 4096, 2048, {}),
    "k_segment": (64, 8192, 4096, {"one_wave": False}),
    "rows": (200, 4096, 4096, {}),
}
WORLD = 2


def a_on_tma(bind):
    """``bind`` with ``TMA_A=True``: A through TMA boxes as before, reading past the shard's end."""

    def bind_with(*args, **kwargs):
        return bind(*args, **{**kwargs, "TMA_A": True})

    return bind_with


def timed(states, inputs, calls: int) -> float:
    """Microseconds per call: the slower rank's CUDA-event time over ``calls`` calls."""

    def body(rank):
        shard, b, out = inputs[rank]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            tp_gemm.all_gather_matmul(states[rank], shard, b, out)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000 / calls

    return max(one_gpu.run(body, WORLD, timeout=300))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out")
    args = parser.parse_args()
    device = torch.device("cuda", 0)
    rows = []
    bind = all_gather_module.bind
    for name, (shard_rows, k, n, options) in SHAPES.items():
        m = WORLD * shard_rows
        variants = {}
        for variant in ("pointer_a", "tma_a"):
            all_gather_module.bind = bind if variant == "pointer_a" else a_on_tma(bind)
            states = one_gpu.create_all(tp_gemm.AllGatherMatmul, WORLD, device=device, m=m, k=k, n=n, **options)
            gen = torch.Generator(device="cpu").manual_seed(0)
            shards = [
                torch.randint(-2, 3, (shard_rows, k), generator=gen).to(device, torch.bfloat16) for _ in range(WORLD)
            ]
            b = torch.randint(-2, 3, (k, n), generator=gen).to(device, torch.bfloat16)
            inputs = [(shards[r], b, torch.empty((m, n), device=device, dtype=torch.bfloat16)) for r in range(WORLD)]
            timed(states, inputs, 2)  # binds (compiles) the launch
            want = (torch.cat(shards).float() @ b.float()).to(torch.bfloat16)
            exact = all(torch.equal(inputs[r][2], want) for r in range(WORLD))
            variants[variant] = dict(states=states, inputs=inputs, exact=exact, us=[])
        all_gather_module.bind = bind  # each state keeps the launch it bound
        for _ in range(args.rounds):
            for v in variants.values():
                v["us"].append(timed(v["states"], v["inputs"], args.calls))
        state = variants["pointer_a"]["states"][0]
        row = dict(
            shape=name,
            m=m,
            k=k,
            n=n,
            state=repr(state),
            us={variant: round(statistics.median(v["us"]), 2) for variant, v in variants.items()},
            exact={variant: v["exact"] for variant, v in variants.items()},
        )
        row["pointer_over_tma"] = round(row["us"]["pointer_a"] / row["us"]["tma_a"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = run_header(0, launcher="python ", world=WORLD, calls=args.calls, rounds=args.rounds, rows=rows)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
