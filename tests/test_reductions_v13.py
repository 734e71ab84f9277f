"""Stack reductions of language v1.3: every reduction over axis 0 of an access, whatever its combine function
(``tl.reduce`` with a ``@triton.jit`` function of the module, ``tl.xor_sum``, ``tl.reduce_or``, ``tl.argmax``,
``tl.argmin``), folds the valid buffers only; with none the result is 0.

The kernels (tests/kernels_reductions_v13.py) run in the interpreter under both strategies over W = 1..8 host
tensors standing in for W GPUs, with a ``ptr_mask`` bit set choosing the valid buffers (all of them, all but
rank 0, none, every other one), against torch references over the chosen buffers; with ``remote="nvshmem"`` on
the simulated NVSHMEM; and compiled for sm_90 (tests/test_compile_sm90.py lists them).
"""

from functools import reduce
from pathlib import Path

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import address_table, transpiled, transpiled_module
from testkit.remote import on_rank, remote_source, symmetric

KERNELS = Path(__file__).with_name("kernels_reductions_v13.py")
WORLDS = range(1, 9)
N, B = 13, 16  # lanes N..B-1 are out of bounds


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    """The transpiled kernels module for one strategy."""
    return transpiled_module(KERNELS, request.param, tmp_path_factory.mktemp(request.param))


def choices(w):
    """The ``ptr_mask`` bit sets a test runs: every buffer, all but rank 0, none, every other one."""
    every = (1 << w) - 1
    return sorted({every, every & ~1, 0, every & 0x55})


def chosen(w, bits):
    return [j for j in range(w) if bits >> j & 1]


def in_bounds(ref):
    """``ref`` (N lanes) widened to B lanes, the lanes out of bounds holding 0."""
    return torch.cat([ref, torch.zeros(B - N, dtype=ref.dtype)])


def folded(bufs, valid, combine, dtype):
    """``combine`` folded over the valid buffers in stack order, 0 where there is none (N lanes)."""
    if not valid:
        return torch.zeros(N, dtype=dtype)
    return reduce(combine, [bufs[j] for j in valid]).to(dtype)


def bitwise_references(bufs, valid):
    """What ``bitwise`` writes, row by row."""
    this_and = in_bounds(folded(bufs, valid, torch.bitwise_and, torch.int32))
    this_or = in_bounds(folded(bufs, valid, torch.bitwise_or, torch.int32))
    this_xor = in_bounds(folded(bufs, valid, torch.bitwise_xor, torch.int32))
    return [this_and, this_or, this_xor, this_or, this_and, this_xor, this_and, this_and, this_xor, this_or, this_or]


def int_buffers(w, seed):
    """int32 buffers whose bits differ from buffer to buffer, most bits set (an and over them is rarely 0)."""
    g = torch.Generator().manual_seed(seed)
    return [(~(1 << torch.randint(0, 31, (N,), generator=g))).to(torch.int32) for _ in range(w)]


@pytest.mark.parametrize("w", WORLDS)
def test_bitwise_reductions_fold_the_valid_buffers_only(k, w):
    bufs = int_buffers(w, seed=w)
    for bits in choices(w):
        out = torch.full((11 * B,), 99, dtype=torch.int32)
        k.bitwise[(1,)](out, address_table(bufs), bits, N, w, B)
        for row, ref in enumerate(bitwise_references(bufs, chosen(w, bits))):
            assert torch.equal(out.view(11, B)[row], ref), (bits, row)


def test_an_and_over_three_buffers_is_not_zeroed_by_the_padded_one(k):
    """W = 3 pads the stack to 4: the padded buffer would take part as 0 and zero every lane."""
    bufs = [torch.full((N,), 0b0111, dtype=torch.int32), torch.full((N,), 0b1110, dtype=torch.int32)]
    bufs.append(torch.full((N,), 0b0110, dtype=torch.int32))
    out = torch.full((11 * B,), 99, dtype=torch.int32)
    k.bitwise[(1,)](out, address_table(bufs), 0b111, N, 3, B)
    for row in (0, 4, 6, 7):
        assert torch.equal(out.view(11, B)[row], in_bounds(torch.full((N,), 0b0110, dtype=torch.int32))), row


