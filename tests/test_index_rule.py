"""The index rule (docs/language.md, "What castpile emits for an index"): what it keeps, and the code it gives.

* Semantics, in the interpreter against torch, under both strategies: row loops (``for`` over a range from 0,
  the persistent ``while`` from ``tl.program_id``: the interpreter runs ranges of constexprs only, and
  tests/lowering/test_lowering_index_rule.py compiles the ``for`` from it) read, update and reduce each buffer's row; an index that goes negative (``row - 1``, ``cols - 2``,
  an index evaluated once that holds -1) still reads nothing; a summand castpile classed as a scalar that is a
  tensor after all (a Multicast parameter passed one) takes its place in the offsets; a flat binding's row loop
  under a mask that proves its bounds (castpile/compiler/mask_bounds.py) reads, stores and adds each row, and one
  whose mask proves nothing still reads nothing past the extent.  The same kernels compile for sm_90.
* The code: the row loops of the issue-35 sweep (benchmarks/kernels/row_bodies.py, generated under both strategies)
  compiled for sm_90 on the CPU.  Every kernel's PTX, 2-D bindings and 1-D ones (``shape=(M * D,)``, read at
  ``row * D + cols`` under ``mask=cols < D``: the mask proves the bounds, castpile/compiler/mask_bounds.py), is its
  hand-written twin's instruction for instruction
  (hand_row_bodies.py: ``ptr + row * D + cols`` under ``cols < D``), with no signed compare of a register against
  -1 or 0 (the ``row >= 0`` that made ptxas recompute the lanes' predicates each row) and the row offset widened to
  64 bits once per row, not per chunk (``mul.wide.s32``); the lowering before the rule
  (``row_bodies_spec.before_rule``) had both, so these checks see the difference.
"""

import re
import sys
from pathlib import Path

import libcst as cst
import pytest
import torch

import castpile
from castpile.compiler.bindings import JitBindings
from castpile.compiler.index_facts import IndexFacts
from castpile.compiler.plan import Plan
from castpile.compiler.scopes import Resolver, Scope, collect_scope
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, transpiled

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "benchmarks" / "kernels"
sys.path.insert(0, str(KERNELS))
from row_bodies_spec import BINDINGS, BODIES, CASTS, LOOPS, before_rule, cp_name, hand_name  # noqa: E402
from row_idioms import IDIOMS, function, idiom_source  # noqa: E402

