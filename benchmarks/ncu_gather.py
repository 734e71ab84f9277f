"""The gather kernel at W = 8, 1M bf16 elements per buffer, under Nsight Compute (one GPU).

    ncu --clock-control none --cache-control none -k regex:'gather' \\
        --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \\
        --csv --page details python3 benchmarks/ncu_gather.py > docs/ncu-gather.csv

The one cell where castpile's kernel trails the hand-written one inside CUDA
graphs (docs/benchmarks.md): hand-written Triton (``hand_gather``: per buffer,
load a row and store it; ``hand_gather_tile``: the same as one (W, BLOCK) tile,
the way the castpile source states it), castpile's loop and gather strategies
(``stack_gather``: load the (W, BLOCK) tile, then store it as one 2-D tile).  Each runs four times
back to back, with the caches left warm as in a graph replay.
"""

import sys
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import hand_kernels as hand  # noqa: E402
from generated import stack_kernels_gather as cp_gather  # noqa: E402
from generated import stack_kernels_loop as cp_loop  # noqa: E402

W, N, BLOCK, WARPS = 8, 1 << 20, 1024, 4


def main():
    dev = torch.device("cuda", 0)
    bufs = [torch.randn(N, device=dev, dtype=torch.bfloat16) for _ in range(W)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    out = torch.empty(W, N, device=dev, dtype=torch.bfloat16)
    grid = (triton.cdiv(N, BLOCK),)
    cfg = dict(W=W, BLOCK=BLOCK, num_warps=WARPS)
    runs = {
        "hand": lambda: hand.hand_gather[grid](bufs[0], table, out, N, ALIGN=True, **cfg),
        "hand_tile": lambda: hand.hand_gather_tile[grid](bufs[0], table, out, N, ALIGN=True, **cfg),
        "castpile_loop": lambda: cp_loop.stack_gather[grid](bufs[0], table, out, N, **cfg),
        "castpile_gather": lambda: cp_gather.stack_gather[grid](bufs[0], table, out, N, **cfg),
    }
    expect = torch.stack(bufs)
    for name, run in runs.items():
        for _ in range(4):
            run()
        torch.cuda.synchronize()
        assert torch.equal(out, expect), name
        out.zero_()


if __name__ == "__main__":
    main()