def float_buffers(w, seed):
    """Integer-valued float32 buffers, different in every buffer."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(-40, 40, (N,), generator=g).float() + 100 * j for j in range(w)]


@pytest.mark.parametrize("w", WORLDS)
def test_a_combine_function_folds_the_valid_buffers_in_stack_order(k, w):
    bufs = float_buffers(w, seed=w)
    for bits in choices(w):
        out = torch.full((6 * B,), 99.0)
        k.ordered[(1,)](out, address_table(bufs), bits, N, w, B)
        valid = chosen(w, bits)
        lanes = torch.arange(N)
        masked = [torch.where(lanes < N - 2, b, torch.full_like(b, -5.0)) for b in bufs]
        first = in_bounds(folded(bufs, valid, lambda a, b: a, torch.float32))
        last = in_bounds(folded([(b.int() * 2).float() for b in bufs], valid, lambda a, b: b, torch.float32))
        last_masked = in_bounds(folded(masked, valid, lambda a, b: b, torch.float32))
        for row, ref in enumerate([first, last, last_masked] * 2):
            assert torch.equal(out.view(6, B)[row], ref), (bits, row)


@pytest.mark.parametrize("w", WORLDS)
def test_elementwise_math_between_the_access_and_its_reduction_folds_the_valid_buffers_only(k, w):
    """``tl.exp``, ``tl.abs``, ``tl.sqrt`` are taken buffer by buffer: the padded entries' and the masked-out
    buffers' exp(0) = 1 take no part in the sum, their -|0| = 0 none in the max of negative values."""
    g = torch.Generator().manual_seed(w)
    bufs = [(torch.randint(1, 5, (N,), generator=g) * (-1) ** j).float() for j in range(w)]
    for bits in choices(w):
        out = torch.full((6 * B,), 99.0)
        k.functions[(1,)](out, address_table(bufs), bits, N, w, B)
        valid = chosen(w, bits)
        exp = in_bounds(folded([torch.exp(b) for b in bufs], valid, torch.add, torch.float32))
        top = in_bounds(folded([-b.abs() for b in bufs], valid, torch.maximum, torch.float32))
        low = in_bounds(folded([torch.sqrt(b * 2 + 20) for b in bufs], valid, torch.minimum, torch.float32))
        for row, ref in enumerate([exp, top, low] * 2):
            assert torch.allclose(out.view(6, B)[row], ref, rtol=1e-6, atol=0), (bits, row)


def first_extremum(stack, valid, op):
    """Per lane, the first of the valid positions that holds their max (min); 0 with none (N lanes)."""
    if not valid:
        return torch.zeros(N)
    part = stack[valid]
    best = part.max(0).values if op == "max" else part.min(0).values
    return torch.tensor([float(valid[(part[:, q] == best[q]).nonzero()[0, 0]]) for q in range(N)])


@pytest.mark.parametrize("w", WORLDS)
def test_argmax_and_argmin_see_the_valid_buffers_only(k, w):
    """Even lanes hold negative values, odd lanes positive ones: a padded entry's 0 would win argmax on the even
    lanes and argmin on the odd ones; few values, so ties go to the first valid position."""
    g = torch.Generator().manual_seed(w)
    sign = torch.where(torch.arange(N) % 2 == 0, -1.0, 1.0)
    bufs = [sign * (1 + torch.randint(0, 3, (N,), generator=g).float()) for _ in range(w)]
    stack = torch.stack(bufs)
    for bits in choices(w):
        out = torch.full((6 * B,), 99.0)
        k.positions[(1,)](out, address_table(bufs), bits, N, w, B)
        valid = chosen(w, bits)
        top, bottom = in_bounds(first_extremum(stack, valid, "max")), in_bounds(first_extremum(stack, valid, "min"))
        for row, ref in enumerate([top, bottom, top, top, bottom, bottom]):
            assert torch.equal(out.view(6, B)[row], ref), (bits, row)