SOURCE = '''\
import triton
import triton.language as tl

import castpile as cp
from castpile import multicast_like


@triton.jit
def row_sums(out, table, M: tl.constexpr, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """out[row] = the stack's sum of row ``row``, a for loop (the interpreter runs ranges of constexprs only)."""
    bufs = multicast_like(out, table[:W], shape=(M, D))
    cols = tl.arange(0, BLOCK)
    for row in range(0, M):
        tl.store(out + row * BLOCK + cols, tl.sum(bufs[row, cols], axis=0))


@triton.jit
def row_updates(out, table, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """A while loop: each buffer's row += 1, then atomically += 2; out[row] = the stack's row loaded, summed."""
    bufs = multicast_like(out, table[:W], shape=(M, D))
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    while row < M:
        bufs[row, cols] += 1
        tl.atomic_add(bufs[row, cols], 2.0)
        x = bufs[row, cols]
        tl.store(out + row * BLOCK + cols, tl.sum(x, axis=0))
        row += tl.num_programs(0)


@triton.jit
def shifted(out, table, M: tl.constexpr, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """out[row] = twice the stack's sum at row - 1, column - 2 (loaded, and reduced): negative indices read 0."""
    bufs = multicast_like(out, table[:W], shape=(M, D))
    cols = tl.arange(0, BLOCK)
    for row in range(M):
        x = bufs[row - 1, cols - 2]
        tl.store(out + row * BLOCK + cols, tl.sum(x, axis=0) + tl.sum(bufs[row - 1, cols - 2], axis=0))


@triton.jit
def counted(out, table, ctr, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """out[pid] = the stack's sum at row (ctr's old value) - 1, an index evaluated once: -1 for the first program."""
    bufs = multicast_like(out, table[:W], shape=(M, D))
    cols = tl.arange(0, BLOCK)
    tl.store(out + tl.program_id(0) * BLOCK + cols, tl.sum(bufs[tl.atomic_add(ctr, 1) - 1, cols], axis=0))


@triton.jit
def _rows_sum(bufs: cp.Multicast, r, BLOCK: tl.constexpr):
    """The stack's sums at rows ``r`` (a tensor: the summand castpile classes as a scalar is none)."""
    cols = tl.arange(0, BLOCK)
    x = bufs[r, cols]
    return tl.sum(bufs[r, cols], axis=0) + tl.sum(x, axis=0)


@triton.jit
def rows_of(out, table, M, D, W: tl.constexpr, R: tl.constexpr, BLOCK: tl.constexpr):
    """out[k] = twice the stack's sum at row k - 1, through a Multicast parameter (row -1 reads 0)."""
    bufs = multicast_like(out, table[:W], shape=(M, D))
    k = tl.arange(0, R)
    h = _rows_sum(bufs, k[:, None] - 1, BLOCK)
    tl.store(out + k[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :], h)


@triton.jit
def tiled(out, table, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """row_sums through a tile of addresses, a persistent while loop: the row offset joins each pointer of the tile."""
    ptrs = tl.load(table + tl.arange(0, W))
    t = multicast_like(out, ptrs, shape=(M, D))
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    while row < M:
        tl.store(out + row * BLOCK + cols, tl.sum(t[row, cols], axis=0))
        row += tl.num_programs(0)


@triton.jit
def flat_row_sums(out, table, M: tl.constexpr, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """row_sums over a flat binding, read under ``mask=cols < D``: the mask proves the bounds."""
    bufs = multicast_like(out, table[:W], shape=(M * D,))
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    for row in range(0, M):
        tl.store(out + row * BLOCK + cols, tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0))


@triton.jit
def flat_row_writes(out, table, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """A persistent while loop over a flat binding, under masks that prove the bounds: out[row] = the stack's row
    summed, then every buffer's row set to 5 and atomically += 2."""
    bufs = multicast_like(out, table[:W], shape=(M * D,))
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        tl.store(out + row * BLOCK + cols, tl.sum(tl.load(bufs[cols + row * D], mask=mask, other=0), axis=0))
        tl.store(bufs[row * D + cols], tl.full((BLOCK,), 5.0, tl.float32), mask=mask)
        tl.atomic_add(bufs[D * row + cols], 2.0, mask=D > cols)
        row += tl.num_programs(0)


@triton.jit
def flat_overlapping(out, table, M: tl.constexpr, D, W: tl.constexpr, BLOCK: tl.constexpr):
    """out[row] = the stack's sum of D + 2 elements from row ``row``'s start: the mask proves nothing, and the last
    row's two past the extent read 0."""
    bufs = multicast_like(out, table[:W], shape=(M * D,))
    cols = tl.arange(0, BLOCK)
    for row in range(0, M):
        x = tl.load(bufs[row * D + cols], mask=cols < D + 2, other=0)
        tl.store(out + row * BLOCK + cols, tl.sum(x, axis=0))
'''

M, D, BLOCK, R = 5, 12, 16, 4


@pytest.fixture(scope="module", params=castpile.STRATEGIES)
def k(request, tmp_path_factory):
    return transpiled(
        tmp_path_factory.mktemp(request.param), SOURCE, f"index_rule_{request.param}", strategy=request.param
    )


