"""Language v1.1: each defect found by outside testing in what lowered kernels compute, run in the interpreter
against torch references (W host tensors stand in for W GPUs) or compiled for sm_90.

Names, scopes and located errors: tests/test_language_v11_names_errors.py."""

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import address_table, padded
from testkit.v11 import KERNELS, ramps, v11_kernels  # noqa: F401 (the fixture k)


# 1. Runtime products in offsets print as products, never powers.
@pytest.mark.parametrize("w", [1, 3])
def test_runtime_cube_and_square_indices(k, w):
    n, b = 4, 8
    bufs = ramps(w, n * n * n)
    out = torch.full((2 * padded(w) * b,), -1.0)
    k.cube_load[(1,)](out, address_table(bufs), n, w, b)
    got = out.view(2, padded(w), b)
    a = torch.arange(b)
    h = a // 2
    for j, buf in enumerate(bufs):
        cube = buf.view(n, n, n)
        assert torch.equal(got[0, j], torch.where(a < n, cube[1, 2, a.clamp(max=n - 1)], 0.0))
        assert torch.equal(got[1, j], buf[h * h])


def test_no_powers_in_output_and_it_compiles_for_sm90(tmp_path):
    out = castpile.transpile(KERNELS.read_bytes(), str(KERNELS))
    assert b"**" not in out.split(b"# ---- castpile")[0]
    module = tmp_path / "kernels_v11.py"
    module.write_bytes(out)
    sig = {"out": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "B": "constexpr"}
    [result] = compile_for_sm90([Job(module, "cube_load", sig, {"W": 3, "B": 16})], tmp_path).values()
    assert result.ok, result.error


# 2. Every index, value and mask is evaluated once, in source order.
@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_v11_kernels_compile_for_sm90(tmp_path, strategy):
    module = tmp_path / f"kernels_v11_{strategy}.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy))
    counter = {"out": "*fp32", "table": "*i64", "ctr": "*i32"}
    jobs = [
        Job(module, "flat_at_counter", {**counter, "W": "constexpr"}, {"W": 3}),
        Job(module, "load_at_counter", {**counter, "n": "i32", "W": "constexpr"}, {"W": 3}),
        Job(module, "bump_at_counter", {**counter, "n": "i32", "W": "constexpr"}, {"W": 3}),
        Job(
            module,
            "store_value_first",
            {"out": "*i32", "table": "*i64", "ctr": "*i32", "n": "i32", "W": "constexpr"},
            {"W": 3},
        ),
    ]
    fp32 = {"out": "*fp32", "table": "*i64"}
    jobs += [
        Job(
            module,
            "stack_extrema",
            {**fp32, "example": "*fp32", "n": "i32", "OP": "constexpr", "W": "constexpr", "B": "constexpr"},
            {"OP": op, "W": 3, "B": 16},
            name=f"stack_extrema_{op}",
        )
        for op in ("max", "min")
    ] + [
        Job(
            module,
            "full_extent",
            {**fp32, "M": "constexpr", "N": "constexpr", "W": "constexpr"},
            {"M": 2, "N": 4, "W": 3},
        ),
        Job(module, "named_slice", {**fp32, "W": "constexpr"}, {"W": 3}),
        Job(
            module,
            "group_sums",
            {**fp32, "n": "i32", "R": "constexpr", "C": "constexpr", "B": "constexpr"},
            {"R": 2, "C": 3, "B": 16},
        ),
        Job(module, "lookalike_names", {**fp32, "n": "i32", "W": "constexpr", "B": "constexpr"}, {"W": 3, "B": 16}),
        Job(module, "helper_lookalike", {**fp32, "W": "constexpr"}, {"W": 3}),
        Job(
            module,
            "keywords_in_source_order",
            {**counter, "n": "i32", "W": "constexpr", "B": "constexpr"},
            {"W": 3, "B": 16},
        ),
        Job(
            module,
            "flags_in_source_order",
            {"flags": "*i32", "table": "*i64", "ctr": "*i32", "W": "constexpr"},
            {"W": 3},
        ),
    ]
    results = compile_for_sm90(jobs, tmp_path)
    assert len(results) == 13 and all(r.ok for r in results.values()), {
        k: r.error for k, r in results.items() if not r.ok
    }


@pytest.mark.parametrize("w", [1, 3])
def test_impure_index_without_bounds(k, w):
    bufs = ramps(w, 4)
    ctr = torch.tensor([2], dtype=torch.int32)
    out = torch.full((padded(w),), -1.0)
    k.flat_at_counter[(1,)](out, address_table(bufs), ctr, w)
    assert ctr.item() == 3 and torch.equal(out[:w], torch.stack([b[2] for b in bufs]))


