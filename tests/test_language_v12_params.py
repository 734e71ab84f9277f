"""Language v1.2, multicast tensors as helper arguments: kernels whose communication lives in @triton.jit helpers
taking castpile.Multicast parameters, run on W = 2, 3, 4 simulated ranks (castpile.gpu.sim) under both strategies
and checked against torch on the same data.  The sm_90 compiles: tests/test_compile_sm90.py, and here those of the
remote="nvshmem" kernels (up to linking NVSHMEM, which this CPU machine lacks)."""

from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90
from testkit import transpiled_module

KERNELS = Path(__file__).parent / "kernels_v12_params.py"
REMOTE_KERNELS = Path(__file__).parent / "kernels_v12_params_remote.py"


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    return transpiled_module(KERNELS, request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    return transpiled_module(REMOTE_KERNELS, "loop", tmp_path_factory.mktemp("remote"))


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
        k.all_reduce_gather[(1,)](
            xs[rank],
            mine.tensor,
            mine.buffer_ptrs,
            mine.signal_pad,
            mine.signal_pad_ptrs,
            sums,
            others,
            rows.tensor,
            rows.buffer_ptrs,
            rank,
            n,
            world,
            block,
        )
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
        k.columns_and_counters[(1,)](
            srcs[rank].tensor,
            srcs[rank].buffer_ptrs,
            counters[rank].tensor,
            counters[rank].buffer_ptrs,
            out,
            rank,
            m,
            n,
            world,
            block,
        )
        return out

    expected = torch.zeros(n, block)
    expected[:, :m] = torch.stack([handle.tensor for handle in srcs]).sum(0)  # column j of the transposes: row j
    for out in sim.run(body, world, timeout=120):
        assert torch.equal(out, expected)
    assert not counters[0].tensor.any()
    for handle in counters[1:]:
        assert torch.equal(handle.tensor, torch.full((block,), world * (world + 1) // 2, dtype=torch.int32))


@pytest.mark.parametrize("world", [2, 3, 4])
def test_one_peer_through_a_helper_defined_after_the_kernel(k, world):
    block = 8
    flags = sim.symmetric_empty(world, (block + 2,), torch.int32)
    for handle in flags:
        handle.tensor.zero_()

    def body(rank):
        k.stamp_next[(1,)](flags[rank].tensor, flags[rank].buffer_ptrs, rank, world, block)

    sim.run(body, world, timeout=120)
    for rank, handle in enumerate(flags):
        stamped = (rank - 1) % world + 1  # by the rank before it
        assert handle.tensor.tolist() == [stamped] * block + [0, 0]


@pytest.mark.parametrize("world", [2, 3, 4])
def test_one_helper_with_and_without_shape(k, world):
    """A helper that receives a tensor with shape= and one without: the first masked to its extent, the second not,
    the index (read by an atomic) evaluated once either way."""
    n, block, start = 5, 8, 2
    srcs = sim.symmetric_empty(world, (block + start,), torch.float32)
    for rank, handle in enumerate(srcs):
        handle.tensor.copy_(values((block + start,), 30 + rank))

    def body(rank):
        out, ctr = torch.full((2, block), float("nan")), torch.tensor([start], dtype=torch.int32)
        k.with_and_without_shape[(1,)](srcs[rank].tensor, srcs[rank].buffer_ptrs, ctr, out, n, world, block)
        return out, ctr

    total = torch.stack([handle.tensor for handle in srcs]).sum(0)[start:]
    for out, ctr in sim.run(body, world, timeout=120):
        assert torch.equal(out[0], torch.where(torch.arange(block) + start < n, total, 0.0))
        assert torch.equal(out[1], total)
        assert ctr.item() == start


@pytest.mark.parametrize(("world", "lws"), [(2, 1), (3, 2), (4, 2)])
def test_remote_bindings_through_helpers(remote, world, lws):
    """remote="nvshmem" tables passed to helpers: a barrier, a sum and a push all-gather, with the peers on
    other simulated nodes reached through the NVSHMEM stand-in."""
    n, block = 6, 8
    xs = [values((n,), 20 + seed) for seed in range(world)]
    bufs = sim.symmetric_empty(world, (n,), torch.float32, local_world_size=lws)
    gathered = sim.symmetric_empty(world, (world, n), torch.float32, local_world_size=lws)
    for handle in gathered:
        handle.tensor.fill_(float("nan"))

    def body(rank):
        mine, rows = bufs[rank], gathered[rank]
        sums = torch.full((n,), float("nan"))
        remote.all_reduce_gather_remote[(1,)](
            xs[rank],
            mine.tensor,
            mine.remote_ptrs,
            mine.signal_pad,
            mine.signal_pad_remote_ptrs,
            sums,
            rows.tensor,
            rows.remote_ptrs,
            rank,
            n,
            world,
            block,
        )
        return sums

    for sums in sim.run(body, world, timeout=120):
        assert torch.equal(sums, torch.stack(xs).sum(0))
    for handle in gathered:
        assert torch.equal(handle.tensor, torch.stack(xs))
    for handle in bufs:
        assert not handle.signal_pad.any(), "the barrier left a signal behind"


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_remote_kernels_compile_for_sm90_up_to_nvshmem_linking(tmp_path, strategy):
    module = tmp_path / f"kernels_v12_params_remote_{strategy}.py"
    module.write_bytes(castpile.transpile(REMOTE_KERNELS.read_bytes(), str(REMOTE_KERNELS), strategy=strategy))
    pointers = dict.fromkeys(("x", "buf", "sums", "gathered"), "*fp32")
    tables = dict.fromkeys(("buf_ptrs", "pad_ptrs", "gathered_ptrs"), "*i64")
    signature = {
        **pointers,
        **tables,
        "pad": "*i32",
        "rank": "i32",
        "n": "i32",
        "WORLD": "constexpr",
        "BLOCK": "constexpr",
    }
    order = [
        "x",
        "buf",
        "buf_ptrs",
        "pad",
        "pad_ptrs",
        "sums",
        "gathered",
        "gathered_ptrs",
        "rank",
        "n",
        "WORLD",
        "BLOCK",
    ]
    jobs = [
        Job(
            module,
            "all_reduce_gather_remote",
            {name: signature[name] for name in order},
            {"WORLD": world, "BLOCK": 16},
            name=f"W{world}",
            nvshmem=True,
        )
        for world in (2, 3, 4)
    ]
    failures = {name: r.error for name, r in compile_for_sm90(jobs, tmp_path).items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