def stack(w: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(w)
    return [torch.randint(-50, 50, (M, D), generator=generator).float() for _ in range(w)]


def padded(rows: torch.Tensor) -> torch.Tensor:
    """(n, D) rows as the kernels store them: BLOCK columns, 0 past D."""
    return torch.cat([rows, torch.zeros(rows.shape[0], BLOCK - D)], 1)


@pytest.mark.parametrize("w", [1, 2, 3, 4])
def test_row_loops_read_and_update_each_row(k, w):
    bufs = stack(w)
    out = torch.full((M, BLOCK), 99.0)
    k.row_sums[(2,)](out, address_table(bufs), M, D, w, BLOCK)
    assert torch.equal(out, padded(sum(bufs)))
    k.row_updates[(2,)](out, address_table(bufs), M, D, w, BLOCK)
    expected = [b + 3 for b in stack(w)]
    assert all(torch.equal(b, e) for b, e in zip(bufs, expected))
    assert torch.equal(out, padded(sum(expected)))


@pytest.mark.parametrize("w", [2, 4])
def test_a_tile_of_addresses(k, w):
    bufs = stack(w)
    out = torch.full((M, BLOCK), 99.0)
    k.tiled[(3,)](out, address_table(bufs), M, D, w, BLOCK)
    assert torch.equal(out, padded(sum(bufs)))


@pytest.mark.parametrize("w", [1, 3])
def test_negative_indices_read_nothing(k, w):
    bufs = stack(w)
    total = sum(bufs)
    out = torch.full((M, BLOCK), 99.0)
    k.shifted[(2,)](out, address_table(bufs), M, D, w, BLOCK)
    expected = torch.zeros(M, BLOCK)
    expected[1:, 2 : D + 2] = 2 * total[:-1]  # row 0 reads row -1, columns 0 and 1 read columns -2 and -1: 0
    assert torch.equal(out, expected)


@pytest.mark.parametrize("w", [1, 3])
def test_an_index_evaluated_once_that_is_negative_reads_nothing(k, w):
    bufs = stack(w)
    out = torch.full((2, BLOCK), 99.0)
    ctr = torch.zeros(1, dtype=torch.int32)
    k.counted[(2,)](out, address_table(bufs), ctr, M, D, w, BLOCK)  # the interpreter runs program 0 first
    assert torch.equal(out, torch.stack([torch.zeros(BLOCK), padded(sum(bufs))[0]]))


@pytest.mark.parametrize("w", [1, 2])
def test_a_scalar_summand_that_is_a_tensor_joins_the_offsets(k, w):
    bufs = stack(w)
    out = torch.full((R, BLOCK), 99.0)
    k.rows_of[(1,)](out, address_table(bufs), M, D, w, R, BLOCK)
    expected = torch.zeros(R, BLOCK)
    expected[1:] = 2 * padded(sum(bufs))[: R - 1]
    assert torch.equal(out, expected)


@pytest.mark.parametrize("w", [1, 2, 3])
def test_a_flat_row_loop_under_a_mask_that_proves_its_bounds(k, w):
    bufs = [b.flatten() for b in stack(w)]
    out = torch.full((M, BLOCK), 99.0)
    k.flat_row_sums[(1,)](out, address_table(bufs), M, D, w, BLOCK)
    assert torch.equal(out, padded(sum(stack(w))))
    out = torch.full((M, BLOCK), 99.0)
    k.flat_row_writes[(2,)](out, address_table(bufs), M, D, w, BLOCK)
    assert torch.equal(out, padded(sum(stack(w))))
    assert all(torch.equal(b, torch.full((M * D,), 7.0)) for b in bufs)


@pytest.mark.parametrize("w", [1, 3])
def test_a_mask_that_proves_nothing_still_reads_nothing_past_the_extent(k, w):
    bufs = [b.flatten() for b in stack(w)]
    total = torch.cat([sum(bufs), torch.zeros(BLOCK)])  # what lies past the extent reads 0
    out = torch.full((M, BLOCK), 99.0)
    k.flat_overlapping[(1,)](out, address_table(bufs), M, D, w, BLOCK)
    expected = torch.zeros(M, BLOCK)
    for row in range(M):
        expected[row, : D + 2] = total[row * D : row * D + D + 2]
    assert torch.equal(out, expected)


def test_the_rule_is_in_the_lowered_text():
    """What the semantic tests run is the rule's form (else they would prove nothing about it)."""
    text = castpile.transpile(SOURCE.encode(), "k.py", strategy="loop").decode()
    row_sum = next(line for line in text.splitlines() if "_castpile_reduce_loop(bufs" in line and "row * BLOCK" in line)
    assert "base=D*row" in row_sum and "(row < M) & (cols < D)" in row_sum and ">= 0" not in row_sum
    assert "(row - 1 >= 0)" in text and "(cols - 2 >= 0)" in text  # not proven: kept
    assert "(True, False)" in text  # the index evaluated once keeps its lower bound, the arange's goes
    assert "(r >= 0)" in text and "base=bufs_stride0*r" in text  # a parameter: kept, and classed as a scalar
    flat = [
        line
        for line in text.splitlines()
        if "(bufs, W, None, out, cols, _castpile_unbounded(bufs_shape0" in line and "base=D*row" in line
    ]
    assert len(flat) == 4  # the flat loops' proven load, reduction, store and atomic: no bounds, the row in base=
    assert "(D*row + cols >= 0) & (D*row + cols < bufs_shape0" in text  # the mask that proves nothing: kept


def test_the_kernels_compile_for_sm90(tmp_path):
    jobs = []
    for strategy in castpile.STRATEGIES:
        path = tmp_path / f"index_rule_{strategy}.py"
        path.write_bytes(castpile.transpile(SOURCE.encode(), str(path), strategy=strategy))
        for kernel in (
            "row_sums", "row_updates", "shifted", "counted", "rows_of", "tiled", "flat_row_sums", "flat_row_writes",
            "flat_overlapping",
        ):  # fmt: skip
            sig = signature(SOURCE, kernel, {"out": "*fp32", "table": "*i64", "ctr": "*i32"})
            constexprs = {"M": M, "W": 4 if kernel != "rows_of" else 3, "BLOCK": BLOCK, "R": R}
            constexprs = {name: value for name, value in constexprs.items() if sig.get(name) == "constexpr"}
            jobs.append(Job(path, kernel, sig, constexprs, name=f"{kernel} [{strategy}]"))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failed = {name: result.error for name, result in results.items() if not result.ok}
    assert not failed, failed


# -- the proof ------------------------------------------------------------------------------------------------


def facts(body: str, params: str = "M, D, i", head: str = "") -> IndexFacts:
    """The facts of a jit function ``def k(<params>)`` with ``body`` (after the module's ``head``), its assignments as
    the analysis collects them."""
    module = cst.parse_module(f"import triton.language as tl\n{head}\n\ndef k({params}):\n" + body)
    func = cst.ensure_type(module.body[-1], cst.FunctionDef)
    scopes = [Scope(), Scope()]
    collect_scope(module.body, scopes[0])
    collect_scope(func.body.body, scopes[1])
    resolver = Resolver(scopes)
    found = JitBindings(func, resolver, set(), Plan())
    return IndexFacts(resolver, found.assignments, {p.name.value for p in func.params.params})


PROVEN = [
    ("    row = tl.program_id(0)\n    row += tl.num_programs(0)\n", "row"),
    ("    for row in range(tl.program_id(0), M, tl.num_programs(0)):\n        pass\n", "row"),
    ("    for row in tl.range(3, M):\n        pass\n", "row * 2 + 1"),
    ("    for row in range(M):\n        pass\n", "row // 4"),
    ("    cols = tl.arange(0, 16)\n", "tl.multiple_of(cols, 16)[:, None] % 8"),
    ("    a = 1\n    b = a\n    a = b + a\n", "a * b"),  # a cycle of names, every value made from proven ones
    ("    row = tl.program_id(0)\n", "row.to(tl.int64) * 4 + tl.cast(row, dtype=tl.int64)"),  # widened
    ("    for row in tl.range(0, M, step=tl.num_programs(0), num_stages=2):\n        pass\n", "row"),
    ("    for row in tl.range(M, step=2):\n        pass\n", "row"),
]
NOT_PROVEN = [
    ("    pass\n", "M"),  # a parameter
    ("    pass\n", "BLOCK"),  # a global
    ("    row = tl.program_id(0)\n    row -= 1\n", "row"),  # counting down
    ("    row = tl.program_id(0)\n    row += i\n", "row"),  # by a parameter
    ("    for row in range(-1, M):\n        pass\n", "row"),
    ("    for row in range(0, M, i):\n        pass\n", "row"),  # a step that may be negative
    ("    for row in [1, 2]:\n        pass\n", "row"),
    ("    row, other = 1, 2\n", "row"),  # unpacked: not followed
    ("    range = tl.arange\n    for row in range(0, 4):\n        pass\n", "row"),  # range is not the builtin
    ("    M = 3\n", "M"),  # a parameter assigned in the body still holds its argument first
    ("    r = tl.load(i)\n", "r"),
    ("    cols = tl.arange(-2, 2)\n", "cols"),
    ("    row = tl.program_id(0)\n", "row - 1"),
    ("    row = tl.program_id(0)\n", "row // -2"),
    ("    cols = tl.arange(0, 16)\n", "cols[1:]"),
    ("    row = tl.program_id(0)\n", "row.to(tl.int16)"),  # narrowed: may wrap
    ("    row = tl.program_id(0)\n", "tl.cast(row, tl.int64, bitcast=True)"),
    ("    for row in tl.range(0, M, step=i):\n        pass\n", "row"),  # a step that may be negative
    ("    for row in tl.range(0, M, 1, step=2):\n        pass\n", "row"),  # the step given twice
    ("    row = tl.program_id(0)\n    t = [0 for row in (-1,)]\n", "row"),  # Triton leaks a comprehension's variable
]


@pytest.mark.parametrize("body,index", PROVEN)
def test_proven_non_negative(body, index):
    assert facts(body).nonnegative(cst.parse_expression(index))


@pytest.mark.parametrize("body,index", NOT_PROVEN)
def test_not_proven(body, index):
    assert not facts(body).nonnegative(cst.parse_expression(index))


def test_a_name_a_global_also_binds_is_not_proven():
    """Triton reads a global where the function reads a name before assigning it (or assigns it in one branch)."""
    body = "    x = row\n    row = tl.program_id(0)\n"
    assert facts(body).nonnegative(cst.parse_expression("row"))
    assert not facts(body, head="row = tl.constexpr(-1)\n").nonnegative(cst.parse_expression("row"))


def test_summands_classed_as_scalars():
    found = facts("    cols = tl.arange(0, 16)\n    r = tl.load(i)\n    row = tl.program_id(0)\n    row += 1\n")
    scalars, others = found.summands(cst.parse_expression("row * D - 3 + cols - r + tl.num_programs(0)"))
    code = cst.Module(body=[]).code_for_node
    assert [(sign, code(node)) for sign, node in scalars] == [(1, "row * D"), (-1, "3"), (1, "tl.num_programs(0)")]
    assert [(sign, code(node)) for sign, node in others] == [(1, "cols"), (-1, "r")]


# -- the code: the issue-35 row loops against their hand twins ------------------------------------------------

GENERATED = {
    "loop": KERNELS / "generated" / "row_bodies_loop.py",
    "gather": KERNELS / "generated" / "row_bodies_gather.py",
}
HAND = KERNELS / "hand_row_bodies.py"
HAND_KERNELS = (
    "hand_none_for", "hand_none_while", "hand_res_before_for", "hand_res_before_while", "hand_res_after_for",
    "hand_res_after_while", "hand_res_weight_for", "hand_res_weight_while", "hand_res_weight_hoisted_for",
    "hand_res_weight_hoisted_while", "hand_scalar_for", "hand_scalar_while", "hand_two_stacks_for",
    "hand_two_stacks_while",
)  # fmt: skip
CASTPILE_KERNELS = (
    "cp_none_for_2d_to", "cp_none_for_2d_dtype", "cp_none_for_1d_to", "cp_none_for_1d_dtype", "cp_none_while_2d_to",
    "cp_none_while_2d_dtype", "cp_none_while_1d_to", "cp_none_while_1d_dtype", "cp_res_before_for_2d_to",
    "cp_res_before_for_2d_dtype", "cp_res_before_for_1d_to", "cp_res_before_for_1d_dtype", "cp_res_before_while_2d_to",
    "cp_res_before_while_2d_dtype", "cp_res_before_while_1d_to", "cp_res_before_while_1d_dtype",
    "cp_res_after_for_2d_to", "cp_res_after_for_2d_dtype", "cp_res_after_for_1d_to", "cp_res_after_for_1d_dtype",
    "cp_res_after_while_2d_to", "cp_res_after_while_2d_dtype", "cp_res_after_while_1d_to",
    "cp_res_after_while_1d_dtype", "cp_res_weight_for_2d_to", "cp_res_weight_for_2d_dtype", "cp_res_weight_for_1d_to",
    "cp_res_weight_for_1d_dtype", "cp_res_weight_while_2d_to", "cp_res_weight_while_2d_dtype",
    "cp_res_weight_while_1d_to", "cp_res_weight_while_1d_dtype", "cp_res_weight_hoisted_for_2d_to",
    "cp_res_weight_hoisted_for_2d_dtype", "cp_res_weight_hoisted_for_1d_to", "cp_res_weight_hoisted_for_1d_dtype",
    "cp_res_weight_hoisted_while_2d_to", "cp_res_weight_hoisted_while_2d_dtype", "cp_res_weight_hoisted_while_1d_to",
    "cp_res_weight_hoisted_while_1d_dtype", "cp_scalar_for_2d_to", "cp_scalar_for_2d_dtype", "cp_scalar_for_1d_to",
    "cp_scalar_for_1d_dtype", "cp_scalar_while_2d_to", "cp_scalar_while_2d_dtype", "cp_scalar_while_1d_to",
    "cp_scalar_while_1d_dtype", "cp_two_stacks_for_2d_to", "cp_two_stacks_for_2d_dtype", "cp_two_stacks_for_1d_to",
    "cp_two_stacks_for_1d_dtype", "cp_two_stacks_while_2d_to", "cp_two_stacks_while_2d_dtype",
    "cp_two_stacks_while_1d_to", "cp_two_stacks_while_1d_dtype",
)  # fmt: skip
#: The kernels' parameters as the sweep launches them (bf16 buffers), and what Triton's JIT records of them:
#: pointers and M, D divisible by 16 (benchmarks/sweeps/sweep_row_bodies.py: 4096 x 8192).
ROW_SIGNATURE = {
    **dict.fromkeys(("ex", "res", "w", "out"), "*bf16"),
    **dict.fromkeys(("table", "table2"), "*i64"),
    "stats": "*fp32",
    **dict.fromkeys(("M", "D"), "i32"),
    **dict.fromkeys(("eps", "alpha"), "fp32"),
    **dict.fromkeys(("W", "BLOCK_D"), "constexpr"),
}
ROW_ATTRS = {k: [["tt.divisibility", 16]] for k, (a, t) in enumerate(ROW_SIGNATURE.items()) if t[0] == "*" or a in "MD"}
LOWER_BOUND = re.compile(r"setp\.(?:gt\.s32\s+%p\d+, %r\d+, -1|ge\.s32\s+%p\d+, %r\d+, 0|lt\.s32\s+%p\d+, %r\d+, 0);")


def instructions(ptx: str) -> list[str]:
    """The kernel's PTX instructions in order, labels and debug lines left out, its name as ``K``."""
    body = ptx[ptx.index(".entry") :]
    body = body[: body.index(".section")] if ".section" in body else body
    lines = (
        re.sub(r"\b(cp|hand)_\w+?_param_", "K_param_", line.strip()) for line in body[body.index("{") :].splitlines()
    )
    return [line for line in lines if line and not line.startswith(("//", ".loc", ".file", "$L__tmp"))]


def test_the_kernel_lists_are_the_sweeps():
    assert tuple(hand_name(b, lp) for b in BODIES for lp in LOOPS) == HAND_KERNELS
    assert (
        tuple(cp_name(b, lp, bd, c) for b in BODIES for lp in LOOPS for bd in BINDINGS for c in CASTS)
        == CASTPILE_KERNELS
    )


def test_row_loops_compile_to_their_hand_twins_ptx_for_sm90(tmp_path):
    before = tmp_path / "row_bodies_before.py"
    before.write_text(before_rule(GENERATED["loop"].read_text()))
    options = {"num_warps": 8}
    jobs = []
    for W in (2, 4):
        constexprs = {"W": W, "BLOCK_D": 8192}
        jobs += [
            Job(HAND, name, ROW_SIGNATURE, constexprs, ROW_ATTRS, f"{name} {W}", options=options)
            for name in HAND_KERNELS
        ]
        for strategy, path in GENERATED.items():
            jobs += [
                Job(path, name, ROW_SIGNATURE, constexprs, ROW_ATTRS, f"{name} {strategy} {W}", options=options)
                for name in CASTPILE_KERNELS
            ]
        name = "cp_res_weight_hoisted_for_2d_to"
        jobs.append(Job(before, name, ROW_SIGNATURE, constexprs, ROW_ATTRS, f"before {W}", options=options))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failed = {name: result.error for name, result in results.items() if not result.ok}
    assert not failed, failed
    ptx = {name: result.ptx.read_text() for name, result in results.items()}
    differ = []
    for W in (2, 4):
        for strategy in GENERATED:
            for name in CASTPILE_KERNELS:
                ours, hand = ptx[f"{name} {strategy} {W}"], ptx[f"hand_{name[3:].rsplit('_', 2)[0]} {W}"]
                assert not LOWER_BOUND.search(ours), f"{name} {strategy} W {W}: a lower-bound compare"
                assert ours.count("mul.wide.s32") == hand.count("mul.wide.s32"), f"{name} {strategy} W {W}"
                if instructions(ours) != instructions(hand):
                    differ.append(f"{name} {strategy} W {W}")
        old, hand = ptx[f"before {W}"], ptx[f"hand_res_weight_hoisted_for {W}"]
        assert LOWER_BOUND.search(old) and old.count("mul.wide.s32") > hand.count("mul.wide.s32")
        assert instructions(old) != instructions(hand)
    assert not differ, f"PTX other than the hand twin's: {differ}"


# -- the mask rule's idioms: the same PTX as the hand twin written the same way ------------------------------
#
# Each idiom the third rule proves (docs/language.md) is applied, as text, to a 1-D row loop of the sweep and to
# its hand twin alike; both are compiled for sm_90, and castpile's output must have the twin's instructions (the
# rule applied: no bounds, the row offset joined to the pointer first).  The order may differ: castpile computes an
# int64 or a guarded row's offset before the first buffer's address is loaded, the twin after it (ptxas schedules
# both).


def test_the_idioms_edit_as_their_example_says():
    import doctest

    import row_idioms

    failures, attempted = doctest.testmod(row_idioms)
    assert failures == 0 and attempted > 0


def test_the_mask_rules_idioms_compile_to_their_hand_twins_ptx_for_sm90(tmp_path):
    castpile_text = (KERNELS / "row_bodies.py").read_text()
    hand_text = HAND.read_text()
    ours, hands = [], []
    for k, edits in enumerate(IDIOMS.values()):
        ours.append(idiom_source(function(castpile_text, "cp_none_for_1d_to"), edits, f"i{k}"))
        hands.append(idiom_source(function(hand_text, "hand_none_for"), edits, f"i{k}"))
    head = "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"
    source = head + "\n\n".join(ours)
    path = tmp_path / "idioms.py"
    path.write_bytes(castpile.transpile(source.encode(), str(path), strategy="loop"))
    lowered = path.read_text()
    assert len(re.findall(r"_castpile_unbounded\(bufs_shape0_*\)", lowered)) == len(IDIOMS), lowered
    assert "< bufs_shape0" not in lowered
    twins = tmp_path / "twins.py"
    twins.write_text(hand_text[: hand_text.index("@triton.jit\ndef hand_")] + "\n\n".join(hands))
    options, constexprs = {"num_warps": 8}, {"W": 2, "BLOCK_D": 8192}
    jobs = []
    for k in range(len(IDIOMS)):
        for module, name in ((path, f"cp_none_for_1d_to_i{k}"), (twins, f"hand_none_for_i{k}")):
            jobs.append(Job(module, name, ROW_SIGNATURE, constexprs, ROW_ATTRS, name, options=options))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failed = {name: result.error for name, result in results.items() if not result.ok}
    assert not failed, failed
    differ = [
        idiom
        for k, idiom in enumerate(IDIOMS)
        if sorted(instructions(results[f"cp_none_for_1d_to_i{k}"].ptx.read_text()))
        != sorted(instructions(results[f"hand_none_for_i{k}"].ptx.read_text()))
    ]
    assert not differ, f"PTX other than the hand twin's instructions: {differ}"


# -- rows in column blocks: the rules applied, the hand twin's PTX ---------------------------------------------
#
# benchmarks/kernels/column_blocks.py: the layer-norm tutorial's loops around a stacked reduction, over a 1-D
# binding (the mask rule drops the bounds) and a 2-D one (``cols >= 0`` goes), compiled for sm_90 against the hand
# twins in the same module; the 1-D kernels with the bounds they had before the mask rule covered column blocks
# (``row_bodies_spec.before_rule``) have more instructions.

COLUMN_BLOCKS = KERNELS / "column_blocks.py"


def twins_code(tmp_path, source: Path, bound, names, signature: dict, constexprs: dict) -> dict:
    """The PTX instructions of ``names`` in ``source`` (transpiled, the loop strategy), compiled for sm_90 with each
    of ``constexprs`` (label -> values; 8 warps), as ``"<name> <label>"``, and of the castpile kernels among them
    (``cp_*``) with the bounds the mask rule dropped put back (``bound``: the lowered text so edited) as
    ``"bounded <name> <label>"``."""
    path = tmp_path / source.name
    lowered = castpile.transpile(source.read_bytes(), str(path), strategy="loop").decode()
    path.write_text(lowered)
    bounded = tmp_path / f"bounded_{source.name}"
    bounded.write_text(bound(lowered))
    attrs = {k: [["tt.divisibility", 16]] for k, (a, t) in enumerate(signature.items()) if t[0] == "*" or a in "MD"}
    jobs = [
        Job(module, name, signature, values, attrs, f"{prefix}{name} {label}", options={"num_warps": 8})
        for label, values in constexprs.items()
        for module, prefix in ((path, ""), (bounded, "bounded "))
        for name in names
        if not prefix or name.startswith("cp_")
    ]
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failed = {name: result.error for name, result in results.items() if not result.ok}
    assert not failed, failed
    return {name: instructions(result.ptx.read_text()) for name, result in results.items()}


def test_column_blocks_compile_to_their_hand_twins_ptx_for_sm90(tmp_path):
    lowered = castpile.transpile(COLUMN_BLOCKS.read_bytes(), "column_blocks.py", strategy="loop").decode()
    assert len(re.findall(r"_castpile_unbounded\(bufs_shape0_*\)", lowered)) == 3, lowered
    assert "(row < M) & (cols < D)" in lowered, lowered
    names = ("cp_sum_1d", "cp_sum_2d", "hand_sum", "cp_norm_1d", "cp_norm_2d", "hand_norm")
    constexprs = {f"W {W}": {"W": W, "BLOCK_D": 2048} for W in (2, 4)}
    code = twins_code(tmp_path, COLUMN_BLOCKS, before_rule, names, ROW_SIGNATURE, constexprs)
    for W in (2, 4):
        for body in ("sum", "norm"):
            hand = sorted(code[f"hand_{body} W {W}"])
            for binding in ("1d", "2d"):
                assert sorted(code[f"cp_{body}_{binding} W {W}"]) == hand, f"{body} {binding} W {W}"
            assert len(code[f"bounded cp_{body}_1d W {W}"]) > len(hand), f"{body} bounded W {W}"


# -- rows the mask keeps below M: a row per program, a tile of rows ---------------------------------------------
#
# benchmarks/kernels/masked_rows.py: the row's test in the mask (``(row < M) & (cols < D)``, ``(rows[:, None] < M)
# & (cols[None, :] < D)``) on 1-D bindings, against the hand twins in the same module; with the bounds put back
# they have more instructions.

MASKED_ROWS = KERNELS / "masked_rows.py"
MASKED_SIGNATURE = {
    **dict.fromkeys(("ex", "out"), "*bf16"),
    "table": "*i64",
    **dict.fromkeys(("M", "D"), "i32"),
    **dict.fromkeys(("W", "BM", "BLOCK_D"), "constexpr"),
}


def with_bounds(lowered: str) -> str:
    """masked_rows.py as castpile lowers it, with the bounds of the 1-D accesses that its mask proves."""
    return lowered.replace(
        "_castpile_unbounded(bufs_shape0)", "(D*row + cols >= 0) & (D*row + cols < bufs_shape0)"
    ).replace("_castpile_unbounded(bufs_shape0_)", "(offs >= 0) & (offs < bufs_shape0_)")


def test_rows_the_mask_bounds_compile_to_their_hand_twins_ptx_for_sm90(tmp_path):
    lowered = castpile.transpile(MASKED_ROWS.read_bytes(), "masked_rows.py", strategy="loop").decode()
    assert len(re.findall(r"_castpile_unbounded\(bufs_shape0_*\)", lowered)) == 2, lowered
    names = ("cp_row", "hand_row", "cp_tile", "hand_tile")
    constexprs = {f"W {W}": {"W": W, "BM": 4, "BLOCK_D": 1024} for W in (2, 4)}
    code = twins_code(tmp_path, MASKED_ROWS, with_bounds, names, MASKED_SIGNATURE, constexprs)
    for W in (2, 4):
        for form in ("row", "tile"):
            hand = sorted(code[f"hand_{form} W {W}"])
            assert sorted(code[f"cp_{form} W {W}"]) == hand, f"{form} W {W}"
            assert len(code[f"bounded cp_{form} W {W}"]) > len(hand), f"{form} bounded W {W}"
