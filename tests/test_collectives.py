"""Collectives in the CPU simulator: W forked ranks against torch references."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import dataclasses
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import castpile
from castpile import collectives, sim

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "castpile" / "collectives" / "kernels.py"
KERNELS_TRITON = ROOT / "castpile" / "collectives" / "kernels_triton.py"

N = 200  # all-reduce elements: several tiles, a ragged last tile and, for W=3, ragged chunks
M = 37  # per-rank elements of all-gather and reduce-scatter
TILE = 16
ITERS = 2


def _inputs(world, dtype, seed, shape):
    """Integer-valued data, so that sums are exact in bf16 as in fp32."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(-8, 9, shape, generator=gen).to(dtype) for _ in range(world)]


def _handles(world, shape, dtype, max_blocks):
    handles = sim.symmetric_empty(world, shape, dtype)
    for h in handles:
        h.tensor.fill_(float("nan"))
    return [dataclasses.replace(h, max_blocks=max_blocks) for h in handles]


CASES = {
    # name: (symmetric shape, run(symm) -> result, reference(inputs, rank))
    "one_shot": ((N,), lambda s, **kw: collectives.all_reduce_one_shot(s, block=TILE, **kw).clone(),
                 lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype)),
    "two_shot": ((N,), lambda s, **kw: collectives.all_reduce_two_shot(s, block=TILE, **kw).clone(),
                 lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype)),
    "all_gather": ((M,), lambda s, **kw: collectives.all_gather(s, block=TILE, **kw),
                   lambda xs, r: torch.stack(xs)),
    "reduce_scatter": (None, lambda s, **kw: collectives.reduce_scatter(s, block=TILE, **kw),
                       lambda xs, r: torch.stack(xs).float().sum(0).to(xs[0].dtype).chunk(len(xs))[r]),
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
    data = {(name, it): _inputs(world, dtype, 100 * world + 10 * i + it, _shape(name, world))
            for i, name in enumerate(CASES) for it in range(ITERS)}

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
        for rank in range(world) for name in CASES for it in range(ITERS)
        if not torch.equal(outs[rank][name, it], CASES[name][2](data[name, it], rank))
    ]
    assert not bad, f"wrong results: {bad}"
    for name in CASES:
        assert all(int(h.signal_pad.abs().sum()) == 0 for h in handles[name]), f"{name} left signals behind"


@pytest.mark.parametrize("name", list(CASES))
def test_removing_the_barrier_breaks_the_result(name):
    """Rank 1 writes its input only once rank 0 has returned from the collective.

    Without the barrier rank 0 returns having read rank 1's stale (NaN) buffer.
    With it rank 0 cannot return first, so rank 1 gives up waiting after 2 s;
    rank 0 then waits for its input, and both results are exact.
    """
    world = 2
    handles = _handles(world, _shape(name, world), torch.float32, max_blocks=2)
    inputs = _inputs(world, torch.float32, 5, _shape(name, world))
    rank0_done = sim.shared_empty((1,), torch.int32)

    def body(rank, barrier):
        give_up = time.monotonic() + (2.0 if barrier else float("inf"))
        while rank == 1 and not rank0_done.item() and time.monotonic() < give_up:
            time.sleep(0.01)
        handles[rank].tensor.copy_(inputs[rank])
        out = CASES[name][1](handles[rank], barrier=barrier)
        rank0_done.fill_(1)
        return out

    def exact(barrier):
        rank0_done.zero_()
        for h in handles:
            h.tensor.fill_(float("nan"))
        outs = sim.run(body, world, args=(barrier,), timeout=60)
        return all(torch.equal(outs[r], CASES[name][2](inputs, r)) for r in range(world))

    assert exact(barrier=True)
    assert not exact(barrier=False)


def test_a_rank_that_skips_a_collective_is_reported_as_hung_peers():
    handles = _handles(3, (N,), torch.float32, max_blocks=2)

    def body(rank):
        handles[rank].tensor.fill_(1.0)
        if rank != 1:
            collectives.all_reduce_one_shot(handles[rank], block=TILE)

    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, 3, timeout=5)
    assert info.value.hung == [0, 2]


def test_checked_in_kernels_are_the_transpiled_source():
    source = KERNELS.read_bytes()
    assert castpile.transpile(source, str(KERNELS.relative_to(ROOT))) == KERNELS_TRITON.read_bytes()


def test_collectives_import_without_the_transpiler_dependencies():
    """The GPU image has triton but no libcst: the generated module must suffice."""
    code = "import sys, castpile.collectives; print(sorted(m for m in ('libcst', 'sympy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


COMPILE_FOR_SM90 = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from castpile.collectives import kernels_triton as k
for dt in ("fp32", "bf16"):
    for fn in (k.one_shot_all_reduce, k.two_shot_all_reduce, k.all_gather, k.reduce_scatter):
        types = {"buf": "*" + dt, "buf_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64", "out": "*" + dt}
        sig = {a: types.get(a, "i32") for a in fn.arg_names}
        sig.update(WORLD="constexpr", BLOCK="constexpr", BARRIER="constexpr")
        ptx = triton.compile(ASTSource(fn, sig, {"WORLD": 2, "BLOCK": 1024, "BARRIER": True}),
                             target=GPUTarget("cuda", 90, 32)).asm["ptx"]
        assert "atom.global.release.sys.cas" in ptx and "atom.global.sys.acquire" in ptx, fn.__name__
"""


def test_kernels_compile_for_the_gpu_with_system_scope_atomics():
    """The interpreter does not compile; this does (for sm_90, on the CPU)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", COMPILE_FOR_SM90], cwd=ROOT, env=env, check=True,
                   capture_output=True, text=True)
