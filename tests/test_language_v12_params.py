"""Language v1.2, multicast tensors as helper arguments: kernels whose communication lives in @triton.jit helpers
taking castpile.Multicast parameters, run on W = 2, 3, 4 simulated ranks (castpile.gpu.sim) under both strategies
and checked against torch on the same data.  Their sm_90 compiles: tests/test_compile_sm90.py."""

from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from testkit import transpiled_module

KERNELS = Path(__file__).parent / "kernels_v12_params.py"


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    return transpiled_module(KERNELS, request.param, tmp_path_factory.mktemp(request.param))


def values(shape, seed):
    """Integer-valued floats: exact in fp32, and in their sums."""
    return torch.randint(-8, 8, shape, generator=torch.Generator().manual_seed(seed)).float()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_all_reduce_and_all_gather_through_helpers(k, world):
    """A barrier, a sum over a table and over a ptr_mask tile through one helper (passed on to another), and a
    push all-gather: each rank's sums exact, every rank's gathered rows those of every rank."""
    n, block = 10, 16
    xs = [values((n,), seed) for seed in range(world)]
    bufs = sim.symmetric_empty(world, (n,), torch.float32)
    gathered = sim.symmetric_empty(world, (world, n), torch.float32)
    for handle in gathered:
        handle.tensor.fill_(float("nan"))

    def body(rank):
        mine, rows = bufs[rank], gathered[rank]
        sums, others = torch.full((n,), float("nan")), torch.full((n,), float("nan"))
        k.all_reduce_gather[(1,)](xs[rank], mine.tensor, mine.buffer_ptrs, mine.signal_pad, mine.signal_pad_ptrs,
                                  sums, others, rows.tensor, rows.buffer_ptrs, rank, n, world, block)
        return sums, others

    total = torch.stack(xs).sum(0)
    for rank, (sums, others) in enumerate(sim.run(body, world, timeout=120)):
        assert torch.equal(sums, total)
        assert torch.equal(others, total - xs[rank])
    for handle in gathered:
        assert torch.equal(handle.tensor, torch.stack(xs))
    for handle in bufs:
        assert not handle.signal_pad.any(), "the barrier left a signal behind"


@pytest.mark.parametrize("world", [2, 3, 4])
def test_strided_columns_and_atomics_through_helpers(k, world):
    """A transposed (strides=) 2-D binding read column by column in a helper, and atomics on every rank but
    rank 0 through another: the column sums exact on every rank, each counter the sum of the ranks' increments."""
    m, n, block = 5, 3, 8
    srcs = sim.symmetric_empty(world, (n, m), torch.float32)
    for rank, handle in enumerate(srcs):
        handle.tensor.copy_(values((n, m), 10 + rank))
    counters = sim.symmetric_empty(world, (block,), torch.int32)
    for handle in counters:
        handle.tensor.zero_()

    def body(rank):
        out = torch.full((n, block), float("nan"))
        k.columns_and_counters[(1,)](srcs[rank].tensor, srcs[rank].buffer_ptrs, counters[rank].tensor,
                                     counters[rank].buffer_ptrs, out, rank, m, n, world, block)
        return out

    expected = torch.zeros(n, block)
    expected[:, :m] = torch.stack([handle.tensor for handle in srcs]).sum(0)  # column j of the transposes: row j
    for out in sim.run(body, world, timeout=120):
        assert torch.equal(out, expected)
    assert not counters[0].tensor.any()
    for handle in counters[1:]:
        assert torch.equal(handle.tensor, torch.full((block,), world * (world + 1) // 2, dtype=torch.int32))
