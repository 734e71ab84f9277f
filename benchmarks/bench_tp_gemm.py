"""Two-GPU check and benchmark of the tensor-parallel GEMMs (all-gather + GEMM, GEMM + reduce-scatter).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/bench_tp_gemm.py \\
        --sweep --out docs/data/bench-tp-gemm.json

bf16.  Shapes M x K x N (K the full reduction dim; for GEMM + reduce-scatter each
rank holds K / W of it): all-gather + GEMM 256 x 8192 x 8192, 4096 x 8192 x 8192,
16384 x 8192 x 14336; GEMM + reduce-scatter 256 x 8192 x 8192, 4096 x 8192 x 8192,
16384 x 14336 x 8192.  For each shape:

1. Check: ``--calls`` calls (default 20) of the fused op with new inputs each
   call and random skew (rank 1 sleeps 0-2 ms before a third of the calls).
   Even calls: integer data in [-2, 2], every fp32 sum exact, so the results must
   equal torch's bit for bit (cuBLAS on the gathered inputs; for the
   reduce-scatter each rank's product rounded to bf16, summed in fp32).  Odd
   calls: normal data, within ``2^-7 |ref| + 1e-3 max |ref|``.  Then the op
   captured in a CUDA graph (``GRAPH_CALLS`` calls) and replayed must give the
   same; flags and barrier slots zero at the end on both ranks.
2. Timing, all in the same run, rounds interleaved, medians of the slower rank
   (benchmarks/harness.py), eager:
   ``cublas_gemm``: ``torch.matmul`` of this rank's whole local problem;
   ``nccl_cublas``: ``dist.all_gather_into_tensor`` then matmul / matmul then
   ``dist.reduce_scatter_tensor``; ``torch_fused``:
   ``torch.ops.symm_mem.fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter``;
   ``triton_gemm``: our persistent GEMM alone on the local problem (TFLOP/s in
   ``tflops``); ``castpile_fused``: the fused op (all-gather: shard already in
   ``state.a_shard``); ``castpile_fused_copy_in``: the all-gather with a separate
   shard tensor (one local copy more).

Every competitor is first called once on both ranks; one that fails anywhere is
left out of the timing with its error in ``errors`` (a fused op whose TMA
configuration fails is retried without TMA), so that the rest of the run goes on.
``--sweep`` adds ``sweep``: our GEMM alone at 4096 x 8192 x 8192 and 256 x 8192 x
8192 over tile configurations, and the fused all-gather at M = 256 and 4096 over
``comm_blocks`` and ``chunk_rows``.  ``--config`` (e.g. ``128x256x64:g8:w8:s3``,
``:ptr`` for pointer loads, ``:flat`` for the GEMM's flattened loop) overrides the
default tiles of our kernels.
"""

import argparse
import json
import random
import sys
import time
import traceback
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed import _symmetric_memory  # registers torch.ops.symm_mem

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu.fused import tp_gemm
from harness import graphed, run_header, start_ranks, stop_ranks, timed, write_result

AG_SHAPES = [(256, 8192, 8192), (4096, 8192, 8192), (16384, 8192, 14336)]
RS_SHAPES = [(256, 8192, 8192), (4096, 8192, 8192), (16384, 14336, 8192)]
SWEEP_CONFIGS = [  # our GEMM alone at M = 4096, as --config strings
    "128x256x64:g8:w8:s3",
    "128x256x64:g8:w8:s4",
    "128x256x64:g4:w8:s3",
    "128x256x64:g16:w8:s3",
    "128x256x64:g8:w8:s3:flat",
    "128x256x64:g8:w8:s2:flat",
    "256x128x64:g8:w8:s3",
    "128x128x64:g8:w8:s4",
    "128x128x64:g8:w4:s4",
    "128x256x64:g8:w8:s3:ptr",
    "128x256x64:g8:w8:s3:ptr:flat",
    "64x256x64:g8:w4:s4",
]
SMALL_SWEEP_CONFIGS = [  # at M = 256
    "128x128x64:g8:w8:s4",
    "128x128x64:g8:w4:s4",
    "128x128x64:g8:w8:s4:flat",
    "64x128x64:g8:w4:s4",
    "128x64x64:g8:w4:s4",
    "128x256x64:g8:w8:s3",
    "64x256x64:g8:w4:s4",
    "128x128x128:g8:w8:s3",
]
COMM_SWEEP = [(2, None), (4, None), (8, None), (4, 16), (4, 32), (8, 8), (16, 8)]  # (comm_blocks, chunk_rows)
K_SEGMENT_SWEEP = [(4, 512), (4, 1024), (4, 2048), (4, 4096), (2, 1024), (2, 512)]  # (comm_blocks, k_segment), M = 256
ASSUMED_FLOPS = 600e12  # a guess at the speed, only to size the timing loops


