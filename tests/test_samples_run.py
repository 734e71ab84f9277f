"""Every sample kernel, transpiled with each strategy, run in the interpreter on W host buffers.

A table of ``data_ptr()``s of W torch CPU tensors stands in for W GPUs.  Results
are checked against torch references (stack, sum, index assignment), never
against castpile's own output.  Buffers are longer than the ``n`` the kernel is
told, so writes past the buffers' shape are caught.

A Triton 3.6 interpreter bug shapes this file (docs/history.md (S3)): bf16
arithmetic is done on the raw uint16 bits, so bf16 appears only where data is
moved (fp16 stands in where it is computed on).  (The interpreter's atomics also
misread broadcast operands; castpile's helpers hand them fresh tensors, and the
atomics tests here run unpatched to prove it.)
"""

from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from testkit import address_table, import_file

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
STRATEGIES = ("loop", "gather")
DTYPES = (torch.float32, torch.bfloat16, torch.int32)  # kernels that only move data
ARITH_DTYPES = (torch.float32, torch.float16, torch.int32)  # kernels that compute
TAIL = 5  # extra elements behind every buffer; they must stay untouched
_modules = {}


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return tmp_path_factory.mktemp("samples_out")


def sample(outdir, name, strategy):
    """The transpiled sample ``name`` imported from a real file (Triton needs its source)."""
    key = (name, strategy)
    if key not in _modules:
        path = outdir / f"{name}_{strategy}.py"
        src = SAMPLES / f"{name}.py"
        path.write_bytes(castpile.transpile(src.read_bytes(), str(src), strategy=strategy))
        _modules[key] = import_file(path, f"castpile_sample_{name}_{strategy}")
    return _modules[key]


