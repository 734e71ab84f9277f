"""Loop bodies around a stacked reduction against their hand twins (one GPU, W buffers on it; issue 35).

    python benchmarks/sweeps/sweep_row_bodies.py --out docs/data/bench-sweep-row-bodies.json
    python benchmarks/sweeps/sweep_row_bodies.py --bindings 1d --out ...     # the 1-D cells only

The kernels of benchmarks/kernels/row_bodies.py (castpile, as ``make generated`` wrote them under both
strategies, ``castpile_loop`` and ``castpile_gather``) and hand_row_bodies.py (``hand``), and ``before``: the
loop strategy's text as castpile's lowering wrote it before issue 35's rule (docs/language.md, "What castpile
emits for an index": the row offset ``D*row + cols`` added to the pointer as one tensor, the 2-D bounds with
``row >= 0`` and ``cols >= 0``; ``row_bodies_spec.before_rule``).  Persistent loops of 4 programs per SM, 8 warps,
M x D = 4096 x 8192, BLOCK_D = D.  Cells (``--grid``):

* ``core``: bf16, cast before the reduction, every body, loop and binding, W = 2..8;
* ``dtype``: fp16 and fp32, every body, ``for`` loops, 2-D, W = 2, 4, 8;
* ``cast``: bf16, ``tl.sum(..., dtype=tl.float32)``, every body, ``for`` loops, both bindings, W = 2..8.

Each cell times its competitors interleaved in one run (``timed_one_gpu``: medians of ``--reps`` rounds; eager
20 calls a round, CUDA graphs of 20 calls replayed 3 times a round), and writes bytes per second (the stacks,
the residual and the output once each, the weight row once) beside hand time / castpile time.
"""

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent)]

from harness import GRAPH_CALLS, graphed, load_variant, run_header, timed_one_gpu, write_result
from kernels import hand_row_bodies as hand
from kernels.generated import row_bodies_gather as cp_gather, row_bodies_loop as cp_loop
from kernels.row_bodies_spec import BINDINGS, BODIES, LOOPS, before_rule, cp_name, hand_name

M, D, PER_SM, WARPS, EPS, ALPHA = 4096, 8192, 4, 8, 1e-6, 0.5
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def cells(grids) -> list[dict]:
    out = []
    if "core" in grids:
        out += [
            dict(body=b, loop=lp, binding=bd, cast="to", dtype="bf16", W=w)
            for w in range(2, 9)
            for b in BODIES
            for lp in LOOPS
            for bd in BINDINGS
        ]
    if "dtype" in grids:
        out += [
            dict(body=b, loop="for", binding="2d", cast="to", dtype=dt, W=w)
            for dt in ("fp16", "fp32")
            for w in (2, 4, 8)
            for b in BODIES
        ]
    if "cast" in grids:
        out += [
            dict(body=b, loop="for", binding=bd, cast="dtype", dtype="bf16", W=w)
            for w in range(2, 9)
            for b in BODIES
            for bd in BINDINGS
        ]
    return out


def warm(job):
    """Compile one kernel into the shared Triton cache (a worker process); ``job``: (path, name, W, dtype[,
    BLOCK_D], D the default)."""
    path, name, W, dtype, *block = job
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    dt, i64, f32 = DTYPES[dtype], torch.int64, torch.float32
    try:
        getattr(module, name).warmup(
            dt, i64, i64, dt, dt, dt, f32, M, D, EPS, ALPHA, W=W, BLOCK_D=(*block, D)[0], num_warps=WARPS, grid=(1,)
        )
        return None
    except Exception as exc:
        return f"{name} W{W} {dtype}: {type(exc).__name__}: {str(exc)[:300]}"


def checked_calls(
    kernels: dict, grid, kargs, W: int, out_want, stats_want, block_d: int = D
) -> tuple[dict, dict, dict]:
    """``fns, errors, regs``: a call of each kernel (label -> jit function) on ``kargs``, each run once and checked:
    its largest error against ``want`` in ``out`` (and ``stats`` where a reference is given; else the exception that
    stopped it, and no call), and its registers."""
    (out, want), (stats, want_stats) = out_want, stats_want
    fns, errors, regs = {}, {}, {}
    for label, fn in kernels.items():
        call = lambda fn=fn: fn[grid](*kargs, W=W, BLOCK_D=block_d, num_warps=WARPS)  # noqa: E731
        try:
            out.zero_()
            compiled = call()
            torch.cuda.synchronize()
        except Exception as exc:  # reported, not timed
            errors[label] = f"{type(exc).__name__}: {str(exc)[:300]}"
            continue
        err = float((out.float() - want).abs().max())
        if want_stats is not None:
            err = max(err, float((stats - want_stats).abs().max()))
        errors[label], regs[label], fns[label] = err, compiled.n_regs, call
    return fns, errors, regs