def pattern(shape, seed, dev, integer):
    """bf16 test data from ``seed`` (the same on every rank): integers in [-2, 2], or normal / 8."""
    gen = torch.Generator(device=dev).manual_seed(seed)
    if integer:
        return torch.randint(-2, 3, shape, generator=gen, device=dev).to(torch.bfloat16)
    return (torch.randn(shape, generator=gen, device=dev) / 8).to(torch.bfloat16)


def parse_config(text):
    """``128x256x64:g8:w8:s3[:ptr][:flat]`` as a GemmConfig (``ptr``: pointer loads; ``flat``: flattened loop)."""
    head, *rest = text.split(":")
    bm, bn, bk = map(int, head.split("x"))
    config = tp_gemm.GemmConfig(bm, bn, bk)
    for part in rest:
        key = {"g": "group_m", "w": "num_warps", "s": "num_stages"}.get(part[0])
        if part == "ptr":
            config = replace(config, tma=False)
        elif part == "flat":
            config = replace(config, flatten=True)
        elif key:
            config = replace(config, **{key: int(part[1:])})
        else:
            raise ValueError(f"--config: unknown part {part!r}")
    return config


def agreed(ok: bool) -> bool:
    """True when ``ok`` holds on every rank."""
    flag = torch.tensor([1 if ok else 0], device="cuda")
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def probe(fns: dict, errors: dict, dog) -> dict:
    """The callables that ran once on every rank without raising (errors recorded for the rest)."""
    usable = {}
    for name, fn in fns.items():
        try:
            fn()
            torch.cuda.synchronize()
            ok, err = True, None
        except Exception:  # recorded in the result file
            ok, err = False, traceback.format_exc()[-2000:]
        if agreed(ok):
            usable[name] = fn
        else:
            errors[name] = err or "failed on another rank"
        dog.tick(f"probe {name}")
    return usable


def closeness(got, ref):
    """(bitwise equal, within tolerance, max abs error) of a bf16 result against its reference."""
    g, r = got.float(), ref.float()
    err = (g - r).abs()
    tol = 2**-7 * r.abs() + 1e-3 * float(r.abs().max())
    worst = float(err.max())
    return bool(torch.equal(got, ref)), bool((err <= tol).all()), worst if worst == worst else float("inf")