@pytest.mark.parametrize("w", [1, 3])
def test_atomic_index_runs_once_and_bounds_check_the_slot_used(k, w):
    n = 5
    bufs = ramps(w, n)
    ctr = torch.tensor([n - 1], dtype=torch.int32)  # one increment: slot n - 1, in bounds
    out = torch.full((padded(w),), -1.0)
    k.load_at_counter[(1,)](out, address_table(bufs), ctr, n, w)
    assert ctr.item() == n
    assert torch.equal(out[:w], torch.stack([b[n - 1] for b in bufs]))


@pytest.mark.parametrize("w", [1, 3])
def test_augmented_load_and_atomic_indices_run_once(k, w):
    n = 8
    bufs = ramps(w, n)
    before = [b.clone() for b in bufs]
    ctr = torch.tensor([0], dtype=torch.int32)
    out = torch.full((padded(w),), -1.0)
    k.bump_at_counter[(1,)](out, address_table(bufs), ctr, n, w)
    # += at slot 0, tl.load at slot 1 (its mask's atomic adds 100), tl.atomic_add at slot 102: out of bounds
    assert ctr.item() == 1 + 1 + 100 + 1
    for j, (b, old) in enumerate(zip(bufs, before)):
        expected = old.clone()
        expected[0] += 1
        assert torch.equal(b, expected), j
        assert out[j] == old[1]


@pytest.mark.parametrize("w", [1, 2])
def test_store_evaluates_the_value_before_the_index(k, w):
    bufs = [torch.full((16,), -1, dtype=torch.int32) for _ in range(w)]
    ctr = torch.tensor([0], dtype=torch.int32)
    k.store_value_first[(1,)](bufs[0], address_table(bufs), ctr, 16, w)
    assert ctr.item() == 11
    for b in bufs:  # value: atomic_add(ctr, 10) -> 0; index: atomic_add(ctr, 1) -> 10
        expected = torch.full((16,), -1, dtype=torch.int32)
        expected[10] = 0
        assert torch.equal(b, expected)


# 7. Ellipsis
@pytest.mark.parametrize("w", [1, 3])
def test_ellipsis_stands_for_full_extents(k, w):
    m, n = 2, 4
    bufs = ramps(w, m * n)
    out = torch.full((padded(w) * m * n + padded(w) * n,), -1.0)
    k.full_extent[(1,)](out, address_table(bufs), m, n, w)
    full = out[: padded(w) * m * n].view(padded(w), m, n)
    row = out[padded(w) * m * n :].view(padded(w), n)
    for j, b in enumerate(bufs):
        assert torch.equal(full[j], b.view(m, n)) and torch.equal(row[j], b.view(m, n)[1])
    assert not full[w:].any() and not row[w:].any()


# 8. and 9. Table slices: a name bound once, static_range bounds.
@pytest.mark.parametrize("w", [2, 4])
def test_table_slice_bound_to_a_name(k, w):
    bufs = ramps(w, 3)
    out = torch.full((padded(w - 1),), -1.0)
    k.named_slice[(1,)](out, address_table(bufs), w)
    assert torch.equal(out[: w - 1], torch.stack([b[0] for b in bufs[1:]]))


def test_slice_bounds_from_static_range_variables(k):
    r, c, n, b = 2, 3, 5, 8
    bufs = ramps(r * c, n)
    out = torch.full((r * b,), -1.0)
    k.group_sums[(1,)](out, address_table(bufs), n, r, c, b)
    for g in range(r):
        ref = torch.stack(bufs[g * c : (g + 1) * c]).sum(0)
        assert torch.equal(out.view(r, b)[g, :n], ref) and not out.view(r, b)[g, n:].any()


# 10. Stack reductions see the valid buffers only.
@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("w", [1, 3, 5])
def test_stack_extrema_ignore_padding(k, w, op):
    n, b = 6, 8
    sign = -1 if op == "max" else 1
    bufs = [sign * (torch.arange(n, dtype=torch.float32) + 1 + 10 * j) for j in range(w)]
    out = torch.full((2 * b,), 99.0)
    k.stack_extrema[(1,)](out, bufs[0], address_table(bufs), n, op, w, b)
    stacked = torch.stack(bufs)
    ref = stacked.max(0).values if op == "max" else stacked.min(0).values
    for half in out.view(2, b):
        assert torch.equal(half[:n], ref) and not half[n:].any()


