"""Stack reductions (tl.sum / tl.max / tl.min over axis 0 of an access), run in the interpreter against torch
references under both strategies (W host tensors stand in for W GPUs) and compiled for sm_90.

tests/kernels_reductions.py holds the kernels: tl.sum's ``dtype=`` after a ``.to()``, ``return_indices=``,
constexpr masks, rank-0 tiles and scalar indices, and elementwise steps between the access and the reduction.
"""

from pathlib import Path

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import address_table, import_file, transpiled
from testkit.diagnostics import diagnostics_of
from testkit.remote import on_rank, remote_source, symmetric

KERNELS = Path(__file__).with_name("kernels_reductions.py")
STACK_KERNELS = Path(__file__).parents[1] / "benchmarks/kernels/stack_kernels.py"
HAND_KERNELS = Path(__file__).parents[1] / "benchmarks/kernels/hand_kernels.py"
WORLDS = [2, 3, 4]
N, B = 13, 16  # lanes N..B-1 are out of bounds


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / f"kernels_reductions_{request.param}.py"
    out.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=request.param))
    return import_file(out)


def randint(w, n, low, high, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(low, high, (n,), generator=g).to(dtype) for _ in range(w)]


def in_bounds(ref, fill=0):
    """``ref`` (N lanes) widened to B lanes, the lanes out of bounds holding ``fill``."""
    return torch.cat([ref, torch.full((B - N,), fill, dtype=ref.dtype)])


# -- tl.sum's dtype= keeps its meaning after a .to() -----------------------------------------------


@pytest.mark.parametrize("w", WORLDS)
def test_sum_dtype_after_an_int8_cast_keeps_the_wrap_around(k, w):
    bufs = randint(w, N, -300, 300, torch.int32, seed=w)
    out = torch.full((6 * B,), 99, dtype=torch.int32)
    k.int8_sums[(1,)](out, address_table(bufs), N, w, B)
    as_int8 = torch.stack(bufs).to(torch.int8)
    wide = in_bounds(as_int8.to(torch.int32).sum(0, dtype=torch.int32))
    wrapped = in_bounds(as_int8.to(torch.int64).sum(0).to(torch.int8).to(torch.int32))
    expected = [wide, wrapped, wide, in_bounds(as_int8.max(0).values.to(torch.int32)), wide, wrapped]
    for row, ref in enumerate(expected):
        assert torch.equal(out.view(6, B)[row], ref), row


@pytest.mark.parametrize("w", WORLDS)
def test_sum_dtype_after_a_half_cast_keeps_the_rounding(k, w):
    g = torch.Generator().manual_seed(w)
    bufs = [torch.randint(-20000, 20000, (N,), generator=g).float() / 7 for _ in range(w)]
    out = torch.full((2 * B,), 99.0)
    k.half_sum[(1,)](out, address_table(bufs), N, w, B)
    ref = in_bounds(torch.stack(bufs).half().float().sum(0))
    assert not torch.equal(ref, in_bounds(torch.stack(bufs).sum(0)))  # the rounding shows
    assert torch.equal(out.view(2, B)[0], ref) and torch.equal(out.view(2, B)[1], ref)


# -- return_indices=True: values and buffer positions over the valid buffers -----------------------


def extremum(stack, positions, op):
    """Per lane, the max (min) over ``positions`` of the stack and the first position holding it; (0, 0) with none."""
    if not positions:
        return torch.zeros(stack.shape[1], dtype=stack.dtype), torch.zeros(stack.shape[1], dtype=torch.int32)
    part = stack[positions]
    best = part.max(0).values if op == "max" else part.min(0).values
    first = torch.tensor([positions[(part[:, q] == best[q]).nonzero()[0, 0]] for q in range(stack.shape[1])])
    return best, first.to(torch.int32)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("w", [1, *WORLDS])