class Problem:
    """One shape of one op: its state, inputs, the torch reference and the timed callables."""

    def __init__(self, op, m, k, n, rank, world, group_name, config, options):
        self.op, self.m, self.k, self.n, self.rank, self.world = op, m, k, n, rank, world
        self.group_name, self.dev = group_name, torch.device("cuda", torch.cuda.current_device())
        self.config, self.options = config, options
        self.ms = m // world
        self.kl = k if op == "all_gather_matmul" else k // world
        self.state = self.make_state(config)

    def make_state(self, config):
        kw = dict(m=self.m, n=self.n, config=config)
        if self.op == "all_gather_matmul":
            return tp_gemm.AllGatherMatmul.create(self.rank, self.world, k=self.k, **kw, **self.options)
        return tp_gemm.MatmulReduceScatter.create(self.rank, self.world, k=self.kl, **kw)

    def inputs(self, seed, integer):
        """Every rank's inputs (generated alike on every rank): AG (shards, b per rank); RS (a per rank, b per rank)."""
        w, dev = self.world, self.dev
        if self.op == "all_gather_matmul":
            first = [pattern((self.ms, self.k), seed * 64 + r, dev, integer) for r in range(w)]
            return first, [pattern((self.k, self.n), seed * 64 + 32 + r, dev, integer) for r in range(w)]
        return (
            [pattern((self.m, self.kl), seed * 64 + r, dev, integer) for r in range(w)],
            [pattern((self.kl, self.n), seed * 64 + 32 + r, dev, integer) for r in range(w)],
        )

    def reference(self, xs, bs):
        r = self.rank
        if self.op == "all_gather_matmul":
            return torch.cat(xs) @ bs[r]
        total = sum((xs[q] @ bs[q]).float() for q in range(self.world))
        return total[r * self.ms : (r + 1) * self.ms].to(torch.bfloat16)

    def fused(self, xs, bs, out):
        r = self.rank
        if self.op == "all_gather_matmul":
            return tp_gemm.all_gather_matmul(self.state, xs[r], bs[r], out)
        return tp_gemm.matmul_reduce_scatter(self.state, xs[r], bs[r], out)

    def out_shape(self):
        return (self.m, self.n) if self.op == "all_gather_matmul" else (self.ms, self.n)

    def check(self, calls, dog):
        """``calls`` fused calls with new data and skew, then a CUDA-graph replay: counts of wrong results."""
        rng = random.Random(4321)  # the same choices on both ranks; only rank 1 sleeps
        wrong = {"integer_not_bitwise": 0, "normal_out_of_tolerance": 0, "graph": 0}
        max_err = 0.0
        out = torch.empty(self.out_shape(), dtype=torch.bfloat16, device=self.dev)
        for call in range(calls):
            integer = call % 2 == 0
            xs, bs = self.inputs(1000 + call, integer)
            ref = self.reference(xs, bs)
            out.fill_(float("nan"))
            skew = rng.random() < 1 / 3
            pause = rng.uniform(0, 2e-3)
            torch.cuda.synchronize()
            if skew and self.rank == 1:
                time.sleep(pause)
            self.fused(xs, bs, out)
            torch.cuda.synchronize()
            exact, close, err = closeness(out, ref)
            if integer:
                wrong["integer_not_bitwise"] += int(not exact)
            else:
                wrong["normal_out_of_tolerance"] += int(not close)
                max_err = max(max_err, err)
            dog.tick(f"check call {call}")
        max_err = max_err if max_err != float("inf") else "not finite"
        xs, bs = self.inputs(5000, True)
        ref = self.reference(xs, bs)
        out.fill_(float("nan"))
        graph = graphed(lambda: self.fused(xs, bs, out))
        graph()
        torch.cuda.synchronize()
        wrong["graph"] = int(not torch.equal(out, ref))
        counts = torch.tensor(
            [int(self.state.flags.tensor.abs().sum()), int(self.state.pad.tensor.abs().sum())], device=self.dev
        )
        dist.all_reduce(counts)
        return {
            "calls": calls,
            "wrong": wrong,
            "normal_max_abs_error": max_err,
            "flags_sum": int(counts[0]),
            "pad_sum": int(counts[1]),
        }

    def competitors(self):
        """The timed callables on fixed normal data."""
        xs, bs = self.inputs(7, False)
        r, dev = self.rank, self.dev
        out = torch.empty(self.out_shape(), dtype=torch.bfloat16, device=dev)
        if self.op == "all_gather_matmul":
            shard, b = xs[r], bs[r]
            full = torch.cat(xs)
            gathered = torch.empty_like(full)
            local_out = torch.empty((self.m, self.n), dtype=torch.bfloat16, device=dev)
            self.state.a_shard.copy_(shard)
            gn = self.group_name

            def nccl_cublas():
                dist.all_gather_into_tensor(gathered, shard)
                torch.matmul(gathered, b, out=local_out)

            return {
                "cublas_gemm": lambda: torch.matmul(full, b, out=local_out),
                "nccl_cublas": nccl_cublas,
                "torch_fused": lambda: torch.ops.symm_mem.fused_all_gather_matmul(shard, [b], 0, gn, return_A=False),
                "triton_gemm": lambda: tp_gemm.matmul(full, b, local_out, config=self.state.config),
                "castpile_fused": lambda: tp_gemm.all_gather_matmul(self.state, None, b, out),
                "castpile_fused_copy_in": lambda: tp_gemm.all_gather_matmul(self.state, shard, b, out),
            }
        a, b = xs[r], bs[r]
        partial = torch.empty((self.m, self.n), dtype=torch.bfloat16, device=dev)
        scattered = torch.empty((self.ms, self.n), dtype=torch.bfloat16, device=dev)
        gn = self.group_name

        def nccl_cublas():
            torch.matmul(a, b, out=partial)
            dist.reduce_scatter_tensor(scattered, partial)

        return {
            "cublas_gemm": lambda: torch.matmul(a, b, out=partial),
            "nccl_cublas": nccl_cublas,
            "torch_fused": lambda: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, gn),
            "triton_gemm": lambda: tp_gemm.matmul(a, b, partial, config=self.state.config),
            "castpile_fused": lambda: tp_gemm.matmul_reduce_scatter(self.state, a, b, out),
        }

    def flops(self):
        return 2.0 * self.m * self.kl * self.n


