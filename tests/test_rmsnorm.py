"""All-reduce + residual + RMSNorm in the CPU simulator, against float64 torch references."""

import dataclasses
import random
import re
import time
from pathlib import Path

import pytest
import torch

from castpile.gpu import collectives, sim
from castpile.gpu.fused import rmsnorm
from compile_sm90 import Job, compile_for_sm90
from testkit import rank1_after_rank0

ROOT = Path(__file__).resolve().parents[1]
ROWS, D = 6, 40  # more rows than blocks; with block=16 every row takes three passes, the last ragged
EPS = 1e-5
TOLERANCE = {torch.float32: dict(rtol=2e-6, atol=1e-6), torch.bfloat16: dict(rtol=2**-7, atol=0)}


def _data(world, dtype, seed):
    """Integer-valued partial sums and residual (so sums and the residual are exact) and a weight."""
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randint(-8, 9, (ROWS, D), generator=gen).to(dtype) for _ in range(world)]
    residual = torch.randint(-8, 9, (ROWS, D), generator=gen).to(dtype)
    weight = (torch.randint(1, 9, (D,), generator=gen) / 4).to(dtype)
    return xs, residual, weight


def _reference(xs, residual, weight):
    """(new residual, y) from the spec, in float64."""
    h = torch.stack(xs).double().sum(0) + (0 if residual is None else residual.double())
    hb = h.to(xs[0].dtype).double()
    y = hb / torch.sqrt((hb * hb).mean(-1, keepdim=True) + EPS) * weight.double()
    return hb.to(xs[0].dtype), y


def _handles(world, dtype, max_blocks=3):
    handles = sim.symmetric_empty(world, (ROWS, D), dtype)
    return [dataclasses.replace(h, max_blocks=max_blocks) for h in handles]


def _check(outs, expected, dtype, what):
    new_residual, y = expected
    for rank, (res, out) in enumerate(outs):
        assert res is None or torch.equal(res, new_residual), f"{what}: rank {rank}'s residual"
        torch.testing.assert_close(out.double(), y.to(dtype).double(), **TOLERANCE[dtype], msg=f"{what}: rank {rank}")
        assert torch.equal(out, outs[0][1]), f"{what}: rank {rank}'s output differs from rank 0's"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_fused_ops_match_torch(world, dtype):
    """Both kernels, with and without residual, in two passes (block 16) then one, ranks out of step, outputs NaN-filled.

    Low-latency all-reduces on the same tensor come between the fused calls:
    the two kernels share the scratch and its epochs.
    """
    handles = _handles(world, dtype)
    calls = [(method, with_residual, it) for it in range(2) for method in rmsnorm.METHODS for with_residual in (1, 0)]
    data = {call: _data(world, dtype, 1000 * world + n) for n, call in enumerate(calls)}

    def body(rank):
        rng = random.Random(rank * 7919 + world)
        results = {}
        for call in calls:
            method, with_residual, it = call
            block = 16 if it == 0 else None
            xs, residual, weight = data[call]
            time.sleep(rng.uniform(0, 0.03))
            symm = handles[rank]
            symm.tensor.copy_(xs[rank])
            out = torch.full_like(xs[rank], float("nan"))
            if with_residual:
                mine = residual.clone()
                rmsnorm.all_reduce_residual_rmsnorm(symm, mine, weight, EPS, out, method=method, block=block)
                results[call] = (mine, out)
            else:
                results[call] = (None, rmsnorm.all_reduce_rmsnorm(symm, weight, EPS, out, method=method, block=block))
            symm.tensor.copy_(xs[rank])
            results[call, "all_reduce"] = collectives.all_reduce_low_latency(symm).clone()
        return results

    outs = sim.run(body, world, timeout=300)
    for call in calls:
        xs, residual, weight = data[call]
        _check([o[call] for o in outs], _reference(xs, residual if call[1] else None, weight), dtype, call)
        for o in outs:
            assert torch.equal(o[call, "all_reduce"], torch.stack(xs).float().sum(0).to(dtype)), call
    assert all(int(h.signal_pad.abs().sum()) == 0 for h in handles)


@pytest.mark.parametrize("block", [None, 8, 64])
def test_row_passes_and_default_block(block):
    """A row in one pass (the default: the row up to MAX_BLOCK), in five ragged passes, or in one padded pass."""
    world, dtype = 2, torch.bfloat16
    handles = _handles(world, dtype)
    xs, residual, weight = _data(world, dtype, 7)

    def body(rank):
        handles[rank].tensor.copy_(xs[rank])
        mine = residual.clone()
        out = rmsnorm.all_reduce_residual_rmsnorm(handles[rank], mine, weight, EPS, block=block, method="one_shot")
        return mine, out

    _check(sim.run(body, world, timeout=120), _reference(xs, residual, weight), dtype, f"block {block}")


