"""The broadcast store at W = 8, 64M bf16 elements, against a Triton copy of the same bytes, under Nsight Compute.

    ncu --clock-control none -k regex:'store|_copy' \\
        --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum \\
        --csv --page details python3 benchmarks/ncu_store.py > docs/ncu-store.csv

The store reads one row and writes it into 8 buffers (1 read : 8 writes); the
copy reads and writes the same total bytes (1 : 1).  Each runs twice.
"""

import sys
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import hand_kernels as hand  # noqa: E402
from generated import stack_kernels_loop as cp  # noqa: E402
from probe_launch_ll import _copy  # noqa: E402

W, N, BLOCK, WARPS = 8, 64 << 20, 1024, 4


def main():
    dev = torch.device("cuda", 0)
    bufs = [torch.empty(N, device=dev, dtype=torch.bfloat16) for _ in range(W)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    src = torch.randn(N, device=dev, dtype=torch.bfloat16)
    half = (W + 1) * N // 2
    copy_src, copy_dst = torch.randn(half, device=dev, dtype=torch.bfloat16), torch.empty(half, device=dev,
                                                                                          dtype=torch.bfloat16)
    grid = (triton.cdiv(N, BLOCK),)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for _ in range(2):
        hand.hand_store[grid](bufs[0], table, src, N, W=W, BLOCK=BLOCK, ALIGN=True, num_warps=WARPS)
        cp.stack_store[grid](bufs[0], table, src, N, W=W, BLOCK=BLOCK, num_warps=WARPS)
        _copy[(2 * sms,)](copy_src, copy_dst, half, BLOCK=4096, num_warps=8)
    torch.cuda.synchronize()
    assert all(torch.equal(b, src) for b in bufs) and torch.equal(copy_dst, copy_src)


if __name__ == "__main__":
    main()