def iters_for(flops):
    """Calls per timed round: about 10 ms of work, between 3 and 50."""
    return max(3, min(50, int(10e3 / (flops / ASSUMED_FLOPS * 1e6))))


def first_working(problem, errors, dog):
    """Make sure the fused op runs (and is checked) with its configuration, else without TMA."""
    xs, bs = problem.inputs(1, True)
    out = torch.empty(problem.out_shape(), dtype=torch.bfloat16, device=problem.dev)
    usable = probe({"castpile_fused": lambda: problem.fused(xs, bs, out)}, errors, dog)
    if usable or not problem.config.tma:
        return bool(usable)
    errors["castpile_fused_tma"] = errors.pop("castpile_fused")
    problem.config = replace(problem.config, tma=False)
    problem.state = problem.make_state(problem.config)
    return bool(probe({"castpile_fused": lambda: problem.fused(xs, bs, out)}, errors, dog))


def shape_case(op, m, k, n, rank, world, group_name, dog, args):
    config = args.config or tp_gemm.default_config(m, op)
    options = args.ag_options if op == "all_gather_matmul" else {}
    problem = Problem(op, m, k, n, rank, world, group_name, config, options)
    row = {"op": op, "M": m, "K": k, "N": n, "label": f"{m} x {k} x {n}", "k_per_rank": problem.kl, "errors": {}}
    dog.tick(f"{op} {m}x{k}x{n} start")
    works = first_working(problem, row["errors"], dog)
    row["config"] = asdict(problem.config)
    row["state"] = repr(problem.state)
    if works:
        row["check"] = problem.check(args.calls, dog)
    fns = problem.competitors()
    if not works:
        fns = {k: v for k, v in fns.items() if not k.startswith("castpile")}
    fns = probe(fns, row["errors"], dog)
    iters = iters_for(problem.flops())
    row["iters"] = iters
    row["eager_us"] = timed(fns, iters, args.reps, dog)
    us = row["eager_us"]
    row["tflops"] = {name: problem.flops() / (t * 1e-6) / 1e12 for name, t in us.items()}
    if "castpile_fused" in us:
        fused = us["castpile_fused"]
        row["ratios"] = {f"{name}_over_castpile_fused": t / fused for name, t in us.items() if name != "castpile_fused"}
    if "triton_gemm" in us and "cublas_gemm" in us:
        row["triton_gemm_fraction_of_cublas"] = us["cublas_gemm"] / us["triton_gemm"]
    row["targets"] = targets(m, us, row.get("triton_gemm_fraction_of_cublas"))
    del problem
    torch.cuda.empty_cache()
    return row


def targets(m, us, fraction):
    """The targets of docs/fused.md where measured: M = 256 1.25x NCCL + cuBLAS; M >= 4096 <= 1.08x cuBLAS, GEMM >= 90%."""
    out = {}
    fused = us.get("castpile_fused")
    if fused is not None and m <= 256 and "nccl_cublas" in us:
        out["speedup_vs_nccl_cublas"] = us["nccl_cublas"] / fused
        out["met_1.25x_vs_nccl_cublas"] = us["nccl_cublas"] / fused >= 1.25
    if fused is not None and m >= 4096 and "cublas_gemm" in us:
        out["fused_over_cublas_gemm"] = fused / us["cublas_gemm"]
        out["met_at_most_1.08x_cublas_gemm"] = fused / us["cublas_gemm"] <= 1.08
    if fraction is not None and m >= 4096:
        out["met_triton_gemm_90pct_of_cublas"] = fraction >= 0.9
    return out


