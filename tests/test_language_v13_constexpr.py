"""Language v1.3's compile-time values that castpile reads itself: a binding's ``align=`` and a stack reduction's
``axis=``, each in every spelling (a literal, a constexpr parameter, a conditional of constexprs, a constexpr global,
a module's attribute, a local annotated ``tl.constexpr``), run in the interpreter under both strategies against
torch and compiled for sm_90.

The kernels are written from :data:`MODULE`, one module per spelling, with the attribute's module
(``constexpr_values``) beside them.  ``aligned`` loads, reduces (through a Multicast helper too), stores and
updates W buffers of a table and of a tile bound with ``align=16``; compiled, its loads are 128 bits wide, which
only an ``align=`` that reached the helpers gives.  ``reduced`` reduces axis 0 of a table and a tile whose
``ptr_mask`` is a run-time bit set, with every reduction (sum, max, min, argmax, argmin, xor_sum, tl.reduce): a
padded or masked-off buffer that took part as 0 would change max, min, argmax, and, and a combine function's last
value.  ``either_axis`` takes its axis from a parameter, 0 (the stack's reduction) or 1 (Triton's, over the loaded
P + I tensor, padded rows 0).
"""

from functools import reduce
from pathlib import Path

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, import_file, padded

# spelling -> how a value whose literal text is v, of the keyword k, is written
SPELLINGS = {
    "literal": lambda k, v: v,
    "parameter": lambda k, v: f"K_{k}",
    "conditional": lambda k, v: f"{v} if MODE == 1 else K_{k}",
    "global": lambda k, v: f"G_{k}",
    "attribute": lambda k, v: f"constexpr_values.G_{k}",
    "local": lambda k, v: f"l_{k}",
}
VALUES = {"align": "16", "axis": "0"}
VALUES_MODULE = "import triton.language as tl\n\n" + "".join(f"G_{k} = tl.constexpr({v})\n" for k, v in VALUES.items())

MODULE = '''\
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import triton
import triton.language as tl

import castpile
import constexpr_values

G_align = tl.constexpr(16)
G_axis = tl.constexpr(0)


@triton.jit
def bit_and(a, b):
    return a & b


@triton.jit
def last(a, b):
    return b


@triton.jit
def stack_total(bufs: castpile.Multicast, offs):
    return tl.sum(bufs[offs], axis=0)


@triton.jit
def aligned(out, table, vals, n, W: tl.constexpr, WP: tl.constexpr, B: tl.constexpr, MODE: tl.constexpr,
            K_align: tl.constexpr):
    """Rows of out (float32): the table's stack sum, the same through a helper, the tile's stack max, then the
    table's P + I load (WP rows); then every buffer += 1 and += vals (an atomic)."""
{align_local}    p = tl.arange(0, WP)
    bufs = castpile.multicast_like(out, table[:W], shape=(n,), align={align})
    tile = castpile.multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=p < W,
                                   align={align})
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(out + o, tl.sum(bufs[o], axis=0))
    tl.store(out + B + o, stack_total(bufs, o))
    tl.store(out + 2 * B + o, tl.max(tile[o], axis=0))
    tl.store(out + 3 * B + p[:, None] * B + o[None, :], bufs[o])
    bufs[o] += 1.0
    tl.atomic_add(tile[o], tl.load(vals + o), sem="relaxed")


@triton.jit
def reduced(out, table, bits, n, W: tl.constexpr, B: tl.constexpr, MODE: tl.constexpr, K_axis: tl.constexpr):
    """Rows of out (int32): reductions over axis 0 of the table (rows 0-6) and of a tile (rows 7-9), the buffers
    whose bit of bits is set."""
{axis_local}    p = tl.arange(0, triton.next_power_of_2(W))
    chosen = ((bits >> p) & 1) != 0
    bufs = castpile.multicast_like(out, table[:W], shape=(n,), ptr_mask=chosen)
    tile = castpile.multicast_like(out, tl.load(table + p, mask=p < W, other=0), shape=(n,), ptr_mask=chosen & (p < W))
    o = tl.arange(0, B)
    tl.store(out + 0 * B + o, tl.sum(bufs[o], axis={axis}))
    tl.store(out + 1 * B + o, tl.max(bufs[o], {axis}))
    tl.store(out + 2 * B + o, bufs[o].min(axis={axis}))
    tl.store(out + 3 * B + o, tl.argmax(bufs[o], axis={axis}))
    tl.store(out + 4 * B + o, tl.xor_sum(bufs[o], {axis}))
    tl.store(out + 5 * B + o, tl.reduce(bufs[o], {axis}, bit_and))
    tl.store(out + 6 * B + o, tl.reduce(tl.load(bufs[o], mask=o < n - 2, other=-5), axis={axis}, combine_fn=last))
    tl.store(out + 7 * B + o, tl.max(tile[o], axis={axis}))
    tl.store(out + 8 * B + o, tl.reduce(tile[o], {axis}, bit_and))
    tl.store(out + 9 * B + o, tl.argmin(tile[o] * 2, axis={axis}))


@triton.jit
def either_axis(out, table, bits, n, W: tl.constexpr, WP: tl.constexpr, B: tl.constexpr, AX: tl.constexpr):
    """Blocks of out (int32, WP x B each): max, and, argmin over axis AX of the table, dims kept (broadcast)."""
    p = tl.arange(0, WP)
    bufs = castpile.multicast_like(out, table[:W], shape=(n,), ptr_mask=((bits >> p) & 1) != 0)
    o = tl.arange(0, B)
    at = p[:, None] * B + o[None, :]
    tl.store(out + 0 * WP * B + at, tl.max(bufs[o], axis=AX, keep_dims=True))
    tl.store(out + 1 * WP * B + at, tl.reduce(bufs[o], AX, bit_and, keep_dims=True))
    tl.store(out + 2 * WP * B + at, tl.argmin(bufs[o], AX, keep_dims=True))
'''


