"""The library's collectives and fused ops at W = 5 to 8 simulated ranks, with their default launch shapes.

Defaults that depend on W (grids from the signal-pad slots, the low-latency scratch, chunk sizes,
MoE's turn order) must hold at eight ranks as at two; small shapes keep each run short.
References are torch's, on the same inputs.
"""

import pytest
import torch

from castpile.gpu import collectives, sim
from castpile.gpu.fused import moe, rmsnorm, tp_gemm

N = 200  # elements per rank: ragged against every W here
EPS = 1e-5


def _inputs(world, n, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(-8, 9, (n,), generator=gen).float() for _ in range(world)]


@pytest.mark.parametrize("world", [5, 6, 7, 8])
def test_every_collective_with_default_shapes(world):
    xs = _inputs(world, N * world, world)
    handles = sim.symmetric_empty(world, (N * world,), torch.float32, push_scratch=True)
    total = torch.stack(xs).sum(0)

    def body(rank):
        h, got = handles[rank], {}
        for name, call in (
            ("one_shot", lambda: collectives.all_reduce_one_shot(h).clone()),
            ("low_latency", lambda: collectives.all_reduce_low_latency(h).clone()),
            ("all_gather", lambda: collectives.all_gather(h).clone()),
            ("reduce_scatter", lambda: collectives.reduce_scatter(h).clone()),
            ("two_shot", lambda: collectives.all_reduce_two_shot(h, push=False).clone()),
            ("two_shot_push", lambda: collectives.all_reduce_two_shot(h, push=True).clone()),
        ):
            h.tensor.copy_(xs[rank])
            got[name] = call()
        return got

    outs = sim.run(body, world, timeout=240)
    for rank, got in enumerate(outs):
        expected = {
            "one_shot": total,
            "low_latency": total,
            "two_shot": total,
            "two_shot_push": total,
            "all_gather": torch.stack(xs),
            "reduce_scatter": total.chunk(world)[rank],
        }
        for name, want in expected.items():
            assert torch.equal(got[name], want), f"W={world} rank {rank}: {name}"
    assert all(not h.signal_pad.any() for h in handles)


def test_rmsnorm_both_kernels_at_eight_ranks():
    world, rows, d = 8, 3, 40
    xs = [x.view(rows, d) for x in _inputs(world, rows * d, 3)]
    handles = sim.symmetric_empty(world, (rows, d), torch.float32)
    weight = torch.linspace(0.5, 1.5, d)
    residual = torch.arange(rows * d, dtype=torch.float32).view(rows, d) % 5

    def body(rank):
        got = {}
        for method in rmsnorm.METHODS:
            handles[rank].tensor.copy_(xs[rank])
            res = residual.clone()
            got[method] = (rmsnorm.all_reduce_residual_rmsnorm(handles[rank], res, weight, EPS, method=method), res)
        return got

    summed = residual + torch.stack(xs).sum(0)
    want = summed * torch.rsqrt(summed.pow(2).mean(-1, keepdim=True) + EPS) * weight
    for got in sim.run(body, world, timeout=240):
        for method, (y, res) in got.items():
            assert torch.equal(res, summed), method
            torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


def test_moe_dispatch_and_combine_at_eight_ranks():
    world, tokens, hidden, topk, experts = 8, 5, 8, 3, 16
    states = moe.MoE.create_all(
        world,
        alloc=sim.symmetric_scratch,
        tokens=tokens,
        hidden=hidden,
        topk=topk,
        experts=experts,
        dtype=torch.float32,
    )
    gen = torch.Generator().manual_seed(8)
    xs = [torch.randint(-3, 4, (tokens, hidden), generator=gen).float() for _ in range(world)]
    idx = [torch.rand((tokens, experts), generator=gen).argsort(1)[:, :topk].to(torch.int32) for _ in range(world)]
    ws = [torch.randint(1, 3, (tokens, topk), generator=gen).float() / 2 for _ in range(world)]
    per = experts // world

    def body(rank):
        st = states[rank]
        d = moe.dispatch(st, xs[rank], idx[rank], ws[rank])
        places = torch.arange(d.grouped_rows.numel(), dtype=torch.int32)
        expert = (places[:, None] >= d.expert_offsets[None, 1:]).sum(1)
        rows = d.recv_x.flatten(0, 1)[d.grouped_rows.long()]
        out = moe.combine(st, rows * (rank * per + expert + 1)[:, None].float())
        return out, d.recv_counts.clone()

    for rank, (out, counts) in enumerate(sim.run(body, world, timeout=240)):
        scale = (ws[rank] * (idx[rank] + 1).float()).sum(1)
        assert torch.equal(out, scale[:, None] * xs[rank]), f"rank {rank}"
        sent = [int(((idx[s] // per) == rank).any(1).sum()) for s in range(world)]
        assert counts.tolist() == sent
    assert all(not st.pad.tensor.any() for st in states)


#: A small tile (pointer loads: the interpreter's), every other launch option the op's default.
SMALL_TILE = tp_gemm.GemmConfig(block_m=16, block_n=16, block_k=16, num_warps=4, num_stages=2, tma=False)


def _ints(gen, *shape):
    return torch.randint(-2, 3, shape, generator=gen).float()


@pytest.mark.parametrize("world", [5, 8])
def test_tensor_parallel_gemms_with_default_chunking(world):
    shard, k, n = 8, 16, 32
    m = world * shard
    gen = torch.Generator().manual_seed(world)
    shards, b = [_ints(gen, shard, k) for _ in range(world)], _ints(gen, k, n)
    parts = [(_ints(gen, m, k), _ints(gen, k, n)) for _ in range(world)]
    ag = tp_gemm.AllGatherMatmul.create_all(
        world, alloc=sim.symmetric_scratch, m=m, k=k, n=n, dtype=torch.float32, config=SMALL_TILE
    )
    rs = tp_gemm.MatmulReduceScatter.create_all(
        world, alloc=sim.symmetric_scratch, m=m, k=k, n=n, dtype=torch.float32, config=SMALL_TILE
    )

    def body(rank):
        gathered = tp_gemm.all_gather_matmul(ag[rank], shards[rank], b)
        return gathered, tp_gemm.matmul_reduce_scatter(rs[rank], *parts[rank])

    total = sum(a @ w for a, w in parts)
    for rank, (gathered, scattered) in enumerate(sim.run(body, world, timeout=300)):
        assert torch.equal(gathered, torch.cat(shards) @ b), f"rank {rank}"
        assert torch.equal(scattered, total[rank * shard : (rank + 1) * shard]), f"rank {rank}"
    for s in ag + rs:
        assert not s.flags.tensor.any() and not s.pad.tensor.any()