def test_extrema_with_indices_see_the_valid_buffers_only(k, w, dtype, op, left):
    sign = -1 if op == "max" else 1  # every value on the far side of 0, the padding's value
    bufs = [sign * t for t in randint(w, N, 1, 4, dtype, seed=w)]  # few values: ties
    lowest, highest = {torch.float32: (float("-inf"), float("inf")), torch.int32: (-(2**31), 2**31 - 1)}[dtype]
    for b in bufs:  # lane 0 holds the reduction's identity in every buffer: the first valid position wins
        b[0] = lowest if op == "max" else highest
    values = torch.full((4 * B,), 99, dtype=dtype)
    at = torch.full((4 * B,), 99, dtype=torch.int32)
    k.extrema_indices[(1,)](values, at, address_table(bufs), N, op, left, w, B)
    stack = torch.stack(bufs)
    for row, positions in enumerate([list(range(w)), list(range(1, w))] * 2):
        best, first = extremum(stack, positions, op)
        got_v, got_i = values.view(4, B)[row], at.view(4, B)[row]
        assert torch.equal(got_v, in_bounds(best)), row
        assert torch.equal(got_i[N:], torch.zeros(B - N, dtype=torch.int32)), row
        if left:
            assert torch.equal(got_i, in_bounds(first)), row
        elif positions:  # Triton leaves the tie to the reduction order: any position holding the extremum
            assert all(got_i[q] in positions and stack[got_i[q], q] == best[q] for q in range(N)), row


@pytest.mark.parametrize(
    "call",
    [
        "tl.sum(bufs[o], axis=0, dtype=tl.int32, acc=1)",
        "tl.max(bufs[o], 0, True, True, False, 1)",
        "bufs[o].to(tl.float32).min(axis=0, foo=1)",
    ],
)
def test_an_argument_a_reduction_does_not_take_is_a_located_error(call):
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    o = tl.arange(0, 16)\n"
        f"    x = {call}\n"
    )
    op = call.split("(")[0].split(".")[-1] if call.startswith("tl.") else "min"
    where = f"tl.{op} of a multicast access"
    problem = (
        ("E402", {"call": where, "most": 5})
        if "False, 1" in call
        else ("E403", {"call": where, "keyword": "acc" if op == "sum" else "foo"})
    )
    assert diagnostics_of(source) == [(10, 9, *problem)]


def table_references(bufs):
    """What ``table_reductions`` writes: its values (two rows) and positions."""
    stack = torch.stack(bufs)
    wrapped = in_bounds((stack * 3).to(torch.int8).to(torch.int32).sum(0, dtype=torch.int32))
    best, first = extremum(-stack, list(range(len(bufs))), "max")
    return torch.cat([wrapped, in_bounds(best)]), in_bounds(first)


@pytest.mark.parametrize("w", WORLDS)
def test_table_reductions(k, w):
    bufs = randint(w, N, -50, 50, torch.int32, seed=w)
    values, at = torch.full((2 * B,), 99, dtype=torch.int32), torch.full((B,), 99, dtype=torch.int32)
    k.table_reductions[(1,)](values, at, address_table(bufs), N, w, B)
    ref_values, ref_at = table_references(bufs)
    assert torch.equal(values, ref_values) and torch.equal(at, ref_at)


@pytest.mark.parametrize("w,lws,rank", [(2, 1, 0), (3, 1, 2), (4, 2, 1)])
def test_table_reductions_over_remote_peers(tmp_path, w, lws, rank):
    """The same kernel with ``remote="nvshmem"``: some or every peer fetched by (simulated) NVSHMEM gets."""
    source = remote_source(KERNELS)
    kernels = transpiled(tmp_path, source, "kernels_reductions_remote")
    bufs = randint(w, N, -50, 50, torch.int32, seed=w)
    s = symmetric(w, lws, N, torch.int32, bufs)

    def body():
        values, at = torch.full((2 * B,), 99, dtype=torch.int32), torch.full((B,), 99, dtype=torch.int32)
        kernels.table_reductions[(1,)](values, at, s[rank].remote_ptrs, N, w, B)
        return torch.cat([values, at])

    ref_values, ref_at = table_references(bufs)
    assert torch.equal(on_rank(body), torch.cat([ref_values, ref_at]))


# -- constexpr masks --------------------------------------------------------------------------------


@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("w", WORLDS)
def test_reductions_of_loads_with_a_constexpr_mask(k, w, even):
    bufs = randint(w, N, -50, 50, torch.float32, seed=w)
    out = torch.full((4 * B,), 99.0)
    k.constexpr_masks[(1,)](out, address_table(bufs), N, even, w, B)
    stack = torch.stack(bufs)
    rows = out.view(4, B)
    if even:
        expected = [stack.sum(0), stack.max(0).values, stack.sum(0), stack.min(0).values]
    else:  # every lane masked off: each buffer takes part as `other`
        expected = [torch.zeros(N), torch.full((N,), -1.0), torch.zeros(N), torch.zeros(N)]
    for row, ref in enumerate(expected):
        assert torch.equal(rows[row], in_bounds(ref)), row