def spelled_source(spelling: str) -> str:
    """:data:`MODULE` with ``align=`` and ``axis=`` written as ``spelling``."""
    write = SPELLINGS[spelling]
    local = {f"{k}_local": f"    l_{k}: tl.constexpr = {v}\n" if spelling == "local" else "" for k, v in VALUES.items()}
    return MODULE.format(**local, **{k: write(k, v) for k, v in VALUES.items()})


def write_module(directory: Path, spelling: str, strategy: str) -> Path:
    """The module of ``spelling`` transpiled under ``strategy`` into ``directory``, its attribute's module beside it."""
    (directory / "constexpr_values.py").write_text(VALUES_MODULE)
    path = directory / f"spelled_{spelling}_{strategy}.py"
    path.write_bytes(castpile.transpile(spelled_source(spelling), str(path), strategy=strategy))
    return path


@pytest.fixture(scope="module", params=[(s, t) for s in SPELLINGS for t in castpile.STRATEGIES], ids="-".join)
def k(request, tmp_path_factory):
    """The kernels of one spelling, transpiled under one strategy."""
    spelling, strategy = request.param
    return import_file(write_module(tmp_path_factory.mktemp(spelling), spelling, strategy))


N, B = 13, 16  # lanes N..B-1 are out of bounds


def in_bounds(ref: torch.Tensor) -> torch.Tensor:
    """``ref`` (N lanes) widened to B lanes, those out of bounds 0."""
    return torch.cat([ref, torch.zeros(B - N, dtype=ref.dtype)])


# -- align= ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("w", [1, 3, 4])
def test_an_align_in_any_spelling_keeps_every_access_right(k, w):
    g = torch.Generator().manual_seed(w)
    bufs = [torch.randint(-50, 50, (N,), generator=g).float() for _ in range(w)]
    before = torch.stack(bufs).clone()
    vals = torch.randint(0, 9, (B,), generator=g).float()
    out = torch.full(((3 + padded(w)) * B,), 99.0)
    k.aligned[(1,)](out, address_table(bufs), vals, N, w, padded(w), B, 1, 16)
    rows = out.view(3 + padded(w), B)
    assert torch.equal(rows[0], in_bounds(before.sum(0)))
    assert torch.equal(rows[1], in_bounds(before.sum(0)))
    assert torch.equal(rows[2], in_bounds(before.max(0).values))
    stacked = torch.zeros(padded(w), B)
    stacked[:w, :N] = before
    assert torch.equal(rows[3:], stacked)
    assert torch.equal(torch.stack(bufs), before + 1 + vals[:N])


