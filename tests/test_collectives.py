"""Collectives in the CPU simulator: W forked ranks against torch references."""

import dataclasses
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from castpile.gpu import collectives, sim
from compile_sm90 import Job, compile_for_sm90
from testkit import rank1_after_rank0

ROOT = Path(__file__).resolve().parents[1]

N = 200  # all-reduce elements: several tiles, a ragged last tile and, for W=3, ragged chunks
M = 37  # per-rank elements of all-gather and reduce-scatter
TILE = 16
ITERS = 2


def _inputs(world, dtype, seed, shape):
    """Integer-valued data, so that sums are exact in bf16 as in fp32."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(-8, 9, shape, generator=gen).to(dtype) for _ in range(world)]


def _handles(world, shape, dtype, max_blocks):
    handles = sim.symmetric_empty(world, shape, dtype, push_scratch=True)
    for h in handles:
        h.tensor.fill_(float("nan"))
    return [dataclasses.replace(h, max_blocks=max_blocks) for h in handles]


CASES = {
    # name: (symmetric shape, run(symm) -> result, reference(inputs, rank))
    "one_shot": (
        (N,),
        lambda s, **kw: collectives.all_reduce_one_shot(s, block=TILE, **kw).clone(),
        lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype),
    ),
    "two_shot": (
        (N,),
        lambda s, **kw: collectives.all_reduce_two_shot(s, block=TILE, push=False, **kw).clone(),
        lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype),
    ),
    "two_shot_push": (
        (N,),
        lambda s, **kw: collectives.all_reduce_two_shot(s, block=TILE, push=True, **kw).clone(),
        lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype),
    ),
    "all_gather": ((M,), lambda s, **kw: collectives.all_gather(s, block=TILE, **kw), lambda xs, r: torch.stack(xs)),
    "reduce_scatter": (
        None,
        lambda s, **kw: collectives.reduce_scatter(s, block=TILE, **kw),
        lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype).chunk(len(xs))[r],
    ),
}


def _shape(name, world):
    shape = CASES[name][0]
    return (world * M,) if shape is None else shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_collectives_match_torch(world, dtype):
    """Every collective, ITERS calls each with fresh data, ranks started at random times."""
    # Three blocks at most: each walks several tiles, as on a GPU with large inputs.
    handles = {name: _handles(world, _shape(name, world), dtype, max_blocks=3) for name in CASES}
    data = {
        (name, it): _inputs(world, dtype, 100 * world + 10 * i + it, _shape(name, world))
        for i, name in enumerate(CASES)
        for it in range(ITERS)
    }

    def body(rank):
        rng = random.Random(rank * 7919 + world)
        results = {}
        for it in range(ITERS):
            for name, (_, run, _) in CASES.items():
                time.sleep(rng.uniform(0, 0.05))
                symm = handles[name][rank]
                symm.tensor.copy_(data[name, it][rank])
                results[name, it] = run(symm)
        return results

    outs = sim.run(body, world, timeout=150)
    bad = [
        f"{name} iteration {it} rank {rank}"
        for rank in range(world)
        for name in CASES
        for it in range(ITERS)
        if not torch.equal(outs[rank][name, it], CASES[name][2](data[name, it], rank))
    ]
    assert not bad, f"wrong results: {bad}"
    for name in CASES:
        assert all(int(h.signal_pad.abs().sum()) == 0 for h in handles[name]), f"{name} left signals behind"


@pytest.mark.parametrize("name", list(CASES))
def test_removing_the_barrier_breaks_the_result(name):
    """Rank 1 writes its input only once rank 0 has returned from the collective (testkit.rank1_after_rank0).

    Without the barrier rank 0 returns before rank 1's input exists (it read rank 1's
    stale NaN buffer, or, pushing, a scratch row rank 1 had not written); with it both
    results are exact.
    """
    world = 2
    handles = _handles(world, _shape(name, world), torch.float32, max_blocks=2)
    inputs = _inputs(world, torch.float32, 5, _shape(name, world))
    run, reference = CASES[name][1], CASES[name][2]
    assert rank1_after_rank0(handles, inputs, run, reference, barrier=True) == [True, True]
    assert not rank1_after_rank0(handles, inputs, run, reference, barrier=False)[0]


def test_a_rank_that_skips_a_collective_is_reported_as_hung_peers():
    handles = _handles(3, (N,), torch.float32, max_blocks=2)

    def body(rank):
        handles[rank].tensor.fill_(1.0)
        if rank != 1:
            collectives.all_reduce_one_shot(handles[rank], block=TILE)

    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, 3, timeout=5, races=False)  # a hang, timed: no recording
    assert info.value.hung == [0, 2]


def test_collectives_import_without_the_transpiler_dependencies():
    """The GPU image has triton but no libcst: the generated module must suffice."""
    code = "import sys, castpile.gpu.collectives; print(sorted(m for m in ('libcst', 'sympy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_kernels_compile_for_the_gpu_with_system_scope_atomics(tmp_path):
    """The interpreter does not compile; this does (for sm_90, on the CPU)."""
    from castpile.gpu.collectives import kernels_triton as k

    module = "castpile.gpu.collectives.kernels_triton"
    barriers = (
        k.one_shot_all_reduce,
        k.two_shot_all_reduce,
        k.two_shot_push_all_reduce,
        k.all_gather,
        k.reduce_scatter,
    )
    jobs = []
    for dt in ("fp32", "bf16"):
        ll_sig = {
            "buf": "*" + dt,
            "ll": "*i64",
            "ll_ptrs": "*i64",
            "epochs": "*i32",
            "out": "*" + dt,
            "rank": "i32",
            "m": "i32",
            "WORLD": "constexpr",
            "BLOCK": "constexpr",
        }
        jobs.append(Job(module, "low_latency_all_reduce", ll_sig, {"WORLD": 2, "BLOCK": 512}, name=f"ll-{dt}"))
        types = {
            "buf": "*" + dt,
            "buf_ptrs": "*i64",
            "pad": "*i32",
            "pad_ptrs": "*i64",
            "out": "*" + dt,
            "scratch": "*" + dt,
            "scratch_ptrs": "*i64",
        }
        for fn in barriers:
            sig = {a: types.get(a, "i32") for a in fn.arg_names}
            sig.update(WORLD="constexpr", BLOCK="constexpr", BARRIER="constexpr")
            constexprs = {"WORLD": 2, "BLOCK": 1024, "BARRIER": True}
            jobs.append(Job(module, fn.__name__, sig, constexprs, name=f"{fn.__name__}-{dt}"))
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items() if not r.ok}
    for dt in ("fp32", "bf16"):
        ll = results[f"ll-{dt}"].ptx.read_text()
        # Words are published with relaxed system-scope exchanges (a plain store polled by a volatile load is a data
        # race, docs/races.md) and polled with volatile loads; nothing acquires or releases.
        atomics = set(re.findall(r"atom\.global\.[a-z0-9.]+", ll))
        assert "ld.volatile.global" in ll and atomics == {"atom.global.sys.relaxed.exch.b64"}, atomics
        for fn in barriers:
            ptx = results[f"{fn.__name__}-{dt}"].ptx.read_text()
            assert "atom.global.release.sys.cas" in ptx and "atom.global.sys.acquire" in ptx, fn.__name__


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_low_latency_all_reduce_matches_torch(world, dtype):
    """Five calls (both epoch slots, twice over) with fresh data each, ranks started at random times."""
    handles = sim.symmetric_empty(world, (N,), dtype)
    calls = 5
    data = [_inputs(world, dtype, 1000 * world + c, (N,)) for c in range(calls)]

    def body(rank):
        rng = random.Random(rank * 104729 + world)
        results = []
        for c in range(calls):
            time.sleep(rng.uniform(0, 0.03))
            handles[rank].tensor.copy_(data[c][rank])
            run = collectives.all_reduce if c % 2 else collectives.all_reduce_low_latency
            results.append(run(handles[rank]).clone())
        return results

    outs = sim.run(body, world, timeout=150)
    for c in range(calls):
        expect = torch.stack(data[c]).float().sum(0).to(dtype)
        assert all(torch.equal(outs[r][c], expect) for r in range(world)), f"call {c}"


def test_low_latency_scratch_only_where_it_applies():
    assert sim.symmetric_empty(2, (N,), torch.bfloat16)[0].low_latency.words == N // 2
    assert sim.symmetric_empty(2, (N + 1,), torch.bfloat16)[0].low_latency is None  # not whole words
    assert sim.symmetric_empty(2, (N,), torch.int32)[0].low_latency is None
    assert sim.symmetric_empty(2, ((256 << 10) // 4 + 1,), torch.float32)[0].low_latency is None  # > 256 KB


def test_all_reduce_without_low_latency_scratch_is_one_shot_and_low_latency_says_why():
    handles = sim.symmetric_empty(2, (N + 1,), torch.bfloat16)
    inputs = _inputs(2, torch.bfloat16, 9, (N + 1,))

    def body(rank):
        handles[rank].tensor.copy_(inputs[rank])
        return collectives.all_reduce(handles[rank])

    assert all(torch.equal(o, torch.stack(inputs).float().sum(0).to(torch.bfloat16)) for o in sim.run(body, 2))
    with pytest.raises(ValueError, match="no low-latency scratch"):
        collectives.all_reduce_low_latency(handles[0])


def test_pushing_two_shot_needs_its_scratch_and_is_chosen_above_the_threshold(monkeypatch):
    plain = sim.symmetric_empty(2, (N,), torch.float32)[0]
    with pytest.raises(ValueError, match="push_scratch=True"):
        collectives.all_reduce_two_shot(plain, push=True)
    with pytest.raises(ValueError, match="powers of two up to 4096"):
        collectives.all_reduce_two_shot(
            sim.symmetric_empty(2, (N,), torch.float32, push_scratch=True)[0], block=8192, push=True
        )
    chosen = []
    monkeypatch.setattr(collectives, "_issue", lambda symm, key, *a, **k: chosen.append(key[0]))
    big = sim.symmetric_empty(2, ((4 << 20) // 4 + 4,), torch.float32, push_scratch=True)[0]
    collectives.all_reduce_two_shot(big)
    collectives.all_reduce_two_shot(sim.symmetric_empty(2, (N,), torch.float32, push_scratch=True)[0])
    collectives.all_reduce_two_shot(sim.symmetric_empty(2, ((4 << 20) // 4 + 4,), torch.float32)[0])
    assert chosen == ["two_shot_push", "two_shot", "two_shot"]


def test_a_wrong_output_is_refused_before_launching():
    symm = sim.symmetric_empty(2, (N,), torch.float32)[0]
    with pytest.raises(ValueError, match=r"shape \(200,\)"):
        collectives.all_reduce_low_latency(symm, torch.empty(N - 1))
    with pytest.raises(ValueError, match="float32"):
        collectives.all_reduce_one_shot(symm, torch.empty(N, dtype=torch.float64))
    with pytest.raises(ValueError, match="not contiguous"):
        collectives.all_gather(symm, torch.empty(N, 2).t())


def test_ranks_out_of_step_in_low_latency_calls_hang_and_are_reported():
    """The epochs are load-bearing: ranks whose call counts differ each wait for data the other never sends."""
    handles = sim.symmetric_empty(2, (N,), torch.float32)
    handles[1].low_latency.epochs.fill_(1)

    def body(rank):
        handles[rank].tensor.fill_(1.0)
        return collectives.all_reduce_low_latency(handles[rank])

    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, 2, timeout=5)
    assert info.value.hung == [0, 1]