# -- rank-0 tiles and scalar indices -------------------------------------------------------------------


@pytest.mark.parametrize("w", WORLDS)
def test_rank0_tile_reduces_its_elements_and_scalar_indices_reduce_the_stack(k, w):
    n, b = 6, 8
    g = torch.Generator().manual_seed(w)
    bufs = [-(torch.randperm(n, generator=g).float() + 1 + 10 * j) for j in range(w)]
    stack = torch.stack(bufs)
    for r in range(w):
        out = torch.full((7,), 99.0)
        k.one_peer[(1,)](out, address_table(bufs), r, n, w, b)
        lanes = torch.cat([bufs[r], torch.zeros(b - n)])  # P = (): an ordinary reduction; lanes past n hold 0
        expected = [
            lanes.sum(),
            lanes.max(),
            lanes.min(),
            lanes.argmin().float(),
            stack[:, 3].sum(),
            stack[:, 3].max(),
            stack[:, 2].min(),
        ]
        assert torch.equal(out, torch.stack(expected)), r


# -- elementwise steps between the access and the reduction ------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("w", WORLDS)
def test_elementwise_steps_reduce_over_the_valid_buffers(k, w, dtype):
    s = 5
    bufs = randint(w, N, -50, 50, dtype, seed=w)
    out = torch.full((6 * B,), 99.0)
    k.elementwise_steps[(1,)](out, bufs[0], address_table(bufs), N, s, w, B)
    stack = torch.stack(bufs)
    lanes = torch.arange(N)
    masked = torch.where(lanes < N - 2, stack, torch.full_like(stack, 7))
    expected = [
        (stack.float() * 2.0 + 1).sum(0),
        (-stack).max(0).values,
        (s - stack).min(0).values,
        (3 * (masked - 1)).sum(0),
        (stack / 4).sum(0),
        (-(stack * s)).max(0).values,
    ]
    for row, ref in enumerate(expected):
        assert torch.equal(out.view(6, B)[row], in_bounds(ref.float())), row


# -- the benchmark's row norm (benchmarks/bench_gpu.py): castpile's kernel and its hand twin --------------


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def bench(request, tmp_path_factory):
    """benchmarks/kernels/stack_kernels.py transpiled under one strategy, and the hand kernels."""
    out = tmp_path_factory.mktemp(request.param) / f"stack_kernels_{request.param}.py"
    out.write_bytes(castpile.transpile(STACK_KERNELS.read_bytes(), str(STACK_KERNELS), strategy=request.param))
    return import_file(out), import_file(HAND_KERNELS)


@pytest.mark.parametrize("w", WORLDS)
def test_row_norm_matches_its_hand_twin(bench, w):
    """bf16 rows summed in fp32: castpile's kernel writes what the hand loop writes."""
    ours_k, hand_k = bench
    m, d, block = 5, 12, 16
    g = torch.Generator().manual_seed(w)
    bufs = [torch.randn(m, d, generator=g).to(torch.bfloat16) for _ in range(w)]
    ours, hand = torch.zeros(m, d, dtype=torch.bfloat16), torch.zeros(m, d, dtype=torch.bfloat16)
    ours_k.stack_row_norm[(2,)](bufs[0], address_table(bufs), ours, m, d, 1e-6, w, block)
    hand_k.hand_row_norm[(2,)](bufs[0], address_table(bufs), hand, m, d, 1e-6, w, block, True)
    summed = torch.stack(bufs).float().sum(0)
    expected = summed * torch.rsqrt(summed.pow(2).mean(1, keepdim=True) + 1e-6)
    assert torch.equal(ours, hand) and torch.allclose(ours.float(), expected, rtol=1e-2, atol=1e-2)


# -- compiled for sm_90 ---------------------------------------------------------------------------------

