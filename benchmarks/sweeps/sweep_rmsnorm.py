"""Row-block and warp sweep of the fused all-reduce + residual + RMSNorm kernels, inside CUDA graphs.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/sweeps/sweep_rmsnorm.py --out docs/data/bench-sweep-rmsnorm.json

bf16.  For each shape, each kernel the tensor supports and each (block, warps):
one call checked against the float32 torch reference (new residual exact,
y within one bf16 rounding), then timed as replays of a CUDA graph of 20 calls
(median over interleaved rounds of the slower rank), with castpile's bare
``all_reduce`` of the same tensor in the same rounds.  It chooses
``castpile.gpu.fused.rmsnorm``'s defaults (MAX_BLOCK, default_warps).
"""

import torch
import torch.distributed as dist
import triton

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from bench_rmsnorm import EPS, pattern, reference
from castpile.gpu import collectives, runtime
from castpile.gpu.fused import rmsnorm
from harness import graph_timed, record_row, run_header, start_ranks, stop_ranks

SHAPES = [(1, 4096), (1, 8192), (4, 8192), (16, 8192), (8, 16384), (16, 16384), (256, 8192), (4096, 8192)]


def configs(method, d):
    """(block, warps) to try: one-shot row passes up to the whole row; low-latency tiles."""
    if method == "low_latency":  # the last block holds a whole row: no tail (WHOLE_ROWS)
        blocks = sorted({512, 1024, 2048, 4096, triton.next_power_of_2(d)})
        return [(block, warps) for block in blocks for warps in (2, 4, 8, 16) if warps < 16 or block >= 8192]
    top = triton.next_power_of_2(d)
    return [(block, warps) for block in (2048, 4096, 8192, 16384) if block <= top for warps in (4, 8, 16)]


def shape_case(m, d, rank, world, dog, reps, backend="cuda"):
    symm = runtime.symmetric_empty((m, d), torch.bfloat16, backend=backend)
    dev = symm.tensor.device
    xs = [pattern((m, d), r, dev) for r in range(world)]
    weight = pattern((d,), 98, dev, 1, 9)
    residual = pattern((m, d), 99, dev)
    out = torch.empty_like(symm.tensor)
    methods = rmsnorm.METHODS if symm.low_latency is not None else ("one_shot",)
    fns, ok = {}, {}
    for method in methods:
        for block, warps in configs(method, d):
            name = f"{method}-{block}-{warps}"
            symm.tensor.copy_(xs[rank])
            mine = residual.clone()
            torch.cuda.synchronize()
            dist.barrier()
            rmsnorm.all_reduce_residual_rmsnorm(
                symm, mine, weight, EPS, out, method=method, block=block, num_warps=warps
            )
            torch.cuda.synchronize()
            expect_residual, expect_y = reference(sum(x.float() for x in xs), residual, weight)
            close = (out.float() - expect_y.float()).abs() <= 2**-7 * expect_y.float().abs() + 1e-30
            ok[name] = bool(torch.equal(mine, expect_residual) and close.all())
            fns[name] = lambda method=method, block=block, warps=warps: rmsnorm.all_reduce_residual_rmsnorm(
                symm, mine, weight, EPS, out, method=method, block=block, num_warps=warps
            )
    all_reduce_out = torch.empty_like(symm.tensor)
    fns["castpile_all_reduce"] = lambda: collectives.all_reduce(symm, all_reduce_out)  # the same bytes, for the ratio
    graph = graph_timed(fns, 10 if m * d <= 1 << 21 else 2, reps, dog)
    fused = {name: us for name, us in graph.items() if name != "castpile_all_reduce"}
    return {"rows": m, "D": d, "correct": ok, "graph_us": graph, "best": min(fused, key=fused.get)}


def main(argv=None):
    parser = sweepkit.command_line(__doc__, reps=5, out="docs/data/bench-sweep-rmsnorm.json")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument(
        "--norm-block",
        type=int,
        default=None,
        help="the low-latency kernel's elements per step of its normalising pass (rmsnorm.LOW_LATENCY_NORM_BLOCK)",
    )
    parser.add_argument("--backend", default="cuda", help="symmetric memory: cuda (torch's default) or nvshmem")
    parser.add_argument("--shapes", nargs="+", default=[f"{m}x{d}" for m, d in SHAPES], help="rows x D, e.g. 16x8192")
    args = parser.parse_args(argv)
    if args.norm_block is not None:
        rmsnorm.LOW_LATENCY_NORM_BLOCK = args.norm_block
    rank, world, dev, dog = start_ranks(args.timeout)
    result = run_header(
        dev,
        world_size=world,
        dtype="bf16",
        reps=args.reps,
        backend=args.backend,
        norm_block=rmsnorm.LOW_LATENCY_NORM_BLOCK,
        rows=[],
    )
    for m, d in (map(int, shape.split("x")) for shape in args.shapes):
        record_row(result, shape_case(m, d, rank, world, dog, args.reps, args.backend), rank, args.out)
    stop_ranks()


if __name__ == "__main__":
    main()
