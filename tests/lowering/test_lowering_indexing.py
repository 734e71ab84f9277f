"""Lowering indices: Ellipsis, and strides of any value (the offsets keep the shape of the indices).

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone

KERNEL_CASES = [
    # Ellipsis
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(BLOCK,))
            x = bufs[...]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_span(BLOCK, 0, 1) < BLOCK))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_span(BLOCK, 0, 1) < BLOCK))
            """),
        },
        id="bufs[...]",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(C, BLOCK))
            x = bufs[i, ...]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_trailing(i, 1) >= 0) & (_castpile_trailing(i, 1) < C) & (_castpile_span(BLOCK, 0, 1) < BLOCK), base=BLOCK*_castpile_trailing(i, 1))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_trailing(i, 1) >= 0) & (_castpile_trailing(i, 1) < C) & (_castpile_span(BLOCK, 0, 1) < BLOCK), base=BLOCK*_castpile_trailing(i, 1))
            """),
        },
        id="bufs[i, ...]",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(C, BLOCK))
            x = bufs[0, ...]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (0 < C) & (_castpile_span(BLOCK, 0, 1) < BLOCK))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (0 < C) & (_castpile_span(BLOCK, 0, 1) < BLOCK))
            """),
        },
        id="bufs[0, ...]: a literal index needs no trailing dims",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(C, BLOCK))
            bufs[...] = v
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, BLOCK*_castpile_span(C, 0, 2) + _castpile_span(BLOCK, 1, 2), (_castpile_span(C, 0, 2) < C) & (_castpile_span(BLOCK, 1, 2) < BLOCK), v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, BLOCK*_castpile_span(C, 0, 2) + _castpile_span(BLOCK, 1, 2), (_castpile_span(C, 0, 2) < C) & (_castpile_span(BLOCK, 1, 2) < BLOCK), v, site='k.py:12')
            """),
        },
        id="bufs[...] = v over two dims",
    ),
    # strides of any value: the offsets keep the shape of the indices
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), strides=(0,))
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, 0*offs, (offs < n))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, 0*offs, (offs < n))
            """),
        },
        id="strides=(0,): 0*offs",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], strides=(0,))
            bufs[offs] = v
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, 0*offs, None, v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, 0*offs, None, v, site='k.py:12')
            """),
        },
        id="strides=(0,) without shape, in a store",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1, 1))
            x = bufs[3 - offs, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, 3 + 0*offs, (-offs + 3 >= 0) & (-offs + 3 < n) & (offs < m))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, 3 + 0*offs, (-offs + 3 >= 0) & (-offs + 3 < n) & (offs < m))
            """),
        },
        id="index terms that cancel: bufs[3 - offs, offs] with strides=(1, 1)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(C, BLOCK), strides=(0, 1))
            x = bufs[...]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, _castpile_span(BLOCK, 1, 2) + 0*_castpile_span(C, 0, 2), (_castpile_span(C, 0, 2) < C) & (_castpile_span(BLOCK, 1, 2) < BLOCK))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, _castpile_span(BLOCK, 1, 2) + 0*_castpile_span(C, 0, 2), (_castpile_span(C, 0, 2) < C) & (_castpile_span(BLOCK, 1, 2) < BLOCK))
            """),
        },
        id="a broadcast view read whole: strides=(0, 1)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m), strides=(0, 1))
            x = bufs[i, tl.atomic_add(ctr, 1)]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, *_castpile_index((i, tl.atomic_add(ctr, 1)), (n, m), (0, 1)))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, *_castpile_index((i, tl.atomic_add(ctr, 1)), (n, m), (0, 1)))
            """),
        },
        id="left alone: a stride of 0 with an index evaluated once (the index helper keeps its shape)",
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
            def k(out, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                grid = offs[:, None] * BLOCK + offs[None, :]
                tl.store(out + grid, grid)
        """),
        id="None and slices on plain tensors",
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