def expected(body, stacks, res, w):
    h = stacks[0].float().sum(0)
    if body == "two_stacks":
        h = h + stacks[1].float().sum(0)
    if body.startswith("res"):
        h = h + res.float()
    scale = torch.rsqrt(h.pow(2).mean(1, keepdim=True) + EPS)
    if body == "scalar":
        return h * (scale * ALPHA), scale[:, 0]
    y = h * scale
    return (y * w.float() if "weight" in body else y), None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-sweep-row-bodies.json")
    parser.add_argument("--grid", nargs="+", default=["core", "dtype", "cast"], choices=("core", "dtype", "cast"))
    parser.add_argument("--bindings", nargs="+", default=list(BINDINGS), choices=BINDINGS, help="only these cells")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args(argv)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "sweep_row_bodies"
    folder.mkdir(parents=True, exist_ok=True)
    before_path = folder / "row_bodies_before.py"
    before_path.write_text(before_rule(Path(cp_loop.__file__).read_text()))
    todo = [c for c in cells(args.grid) if c["binding"] in args.bindings]
    paths = {"loop": Path(cp_loop.__file__), "gather": Path(cp_gather.__file__), "before": before_path}
    jobs = set()
    for c in todo:
        name = cp_name(c["body"], c["loop"], c["binding"], c["cast"])
        jobs |= {(str(p), name, c["W"], c["dtype"]) for p in paths.values()}
        jobs.add((hand.__file__, hand_name(c["body"], c["loop"]), c["W"], c["dtype"]))
    with ProcessPoolExecutor(args.jobs) as pool:
        failed = [e for e in pool.map(warm, sorted(jobs)) if e]
    for e in failed:
        print("compile failed:", e, flush=True)
    before = load_variant("row_bodies_before", before_path.read_text(), folder)
    dev = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    grid = (PER_SM * sms,)
    result = run_header(
        dev,
        launcher="python ",
        M=M,
        D=D,
        BLOCK_D=D,
        programs=grid[0],
        num_warps=WARPS,
        reps=args.reps,
        graph_calls=GRAPH_CALLS,
        failed=failed,
        rows=[],
    )
    stacks_by = {}
    for c in todo:
        W, dt = c["W"], DTYPES[c["dtype"]]
        key = (W, c["dtype"])
        if key not in stacks_by:
            stacks_by.clear()
            torch.cuda.empty_cache()
            stacks = [[torch.randn(M, D, device=dev, dtype=dt) for _ in range(W)] for _ in range(2)]
            tables = [torch.tensor([b.data_ptr() for b in s], device=dev, dtype=torch.int64) for s in stacks]
            stacks_by[key] = (stacks, tables, torch.stack(stacks[0]), torch.stack(stacks[1]))
        stacks, tables, s0, s1 = stacks_by[key]
        res = torch.randn(M, D, device=dev, dtype=dt)
        w = torch.randn(D, device=dev, dtype=dt)
        out = torch.empty(M, D, device=dev, dtype=dt)
        stats = torch.empty(M, device=dev, dtype=torch.float32)
        kargs = (stacks[0][0], tables[0], tables[1], res, w, out, stats, M, D, EPS, ALPHA)
        name = cp_name(c["body"], c["loop"], c["binding"], c["cast"])
        kernels = {
            "hand": getattr(hand, hand_name(c["body"], c["loop"])),
            "castpile_loop": getattr(cp_loop, name),
            "castpile_gather": getattr(cp_gather, name),
            "before": getattr(before, name),
        }
        want, want_stats = expected(c["body"], (s0, s1), res, w)
        fns, errors, regs = checked_calls(kernels, grid, kargs, W, (out, want), (stats, want_stats))
        eager = timed_one_gpu(fns, 20, args.reps)
        graphs = {k: graphed(f) for k, f in fns.items()}
        graph = {k: t / GRAPH_CALLS for k, t in timed_one_gpu(graphs, 3, args.reps).items()}
        size = dt.itemsize if hasattr(dt, "itemsize") else torch.finfo(dt).bits // 8
        planes = W * (2 if c["body"] == "two_stacks" else 1) + 1 + (1 if c["body"].startswith("res") else 0)
        moved = planes * M * D * size + (D * size if "weight" in c["body"] else 0)
        row = {
            **c,
            "bytes_moved": moved,
            "eager_us": eager,
            "graph_us": graph,
            "graph_TBps": {k: moved / t / 1e6 for k, t in graph.items()},
            "eager_TBps": {k: moved / t / 1e6 for k, t in eager.items()},
            "hand_over": {
                f"{mode}_{k}": times["hand"] / times[k]
                for mode, times in (("graph", graph), ("eager", eager))
                for k in times
                if k != "hand" and "hand" in times
            },
            "registers": regs,
            "max_abs_error": errors,
        }
        result["rows"].append(row)
        print(
            json.dumps(
                {k: row[k] for k in ("body", "loop", "binding", "cast", "dtype", "W")}
                | {
                    "TBps": {k: round(v, 2) for k, v in row["graph_TBps"].items()},
                    "ratio": {k: round(v, 3) for k, v in row["hand_over"].items() if k.startswith("graph")},
                }
            ),
            flush=True,
        )
        write_result(args.out, result)
        del graphs, fns


if __name__ == "__main__":
    main()