@pytest.mark.parametrize(("bad", "shown"), [(12, "12"), (0, "0"), ("16", "'16'")])
def test_an_align_outside_the_powers_of_two_is_an_error_naming_the_binding(tmp_path, bad, shown):
    path = write_module(tmp_path, "parameter", "loop")
    module = import_file(path)
    written = spelled_source("parameter").splitlines()
    line = next(n for n, text in enumerate(written, 1) if "table[:W], shape=(n,), align=K_align" in text)
    bufs = [torch.zeros(N) for _ in range(2)]
    with pytest.raises(Exception) as refused:
        module.aligned[(1,)](torch.zeros(5 * B), address_table(bufs), torch.zeros(B), N, 2, 2, B, 1, bad)
    message = str(refused.value)
    expected = f"{path}:{line}: error: multicast_like: align= must be a power-of-two integer (bytes) or None"
    assert expected in message and f"not {shown}" in message, message


def test_an_align_of_none_from_a_parameter_is_no_alignment(tmp_path):
    module = import_file(write_module(tmp_path, "parameter", "gather"))
    bufs = [torch.arange(N).float(), torch.ones(N)]
    out = torch.zeros(5 * B)
    module.aligned[(1,)](out, address_table(bufs), torch.zeros(B), N, 2, 2, B, 1, None)
    assert torch.equal(out.view(5, B)[0], in_bounds(torch.arange(N).float() + 1))


# -- axis= -------------------------------------------------------------------------------------------------


def choices(w):
    """The ``ptr_mask`` bit sets a test runs: every buffer, all but rank 0, none, every other one."""
    every = (1 << w) - 1
    return sorted({every, every & ~1, 0, every & 0x55})


def int_buffers(w, seed):
    """int32 buffers, most bits set (an and over them is rarely 0), negative on even lanes and positive on odd ones
    (a 0 that took part would win max on the even lanes and min on the odd ones)."""
    g = torch.Generator().manual_seed(seed)
    bufs = [(~(1 << torch.randint(0, 30, (N,), generator=g))).to(torch.int32) for _ in range(w)]
    odd = torch.arange(N) % 2 == 1
    return [torch.where(odd, b & 0x7FFFFFFF, b | -0x80000000).to(torch.int32) for b in bufs]


def folded(bufs, valid, combine):
    """``combine`` folded over the valid buffers in stack order, 0 where there is none (N lanes)."""
    return reduce(combine, [bufs[j] for j in valid]) if valid else torch.zeros(N, dtype=torch.int32)


def first_extremum(stack, valid, op):
    """Per lane, the first valid position holding the max (min) of the valid buffers; 0 with none."""
    if not valid:
        return torch.zeros(N, dtype=torch.int32)
    part = stack[valid]
    best = part.max(0).values if op == "max" else part.min(0).values
    return torch.tensor([valid[(part[:, q] == best[q]).nonzero()[0, 0]] for q in range(N)], dtype=torch.int32)


def reduced_references(bufs, valid):
    """What ``reduced`` writes, row by row."""
    stack = torch.stack(bufs)
    masked = [torch.where(torch.arange(N) < N - 2, b, torch.full_like(b, -5)) for b in bufs]
    total = stack[valid].sum(0, dtype=torch.int32) if valid else torch.zeros(N, dtype=torch.int32)
    top = stack[valid].max(0).values if valid else torch.zeros(N, dtype=torch.int32)
    bottom = stack[valid].min(0).values if valid else torch.zeros(N, dtype=torch.int32)
    this_and = folded(bufs, valid, torch.bitwise_and)
    rows = [
        total,
        top,
        bottom,
        first_extremum(stack, valid, "max"),
        folded(bufs, valid, torch.bitwise_xor),
        this_and,
        folded(masked, valid, lambda a, b: b),
        top,
        this_and,
        first_extremum(stack * 2, valid, "min"),
    ]
    return [in_bounds(row.to(torch.int32)) for row in rows]


@pytest.mark.parametrize("w", [1, 3, 4, 6])
def test_an_axis_in_any_spelling_that_holds_0_folds_the_valid_buffers_only(k, w):
    bufs = int_buffers(w, seed=w)
    for bits in choices(w):
        out = torch.full((10 * B,), 99, dtype=torch.int32)
        k.reduced[(1,)](out, address_table(bufs), bits, N, w, B, 1, 0)
        valid = [j for j in range(w) if bits >> j & 1]
        for row, ref in enumerate(reduced_references(bufs, valid)):
            assert torch.equal(out.view(10, B)[row], ref), (bits, row)