# 26. An atomic whose result is unused assembles no old values.
def test_unused_atomic_compiles_to_the_hand_written_reductions(tmp_path):
    module = tmp_path / "kernels_v11.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS)))
    sig = {"example": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "B": "constexpr"}
    jobs = [Job(module, name, sig, {"W": 4, "B": 256}) for name in ("scatter_add_unused", "scatter_add_by_hand")]
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items()}

    def memory_ops(name):
        ptx = results[name].ptx.read_text()
        return sorted(
            line.split()[0]
            for line in ptx.splitlines()
            if line.strip().startswith(("red.", "atom.", "@")) and ("red." in line or "atom." in line)
        )

    ours, hand = memory_ops("scatter_add_unused"), memory_ops("scatter_add_by_hand")
    assert ours == hand and ours, (ours, hand)


# Found by a new user's review of v1.1 (each failed before its fix).
def test_multiline_augmented_value_keeps_its_parentheses(k):
    bufs = [torch.full((8,), 100.0) for _ in range(3)]
    k.bump_multiline[(1,)](bufs[0], address_table(bufs), 8, 3, 8)
    for b in bufs:
        assert torch.equal(b, 100.0 - (torch.arange(8.0) - 5))


@pytest.mark.parametrize("w", [1, 3])
def test_every_spelling_of_a_stack_max(k, w):
    n, b = 6, 8
    bufs = [-(torch.arange(n, dtype=torch.float32) + 1 + 10 * j) for j in range(w)]
    out = torch.full((7 * b,), 99.0)
    k.extrema_spellings[(1,)](out, address_table(bufs), n, w, b)
    rows = out.view(7, b)
    stacked = torch.stack(bufs)
    for r in range(5):
        assert torch.equal(rows[r, :n], stacked.max(0).values) and not rows[r, n:].any(), r
    for r in (5, 6):
        assert torch.equal(rows[r, :n], stacked.sum(0)) and not rows[r, n:].any(), r


def test_triton_language_functions_imported_by_name(k):
    w, n, b = 3, 6, 8
    bufs = ramps(w, n)
    before = [x.clone() for x in bufs]
    out = torch.full((padded(w) * b,), 99.0)
    k.direct_imports[(1,)](out, address_table(bufs), n, w, b)
    got = out.view(padded(w), b)
    for j, old in enumerate(before):
        assert torch.equal(got[j, :3], old[:3]) and torch.equal(got[j, 3:], torch.full((5,), -1.0))
        expected = old.clone()
        expected[:2] += 1
        assert torch.equal(bufs[j], expected)


def test_masked_off_old_values_are_zero(k):
    w, n, b = 3, 6, 8
    bufs = ramps(w, n)
    before = [x.clone() for x in bufs]
    out = torch.full((padded(w) * b,), 99.0)
    k.masked_old_values[(1,)](out, address_table(bufs), n, w, b)
    got = out.view(padded(w), b)
    for j, old in enumerate(before):
        assert torch.equal(got[j, :2], old[:2]) and not got[j, 2:].any()


@pytest.mark.parametrize("w", [1, 3])
def test_keyword_arguments_run_in_the_order_written(k, w):
    n, b = 6, 8
    bufs = [torch.zeros(n) for _ in range(w)]
    ctr = torch.tensor([2], dtype=torch.int32)
    k.keywords_in_source_order[(1,)](bufs[0], address_table(bufs), ctr, n, w, b)
    expected = torch.zeros(n)
    expected[:2] = 3.0  # mask first: o < 2 (ctr 2 -> 3); then val: 3 (ctr 3 -> 4)
    assert ctr.item() == 4 and all(torch.equal(x, expected) for x in bufs)


@pytest.mark.parametrize("w", [1, 3])
def test_signal_and_wait_keywords_run_in_the_order_written(k, w):
    """mask before value with wait_for's (or reset's) default between them in the helper: mask runs first."""
    flags = [torch.tensor([0, 0, 7, 0], dtype=torch.int32) for _ in range(w)]  # flag 2 already holds what wait wants
    ctr = torch.zeros(1, dtype=torch.int32)
    k.flags_in_source_order[(1,)](flags[0], address_table(flags), ctr, w)
    assert ctr.item() == 6
    expected = torch.tensor([11, 1, 0, 0], dtype=torch.int32)  # set to 11; swapped 0 -> 1; seen at 7 and reset to 0
    assert all(torch.equal(f, expected) for f in flags), flags