def values(shape, dtype, seed, low=-8, high=8):
    """Integer-valued data (exact in every dtype here, and in their sums)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def buffers(world, n, dtype, seed=0):
    """W buffers of n values each, plus an untouched tail; and their address table."""
    bufs = [torch.cat([values((n,), dtype, seed + w), torch.full((TAIL,), 99).to(dtype)]) for w in range(world)]
    return bufs, address_table(bufs)


def assert_tails(bufs, n):
    for b in bufs:
        assert (b[n:] == 99).all(), "an access wrote past the buffers' shape"


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_load_table(outdir, strategy, dtype, world):
    n, block = 70, 32
    bufs, ptrs = buffers(world, n, dtype)
    out = torch.full((world, n), -1).to(dtype)
    sample(outdir, "load_table", strategy).stack_copy[(3,)](out, ptrs, n, WORLD=world, BLOCK=block)
    assert torch.equal(out, torch.stack([b[:n] for b in bufs]))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype,world", [(torch.float32, 1), (torch.float32, 3), (torch.bfloat16, 4), (torch.int32, 2)])
def test_tile_2d_elements(outdir, strategy, dtype, world):
    m, n = 10, 12
    mod = sample(outdir, "tile_2d_elements", strategy)
    grid = (2, 2)
    bufs = [values((m, n), dtype, w) for w in range(world)]
    out = torch.full((world, m, n), -1).to(dtype)
    mod.stack_tiles[grid](out, address_table(bufs), m, n, WORLD=world, BI=8, BJ=8)
    assert torch.equal(out, torch.stack(bufs))

    transposed = [values((n, m), dtype, 10 + w) for w in range(world)]
    out = torch.full((world, m, n), -1).to(dtype)
    mod.stack_transposed[grid](out, address_table(transposed), m, n, WORLD=world, BI=8, BJ=8)
    assert torch.equal(out, torch.stack([b.T for b in transposed]))


TILES = [(1, 1), (2, 2), (2, 4), (4, 2)]


def tile_buffers(outdir, strategy, dtype, rows, cols, n):
    """The module, the R * C buffers (keep them alive: the table holds raw addresses), table, stack."""
    bufs, ptrs = buffers(rows * cols, n, dtype)
    stacked = torch.stack([b[:n] for b in bufs]).reshape(rows, cols, n)
    return sample(outdir, "pointer_tile_2d", strategy), bufs, ptrs, stacked


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,cols", TILES)
def test_pointer_tile_2d_copy(outdir, strategy, dtype, rows, cols):
    n = 40
    mod, _bufs, ptrs, stacked = tile_buffers(outdir, strategy, dtype, rows, cols, n)
    out = torch.full((rows, cols, n), -1).to(dtype)
    mod.grid_copy[(3,)](out, ptrs, n, R=rows, C=cols, BLOCK=16)
    assert torch.equal(out, stacked)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ARITH_DTYPES)
@pytest.mark.parametrize("rows,cols", TILES)
def test_pointer_tile_2d_row_sums(outdir, strategy, dtype, rows, cols):
    n = 40
    mod, _bufs, ptrs, stacked = tile_buffers(outdir, strategy, dtype, rows, cols, n)
    out = torch.full((rows, n), -1).to(dtype)
    mod.row_sums[(3,)](out, ptrs, n, R=rows, C=cols, BLOCK=16)
    assert torch.equal(out, stacked.sum(1).to(dtype))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_world3_stack(outdir, strategy, dtype):
    n = 50
    bufs, ptrs = buffers(3, n, dtype)  # a table of exactly 3 addresses: entry 3 must never be read
    out = torch.full((4, n), -1).to(dtype)
    sample(outdir, "masked_world3", strategy).stack3[(2,)](out, ptrs, n, BLOCK=32)
    assert torch.equal(out[:3], torch.stack([b[:n] for b in bufs]))
    assert (out[3] == 0).all()


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ARITH_DTYPES)
def test_masked_world3_ptr_mask(outdir, strategy, dtype):
    n = 50
    bufs, ptrs = buffers(4, n, dtype, seed=7)  # four real buffers; the fourth is masked off
    before = [b.clone() for b in bufs]
    sample(outdir, "masked_world3", strategy).add_one_masked[(2,)](ptrs, n, bufs[0], BLOCK=32)
    for w in range(3):
        assert torch.equal(bufs[w][:n], before[w][:n] + 1)
    assert torch.equal(bufs[3], before[3])
    assert_tails(bufs, n)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", [1, 3, 4, 8])
def test_broadcast_store(outdir, strategy, dtype, world):
    n, block = 70, 32
    bufs, ptrs = buffers(world, n, dtype)
    src = values((n,), dtype, seed=100)
    sample(outdir, "broadcast_store", strategy).broadcast[(3,)](src, ptrs, n, WORLD=world, BLOCK=block)
    for b in bufs:
        assert torch.equal(b[:n], src)
    assert_tails(bufs, n)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ARITH_DTYPES)
@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_scatter_rank(outdir, strategy, dtype, world):
    mod = sample(outdir, "scatter_rank", strategy)
    n, k = 24, 5
    bufs, ptrs = buffers(world, n, dtype)
    expected = [b.clone() for b in bufs]
    for j, e in enumerate(expected):
        e[k] = j
    mod.stamp_rank[(1,)](ptrs, k, bufs[0], WORLD=world)
    for b, e in zip(bufs, expected):
        assert torch.equal(b, e)

    for j, e in enumerate(expected):
        e[:n] = (1000 * j + torch.arange(n)).to(dtype)
    mod.scatter_rows[(2,)](ptrs, n, bufs[0], WORLD=world, BLOCK=16)
    for b, e in zip(bufs, expected):
        assert torch.equal(b, e)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ARITH_DTYPES)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_allreduce_oneshot(outdir, strategy, dtype, world):
    n, block = 300, 128
    bufs, ptrs = buffers(world, n, dtype)
    out = torch.full((n,), -1).to(dtype)
    sample(outdir, "allreduce_oneshot", strategy).allreduce_oneshot[(3,)](out, ptrs, n, WORLD=world, BLOCK=block)
    assert torch.equal(out, torch.stack([b[:n] for b in bufs]).sum(0).to(dtype))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_allreduce_oneshot_random_fp32(outdir, strategy):
    n, world = 500, 4
    g = torch.Generator().manual_seed(3)
    bufs = [torch.randn(n, generator=g) for _ in range(world)]
    out = torch.empty(n)
    sample(outdir, "allreduce_oneshot", strategy).allreduce_oneshot[(4,)](
        out, address_table(bufs), n, WORLD=world, BLOCK=128
    )
    torch.testing.assert_close(out, torch.stack(bufs).sum(0))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("world", [1, 3, 4, 8])
def test_allgather(outdir, strategy, dtype, world):
    n = 150  # 2 programs of 3 blocks of 32, the last ones partly masked
    bufs, ptrs = buffers(world, n + TAIL, dtype)  # allgather has no shape: it reads n of n + TAIL
    out = torch.full((world, n), -1).to(dtype)
    sample(outdir, "allgather", strategy).allgather[(2,)](out, ptrs, n, WORLD=world, CHUNK=96, BLOCK=32)
    assert torch.equal(out, torch.stack([b[:n] for b in bufs]))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_atomics(outdir, strategy, world):
    mod = sample(outdir, "atomics", strategy)
    nbins, n = 10, 60
    hist = [torch.zeros(nbins + TAIL, dtype=torch.int32) for _ in range(world)]
    expected = torch.zeros(nbins, dtype=torch.int64)
    for rank in range(2):  # two ranks count their keys into every peer's histogram
        keys = values((n,), torch.int32, seed=rank, low=-3, high=nbins + 3)
        mod.histogram[(4,)](keys, n, address_table(hist), nbins, WORLD=world, BLOCK=16)
        kept = keys[(keys >= 0) & (keys < nbins)].long()
        expected += torch.bincount(kept, minlength=nbins)
    for h in hist:
        assert torch.equal(h[:nbins].long(), expected)
        assert (h[nbins:] == 0).all()

    x = torch.randn(n, generator=torch.Generator().manual_seed(1))
    peaks = [torch.tensor([x.max() + 1 if w % 2 else -10.0, 5.0]) for w in range(world)]
    initial = [p.clone() for p in peaks]
    mod.peak[(4,)](x, n, address_table(peaks), WORLD=world, BLOCK=16)
    for p, before in zip(peaks, initial):
        assert p[0] == torch.maximum(before[0], x.max()) and p[1] == before[1]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_atomic_cas(outdir, strategy, world):
    mod = sample(outdir, "atomics", strategy)
    slot, ticket = 2, 42
    owners = [torch.tensor([1, 1, 0 if w % 3 else 7 + w, 1], dtype=torch.int32) for w in range(world)]
    before = [o.clone() for o in owners]
    previous = torch.full((world,), -1, dtype=torch.int32)
    mod.claim[(1,)](previous, address_table(owners), slot, ticket, WORLD=world)
    assert torch.equal(previous, torch.stack([b[slot] for b in before]))
    for o, b in zip(owners, before):
        expected = b.clone()
        expected[slot] = ticket if b[slot] == 0 else b[slot]
        assert torch.equal(o, expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_allreduce_rmsnorm(outdir, strategy, world):
    """Rows of 40 in one padded block: the new residual exact, y within fp32 rounding of float64 torch."""
    rows, d, eps = 3, 40, 1e-5
    xs = [values((rows, d), torch.float32, 10 + w) for w in range(world)]
    residual = values((rows, d), torch.float32, 99)
    weight = values((d,), torch.float32, 98, 1, 8) / 4
    out = torch.full((rows, d), float("nan"))
    mine = residual.clone()
    kernel = sample(outdir, "allreduce_rmsnorm", strategy).allreduce_rmsnorm
    kernel[(rows,)](xs[0], address_table(xs), mine, weight, out, d, eps, WORLD=world, BLOCK=64)
    h = torch.stack(xs).double().sum(0) + residual.double()
    y = h / torch.sqrt((h * h).mean(-1, keepdim=True) + eps) * weight.double()
    assert torch.equal(mine, h.float())
    torch.testing.assert_close(out.double(), y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("world", [2, 3, 4])
def test_fused_rs_rmsnorm_ag(outdir, strategy, world):
    """Each rank's launch normalises its rows (every world-th) of the rows summed over the ranks and stores them
    into every rank's out: after all launches every out holds them all, within fp32 rounding of float64 torch."""
    rows, d, eps = 7, 40, 1e-5
    xs = [values((rows, d), torch.float32, 20 + w) for w in range(world)]
    weight = values((d,), torch.float32, 97, 1, 8) / 4
    outs = [torch.full((rows, d), float("nan")) for _ in range(world)]
    kernel = sample(outdir, "fused_rs_rmsnorm_ag", strategy).fused_rs_rmsnorm_ag
    for rank in range(world):
        kernel[(2,)](
            xs[rank],
            address_table(xs),
            weight,
            outs[rank],
            address_table(outs),
            rank,
            rows,
            d,
            eps,
            WORLD=world,
            BLOCK=64,
        )
    h = torch.stack(xs).double().sum(0)
    y = h / torch.sqrt((h * h).mean(-1, keepdim=True) + eps) * weight.double()
    for out in outs:
        torch.testing.assert_close(out.double(), y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("world", [2, 3, 4])
def test_ring_allreduce(outdir, strategy, world):
    chunk, block = 10, 4
    n, programs = world * chunk, -(-chunk // block)  # 3 programs, the last partly masked
    inputs = [values((n,), torch.float32, seed=w) for w in range(world)]
    xs = [sim.shared_empty((n + TAIL,), torch.float32) for _ in range(world)]
    pads = [sim.shared_empty((programs * world,), torch.int32) for _ in range(world)]
    for x, given, pad in zip(xs, inputs, pads):
        x[:n], x[n:] = given, 99
        pad.zero_()
    kernel = sample(outdir, "ring_allreduce", strategy).ring_allreduce
    buf_ptrs, pad_ptrs = address_table(xs), address_table(pads)
    sim.run(
        lambda rank: kernel[(programs,)](xs[rank], buf_ptrs, pad_ptrs, pads[rank], rank, chunk, world, block),
        world,
        timeout=120,
    )
    total = torch.stack(inputs).sum(0)
    for rank, x in enumerate(xs):
        assert torch.equal(x[:n], total), rank
    assert_tails(xs, n)
    assert all(not pad.any() for pad in pads), "the pads are zero again"