def either_references(bufs, w, bits, axis):
    """What ``either_axis`` writes for ``axis``: over the valid buffers (0), or over each loaded row (1), padded
    and masked-off rows and lanes out of bounds 0."""
    wp = padded(w)
    valid = [j for j in range(w) if bits >> j & 1]
    if axis == 0:
        stack = torch.stack(bufs)
        rows = [
            stack[valid].max(0).values if valid else torch.zeros(N, dtype=torch.int32),
            folded(bufs, valid, torch.bitwise_and),
            first_extremum(stack, valid, "min"),
        ]
        return [in_bounds(row.to(torch.int32)).expand(wp, B) for row in rows]
    loaded = torch.zeros(wp, B, dtype=torch.int32)
    for j in valid:
        loaded[j, :N] = bufs[j]
    this_and = torch.tensor([reduce(lambda a, b: a & b, row.tolist()) for row in loaded], dtype=torch.int32)
    columns = [loaded.max(1).values, this_and, loaded.min(1).indices.to(torch.int32)]
    return [column[:, None].expand(wp, B) for column in columns]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("w", [1, 3, 4])
def test_an_axis_parameter_reduces_the_stack_at_0_and_the_elements_at_1(tmp_path, strategy, w):
    module = import_file(write_module(tmp_path, "parameter", strategy))
    bufs = int_buffers(w, seed=10 + w)
    for bits in choices(w):
        for axis in (0, 1):
            out = torch.full((3 * padded(w) * B,), 99, dtype=torch.int32)
            module.either_axis[(1,)](out, address_table(bufs), bits, N, w, padded(w), B, axis)
            for block, ref in enumerate(either_references(bufs, w, bits, axis)):
                assert torch.equal(out.view(3, padded(w), B)[block], ref), (bits, axis, block)


# -- compiled for sm_90 -----------------------------------------------------------------------------------

TYPES = {"out": "*fp32", "table": "*i64", "vals": "*fp32"}
ALIGNED = {"W": 4, "WP": 4, "B": 1024, "MODE": 1, "K_align": 16}
DIVISIBLE = {i: [["tt.divisibility", 16]] for i in range(4)}  # what Triton's JIT records for out, table, vals, n


def sm90_jobs(directory: Path) -> list[Job]:
    """Every spelling's kernels under both strategies, ``either_axis`` at both axes, and align= given None and 12."""
    jobs = []
    for spelling in SPELLINGS:
        source = spelled_source(spelling)
        for strategy in castpile.STRATEGIES:
            path = write_module(directory, spelling, strategy)
            aligned = signature(source, "aligned", TYPES)
            ints = signature(source, "reduced", {"out": "*i32", "table": "*i64"})
            jobs.append(Job(path, "aligned", aligned, ALIGNED, DIVISIBLE, name=f"aligned {spelling} {strategy}"))
            jobs.append(
                Job(path, "reduced", ints, {"W": 3, "B": 16, "MODE": 1, "K_axis": 0}, name=f"{spelling} {strategy}")
            )
            if spelling == "parameter":
                either = signature(source, "either_axis", {"out": "*i32", "table": "*i64"})
                for axis in (0, 1):
                    constexprs = {"W": 3, "WP": 4, "B": 16, "AX": axis}
                    jobs.append(Job(path, "either_axis", either, constexprs, name=f"either {axis} {strategy}"))
                for align in (None, 12):
                    given = ALIGNED | {"K_align": align}
                    jobs.append(Job(path, "aligned", aligned, given, DIVISIBLE, name=f"align {align} {strategy}"))
    return jobs


def test_every_spelling_compiles_for_sm90_and_an_align_reaches_the_loads(tmp_path):
    results = compile_for_sm90(sm90_jobs(tmp_path), tmp_path, processes=2)
    line = next(n for n, text in enumerate(spelled_source("parameter").splitlines(), 1) if "align=K_align" in text)
    for strategy in castpile.STRATEGIES:
        refused = results.pop(f"align 12 {strategy}")
        site = f"{tmp_path / f'spelled_parameter_{strategy}.py'}:{line}: error: multicast_like: align="
        assert not refused.ok and site in refused.error and "not 12" in refused.error, refused.error
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
    for strategy in castpile.STRATEGIES:  # without an alignment the buffers are read 32 bits at a time
        assert "ld.global.b32" in results[f"align None {strategy}"].ptx.read_text()
    for spelling in SPELLINGS:
        for strategy in castpile.STRATEGIES:
            ptx = results[f"aligned {spelling} {strategy}"].ptx.read_text()
            assert "ld.global.b32" not in ptx and "ld.global.v4.b32" in ptx, f"{spelling} {strategy}: align= lost"
