"""Check castpile's collectives against NCCL on real GPUs, many times over.

For every collective, dtype and size: ``--iters`` back-to-back calls, each on
fresh integer-valued data (so results must be bit-exact), compared on the GPU
with ``torch.distributed`` (NCCL) on the same input; then the signal pads must
be all zero.  A watchdog ends the job if a configuration takes longer than
``--timeout`` seconds (a hung barrier).  It also times both sides (eager
launches, CUDA events, a fixed count of calls identical on every rank).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        torchrun --nproc_per_node 2 benchmarks/check_collectives.py --out docs/data/collectives-2xh200.json
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu import collectives, runtime
from harness import calls_timed, events, start_ranks

SIZES = [4 << 10, 32 << 10, 256 << 10, 2 << 20, 16 << 20, 64 << 20]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# Integer ranges whose sums over 2 ranks stay exact (bf16 holds integers up to 256 exactly).
SPAN = {torch.float32: 1000, torch.bfloat16: 64}


def collective_cases(symm, x, world):
    """name -> (castpile call, NCCL reference call, NCCL call to time); the first two return results."""
    n = x.numel()
    gathered = x.new_empty((world, n))
    scattered = x.new_empty((n // world,))
    ours_rs = x.new_empty((n // world,))
    ours_ag = x.new_empty((world, n))
    ours_ar = torch.empty_like(x)

    def nccl_all_reduce():
        ref = x.clone()
        dist.all_reduce(ref)
        return ref

    def nccl_all_gather():
        dist.all_gather_into_tensor(gathered, x)
        return gathered

    def nccl_reduce_scatter():
        dist.reduce_scatter_tensor(scattered, x)
        return scattered

    cases = {
        "all_reduce_one_shot": (
            lambda: collectives.all_reduce_one_shot(symm, ours_ar),
            nccl_all_reduce,
            lambda: dist.all_reduce(x),
        ),
        "all_reduce_two_shot": (
            lambda: collectives.all_reduce_two_shot(symm, push=False),
            nccl_all_reduce,
            lambda: dist.all_reduce(x),
        ),
        "all_reduce_two_shot_push": (
            lambda: collectives.all_reduce_two_shot(symm, push=True),
            nccl_all_reduce,
            lambda: dist.all_reduce(x),
        ),
        "all_gather": (lambda: collectives.all_gather(symm, ours_ag), nccl_all_gather, nccl_all_gather),
        "reduce_scatter": (lambda: collectives.reduce_scatter(symm, ours_rs), nccl_reduce_scatter, nccl_reduce_scatter),
    }
    if symm.low_latency is not None:
        cases["all_reduce_low_latency"] = (
            lambda: collectives.all_reduce_low_latency(symm, ours_ar),
            nccl_all_reduce,
            lambda: dist.all_reduce(x),
        )
    return cases


def time_us(fn, calls):
    """Mean microseconds per call over ``calls`` calls after a warm-up, same count on every rank."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    return calls_timed(fn, calls, *events())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--timing-calls", type=int, default=100)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="bytes of each rank's input")
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per configuration")
    parser.add_argument("--out", default="docs/data/collectives-2xh200.json")
    args = parser.parse_args()

    rank, world, device, dog = start_ranks(args.timeout)
    results = []
    for dname in args.dtypes:
        dtype = DTYPES[dname]
        for nbytes in args.sizes:
            n = nbytes // dtype.itemsize
            symm = runtime.symmetric_empty((n,), dtype, push_scratch=True)
            x = torch.empty(n, dtype=dtype, device=device)
            base = torch.arange(n, device=device, dtype=torch.int64)
            span = SPAN[dtype]
            for name, (ours, nccl, nccl_timed) in collective_cases(symm, x, world).items():
                dog.tick(f"the start of {name} {dname} {nbytes} B")
                mismatches = torch.zeros((), dtype=torch.int64, device=device)
                dist.barrier()
                t0 = time.perf_counter()
                for it in range(args.iters):
                    x.copy_((base * (rank + 3) + it * 7919 + rank * 31) % (2 * span + 1) - span)
                    symm.tensor.copy_(x)
                    got = ours()
                    mismatches += (got != nccl()).sum()
                torch.cuda.synchronize()
                check_s = time.perf_counter() - t0
                dist.barrier()
                torch.cuda.synchronize()
                totals = torch.stack([mismatches, symm.signal_pad.count_nonzero().to(torch.int64)])
                dist.all_reduce(totals)  # summed over ranks
                ours_us = time_us(ours, args.timing_calls)
                nccl_us = time_us(nccl_timed, args.timing_calls)
                row = dict(
                    collective=name,
                    dtype=dname,
                    bytes=nbytes,
                    elements=n,
                    iters=args.iters,
                    mismatches=int(totals[0]),
                    pads_nonzero_after=int(totals[1]),
                    check_seconds=round(check_s, 3),
                    castpile_us=round(ours_us, 1),
                    nccl_us=round(nccl_us, 1),
                )
                results.append(row)
                if rank == 0:
                    print(json.dumps(row), flush=True)
            del symm
    dog.tick("the last configuration")
    ok = all(r["mismatches"] == 0 and r["pads_nonzero_after"] == 0 for r in results)
    if rank == 0:
        report = dict(
            command="NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "
            f"torchrun --nproc_per_node {world} " + " ".join(sys.argv),
            world_size=world,
            device=torch.cuda.get_device_name(device),
            torch=torch.__version__,
            triton=triton.__version__,
            all_ranks_ok=ok,
            results=results,
        )
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print("ALL OK" if ok else "FAILURES", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
