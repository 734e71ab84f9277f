"""Kernels for Nsight Compute on one GPU: ``--case gather`` (W = 8, 1M) or ``--case store`` (W = 8, 64M).

    ncu --clock-control none --cache-control none -k regex:'gather' \\
        --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \\
        --csv --page details python3 benchmarks/diag_ncu_single_gpu.py --case gather > docs/data/ncu-gather.csv
    ncu --clock-control none -k regex:'store|_copy' \\
        --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \\
        --csv --page details python3 benchmarks/diag_ncu_single_gpu.py --case store > docs/data/ncu-store.csv

gather: the one cell where castpile's kernel trails the hand-written one inside
CUDA graphs (docs/benchmarks.md).  Hand-written Triton (``hand_gather``: per
buffer, load a row and store it; ``hand_gather_tile``: the same as one (W, BLOCK)
tile, the way the castpile source states it) and castpile's loop and gather
strategies, four times each back to back, caches left warm as in a graph replay.

store: the broadcast store (1 read : 8 writes) against a Triton copy of the same
bytes (1 : 1), twice each.
"""

import argparse
import sys
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from kernels import hand_kernels as hand
from kernels.generated import (
    stack_kernels_gather as cp_gather,
    stack_kernels_loop as cp_loop,
)

W, BLOCK, WARPS = 8, 1024, 4


def gather(dev, n=1 << 20):
    bufs = [torch.randn(n, device=dev, dtype=torch.bfloat16) for _ in range(W)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    out = torch.empty(W, n, device=dev, dtype=torch.bfloat16)
    grid = (triton.cdiv(n, BLOCK),)
    cfg = dict(W=W, BLOCK=BLOCK, num_warps=WARPS)
    runs = {
        "hand": lambda: hand.hand_gather[grid](bufs[0], table, out, n, ALIGN=True, **cfg),
        "hand_tile": lambda: hand.hand_gather_tile[grid](bufs[0], table, out, n, ALIGN=True, **cfg),
        "castpile_loop": lambda: cp_loop.stack_gather[grid](bufs[0], table, out, n, **cfg),
        "castpile_gather": lambda: cp_gather.stack_gather[grid](bufs[0], table, out, n, **cfg),
    }
    expect = torch.stack(bufs)
    for name, run in runs.items():
        for _ in range(4):
            run()
        torch.cuda.synchronize()
        assert torch.equal(out, expect), name
        out.zero_()


def store(dev, n=64 << 20):
    bufs = [torch.empty(n, device=dev, dtype=torch.bfloat16) for _ in range(W)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    src = torch.randn(n, device=dev, dtype=torch.bfloat16)
    half = (W + 1) * n // 2
    copy_src = torch.randn(half, device=dev, dtype=torch.bfloat16)
    copy_dst = torch.empty_like(copy_src)
    grid = (triton.cdiv(n, BLOCK),)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for _ in range(2):
        hand.hand_store[grid](bufs[0], table, src, n, W=W, BLOCK=BLOCK, ALIGN=True, num_warps=WARPS)
        cp_loop.stack_store[grid](bufs[0], table, src, n, W=W, BLOCK=BLOCK, num_warps=WARPS)
        hand._copy[(2 * sms,)](copy_src, copy_dst, half, BLOCK=4096, num_warps=8)
    torch.cuda.synchronize()
    assert all(torch.equal(b, src) for b in bufs) and torch.equal(copy_dst, copy_src)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("gather", "store"), required=True)
    {"gather": gather, "store": store}[parser.parse_args().case](torch.device("cuda", 0))


if __name__ == "__main__":
    main()
