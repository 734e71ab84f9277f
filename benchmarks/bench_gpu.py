"""Single-GPU benchmark: castpile's stack kernels against the same kernels by hand, torch and Helion.

    python benchmarks/bench_gpu.py --out docs/data/bench-gpu.json

For each kernel (sum over the stack, broadcast store, gather of all buffers),
W in {2, 4, 8} bf16 buffers and 4K, 1M, 64M elements, every competitor runs in
this process on the same buffers, interleaved: ``--reps`` rounds, each timing a
fixed number of back-to-back calls between two CUDA events; the median per-call
time is reported.  Small sizes are also timed inside a CUDA graph (GPU time
without host launch cost).  ``copy`` is a device-to-device copy of the same
number of bytes a 64M-element sum moves, the bandwidth reference.
Every competitor's result is checked against torch first.

``--cases row_norm`` (also in the default run): a row-normalising kernel whose stack sum
converts each bf16 buffer to fp32 first (``tl.sum(bufs[row, cols].to(tl.float32), axis=0)``),
M x D = 4096 x 8192, BLOCK_D = 8192, 8 warps, 4 programs per SM looping over the rows, against
the same kernel by hand (a ``tl.static_range`` loop over the addresses accumulating in fp32),
eager and in CUDA graphs; written under ``row_norm`` in the result, with hand / castpile ratios.
"""

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu.launch import bind
from harness import (
    GRAPH_CALLS,
    STACK_BLOCK as BLOCK,
    STACK_WARPS as WARPS,
    graphed,
    host_times,
    timed_one_gpu,
    write_result,
)
from kernels import hand_kernels as hand
from kernels.generated import (
    stack_kernels_gather as cp_gather,
    stack_kernels_loop as cp_loop,
)

SIZES = {"4K": 4096, "1M": 1 << 20, "64M": 64 << 20}
WORLDS = (2, 4, 8)
KERNELS = ("sum", "store", "gather")
GRAPH_SIZES = ("4K", "1M")
ROW_NORM = {"M": 4096, "D": 8192, "BLOCK_D": 8192, "num_warps": 8, "programs_per_sm": 4, "eps": 1e-6}


def helion_kernels():
    """Helion's stack-tensor sum, or None and the reason it is missing."""
    try:
        import helion

        from kernels.helion_kernels import helion_sum
    except Exception as exc:  # reported in the results
        return None, f"{type(exc).__name__}: {exc}"
    return helion_sum, f"helion {getattr(helion, '__version__', '?')}"