@pytest.mark.parametrize("world", [2, 3])
def test_low_latency_rows_cut_into_tiles_over_blocks(world):
    """Rows of 520 elements in tiles of 128 (five a row, the last ragged) over the simulator's four blocks.

    Tiles of a row land on different blocks; the block that arrives last normalises
    the row.  Three calls, so that the arrival counts must have gone back to zero.
    """
    dtype, rows, d = torch.bfloat16, 6, 520
    handles = sim.symmetric_empty(world, (rows, d), dtype)
    assert handles[0].low_latency.epochs.numel() == 4
    gen = torch.Generator().manual_seed(world)
    data = [
        (
            [torch.randint(-8, 9, (rows, d), generator=gen).to(dtype) for _ in range(world)],
            torch.randint(-8, 9, (rows, d), generator=gen).to(dtype),
            (torch.randint(1, 9, (d,), generator=gen) / 4).to(dtype),
        )
        for _ in range(3)
    ]

    def body(rank):
        results = []
        for xs, residual, weight in data:
            handles[rank].tensor.copy_(xs[rank])
            mine = residual.clone()
            out = rmsnorm.all_reduce_residual_rmsnorm(handles[rank], mine, weight, EPS, block=128)
            results.append((mine, out))
        return results

    outs = sim.run(body, world, timeout=300)
    for call, (xs, residual, weight) in enumerate(data):
        h = torch.stack(xs).double().sum(0) + residual.double()
        hb = h.to(dtype)
        y = hb.double() / torch.sqrt((hb.double() ** 2).mean(-1, keepdim=True) + EPS) * weight.double()
        _check([o[call] for o in outs], (hb, y), dtype, f"call {call}")


def test_removing_the_barrier_breaks_the_one_shot():
    """Rank 1 writes its input after rank 0 returned: only the barriers make rank 0 wait for it.

    Inputs whose sums are all +-2 with eps = 0 make every step exact: y = sign * weight.
    """
    world, dtype = 2, torch.float32
    handles = _handles(world, dtype, max_blocks=2)
    signs = torch.randint(0, 2, (ROWS, D), generator=torch.Generator().manual_seed(3)) * 2 - 1
    xs = [signs.to(dtype), signs.to(dtype)]
    weight = torch.arange(1, D + 1, dtype=dtype)
    expected = (signs * weight).to(dtype)

    def run(symm, barrier):
        return rmsnorm.all_reduce_rmsnorm(symm, weight, 0.0, method="one_shot", barrier=barrier)

    assert rank1_after_rank0(handles, xs, run, lambda inputs, r: expected, barrier=True) == [True, True]
    assert not rank1_after_rank0(handles, xs, run, lambda inputs, r: expected, barrier=False)[0]


def test_bad_arguments_are_reported():
    symm = sim.symmetric_empty(1, (ROWS, D), torch.float32)[0]
    weight = torch.ones(D)
    with pytest.raises(ValueError, match=re.escape("weight must be a contiguous torch.float32 tensor of shape")):
        rmsnorm.all_reduce_rmsnorm(symm, torch.ones(D + 1))
    with pytest.raises(ValueError, match="residual must be"):
        rmsnorm.all_reduce_residual_rmsnorm(symm, torch.ones(ROWS, D, dtype=torch.bfloat16), weight)
    with pytest.raises(ValueError, match="method must be one of low_latency, one_shot"):
        rmsnorm.all_reduce_rmsnorm(symm, weight, method="two_shot")
    flat = sim.symmetric_empty(1, (ROWS * D,), torch.float32)[0]
    with pytest.raises(ValueError, match="contiguous 2-D"):
        rmsnorm.all_reduce_rmsnorm(flat, weight)
    big = sim.symmetric_empty(1, (128, 1024), torch.float32)[0]  # 512 KB: no low-latency scratch
    with pytest.raises(ValueError, match="no low-latency scratch"):
        rmsnorm.all_reduce_rmsnorm(big, torch.ones(1024), method="low_latency")


@pytest.mark.parametrize("world", [2, 3])
def test_low_latency_whole_rows_leave_the_tile_sums_and_counts_alone(world):
    """A tile that holds a whole row (rows of 40, tiles of 64 bf16): each block normalises its rows from registers;
    tile sums and arrival counts filled with garbage first are neither read nor written."""
    dtype = torch.bfloat16
    handles = sim.symmetric_empty(world, (ROWS, D), dtype)
    for h in handles:
        h.low_latency.tile_sums.fill_(float("nan"))
        h.low_latency.row_arrivals.fill_(-7)
    data = [_data(world, dtype, 50 + call) for call in range(2)]

    def body(rank):
        h = handles[rank]
        results = []
        for xs, residual, weight in data:
            h.tensor.copy_(xs[rank])
            mine = residual.clone()
            out = rmsnorm.all_reduce_residual_rmsnorm(h, mine, weight, EPS, block=64)
            results.append((mine, out))
        untouched = bool(h.low_latency.tile_sums.isnan().all()) and bool((h.low_latency.row_arrivals == -7).all())
        return results, untouched

    outs = sim.run(body, world, timeout=300)
    for call, (xs, residual, weight) in enumerate(data):
        _check([o[0][call] for o in outs], _reference(xs, residual, weight), dtype, f"call {call}")
    assert all(untouched for _, untouched in outs)