def sweep(rank, world, group_name, dog, args):
    """Our GEMM alone over tile configurations; the fused all-gather over its communication options."""
    rows = []
    dev = torch.device("cuda", torch.cuda.current_device())
    for m, configs in ((4096, SWEEP_CONFIGS), (256, SMALL_SWEEP_CONFIGS)):
        k = n = 8192
        a, b = pattern((m, k), 1, dev, False), pattern((k, n), 2, dev, False)
        c = torch.empty((m, n), dtype=torch.bfloat16, device=dev)
        fns = {"cublas_gemm": lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)}
        for name in configs:
            fns[name] = lambda a=a, b=b, c=c, config=parse_config(name): tp_gemm.matmul(a, b, c, config=config)
        errors = {}
        fns = probe(fns, errors, dog)
        us = timed(fns, iters_for(2.0 * m * k * n), args.reps, dog)
        rows.append(
            {
                "what": "triton_gemm",
                "M": m,
                "K": k,
                "N": n,
                "eager_us": us,
                "errors": errors,
                "tflops": {name: 2.0 * m * k * n / (t * 1e-6) / 1e12 for name, t in us.items()},
            }
        )
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
    for m in (256, 4096):
        k = n = 8192
        fns, errors, keep = {}, {}, []
        rows_options = [{"comm_blocks": c, "chunk_rows": r, "k_segment": 0} for c, r in COMM_SWEEP]
        column_options = [{"comm_blocks": c, "k_segment": s} for c, s in K_SEGMENT_SWEEP] if m == 256 else []
        for options in rows_options + column_options:
            problem = Problem(
                "all_gather_matmul",
                m,
                k,
                n,
                rank,
                world,
                group_name,
                args.config or tp_gemm.default_config(m, "all_gather_matmul"),
                options,
            )
            keep.append(problem)
            xs, bs = problem.inputs(7, False)
            problem.state.a_shard.copy_(xs[rank])
            out = torch.empty(problem.out_shape(), dtype=torch.bfloat16, device=dev)
            st = problem.state
            name = f"comm_blocks={st.comm_blocks}," + (
                f"k_segment={st.k_segment}" if st.k_segment else f"chunk_rows={st.chunk_rows}"
            )
            fns[name] = lambda p=problem, b=bs[rank], out=out: tp_gemm.all_gather_matmul(p.state, None, b, out)
        fns = probe(fns, errors, dog)
        us = timed(fns, iters_for(2.0 * m * k * n), args.reps, dog)
        rows.append(
            {"what": "castpile_fused all_gather_matmul", "M": m, "K": k, "N": n, "eager_us": us, "errors": errors}
        )
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
        del keep
        torch.cuda.empty_cache()
    return rows


def parse_shapes(text, defaults):
    if text is None:
        return defaults
    if text == "none":
        return []
    return [tuple(map(int, s.split("x"))) for s in text.split(",") if s]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-tp-gemm.json")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ag-shapes", default=None, help="e.g. 256x8192x8192 (default: all; 'none' for none)")
    parser.add_argument("--rs-shapes", default=None, help="as --ag-shapes")
    parser.add_argument("--config", type=parse_config, default=None, help="our tiles, e.g. 128x256x64:g8:w8:s3")
    parser.add_argument("--comm-blocks", type=int, default=None)
    parser.add_argument("--chunk-rows", type=int, default=None)
    parser.add_argument("--k-segment", type=int, default=None, help="the all-gather's columns per chunk (0: rows)")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args(argv)
    args.ag_options = {
        k: v
        for k, v in (("comm_blocks", args.comm_blocks), ("chunk_rows", args.chunk_rows), ("k_segment", args.k_segment))
        if v is not None
    }
    rank, world, dev, dog = start_ranks(args.timeout)
    group_name = dist.group.WORLD.group_name
    with warnings.catch_warnings():  # deprecated (and not needed) in torch 2.11; older torch needs it
        warnings.simplefilter("ignore")
        try:
            _symmetric_memory.enable_symm_mem_for_group(group_name)
        except Exception as exc:  # noted, not fatal: the torch_fused rows say whether torch's ops ran
            print(f"rank {rank}: enable_symm_mem_for_group: {exc}", flush=True)
    result = run_header(dev, world_size=world, dtype="bf16", reps=args.reps, calls=args.calls, rows=[])
    cases = [("all_gather_matmul", s) for s in parse_shapes(args.ag_shapes, AG_SHAPES)]
    cases += [("matmul_reduce_scatter", s) for s in parse_shapes(args.rs_shapes, RS_SHAPES)]
    for op, (m, k, n) in cases:
        row = shape_case(op, m, k, n, rank, world, group_name, dog, args)
        result["rows"].append(row)
        if rank == 0:
            print(json.dumps(row), flush=True)
            write_result(args.out, result)
    if args.sweep:
        result["sweep"] = sweep(rank, world, group_name, dog, args)
        if rank == 0:
            write_result(args.out, result)
    stop_ranks()


if __name__ == "__main__":
    main()