def case(kernel, world, n, dev, helion_sum):
    """(callables by competitor name, reference check) for one cell."""
    bufs = [torch.randn(n, device=dev, dtype=torch.bfloat16) for _ in range(world)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    ex = bufs[0]
    grid = (triton.cdiv(n, BLOCK),)
    cfg = dict(W=world, BLOCK=BLOCK, num_warps=WARPS)
    if kernel == "sum":
        third = torch.empty(n, device=dev, dtype=torch.bfloat16)
        expect = lambda: torch.stack(bufs).float().sum(0).to(torch.bfloat16)  # noqa: E731
        result = lambda: third  # noqa: E731
        eager = {"torch": lambda: torch.stack(bufs).float().sum(0).to(torch.bfloat16)}
    elif kernel == "store":
        third = torch.randn(n, device=dev, dtype=torch.bfloat16)
        expect = lambda: third.expand(world, n)  # noqa: E731
        result = lambda: torch.stack(bufs)  # noqa: E731
        eager = {"torch": lambda: torch._foreach_copy_(bufs, [third] * world)}
    else:
        third = torch.empty(world, n, device=dev, dtype=torch.bfloat16)
        expect = lambda: torch.stack(bufs)  # noqa: E731
        result = lambda: third  # noqa: E731
        eager = {"torch": lambda: torch.stack(bufs, out=third)}
    args = (ex, table, third, n)
    hk = getattr(hand, f"hand_{kernel}")
    fns = {
        "hand": lambda: hk[grid](*args, ALIGN=True, **cfg),
        "castpile_loop": lambda: getattr(cp_loop, f"stack_{kernel}")[grid](*args, **cfg),
        "castpile_gather": lambda: getattr(cp_gather, f"stack_{kernel}")[grid](*args, **cfg),
        "hand_noalign": lambda: hk[grid](*args, ALIGN=False, **cfg),
        "castpile_loop_noalign": lambda: getattr(cp_loop, f"stack_{kernel}_u")[grid](*args, **cfg),
        "castpile_gather_noalign": lambda: getattr(cp_gather, f"stack_{kernel}_u")[grid](*args, **cfg),
        "hand_bound": bind(hk, grid, *args, ALIGN=True, **cfg),
        "castpile_loop_bound": bind(getattr(cp_loop, f"stack_{kernel}"), grid, *args, **cfg),
        "castpile_gather_bound": bind(getattr(cp_gather, f"stack_{kernel}"), grid, *args, **cfg),
        "castpile_loop_replay": bind(getattr(cp_loop, f"stack_{kernel}"), grid, *args, graph=True, **cfg),
        **eager,
    }
    if kernel == "sum" and helion_sum is not None:
        ptrs_u64 = table.view(torch.uint64)
        fns["helion"] = lambda: helion_sum(ptrs_u64, ex)
    errors = {}
    for name, fn in list(fns.items()):
        try:
            for t in bufs if kernel == "store" else [third]:
                t.zero_()
            out = fn()
            got = out if (name in ("torch", "helion") and kernel == "sum") else result()
            torch.cuda.synchronize()
            errors[name] = float((got.float() - expect().float()).abs().max())
        except Exception as exc:  # a competitor that fails is reported, not timed
            errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            del fns[name]
    moved = {"sum": (world + 1) * n * 2, "store": (world + 1) * n * 2, "gather": 2 * world * n * 2}[kernel]
    return fns, errors, moved


def row_norm_case(world, dev):
    """(callables by competitor name, max abs error of each against torch, grid, the buffers) for the row norm at
    W = world; the caller holds the buffers while it times: the table holds their addresses, nothing else does."""
    m, d, eps = ROW_NORM["M"], ROW_NORM["D"], ROW_NORM["eps"]
    bufs = [torch.randn(m, d, device=dev, dtype=torch.bfloat16) for _ in range(world)]
    table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
    out = torch.empty(m, d, device=dev, dtype=torch.bfloat16)
    grid = (ROW_NORM["programs_per_sm"] * torch.cuda.get_device_properties(dev).multi_processor_count,)
    cfg = dict(W=world, BLOCK_D=ROW_NORM["BLOCK_D"], num_warps=ROW_NORM["num_warps"])
    args = (bufs[0], table, out, m, d, eps)
    fns = {
        "hand": lambda: hand.hand_row_norm[grid](*args, ALIGN=True, **cfg),
        "castpile_loop": lambda: cp_loop.stack_row_norm[grid](*args, **cfg),
        "castpile_gather": lambda: cp_gather.stack_row_norm[grid](*args, **cfg),
    }
    summed = torch.stack(bufs).float().sum(0)
    expect = (summed * torch.rsqrt(summed.pow(2).mean(1, keepdim=True) + eps)).float()
    errors = {}
    for name, fn in list(fns.items()):
        try:
            out.zero_()
            fn()
            torch.cuda.synchronize()
            errors[name] = float((out.float() - expect).abs().max())
        except Exception as exc:  # a competitor that fails is reported, not timed
            errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            del fns[name]
    return fns, errors, grid, bufs


def row_norm_rows(dev, reps: int) -> list[dict]:
    """The row norm at each W: eager and CUDA-graph medians, and hand time / castpile time."""
    rows = []
    for world in WORLDS:
        fns, errors, grid, bufs = row_norm_case(world, dev)
        eager = timed_one_gpu(fns, 20, reps)
        graphs = {name: graphed(fn) for name, fn in fns.items()}
        graph = {name: t / GRAPH_CALLS for name, t in timed_one_gpu(graphs, 5, reps).items()}
        ratios = {
            f"{when}_{name}": times["hand"] / times[name]
            for when, times in (("eager", eager), ("graph", graph))
            for name in times
            if name != "hand" and "hand" in times
        }
        row = {
            "kernel": "row_norm",
            "W": world,
            **ROW_NORM,
            "programs": grid[0],
            "bytes_moved": (world + 1) * ROW_NORM["M"] * ROW_NORM["D"] * 2,
            "eager_us": eager,
            "graph_us": graph,
            "hand_over_castpile": ratios,
            "max_abs_error": errors,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        del fns, graphs, bufs
        torch.cuda.empty_cache()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-gpu.json")
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument(
        "--cases",
        nargs="+",
        choices=("stack", "row_norm"),
        default=["stack", "row_norm"],
        help="the stack kernels (sum, store, gather) and/or the row norm",
    )
    args = parser.parse_args(argv)
    dev = torch.device("cuda", 0)
    helion_sum, helion_note = helion_kernels()
    rows = []
    iters = {"4K": 200, "1M": 100, "64M": 10}
    meta = {
        "command": " ".join(["python", *sys.argv]),
        "gpu": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "helion": helion_note,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "block": BLOCK,
        "num_warps": WARPS,
        "reps": args.reps,
        "iters": iters,
        "graph_calls_per_replay": GRAPH_CALLS,
    }
    # Bandwidth reference for each W: a device copy moving as many bytes as the 64M-element sum (read + write).
    copies = {}
    for world in WORLDS:
        nbytes = (world + 1) * SIZES["64M"] * 2 // 2
        src = torch.empty(nbytes, device=dev, dtype=torch.uint8)
        dst = torch.empty_like(src)
        t = timed_one_gpu({"copy": lambda dst=dst, src=src: dst.copy_(src)}, 10, args.reps)["copy"]
        copies[f"W{world}"] = {"bytes_moved": 2 * nbytes, "us": t, "TBps": 2 * nbytes / t / 1e6}
        del src, dst
    sizes = SIZES if "stack" in args.cases else {}
    for size, n in sizes.items():
        for world in WORLDS:
            for kernel in KERNELS:
                fns, errors, moved = case(kernel, world, n, dev, helion_sum)
                eager = timed_one_gpu(fns, iters[size], args.reps)
                graph = {}
                if size in GRAPH_SIZES:
                    graphs = {
                        k: graphed(fns[k]) for k in ("hand", "castpile_loop", "castpile_gather", "torch") if k in fns
                    }
                    graph = timed_one_gpu(graphs, 5, args.reps)
                    graph = {k: v / GRAPH_CALLS for k, v in graph.items()}
                row = {
                    "kernel": kernel,
                    "W": world,
                    "size": size,
                    "elements": n,
                    "bytes_moved": moved,
                    "eager_us": eager,
                    "graph_us": graph,
                    "max_abs_error": errors,
                }
                if size == "4K":
                    row["host_us"] = host_times(fns, calls=500)
                rows.append(row)
                print(json.dumps(row), flush=True)
                write_result(args.out, {**meta, "copy": copies, "rows": rows})
                del fns
                torch.cuda.empty_cache()
    norm = row_norm_rows(dev, args.reps) if "row_norm" in args.cases else []
    write_result(args.out, {**meta, "copy": copies, "rows": rows, "row_norm": norm})


if __name__ == "__main__":
    main()