@pytest.mark.parametrize("rows,columns", [(1, 2), (2, 2), (4, 2)])
def test_a_2d_tile_reduces_its_first_dim_over_the_valid_entries(k, rows, columns):
    bufs = int_buffers(rows * columns, seed=rows)
    for bits in (0, (1 << rows * columns) - 1, 0b10110110 & ((1 << rows * columns) - 1)):
        out = torch.full((2 * columns * B,), 99, dtype=torch.int32)
        k.tile_rows[(1,)](out, address_table(bufs), bits, N, rows, columns, B)
        for c in range(columns):
            valid = [r * columns + c for r in range(rows) if bits >> (r * columns + c) & 1]
            this_and = in_bounds(folded(bufs, valid, torch.bitwise_and, torch.int32))
            this_xor = in_bounds(folded(bufs, valid, torch.bitwise_xor, torch.int32))
            assert torch.equal(out.view(2, columns, B)[0, c], this_and), (bits, c)
            assert torch.equal(out.view(2, columns, B)[1, c], this_xor), (bits, c)


def table_references(bufs, valid):
    """What ``table_only`` writes, row by row."""
    stack = torch.stack(bufs)
    this_and = folded(bufs, valid, torch.bitwise_and, torch.int32)
    this_xor = folded(bufs, valid, torch.bitwise_xor, torch.int32)
    this_or = folded(bufs, valid, torch.bitwise_or, torch.int32)
    last = folded([b * 2 for b in bufs], valid, lambda a, b: b, torch.int32)
    top = first_extremum(stack, valid, "max").to(torch.int32)
    return [in_bounds(ref) for ref in (this_and, this_xor, this_or, last, top)]


@pytest.mark.parametrize("w", WORLDS)
def test_table_reductions(k, w):
    bufs = int_buffers(w, seed=w)
    for bits in choices(w):
        out = torch.full((5 * B,), 99, dtype=torch.int32)
        k.table_only[(1,)](out, address_table(bufs), bits, N, w, B)
        for row, ref in enumerate(table_references(bufs, chosen(w, bits))):
            assert torch.equal(out.view(5, B)[row], ref), (bits, row)


@pytest.mark.parametrize("w,lws,rank", [(2, 1, 0), (3, 1, 2), (5, 2, 1)])
def test_table_reductions_over_remote_peers(tmp_path, w, lws, rank):
    """``table_only`` with ``remote="nvshmem"``: some or every peer fetched by (simulated) NVSHMEM gets, rank 0
    left out by the mask."""
    kernels = transpiled(tmp_path, remote_source(KERNELS), "kernels_reductions_v13_remote")
    bufs = int_buffers(w, seed=w)
    s = symmetric(w, lws, N, torch.int32, bufs)
    bits = ((1 << w) - 1) & ~1

    def body():
        out = torch.full((5 * B,), 99, dtype=torch.int32)
        kernels.table_only[(1,)](out, s[rank].remote_ptrs, bits, N, w, B)
        return out

    out = on_rank(body)
    for row, ref in enumerate(table_references(bufs, chosen(w, bits))):
        assert torch.equal(out.view(5, B)[row], ref), row


MULTI = """\
import triton
import triton.language as tl
import castpile


@triton.jit
def pick(a, i, b, j):
    return a, i


@triton.jit
def k(out, table, W: tl.constexpr, B: tl.constexpr):
    bufs = castpile.multicast_like(out, table[:W], shape=(B,))
    offs = tl.arange(0, B)
    v, at = {call}
    tl.store(out + offs, v)
"""


@pytest.mark.parametrize(
    "call",
    [
        "tl.reduce((bufs[offs], offs + tl.zeros((W, B), tl.int32)), 0, pick)",
        "tl.reduce((tl.load(bufs[offs]), offs + tl.zeros((W, B), tl.int32)), axis=0, combine_fn=pick)",
    ],
)
def test_a_multi_operand_reduce_over_the_stack_is_a_located_error(call):
    from testkit.diagnostics import diagnostics_of

    source = MULTI.format(call=call)
    line = source.splitlines().index(f"    v, at = {call}") + 1
    [(got_line, got_col, code, params)] = diagnostics_of(source)
    assert (got_line, got_col, code, params) == (line, 13, "E419", {"name": "bufs"})


