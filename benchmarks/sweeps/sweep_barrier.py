"""Barrier variants of the one-shot all-reduce at small sizes, inside CUDA graphs, beside symm_mem's one-shot.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_barrier.py --out docs/data/bench-sweep-barrier.json

Variants (the library's one-shot kernel, ``START_ORDERED``): ``acqrel`` (release/acquire in both barriers) and
``relaxed_start`` (relaxed atomics in the barrier before the reads, what the library now does).
2048-element tiles, 4 warps.  (A first version also tried polling flags with volatile loads; it
hung, see docs/perf-findings.md.)
"""

import json

import torch
import triton

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from castpile.gpu.collectives import kernels_triton as lib
from castpile.gpu.launch import bind
from harness import GRAPH_CALLS, graph_timed, start_ranks

SIZES = [4 << 10, 32 << 10, 256 << 10]
BLOCK = 2048


def main(argv=None):
    args = sweepkit.command_line(__doc__, reps=9).parse_args(argv)
    rank, world, dev, dog = start_ranks(45)
    rows = []
    for nbytes in SIZES:
        symm, expect = sweepkit.bf16_case(nbytes, rank, world, dev)
        x, out = symm.tensor, torch.empty_like(symm.tensor)
        n = x.numel()
        grid = (max(1, min(triton.cdiv(n, BLOCK), symm.max_blocks // 2)),)
        fns = {"symm_mem_one_shot": sweepkit.symm_mem_one_shot(x)}
        for relaxed in (False, True):
            name = "relaxed_start" if relaxed else "acqrel"
            fns[name] = bind(
                lib.one_shot_all_reduce,
                grid,
                x,
                symm.buffer_ptrs,
                symm.signal_pad,
                symm.signal_pad_ptrs,
                out,
                symm.rank,
                n,
                WORLD=world,
                BLOCK=BLOCK,
                BARRIER=True,
                START_ORDERED=not relaxed,
                num_warps=4,
            )
        errors = {}
        for name, fn in fns.items():
            if name != "symm_mem_one_shot":
                print(f"rank {rank}: checking {name} at {nbytes} bytes", flush=True)
                dog.tick(f"check {name}")
                # repeated calls: a lost signal would hang, a stale read would differ
                errors[name] = sweepkit.checked(fn, out, expect, prepare=out.zero_, calls=50)
                errors[name + "_pads_nonzero"] = int(symm.signal_pad.count_nonzero())
        dog.tick(f"checked {nbytes}")
        us = graph_timed(fns, 10, args.reps, dog)
        rows.append({"bytes": nbytes, "graph_us": us, "checks": errors})
        if rank == 0:
            print(json.dumps({"bytes": nbytes, **{k: round(v, 2) for k, v in us.items()}}), flush=True)
        del fns, symm, x
        torch.cuda.synchronize()
    sweepkit.finish(args.out, dev, rank, graph_calls_per_replay=GRAPH_CALLS, block=BLOCK, rows=rows)


if __name__ == "__main__":
    main()