def test_kernels_compile_for_sm90(tmp_path):
    module = ROOT / "castpile" / "gpu" / "fused" / "rmsnorm_kernels_triton.py"
    common = {
        "residual": "*bf16",
        "weight": "*bf16",
        "out": "*bf16",
        "rank": "i32",
        "rows": "i32",
        "D": "i32",
        "eps": "fp32",
        "WORLD": "constexpr",
        "BLOCK": "constexpr",
    }
    ll = {
        "buf": "*bf16",
        "ll": "*i64",
        "ll_ptrs": "*i64",
        "epochs": "*i32",
        "partials": "*fp32",
        "arrivals": "*i32",
        **common,
        "SEGMENTS": "constexpr",
        "NORM_BLOCK": "constexpr",
        "HAS_RESIDUAL": "constexpr",
        "WHOLE_ROWS": "constexpr",
    }
    one_shot = {
        "buf": "*bf16",
        "buf_ptrs": "*i64",
        "pad": "*i32",
        "pad_ptrs": "*i64",
        **common,
        "HAS_RESIDUAL": "constexpr",
        "ONE_PASS": "constexpr",
        "BARRIER": "constexpr",
    }
    jobs = []
    for has_residual in (True, False):
        suffix = "-residual" if has_residual else ""
        for whole in (False, True):
            jobs.append(
                Job(
                    module,
                    "low_latency_rmsnorm",
                    ll,
                    {
                        "WORLD": 2,
                        "BLOCK": 8192 if whole else 1024,
                        "SEGMENTS": 1 if whole else 8,
                        "NORM_BLOCK": 4096,
                        "HAS_RESIDUAL": has_residual,
                        "WHOLE_ROWS": whole,
                    },
                    name=f"ll{'-whole' if whole else ''}{suffix}",
                )
            )
        for one_pass in (True, False):
            constexprs = {
                "WORLD": 2,
                "BLOCK": 8192 if one_pass else 4096,
                "HAS_RESIDUAL": has_residual,
                "ONE_PASS": one_pass,
                "BARRIER": True,
            }
            jobs.append(
                Job(
                    module,
                    "one_shot_rmsnorm",
                    one_shot,
                    constexprs,
                    name=f"one_shot-{'one' if one_pass else 'two'}-pass{suffix}",
                )
            )
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items() if not r.ok}
    for name, result in results.items():
        ptx = result.ptx.read_text()
        assert "sqrt.rn.f32" in ptx and "div.rn.f32" in ptx, name
        assert ("ld.volatile.global" in ptx) == name.startswith("ll"), name
        if name.startswith("ll"):  # the arrival count, only where tiles of a row meet
            assert ("atom.global.gpu.acq_rel.add" in ptx) != name.startswith("ll-whole"), name


def test_a_call_with_its_output_given_allocates_nothing(monkeypatch):
    """cudagraph trees reject tensors allocated during a warm-up call: the state comes with the scratch."""
    symm = sim.symmetric_empty(1, (ROWS, D), torch.float32)[0]
    xs, residual, weight = _data(1, torch.float32, 5)
    symm.tensor.copy_(xs[0])
    out = torch.empty(ROWS, D)

    def no_allocation(*args, **kwargs):
        raise AssertionError("the fused op allocated a tensor during a call")

    for name in ("empty", "zeros", "empty_like", "zeros_like", "full"):
        monkeypatch.setattr(torch, name, no_allocation)
    mine = residual.clone()
    rmsnorm.all_reduce_residual_rmsnorm(symm, mine, weight, EPS, out, method="low_latency")
    monkeypatch.undo()
    _check([(mine, out)], _reference(xs, residual, weight), torch.float32, "world 1")


@pytest.mark.parametrize(
    "method,block", [("one_shot", 24), ("one_shot", 0), ("low_latency", 1), ("low_latency", 0), ("low_latency", 48)]
)
def test_a_block_that_is_not_a_power_of_two_or_splits_a_word_is_refused(method, block):
    """block=1 of bf16 made the low-latency kernel's tiles zero words wide: it returned garbage."""
    symm = sim.symmetric_empty(1, (ROWS, D), torch.bfloat16)[0]
    with pytest.raises(ValueError, match="block must be a power of two"):
        rmsnorm.all_reduce_rmsnorm(symm, torch.ones(D, dtype=torch.bfloat16), method=method, block=block)
