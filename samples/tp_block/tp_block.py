"""A tensor-parallel transformer block on castpile's torch ops, under torch.compile, against NCCL and torch's async TP.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=. \\
        python3 -m torch.distributed.run --nproc_per_node 2 samples/tp_block/tp_block.py --out docs/data/tp-block.json

One Llama-style block (D 4096, 32 heads of 128, SwiGLU MLP of 14336, bf16),
split Megatron-style over the ranks: the QKV and gate/up projections by
columns (each rank its heads and its share of the MLP), the attention output
and down projections by rows, so each of those yields partial sums that the
ranks add up.  Three ways to write the communication, each compiled with
``torch.compile(fullgraph=True, mode="reduce-overhead")`` (CUDA graphs):

- ``castpile``: after each row-parallel projection,
  ``torch.ops.castpile.all_reduce_residual_rmsnorm`` adds the partial sums of
  every rank into the residual stream and normalises it, in one kernel
  (castpile.gpu.fused.rmsnorm; low-latency for decode).
- ``nccl``: ``all_reduce`` (functional collectives over NCCL), residual add,
  ``F.rms_norm``.
- ``async_tp``: sequence parallel (the residual stream split by tokens):
  all-gather before the column-parallel projections, reduce-scatter after the
  row-parallel ones, with ``torch._inductor.config._micro_pipeline_tp = True`` so
  that inductor fuses them with the matmuls into torch's symmetric-memory
  ``fused_all_gather_matmul`` / ``fused_matmul_reduce_scatter``.  It needs the
  token count divisible by the ranks (not decode of one token).

Decode (1, 8, 64 new tokens attending to a 1024-token cache) and prefill (4096
tokens, causal).  Every variant's output (the residual stream and the next
block's normalised input) is compared with the NCCL one on the same inputs
(bf16: within 2% of the largest magnitude), then timed in the same run:
rounds interleaved, medians of the slower rank (benchmarks/harness.py).
"""

import argparse
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch._dynamo.utils import counters

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from castpile.gpu import ops, runtime
from harness import record_row, run_header, start_ranks, timed

D, HEADS, HEAD_DIM, FFN, CACHE, EPS = 4096, 32, 128, 14336, 1024, 1e-5
DECODE, PREFILL = (1, 8, 64), 4096


class Shard:
    """This rank's weights (column shards of QKV and gate/up, row shards of the output and down projections)."""

    def __init__(self, rank, world, dev):
        gen = torch.Generator(device=dev).manual_seed(0)  # the same full weights on every rank

        def full(*shape):
            return (torch.randn(*shape, generator=gen, device=dev) * 0.02).to(torch.bfloat16)

        heads = HEADS // world
        cols = slice(rank * heads * HEAD_DIM, (rank + 1) * heads * HEAD_DIM)
        ffn = slice(rank * FFN // world, (rank + 1) * FFN // world)
        self.heads = heads
        self.wq, self.wk, self.wv = (full(D, D)[:, cols].contiguous() for _ in range(3))
        self.wo = full(D, D)[cols, :].contiguous()
        self.wg, self.wu = (full(D, FFN)[:, ffn].contiguous() for _ in range(2))
        self.wd = full(FFN, D)[ffn, :].contiguous()
        self.norm1 = (1 + 0.1 * torch.randn(D, generator=gen, device=dev)).to(torch.bfloat16)
        self.norm2 = (1 + 0.1 * torch.randn(D, generator=gen, device=dev)).to(torch.bfloat16)
        self.k_cache = full(1, heads, CACHE, HEAD_DIM) * 50
        self.v_cache = full(1, heads, CACHE, HEAD_DIM) * 50
        for t in vars(self).values():  # weights, as a module's parameters are: CUDA graphs must not copy them per call
            if isinstance(t, torch.Tensor):
                torch._dynamo.mark_static_address(t)


def attention(w: Shard, n: torch.Tensor, decode: bool) -> torch.Tensor:
    """This rank's heads: (T, D) normalised input -> (T, D) partial sums of the output projection."""
    t = n.shape[0]
    q, k, v = ((n @ m).view(t, w.heads, HEAD_DIM).transpose(0, 1)[None] for m in (w.wq, w.wk, w.wv))
    if decode:
        k, v = torch.cat([w.k_cache, k], 2), torch.cat([w.v_cache, v], 2)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=not decode)
    return a[0].transpose(0, 1).reshape(t, w.heads * HEAD_DIM) @ w.wo


def mlp(w: Shard, n: torch.Tensor) -> torch.Tensor:
    """This rank's share of the SwiGLU MLP: partial sums of the down projection."""
    return (F.silu(n @ w.wg) * (n @ w.wu)) @ w.wd


def block_castpile(w, name, h, n1, decode):
    """(h, n1) -> (h, n3): the residual stream updated by the fused op, and the next block's input.

    The op updates its residual in place; the block works on a copy, as the NCCL
    block's ``h + ...`` makes a new tensor (and CUDA graphs would skip a function
    that mutates its input).
    """
    h = h.clone()
    n2 = torch.ops.castpile.all_reduce_residual_rmsnorm(attention(w, n1, decode), name, h, w.norm2, EPS)
    n3 = torch.ops.castpile.all_reduce_residual_rmsnorm(mlp(w, n2), name, h, w.norm1, EPS)
    return h, n3