def test_a_multi_operand_reduce_over_an_element_dim_is_left_to_triton():
    source = MULTI.format(call="tl.reduce((bufs[offs], offs + tl.zeros((W, B), tl.int32)), 1, pick)")
    assert "_castpile_load" in castpile.transpile(source, "k.py").decode()


GUARDED = """\
import triton
import triton.language as tl
import castpile


@triton.jit
def both_max(a, i, b, j):
    return tl.maximum(a, b), tl.maximum(i, j)


@triton.jit
def k(out, at, table, n, W: tl.constexpr, WP: tl.constexpr, B: tl.constexpr, AX: tl.constexpr):
    bufs = castpile.multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, B)
    rows = tl.arange(0, WP)
    v, i = tl.reduce((bufs[offs], rows[:, None] + offs * 0), AX, both_max)
    tl.store(out + rows, v)
    tl.store(at + rows, i)
"""


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_multi_operand_reduce_over_a_constexpr_axis_is_triton_s_and_refused_at_0(tmp_path, strategy):
    """With its axis a constexpr parameter, a multi-operand ``tl.reduce`` of an access reduces the loaded P + I
    tensor (padded rows and lanes out of bounds 0) over axis 1, and where the axis holds 0 it is refused when Triton
    compiles it, naming the call (as E419 refuses the literal)."""
    kernels = transpiled(tmp_path, GUARDED, "guarded", strategy=strategy)
    w = 3
    bufs = [torch.arange(N, dtype=torch.int32) * (j + 1) - 20 * j for j in range(w)]
    out, at = torch.full((4,), 99, dtype=torch.int32), torch.full((4,), 99, dtype=torch.int32)
    kernels.k[(1,)](out, at, address_table(bufs), N, w, 4, B, 1)
    loaded = torch.zeros(4, B, dtype=torch.int32)
    loaded[:w, :N] = torch.stack(bufs)
    assert torch.equal(out, loaded.max(1).values) and torch.equal(at, torch.arange(4, dtype=torch.int32))
    line = GUARDED.splitlines().index("    v, i = tl.reduce((bufs[offs], rows[:, None] + offs * 0), AX, both_max)") + 1
    with pytest.raises(Exception, match=rf"guarded\.py:{line}: error: tl\.reduce over axis 0 of 'bufs' with several"):
        kernels.k[(1,)](out, at, address_table(bufs), N, w, 4, B, 0)


def test_a_multi_operand_reduce_over_a_constexpr_axis_compiles_for_sm90_and_is_refused_at_0(tmp_path):
    sig = {
        "out": "*i32",
        "at": "*i32",
        "table": "*i64",
        "n": "i32",
        **dict.fromkeys(("W", "WP", "B", "AX"), "constexpr"),
    }
    jobs = []
    for strategy in castpile.STRATEGIES:
        path = tmp_path / f"guarded_{strategy}.py"
        path.write_bytes(castpile.transpile(GUARDED, str(path), strategy=strategy))
        for axis in (0, 1):
            constexprs = {"W": 3, "WP": 4, "B": 16, "AX": axis}
            jobs.append(Job(path, "k", sig, constexprs, name=f"{strategy} {axis}"))
    results = compile_for_sm90(jobs, tmp_path)
    line = GUARDED.splitlines().index("    v, i = tl.reduce((bufs[offs], rows[:, None] + offs * 0), AX, both_max)") + 1
    for strategy in castpile.STRATEGIES:
        assert results[f"{strategy} 1"].ok, results[f"{strategy} 1"].error
        refused = results[f"{strategy} 0"]
        site = f"guarded_{strategy}.py:{line}: error: tl.reduce over axis 0 of 'bufs' with several operands"
        assert not refused.ok and site in refused.error, refused.error
