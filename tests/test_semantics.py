"""Every access context of the contract, run in the interpreter against torch references.

tests/kernels_semantics.py is transpiled once per strategy; W host tensors stand
in for W GPUs through a table of their ``data_ptr()``s.
"""

from pathlib import Path

import pytest
import torch

import castpile
from testkit import address_table, import_file, padded
from testkit.references import ATOMIC_REFS, buffers, padded_stack

KERNELS = Path(__file__).with_name("kernels_semantics.py")
WORLDS = [1, 2, 3, 4, 8]
DTYPES = [torch.float32, torch.bfloat16, torch.int32]
# Triton 3.6's interpreter computes bf16 arithmetic wrongly (x + y of two bf16 loads gives
# garbage in a plain Triton kernel too); bf16 moves and conversions are right.  bf16 is
# therefore tested where data only moves, and reduced through .to(tl.float32).
ARITHMETIC_DTYPES = [torch.float32, torch.int32]


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    """The transpiled kernels module for one strategy."""
    out = tmp_path_factory.mktemp(request.param) / f"kernels_{request.param}.py"
    out.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=request.param))
    return import_file(out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("w", WORLDS)
def test_load_pads_and_masks(k, w, dtype):
    n, block = 13, 16
    bufs = buffers(w, n, dtype)
    out = torch.full((padded(w) * block,), 99, dtype=dtype)
    k.load_stack[(1,)](out, address_table(bufs), n, w, block)
    assert torch.equal(out.view(padded(w), block), padded_stack(bufs, padded(w), block))


REDUCTION_CASES = [(d, op) for d in ARITHMETIC_DTYPES for op in ("sum", "max", "min", "sum_f32", "masked_max")] + [
    (torch.bfloat16, "sum_f32")
]


@pytest.mark.parametrize("dtype,op", REDUCTION_CASES)
@pytest.mark.parametrize("w", WORLDS)
def test_reductions_over_the_stack(k, w, dtype, op):
    n, block = 37, 16
    bufs = buffers(w, n, dtype, seed=w)
    full = torch.stack(bufs)  # v1.1: only the W valid buffers take part, never the padded entries
    ref = {
        "sum": lambda: full.sum(0, dtype=torch.int32 if dtype == torch.int32 else dtype),
        "max": lambda: full.max(0).values,
        "min": lambda: full.min(0).values,
        "sum_f32": lambda: full.float().sum(0),
        "masked_max": lambda: torch.cat([full[:, : n - 3], torch.zeros_like(full[:, n - 3 :])], 1).max(0).values,
    }[op]()
    out = torch.zeros(n, dtype=torch.float32 if op == "sum_f32" else dtype)
    k.reduce_stack[(3,)](out, bufs[0], address_table(bufs), n, op, w, block)
    assert torch.equal(out, ref.to(out.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("w", WORLDS)
def test_store_one_row_everywhere(k, w, dtype):
    n, block = 21, 8
    bufs = [torch.zeros(n + 4, dtype=dtype) for _ in range(w)]  # 4 guard elements past n
    src = buffers(1, n, dtype)[0]
    k.store_row[(3,)](src, address_table(bufs), n, w, block)
    for b in bufs:
        assert torch.equal(b[:n], src) and not b[n:].any()


@pytest.mark.parametrize("w", WORLDS)
def test_store_full_tensor_row_per_buffer(k, w):
    n, block = 6, 8
    bufs = [torch.zeros(n + 2, dtype=torch.float32) for _ in range(w)]
    src = torch.arange(padded(w) * block, dtype=torch.float32)
    k.store_full[(1,)](src, address_table(bufs), n, w, block)
    for j, b in enumerate(bufs):
        assert torch.equal(b[:n], src.view(padded(w), block)[j, :n]) and not b[n:].any()


@pytest.mark.parametrize("w", [1, 2, 4, 8])
def test_scatter_rank_reverse_of_stacking(k, w):
    bufs = [torch.full((5,), -1, dtype=torch.int32) for _ in range(w)]
    k.scatter_rank[(1,)](bufs[0], address_table(bufs), 3, w)
    for j, b in enumerate(bufs):
        expected = torch.full((5,), -1, dtype=torch.int32)
        expected[3] = j
        assert torch.equal(b, expected)


@pytest.mark.parametrize("dtype", ARITHMETIC_DTYPES)
@pytest.mark.parametrize("w", [1, 3, 4])
def test_augmented_store(k, w, dtype):
    n, block = 7, 8
    bufs = buffers(w, n + 1, dtype, seed=3)
    before = [b.clone() for b in bufs]
    src = buffers(1, n, dtype, seed=4)[0]
    k.augmented[(1,)](src, address_table(bufs), n, w, block)
    for b, old in zip(bufs, before):
        assert torch.equal(b[:n], (old[:n] + src) * 2) and b[n] == old[n]


@pytest.mark.parametrize("w", [1, 3, 8])
def test_tl_load_and_store_keywords(k, w):
    n, m, block = 10, 6, 16
    bufs = buffers(w, n, torch.float32, seed=5)
    before = [b.clone() for b in bufs]
    out = torch.zeros(padded(w) * block)
    k.load_store_calls[(1,)](out, address_table(bufs), n, m, w, block)
    expected = padded_stack([b[:m] for b in before], padded(w), block, fill=-1)
    assert torch.equal(out.view(padded(w), block), expected)
    for b, old in zip(bufs, before):
        ref = old.clone()
        ref[0:m:2] = old[0:m:2] + 100
        ref[m:n:2] = -1 + 100  # masked loads gave `other`, even lanes below n are stored
        assert torch.equal(b, ref)


@pytest.mark.parametrize("op", [*ATOMIC_REFS, "cas"])
@pytest.mark.parametrize("w", WORLDS)
def test_atomics_return_old_values(k, w, op):
    n, block = 9, 16
    g = torch.Generator().manual_seed(11)
    bufs = [torch.randint(0, 12, (n + 1,), generator=g, dtype=torch.int32) for _ in range(w)]
    before = [b.clone() for b in bufs]
    out = torch.full((padded(w) * block,), -7, dtype=torch.int32)
    k.atomics[(1,)](out, address_table(bufs), n, op, w, block)
    offs = torch.arange(n, dtype=torch.int32)
    v = offs + 3
    live = n - 1 if op == "add" else n
    for j, (b, old) in enumerate(zip(bufs, before)):
        ref = old.clone()
        if op == "cas":
            ref[:n] = torch.where(old[:n] == offs, v, old[:n])
        else:
            ref[:live] = ATOMIC_REFS[op](old[:live], v[:live])
        assert torch.equal(b, ref), f"buffer {j}"
        assert torch.equal(out.view(padded(w), block)[j, :live], old[:live])


def test_atomic_add_float(k):
    bufs = [torch.zeros(9) for _ in range(3)]
    out = torch.zeros(4 * 16)
    k.atomics[(1,)](out, address_table(bufs), 9, "add", 3, 16)
    for b in bufs:
        assert torch.equal(b[:8], torch.arange(3, 11, dtype=torch.float32)) and b[8] == 0


LAYOUTS_2D = {
    # kernel: buffer j as the (M, N) tensor the kernel indexes
    "elements_2d": lambda b, m, n: b.view(m, n),  # row-major, the default strides
    "strided_2d": lambda b, m, n: b.view(n, m).t(),  # column-major through strides=(1, M)
}


@pytest.mark.parametrize("kernel", LAYOUTS_2D)
@pytest.mark.parametrize("w", [1, 2, 3, 4])
def test_two_dim_elements(k, w, kernel):
    m, n, bi, bj = 3, 5, 4, 8
    bufs = buffers(w, m * n, torch.float32, seed=6 + list(LAYOUTS_2D).index(kernel))
    out = torch.full((padded(w) * bi * bj,), 99.0)
    getattr(k, kernel)[(1,)](out, address_table(bufs), m, n, w, bi, bj)
    ref = torch.zeros(padded(w), bi, bj)
    for j, b in enumerate(bufs):
        ref[j, :m, :n] = LAYOUTS_2D[kernel](b, m, n)
    assert torch.equal(out.view(padded(w), bi, bj), ref)


@pytest.mark.parametrize("w", [1, 3, 5, 8])
def test_pointer_tile_2d_with_mask(k, w):
    r, c, n, block = 2, 4, 6, 8
    bufs = buffers(w, n + 1, torch.float32, seed=8)
    before = [b.clone() for b in bufs]
    addrs = torch.zeros(r * c, dtype=torch.int64)
    addrs[:w] = address_table(bufs)
    out = torch.full((r * c * block,), 99.0)
    k.tile_2d[(1,)](out, addrs, n, r, c, w, block)
    expected = padded_stack([b[:n] for b in before], r * c, block)
    assert torch.equal(out.view(r * c, block), expected)
    for b, old in zip(bufs, before):
        assert torch.equal(b[:n], old[:n] + 1) and b[n] == old[n]


@pytest.mark.parametrize("w", [1, 3, 4])
def test_tensor_tile_sum(k, w):
    n, block = 5, 8
    bufs = buffers(w, n, torch.float32, seed=9)
    out = torch.zeros(n)
    k.tile_1d_sum[(1,)](out, address_table(bufs), n, w, block)
    assert torch.equal(out, torch.stack(bufs).sum(0))


@pytest.mark.parametrize("w", [1, 3, 4])
def test_signal_then_wait_leaves_flags_zero(k, w):
    pads = [torch.zeros(4, dtype=torch.int32) for _ in range(w)]
    k.signal_then_wait[(1,)](pads[0], address_table(pads), w)
    assert all(not p.any() for p in pads)


@pytest.mark.parametrize("w", [2, 3])
def test_signal_by_exchange_and_wait_on_plain_pointers(k, w):
    pads = [torch.zeros(2, dtype=torch.int32) for _ in range(w)]
    k.signal_exchange_wait_plain[(1,)](pads[0], address_table(pads), w)
    assert pads[0].tolist() == [0, 0]  # waited on and reset
    assert all(p.tolist() == [7, 0] for p in pads[1:])  # signalled, nobody waited


@pytest.mark.parametrize("w", [2, 3])
def test_uint64_address_table(k, w):
    """The contract allows int64 or uint64 addresses (Helion passes uint64)."""
    n, block = 13, 16
    bufs = buffers(w, n, torch.float32, seed=12)
    out = torch.full((padded(w) * block,), 99.0)
    k.load_stack[(1,)](out, address_table(bufs).view(torch.uint64), n, w, block)
    assert torch.equal(out.view(padded(w), block), padded_stack(bufs, padded(w), block))
