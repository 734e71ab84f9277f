"""Lowering stack reductions: a table's buffer by buffer under both strategies, a tile's through P + I.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone

KERNEL_CASES = [
    # stack reductions: a table's buffer by buffer under both strategies, a tile's through P + I
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs], axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum")
        """),
        id="tl.sum(bufs[offs], axis=0)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(bufs[offs], axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
        """),
        id="tl.max(bufs[offs], axis=0)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.min(bufs[offs], axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "min")
        """),
        id="tl.min(bufs[offs], axis=0)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.min(bufs[offs], 0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "min")
        """),
        id="tl.min with a positional axis 0",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs].to(tl.float32), axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum", steps="to", operands=(tl.float32,))
        """),
        id="tl.sum of .to(T): a step",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs].to(tl.int8), axis=0, dtype=tl.int32)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum", steps="to", operands=(tl.int8,), dtype=tl.int32)
        """),
        id="tl.sum of .to(T) with dtype=: the cast, then dtype=",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = bufs[offs].sum(0, False, tl.int8)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum", keep_dims=False, dtype=tl.int8)
        """),
        id="the method with a positional dtype",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(bufs[offs].to(tl.float32, bitcast=True).to(tl.float16, fp_downcast_rounding='rtz'), axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max", steps="bitcast to_rtz", operands=(tl.float32, tl.float16))
        """),
        id="casts with bitcast= and fp_downcast_rounding= literals",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(3 * (bufs[offs].to(tl.float32) / 2.0 - C), axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum", steps="to truediv sub rmul", operands=(tl.float32, 2.0, C, 3))
        """),
        id="arithmetic with literals and constexprs, either side: steps in order",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(-bufs[offs], axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max", steps="neg")
        """),
        id="a negation has no operand",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.min(-1 - tl.load(bufs[offs], mask=offs < m), axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "min", offs < m, steps="rsub", operands=(-1,))
        """),
        id="a step over tl.load",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(tl.load(bufs[offs], mask=offs < m), axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum", offs < m)
        """),
        id="tl.sum of tl.load with mask",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(tl.load(bufs[offs], mask=offs < m, other=-5.0, eviction_policy='evict_first'), axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max", offs < m, -5.0, eviction_policy='evict_first')
        """),
        id="tl.max of tl.load with mask, other and an option",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s, at = tl.max(bufs[offs], axis=0, return_indices=True, return_indices_tie_break_left=False)
        """),
        dedent("""\
            bufs = table
            s, at = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max", return_indices=True, return_indices_tie_break_left=False)
        """),
        id="return_indices and its tie-break, by keyword",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s, at = tl.min(bufs[offs], 0, True, True, C)
        """),
        dedent("""\
            bufs = table
            s, at = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "min", return_indices=True, return_indices_tie_break_left=True, keep_dims=C)
        """),
        id="return_indices and keep_dims by position",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, tile, shape=(n,))
            s = tl.sum(bufs[offs].to(tl.float32) * 2, axis=0)
        """),
        dedent("""\
            bufs = tile
            s = _castpile_reduce_gather(bufs, bufs.numel, None, out, offs, (offs < n), "sum", steps="to mul", operands=(tl.float32, 2))
        """),
        id="reduction over a tile: the gather reduction under both strategies",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs], axis=1)
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = tl.sum(_castpile_load_loop(bufs, W, None, out, offs, (offs < n)), axis=1)
            """),
            "gather": dedent("""\
                bufs = table
                s = tl.sum(_castpile_load_gather(bufs, W, None, out, offs, (offs < n)), axis=1)
            """),
        },
        id="tl.sum over another axis: a plain load, reduced",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs].to(tl.float32))
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = tl.sum(_castpile_load_loop(bufs, W, None, out, offs, (offs < n)).to(tl.float32))
            """),
            "gather": dedent("""\
                bufs = table
                s = tl.sum(_castpile_load_gather(bufs, W, None, out, offs, (offs < n)).to(tl.float32))
            """),
        },
        id="tl.sum without an axis: a plain load, reduced",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs] * v, axis=0)
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = tl.sum(_castpile_load_loop(bufs, W, None, out, offs, (offs < n)) * v, axis=0)
            """),
            "gather": dedent("""\
                bufs = table
                s = tl.sum(_castpile_load_gather(bufs, W, None, out, offs, (offs < n)) * v, axis=0)
            """),
        },
        id="arithmetic with a tensor: a plain load, reduced",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(bufs[offs] - bufs[offs + 1], axis=0)
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = tl.max(_castpile_load_loop(bufs, W, None, out, offs, (offs < n)) - _castpile_load_loop(bufs, W, None, out, offs + 1, (offs + 1 < n)), axis=0)
            """),
            "gather": dedent("""\
                bufs = table
                s = tl.max(_castpile_load_gather(bufs, W, None, out, offs, (offs < n)) - _castpile_load_gather(bufs, W, None, out, offs + 1, (offs + 1 < n)), axis=0)
            """),
        },
        id="arithmetic of two accesses: plain loads, reduced",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(bufs[offs].to(tl.int32, bitcast=C), axis=0)
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = tl.max(_castpile_load_loop(bufs, W, None, out, offs, (offs < n)).to(tl.int32, bitcast=C), axis=0)
            """),
            "gather": dedent("""\
                bufs = table
                s = tl.max(_castpile_load_gather(bufs, W, None, out, offs, (offs < n)).to(tl.int32, bitcast=C), axis=0)
            """),
        },
        id="a cast whose bitcast= is not a literal: a plain load, reduced",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.sum(bufs[offs], axis=0, keep_dims=True)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "sum", keep_dims=True)
        """),
        id="tl.sum with keep_dims=True: a stack reduction that keeps the stack dim",
    ),
    # v1.3: an axis that is a compile-time value written other than as a literal: the stack's reduction where it
    # holds 0, Triton's of the loaded P + I tensor elsewhere (Triton compiles one side of the condition)
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.max(bufs[offs], axis=C - 2)
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = (_castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max") if (C - 2) == 0 else tl.max(_castpile_load_loop(bufs, W, None, out, offs, (offs < n)), axis=C - 2))
            """),
            "gather": dedent("""\
                bufs = table
                s = (_castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max") if (C - 2) == 0 else tl.max(_castpile_load_gather(bufs, W, None, out, offs, (offs < n)), axis=C - 2))
            """),
        },
        id="tl.max with a constexpr axis holding 0: the stack's where it is 0",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            s = tl.argmax(tl.load(bufs[offs], mask=offs < m, other=-1), C - 1)
        """),
        {
            "loop": dedent("""\
                bufs = table
                s = (_castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max", offs < m, -1, return_indices=True)[1] if (C - 1) == 0 else tl.argmax(_castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < m, -1), C - 1))
            """),
            "gather": dedent("""\
                bufs = table
                s = (_castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max", offs < m, -1, return_indices=True)[1] if (C - 1) == 0 else tl.argmax(_castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < m, -1), C - 1))
            """),
        },
        id="tl.argmax of a tl.load with a constexpr axis holding 1: Triton's of the loaded P + I",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            @triton.jit
            def k(out, ptrs, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                x = tl.load(ptrs + offs)
                tl.store(out, tl.sum(x, axis=0) + tl.max(x, axis=0))
        """),
        id="reductions of plain loads",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), KERNEL_CASES)
def test_kernel_lines(source, expected, strategy):
    check_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES)