T = {"table": "*i64"}
SM90_JOBS = [
    *[
        ("int8_sums", {"out": "*i32", **T, "n": "i32", "W": "constexpr", "B": "constexpr"}, {"W": w, "B": 64})
        for w in (3, 4)
    ],
    (
        "table_reductions",
        {"values": "*i32", "at": "*i32", **T, "n": "i32", "W": "constexpr", "B": "constexpr"},
        {"W": 3, "B": 64},
    ),
    ("half_sum", {"out": "*fp32", **T, "n": "i32", "W": "constexpr", "B": "constexpr"}, {"W": 3, "B": 64}),
    *[
        (
            "extrema_indices",
            {
                "values": "*fp32",
                "at": "*i32",
                **T,
                "n": "i32",
                "OP": "constexpr",
                "LEFT": "constexpr",
                "W": "constexpr",
                "B": "constexpr",
            },
            {"OP": op, "LEFT": left, "W": 3, "B": 64},
        )
        for op in ("max", "min")
        for left in (True, False)
    ],
    *[
        (
            "constexpr_masks",
            {"out": "*fp32", **T, "n": "i32", "EVEN": "constexpr", "W": "constexpr", "B": "constexpr"},
            {"EVEN": even, "W": 3, "B": 64},
        )
        for even in (True, False)
    ],
    ("one_peer", {"out": "*fp32", **T, "r": "i32", "n": "i32", "W": "constexpr", "B": "constexpr"}, {"W": 3, "B": 64}),
    (
        "elementwise_steps",
        {"out": "*fp32", "example": "*i32", **T, "n": "i32", "S": "constexpr", "W": "constexpr", "B": "constexpr"},
        {"S": 5, "W": 3, "B": 64},
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_every_reduction_kernel_compiles_for_sm90(tmp_path, strategy):
    module = tmp_path / f"kernels_reductions_{strategy}.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy))
    jobs = [Job(module, name, sig, const, name=f"{name}_{k}") for k, (name, sig, const) in enumerate(SM90_JOBS)]
    results = compile_for_sm90(jobs, tmp_path)
    failures = [f"{name}: {r.error}" for name, r in results.items() if not r.ok]
    assert not failures, "\n".join(failures)


ROW_NORM = {
    "ex": "*bf16",
    **T,
    "out": "*bf16",
    "M": "i32",
    "D": "i32",
    "eps": "fp32",
    "W": "constexpr",
    "BLOCK_D": "constexpr",
}


def memory_operations(ptx: str) -> list[str]:
    """The global and shared loads and stores of a PTX listing, sorted (predicates dropped)."""
    ops = []
    for line in ptx.splitlines():
        words = line.split()
        if words and words[0].startswith("@"):
            words = words[1:]
        if words and words[0].startswith(("ld.global", "st.global", "ld.shared", "st.shared")):
            ops.append(words[0])
    return sorted(ops)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_cast_before_a_stack_sum_streams_like_the_hand_loop(tmp_path, strategy):
    """The benchmark's row norm, `tl.sum(bufs[row, cols].to(tl.float32), axis=0)` of a table with BLOCK_D = 8192:
    the same loads and stores as the hand loop over the addresses (one scalar load of each address, no
    (W, BLOCK_D) gather of pointers)."""
    module = tmp_path / "stack_kernels.py"
    module.write_bytes(castpile.transpile(STACK_KERNELS.read_bytes(), str(STACK_KERNELS), strategy=strategy))
    attrs = {i: [["tt.divisibility", 16]] for i in (0, 1, 2, 4)}  # what the JIT records for these arguments
    jobs = []
    for w in (2, 4, 8):
        jobs.append(Job(module, "stack_row_norm", ROW_NORM, {"W": w, "BLOCK_D": 8192}, attrs, name=f"ours_{w}"))
        jobs.append(
            Job(
                HAND_KERNELS,
                "hand_row_norm",
                {**ROW_NORM, "ALIGN": "constexpr"},
                {"W": w, "BLOCK_D": 8192, "ALIGN": True},
                attrs,
                name=f"hand_{w}",
            )
        )
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items() if not r.ok}
    for w in (2, 4, 8):
        ours = memory_operations(results[f"ours_{w}"].ptx.read_text())
        hand = memory_operations(results[f"hand_{w}"].ptx.read_text())
        assert ours == hand and ours.count("ld.global.b64") == w, (w, ours, hand)
