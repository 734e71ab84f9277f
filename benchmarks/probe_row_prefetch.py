"""Whether prefetching the row into L2, or evict-first loads, lift a row loop out of the slow schedule (one GPU; issue 35).

    python benchmarks/probe_row_prefetch.py docs/data/probe-row-prefetch.json

The slow schedule (docs/perf-findings.md) is ptxas keeping fewer 128-bit loads in flight;
a bulk L2 prefetch of the row's bytes (one instruction per buffer, issued by one thread) would keep the memory busy whatever the
schedule.  bf16, 4 programs per SM, 8 warps, BLOCK_D = D, W = 2..8, 4096 x 8192 and 32768 x 4096.
"""

import functools
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton
import triton.language as tl

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from harness import GRAPH_CALLS, graphed, timed_one_gpu


@triton.jit
def _peer(table, p: tl.constexpr, ex):
    """Buffer ``p``'s address, typed and 16-byte aligned (as hand_row_bodies.py reads it)."""
    return tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)), 16)


@triton.jit
def _pf(ptr, nbytes):
    """``nbytes`` from ``ptr`` prefetched into L2 by the program's thread 0 (``cp.async.bulk.prefetch.L2``, sm_90)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; @p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
        "=r,l,r",
        [ptr.to(tl.int64, bitcast=True), nbytes],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def body(
    ex,
    table,
    res,
    w,
    out,
    M,
    D,
    eps,
    W: tl.constexpr,
    BLOCK_D: tl.constexpr,
    KIND: tl.constexpr,
    PF: tl.constexpr,
    EF: tl.constexpr,
):
    """The row loop of hand_row_bodies.py (``KIND`` 0 ``none``, 1 a residual after the reduction, 2 and a weight
    loaded once before the loop, applied before the scale); ``PF`` 1: each row's stack and residual prefetched
    into L2 as the row starts, 2: the next row's; ``EF``: the stack's loads ``evict_first``."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    nb = D * 2
    if KIND == 2:
        wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        if PF == 1:
            for p in tl.static_range(W):
                _pf(_peer(table, p, ex) + row * D, nb)
            if KIND >= 1:
                _pf(res + row * D, nb)
        if PF == 2:
            nxt = row + tl.num_programs(0)
            if nxt < M:
                for p in tl.static_range(W):
                    _pf(_peer(table, p, ex) + nxt * D, nb)
                if KIND >= 1:
                    _pf(res + nxt * D, nb)
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            if EF:
                h += tl.load(
                    _peer(table, p, ex) + row * D + cols, mask=mask, other=0, eviction_policy="evict_first"
                ).to(tl.float32)
            else:
                h += tl.load(_peer(table, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)
        if KIND >= 1:
            h += tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        if KIND == 2:
            h = h * wt
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)


SHAPES = [(4096, 8192), (32768, 4096)]
VARIANTS = [(pf, ef) for pf in (0, 1, 2) for ef in (0, 1)]
KINDS = (0, 1, 2)
WS = range(2, 9)


def warm(job):
    """Compile one kernel into the shared Triton cache (a worker process)."""
    M, D, W, kind, pf, ef = job
    body.warmup(
        torch.bfloat16,
        torch.int64,
        torch.bfloat16,
        torch.bfloat16,
        torch.bfloat16,
        M,
        D,
        1e-6,
        W=W,
        BLOCK_D=D,
        KIND=kind,
        PF=pf,
        EF=ef,
        num_warps=8,
        grid=(1,),
    )


def main(out_path):
    """Every cell: correctness against torch, registers, graph and eager medians, bytes per second."""
    jobs = [(M, D, W, kind, pf, ef) for M, D in SHAPES for W in WS for kind in KINDS for pf, ef in VARIANTS]
    t0 = time.time()
    with ProcessPoolExecutor(16) as pool:
        list(pool.map(warm, jobs))
    print("compiled", len(jobs), round(time.time() - t0), flush=True)
    dev = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    grid = (4 * sms,)
    rows = []
    for M, D in SHAPES:
        for W in WS:
            torch.cuda.empty_cache()
            stacks = [torch.randn(M, D, device=dev, dtype=torch.bfloat16) for _ in range(W)]
            table = torch.tensor([s.data_ptr() for s in stacks], device=dev, dtype=torch.int64)
            res = torch.randn(M, D, device=dev, dtype=torch.bfloat16)
            w = torch.randn(D, device=dev, dtype=torch.bfloat16)
            out = torch.empty(M, D, device=dev, dtype=torch.bfloat16)
            h0 = torch.stack(stacks).float().sum(0)
            for kind in KINDS:
                h = h0 + res.float() if kind >= 1 else h0
                want = h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6)
                if kind == 2:
                    want = want * w.float()
                fns, err, regs = {}, {}, {}
                for pf, ef in VARIANTS:
                    name = f"pf{pf}_ef{ef}"
                    call = functools.partial(
                        body[grid],
                        stacks[0],
                        table,
                        res,
                        w,
                        out,
                        M,
                        D,
                        1e-6,
                        W=W,
                        BLOCK_D=D,
                        KIND=kind,
                        PF=pf,
                        EF=ef,
                        num_warps=8,
                    )
                    out.zero_()
                    c = call()
                    torch.cuda.synchronize()
                    err[name] = float((out.float() - want).abs().max())
                    regs[name] = c.n_regs
                    fns[name] = call
                eager = timed_one_gpu(fns, 20, 7)
                gr = {
                    n: t / GRAPH_CALLS for n, t in timed_one_gpu({n: graphed(f) for n, f in fns.items()}, 3, 7).items()
                }
                planes = W + 1 + (1 if kind >= 1 else 0)
                moved = planes * M * D * 2
                row = dict(
                    M=M,
                    D=D,
                    W=W,
                    kind=["none", "res_after", "res_weight_hoisted"][kind],
                    registers=regs,
                    max_abs_error=err,
                    graph_us=gr,
                    eager_us=eager,
                    graph_TBps={n: moved / t / 1e6 for n, t in gr.items()},
                )
                rows.append(row)
                print(
                    json.dumps(
                        {
                            "M": M,
                            "W": W,
                            "kind": row["kind"],
                            "TBps": {n: round(v, 2) for n, v in row["graph_TBps"].items()},
                            "err": max(err.values()),
                            "regs": regs,
                        }
                    ),
                    flush=True,
                )
                with open(out_path, "w") as f:
                    json.dump(
                        {
                            "command": "python benchmarks/probe_row_prefetch.py docs/data/probe-row-prefetch.json",
                            "gpu": torch.cuda.get_device_name(),
                            "triton": __import__("triton").__version__,
                            "rows": rows,
                        },
                        f,
                        indent=1,
                    )


if __name__ == "__main__":
    main(sys.argv[1])
