"""Two-GPU check and benchmark of MoE dispatch and combine: castpile against the torch path and the NVLink limit.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/bench_moe.py --out docs/data/bench-moe.json

T tokens per rank (128, 4096, 32768; ``--tokens``), H=7168, top-8 of 64 experts
(distinct, random), random weights, bf16.  For each T:

1. Correctness: ``--calls`` dispatch + combine calls with fresh inputs each (the
   same tensors refilled, as a model's layers would), one rank (chosen at
   random) first spinning 0-2 ms on its stream before about half of the calls.
   Every output of :func:`castpile.gpu.fused.moe.dispatch` (rows per source,
   counts, grouped rows and offsets, slot positions, weights, token ids, expert
   ids) and :func:`combine` is compared exactly with the torch path below run on
   the same inputs (integer-valued data, weights multiples of 1/8: every fp32
   sum is exact, and both round the same fp32 values to bf16); the signal pad
   must be all zero afterwards.
2. Timing, eager and inside CUDA graphs (castpile and the copy; the torch
   dispatch reads counts on the host and cannot be captured): rounds
   interleaved across methods, each a fixed number of calls between CUDA events
   after ``dist.barrier()`` (identical on every rank), the median over rounds of
   the slower rank (benchmarks/harness.py).  Methods:

   - ``castpile_*``: ``moe.dispatch`` / ``moe.combine`` (prepared launches).
   - ``torch_*``: what a careful user writes with NCCL.  Dispatch: per-rank send
     counts exchanged by ``all_to_all_single``, ``.tolist()`` for the splits, the
     tokens put in destination order deduplicated per rank (``index_select``),
     one ``all_to_all_single`` of the rows and one of their expert ids and
     weights, then a stable argsort of the local expert ids of the received
     (row, slot) pairs, which gives the same grouped rows, counts, offsets and
     slot positions.  Combine: weighted partial sums per received row (fp32, slot
     order), ``all_to_all_single`` back, a sum per token in rank order.
   - ``nvlink_copy``: the NVLink limit, a Triton copy (benchmarks/kernels
     ``_copy``) from this rank's memory into the peer's symmetric buffer of
     exactly the deduplicated bytes this rank's dispatch sends to its peers (rows
     x H x 2), both ranks at once, as in the dispatch.  ``*_vs_copy`` in each row
     is a method's time over the copy's.

Only the generated kernels are imported (castpile.gpu.fused.moe), not the
compiler: the GPU image has triton and torch but no libcst.
"""

import argparse
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed import _symmetric_memory as symm_mem

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu.fused import moe
from castpile.gpu.launch import bind
from harness import graph_timed, run_header, start_ranks, stop_ranks, timed, write_result
from kernels.hand_kernels import _copy

HIDDEN, TOPK, EXPERTS = 7168, 8, 64
TOKENS = [128, 4096, 32768]
#: Spin cycles per millisecond of the skew (H200 SM clock, about 1.98 GHz).
CYCLES_PER_MS = 1_980_000


# -- inputs ----------------------------------------------------------------------------------------------------


def fill_inputs(inputs: dict, gen: torch.Generator):
    """Refill x (integers in [-8, 8]), distinct top-k experts, weights (k/8) and expert_out (integers in [-3, 3])."""
    tokens = inputs["x"].shape[0]
    inputs["x"].random_(-8, 9, generator=gen)
    scores = torch.rand(tokens, EXPERTS, generator=gen, device=inputs["x"].device)
    inputs["idx"].copy_(scores.topk(TOPK, dim=1).indices)
    inputs["w"].random_(1, 9, generator=gen).div_(8)
    inputs["expert_out"].random_(-3, 4, generator=gen)


def new_inputs(state: moe.MoE, dev) -> dict:
    T, H = state.tokens, state.hidden
    return {
        "x": torch.empty(T, H, dtype=torch.bfloat16, device=dev),
        "idx": torch.empty(T, TOPK, dtype=torch.int64, device=dev),
        "w": torch.empty(T, TOPK, dtype=torch.float32, device=dev),
        "expert_out": torch.empty(state.capacity_pairs, H, dtype=torch.bfloat16, device=dev),
    }