def block_nccl(w, group, h, n1, decode):
    h = h + funcol.all_reduce(attention(w, n1, decode), "sum", group)
    n2 = F.rms_norm(h, (D,), w.norm2, EPS)
    h = h + funcol.all_reduce(mlp(w, n2), "sum", group)
    return h, F.rms_norm(h, (D,), w.norm1, EPS)


def block_async_tp(w, group, h_shard, n1_shard, decode):
    """Sequence parallel: rows of the residual stream split over the ranks."""
    gathered = funcol.all_gather_tensor(n1_shard, 0, group)
    h_shard = h_shard + funcol.reduce_scatter_tensor(attention(w, gathered, decode), "sum", 0, group)
    n2 = funcol.all_gather_tensor(F.rms_norm(h_shard, (D,), w.norm2, EPS), 0, group)
    h_shard = h_shard + funcol.reduce_scatter_tensor(mlp(w, n2), "sum", 0, group)
    return h_shard, F.rms_norm(h_shard, (D,), w.norm1, EPS)


def gathered(t, world, group):
    """The ranks' shards of ``t`` stacked along rows (to compare the sequence-parallel result)."""
    out = t.new_empty((t.shape[0] * world, *t.shape[1:]))
    dist.all_gather_into_tensor(out, t.contiguous(), group=group)
    return out


def compiled(fn):
    return torch.compile(fn, fullgraph=True, mode="reduce-overhead")


def case(tokens, w, rank, world, group, dog, reps):
    decode = tokens in DECODE
    dev = w.wq.device
    gen = torch.Generator(device=dev).manual_seed(tokens)
    h0 = torch.randn(tokens, D, generator=gen, device=dev).to(torch.bfloat16)
    n0 = F.rms_norm(h0, (D,), w.norm1, EPS)
    symm = runtime.symmetric_empty((tokens, D), torch.bfloat16)
    name = ops.register(symm)
    variants = {
        "castpile": (compiled(block_castpile), lambda h, n: (w, name, h, n, decode)),
        "nccl": (compiled(block_nccl), lambda h, n: (w, group, h, n, decode)),
    }
    shard = slice(rank * tokens // world, (rank + 1) * tokens // world)
    if tokens % world == 0:
        variants["async_tp"] = (compiled(block_async_tp), lambda h, n: (w, group, h[shard], n[shard], decode))
    row = {"tokens": tokens, "phase": "decode" if decode else "prefill",
           "async_tp": "measured" if "async_tp" in variants else "n/a: sequence parallelism needs tokens % ranks == 0"}
    results, failed = {}, {}
    for key, (fn, args) in list(variants.items()):
        try:
            for _ in range(3):  # cudagraph trees record on the second or third call
                out = fn(*args(h0.clone(), n0.clone()))
            torch.cuda.synchronize()
            ok = torch.ones(1, device=dev)
        except Exception as exc:  # recorded in the result; the other variants go on
            failed[key] = f"{type(exc).__name__}: {str(exc)[:300]}"
            ok = torch.zeros(1, device=dev)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        if not ok.item():
            failed.setdefault(key, "failed on another rank")
            del variants[key]
            continue
        h, n3 = (t.clone() for t in out)
        results[key] = (gathered(h, world, group), gathered(n3, world, group)) if key == "async_tp" else (h, n3)
        dog.tick(f"{tokens} {key} compiled")
    row["failed"] = failed
    ref_h, ref_n = results["nccl"]
    row["max_error_vs_nccl"] = {
        key: {"h": float((h.float() - ref_h.float()).abs().max() / ref_h.float().abs().max()),
              "n3": float((n.float() - ref_n.float()).abs().max() / ref_n.float().abs().max())}
        for key, (h, n) in results.items() if key != "nccl"}
    row["matches_nccl"] = all(e["h"] < 0.02 and e["n3"] < 0.02 for e in row["max_error_vs_nccl"].values())
    inputs = {key: args(h0.clone(), n0.clone()) for key, (_, args) in variants.items()}
    fns = {key: (lambda fn=fn, a=inputs[key]: fn(*a)) for key, (fn, _) in variants.items()}
    row["iters"] = iters = 50 if decode else 10
    row["us"] = timed(fns, iters, reps, dog)
    row["cudagraph_skips"] = int(counters["inductor"]["cudagraph_skips"])
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/tp-block.json")
    parser.add_argument("--tokens", type=int, nargs="+", default=[*DECODE, PREFILL])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(args.timeout)
    torch._inductor.config._micro_pipeline_tp = True
    group = dist.group.WORLD
    weights = Shard(rank, world, dev)
    result = run_header(dev, world_size=world, dims={"D": D, "heads": HEADS, "head_dim": HEAD_DIM, "ffn": FFN,
                                                     "decode_cache": CACHE}, compile='fullgraph=True, mode="reduce-overhead"',
                        reps=args.reps, rows=[])
    for tokens in args.tokens:
        record_row(result, case(tokens, weights, rank, world, group, dog, args.reps), rank, args.out)
    # Not harness.stop_ranks: on the 2 x H200 host its closing barrier after torch's async-TP graphs hung (a
    # first run's watchdog fired there, after every row was written); rank 0 wrote the results before this.
    torch.cuda.synchronize()
    os._exit(0)


if __name__ == "__main__":
    main()