# -- the torch path --------------------------------------------------------------------------------------------


class TorchMoE:
    """Dispatch and combine as a careful user writes them with ``all_to_all_single`` (NCCL)."""

    def __init__(self, rank, world, tokens, hidden):
        self.rank, self.world, self.tokens, self.hidden = rank, world, tokens, hidden
        self.local = EXPERTS // world
        self.plan = None

    def dispatch(self, x, idx, w) -> dict:
        W, EL, K, dev = self.world, self.local, idx.shape[1], x.device
        goes = torch.zeros(self.tokens, W, dtype=torch.bool, device=dev).scatter_(1, idx // EL, True)  # dedup
        send_counts = goes.sum(0)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        send, recv = send_counts.tolist(), recv_counts.tolist()
        tok = goes.t().nonzero()[:, 1]  # destination-major, token order within a destination
        rows = sum(recv)
        recv_x = x.new_empty(rows, self.hidden)
        dist.all_to_all_single(recv_x, x.index_select(0, tok), recv, send)
        meta = torch.cat([idx.int(), w.view(torch.int32)], 1).index_select(0, tok)
        recv_meta = meta.new_empty(rows, 2 * K)
        dist.all_to_all_single(recv_meta, meta, recv, send)
        recv_idx, recv_w = recv_meta[:, :K], recv_meta[:, K:].view(torch.float32)
        local = recv_idx.long() - self.rank * EL
        mine = (local >= 0) & (local < EL)
        key = torch.where(mine, local, EL).flatten()  # other ranks' slots sort last
        order = torch.sort(key, stable=True).indices
        counts = torch.zeros(EL + 1, dtype=torch.int64, device=dev).scatter_add_(0, key, torch.ones_like(key))[:EL]
        place = torch.empty_like(order)
        place[order] = torch.arange(order.numel(), device=dev)
        slots = torch.where(mine, place.view(rows, K), -1)
        self.plan = (tok, send, recv, slots, recv_w)
        return {
            "recv_x": recv_x,
            "recv_splits": recv,
            "recv_idx": recv_idx,
            "recv_w": recv_w,
            "expert_counts": counts,
            "expert_offsets": torch.cat([counts.new_zeros(1), counts.cumsum(0)]),
            "grouped_rows": order // K,
            "slot_positions": slots,
        }

    def combine(self, expert_out) -> torch.Tensor:
        tok, send, recv, slots, recv_w = self.plan
        acc = torch.zeros(slots.shape[0], self.hidden, dtype=torch.float32, device=expert_out.device)
        for k in range(slots.shape[1]):  # slot order, fp32
            at = slots[:, k]
            acc += torch.where(at >= 0, recv_w[:, k], 0)[:, None] * expert_out.index_select(0, at.clamp(min=0)).float()
        back = expert_out.new_empty(tok.numel(), self.hidden)
        dist.all_to_all_single(back, acc.to(expert_out.dtype), send, recv)
        out = torch.zeros(self.tokens, self.hidden, dtype=torch.float32, device=expert_out.device)
        start = 0
        for n in send:  # rank order; a token appears at most once per rank
            out.index_add_(0, tok[start : start + n], back[start : start + n].float())
            start += n
        return out.to(expert_out.dtype)


# -- correctness -----------------------------------------------------------------------------------------------


def mismatches(state: moe.MoE, got: moe.Dispatched, out, ref: dict, ref_out, src_token) -> dict:
    """Per output, the number of elements where castpile and the torch path differ."""
    T = state.tokens
    splits = ref["recv_splits"]
    starts = [sum(splits[:s]) for s in range(len(splits))]
    bad = {"recv_counts": int((got.recv_counts.long().cpu() != torch.tensor(splits)).sum())}
    pairs = (
        ("recv_x", got.recv_x, ref["recv_x"]),
        ("recv_topk_idx", got.recv_topk_idx, ref["recv_idx"]),
        ("recv_weights", got.recv_weights, ref["recv_w"]),
        ("recv_src_token", got.recv_src_token, src_token),
        ("slot_positions", got.slot_positions, ref["slot_positions"]),
    )
    for name, mine, theirs in pairs:
        bad[name] = sum(
            int((mine[s, :n] != theirs[a : a + n].to(mine.dtype)).sum()) for s, (a, n) in enumerate(zip(starts, splits))
        )
    bad["expert_counts"] = int((got.expert_counts.long() != ref["expert_counts"]).sum())
    bad["expert_offsets"] = int((got.expert_offsets.long() != ref["expert_offsets"]).sum())
    total = int(ref["expert_offsets"][-1])
    to_region = torch.cat([s * T + torch.arange(n, device=out.device) for s, n in enumerate(splits)])
    bad["grouped_rows"] = int((got.grouped_rows[:total].long() != to_region[ref["grouped_rows"][:total]]).sum())
    bad["combine"] = int((out != ref_out).sum())
    bad["signal_pad"] = int(state.pad.tensor.abs().sum())
    return bad


def source_tokens(torch_moe: TorchMoE, ref: dict) -> torch.Tensor:
    """The source token of each row the torch path received (one more all_to_all, for the check only)."""
    tok, send = torch_moe.plan[0].int(), torch_moe.plan[1]
    got = tok.new_empty(sum(ref["recv_splits"]))
    dist.all_to_all_single(got, tok, ref["recv_splits"], send)
    return got


def check(state, torch_moe, inputs, gen, calls, rank, world, dog) -> dict:
    """``calls`` dispatch + combine calls on fresh inputs with random skew; total mismatches per output."""
    totals = {}
    skew = random.Random(1234)  # the same choices on every rank
    for c in range(calls):
        fill_inputs(inputs, gen)
        x, idx, w, expert_out = inputs["x"], inputs["idx"], inputs["w"], inputs["expert_out"]
        torch.cuda.synchronize()
        dist.barrier()
        sleeper, ms = skew.randrange(world), skew.uniform(0, 2)
        if skew.random() < 0.5 and rank == sleeper:
            torch.cuda._sleep(int(ms * CYCLES_PER_MS))
        got = moe.dispatch(state, x, idx, w)
        if skew.random() < 0.5 and rank == sleeper:
            torch.cuda._sleep(int(ms * CYCLES_PER_MS))
        out = moe.combine(state, expert_out)
        torch.cuda.synchronize()
        ref = torch_moe.dispatch(x, idx, w)
        ref_out = torch_moe.combine(expert_out)
        src_token = source_tokens(torch_moe, ref)
        torch.cuda.synchronize()
        for name, n in mismatches(state, got, out, ref, ref_out, src_token).items():
            totals[name] = totals.get(name, 0) + n
        dog.tick(f"check call {c}")
    counts = torch.tensor(list(totals.values()), device="cuda")
    dist.all_reduce(counts)
    return dict(zip(totals, counts.tolist()))


# -- timing ----------------------------------------------------------------------------------------------------


def peer_copies(rank, world, x, rows_to: list, dev):
    """The NVLink limit: one launch per peer copying the rows this rank's dispatch sends it into its buffer."""
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    n = x.numel()
    buf = symm_mem.empty(n, dtype=x.dtype, device=dev)
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    launches = []
    for peer in range(world):
        if peer != rank and rows_to[peer]:
            remote = hdl.get_buffer(peer, (n,), x.dtype)
            launches.append(
                bind(_copy, (2 * sms,), x.view(-1), remote, rows_to[peer] * x.shape[1], BLOCK=4096, num_warps=8)
            )

    def copy():
        for launch in launches:
            launch()

    return copy, buf


def time_case(state, torch_moe, inputs, rank, world, dev, iters, reps, dog) -> dict:
    x, idx, w, expert_out = inputs["x"], inputs["idx"], inputs["w"], inputs["expert_out"]
    out = torch.empty_like(x)
    goes = torch.zeros(state.tokens, world, dtype=torch.bool, device=dev).scatter_(1, idx // state.local_experts, True)
    rows_to = goes.sum(0).tolist()
    copy, keep = peer_copies(rank, world, x, rows_to, dev)
    moe.dispatch(state, x, idx, w)
    torch_moe.dispatch(x, idx, w)
    fns = {
        "castpile_dispatch": lambda: moe.dispatch(state, x, idx, w),
        "castpile_combine": lambda: moe.combine(state, expert_out, out),
        "torch_dispatch": lambda: torch_moe.dispatch(x, idx, w),
        "torch_combine": lambda: torch_moe.combine(expert_out),
        "nvlink_copy": copy,
    }
    eager = timed(fns, iters, reps, dog)
    graph_names = ["castpile_dispatch", "castpile_combine", "nvlink_copy"]
    graph = graph_timed({name: fns[name] for name in graph_names}, max(1, iters // 20), reps, dog)
    sent = torch.tensor([sum(r for d, r in enumerate(rows_to) if d != rank)], device=dev)
    dist.all_reduce(sent, op=dist.ReduceOp.MAX)
    nbytes = int(sent) * state.hidden * 2
    del keep
    return {
        "rows_to_each_rank": rows_to,
        "nvlink_bytes_max_rank": nbytes,
        "eager_us": eager,
        "graph_us": graph,
        "eager_vs_copy": {k: v / eager["nvlink_copy"] for k, v in eager.items()},
        "graph_vs_copy": {k: v / graph["nvlink_copy"] for k, v in graph.items()},
        "copy_GBps": {"eager": nbytes / eager["nvlink_copy"] / 1e3, "graph": nbytes / graph["nvlink_copy"] / 1e3},
        "castpile_dispatch_GBps": {
            "eager": nbytes / eager["castpile_dispatch"] / 1e3,
            "graph": nbytes / graph["castpile_dispatch"] / 1e3,
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-moe.json")
    parser.add_argument("--tokens", type=int, nargs="+", default=TOKENS)
    parser.add_argument("--calls", type=int, default=20, help="checked calls per size")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--token-block", type=int, default=moe.TOKEN_BLOCK)
    parser.add_argument("--hidden-block", type=int, default=moe.HIDDEN_BLOCK)
    parser.add_argument("--num-warps", type=int, default=8)
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(args.timeout)
    env = {
        k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
    }
    result = run_header(
        dev,
        env=env,
        world_size=world,
        hidden=HIDDEN,
        topk=TOPK,
        experts=EXPERTS,
        dtype="bf16",
        reps=args.reps,
        calls=args.calls,
        token_block=args.token_block,
        hidden_block=args.hidden_block,
        num_warps=args.num_warps,
        rows=[],
    )
    for T in args.tokens:
        state = moe.MoE.create(
            rank,
            world,
            tokens=T,
            hidden=HIDDEN,
            topk=TOPK,
            experts=EXPERTS,
            dtype=torch.bfloat16,
            token_block=args.token_block,
            hidden_block=args.hidden_block,
            num_warps=args.num_warps,
        )
        torch_moe = TorchMoE(rank, world, T, HIDDEN)
        inputs = new_inputs(state, dev)
        gen = torch.Generator(device=dev).manual_seed(1000 * T + rank)
        t0 = time.perf_counter()
        errors = check(state, torch_moe, inputs, gen, args.calls, rank, world, dog)
        row = {
            "tokens": T,
            "blocks": state.blocks,
            "check_calls": args.calls,
            "mismatches": errors,
            "exact": all(v == 0 for v in errors.values()),
            "check_s": round(time.perf_counter() - t0, 1),
        }
        iters = 100 if T <= 128 else (20 if T <= 4096 else 5)
        row.update(iters=iters, **time_case(state, torch_moe, inputs, rank, world, dev, iters, args.reps, dog))
        result["rows"].append(row)
        if rank == 0:
            print(row, flush=True)
            write_result(args.out, result)
        del state, inputs
        torch.cuda.synchronize()
    stop_ranks()


if __name__ == "__main__":
    main()
