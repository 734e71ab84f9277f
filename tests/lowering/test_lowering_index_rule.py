"""Lowering an index: its scalar summands go into the buffers' pointers first (``base=``), and the bounds mask
carries no ``i >= 0`` that the index is proven to satisfy (docs/language.md, "What castpile emits for an index";
castpile/compiler/index_facts.py).  Every other lower bound stays.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py;
the semantics (a negative index still masked) and the PTX this gives (the hand-written twin's): tests/test_index_rule.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines

KERNEL_CASES = [
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                x = tl.sum(bufs[row, offs], axis=0)
        """),
        dedent("""\
            bufs = table
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                x = _castpile_reduce_loop(bufs, W, None, out, offs, (row < n) & (offs < m), "sum", base=m*row)
        """),
        id="a for loop from tl.program_id by tl.num_programs: no row >= 0, the row offset in base=",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            row = tl.program_id(0)
            while row < n:
                bufs[row, offs] = v
                row += tl.num_programs(0)
        """),
        {
            "loop": dedent("""\
                bufs = table
                row = tl.program_id(0)
                while row < n:
                    _castpile_store_loop(bufs, W, None, out, offs, (row < n) & (offs < m), v, base=m*row, site='k.py:14')
                    row += tl.num_programs(0)
            """),
            "gather": dedent("""\
                bufs = table
                row = tl.program_id(0)
                while row < n:
                    _castpile_store_gather(bufs, W, None, out, offs, (row < n) & (offs < m), v, base=m*row, site='k.py:14')
                    row += tl.num_programs(0)
            """),
        },
        id="the while twin: row = tl.program_id(0), row += tl.num_programs(0)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            row = tl.program_id(0)
            while row < n:
                x = bufs[row, offs]
                row -= 1
        """),
        {
            "loop": dedent("""\
                bufs = table
                row = tl.program_id(0)
                while row < n:
                    x = _castpile_load_loop(bufs, W, None, out, offs, (row >= 0) & (row < n) & (offs < m), base=m*row)
                    row -= 1
            """),
            "gather": dedent("""\
                bufs = table
                row = tl.program_id(0)
                while row < n:
                    x = _castpile_load_gather(bufs, W, None, out, offs, (row >= 0) & (row < n) & (offs < m), base=m*row)
                    row -= 1
            """),
        },
        id="a row counting down keeps row >= 0",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                x = bufs[row - 1, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                for row in range(tl.program_id(0), n, tl.num_programs(0)):
                    x = _castpile_load_loop(bufs, W, None, out, offs, (row - 1 >= 0) & (row - 1 < n) & (offs < m), base=m*(row - 1))
            """),
            "gather": dedent("""\
                bufs = table
                for row in range(tl.program_id(0), n, tl.num_programs(0)):
                    x = _castpile_load_gather(bufs, W, None, out, offs, (row - 1 >= 0) & (row - 1 < n) & (offs < m), base=m*(row - 1))
            """),
        },
        id="row - 1 keeps its lower bound (a subtraction proves nothing)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            for row in range(-1, n):
                x = bufs[row, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                for row in range(-1, n):
                    x = _castpile_load_loop(bufs, W, None, out, offs, (row >= 0) & (row < n) & (offs < m), base=m*row)
            """),
            "gather": dedent("""\
                bufs = table
                for row in range(-1, n):
                    x = _castpile_load_gather(bufs, W, None, out, offs, (row >= 0) & (row < n) & (offs < m), base=m*row)
            """),
        },
        id="a range starting below 0 keeps row >= 0",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            for row in range(0, n, i):
                x = bufs[row, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                for row in range(0, n, i):
                    x = _castpile_load_loop(bufs, W, None, out, offs, (row >= 0) & (row < n) & (offs < m), base=m*row)
            """),
            "gather": dedent("""\
                bufs = table
                for row in range(0, n, i):
                    x = _castpile_load_gather(bufs, W, None, out, offs, (row >= 0) & (row < n) & (offs < m), base=m*row)
            """),
        },
        id="a step that is a parameter keeps row >= 0",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(C, BLOCK))
            for r in tl.static_range(C):
                x = bufs[r, ...]
        """),
        {
            "loop": dedent("""\
                bufs = table
                for r in tl.static_range(C):
                    x = _castpile_load_loop(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_trailing(r, 1) < C) & (_castpile_span(BLOCK, 0, 1) < BLOCK), base=BLOCK*_castpile_trailing(r, 1))
            """),
            "gather": dedent("""\
                bufs = table
                for r in tl.static_range(C):
                    x = _castpile_load_gather(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_trailing(r, 1) < C) & (_castpile_span(BLOCK, 0, 1) < BLOCK), base=BLOCK*_castpile_trailing(r, 1))
            """),
        },
        id="tl.static_range and a trailing ...: neither lower bound",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            r = tl.load(idx)
            x = bufs[r, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                r = tl.load(idx)
                x = _castpile_load_loop(bufs, W, None, out, m*r + offs, (r >= 0) & (r < n) & (offs < m))
            """),
            "gather": dedent("""\
                bufs = table
                r = tl.load(idx)
                x = _castpile_load_gather(bufs, W, None, out, m*r + offs, (r >= 0) & (r < n) & (offs < m))
            """),
        },
        id="an index loaded from memory keeps its lower bound, and is no scalar: no base=",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[tl.program_id(0) * BLOCK + offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, BLOCK*tl.program_id(0) + offs, (BLOCK*tl.program_id(0) + offs < n))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, BLOCK*tl.program_id(0) + offs, (BLOCK*tl.program_id(0) + offs < n))
            """),
        },
        id="1-D with shape=: a dim mixing scalar and tensor summands stays whole, no lower bound (BLOCK ends offs's arange)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[tl.program_id(0) * C + offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, C*tl.program_id(0) + offs, (C*tl.program_id(0) + offs >= 0) & (C*tl.program_id(0) + offs < n))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, C*tl.program_id(0) + offs, (C*tl.program_id(0) + offs >= 0) & (C*tl.program_id(0) + offs < n))
            """),
        },
        id="1-D with shape=: its lower bound kept where the block size ends no arange of the index (C proves nothing)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            x = bufs[tl.program_id(0) * BLOCK + offs - 1]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, None, base=BLOCK*tl.program_id(0) - 1)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, None, base=BLOCK*tl.program_id(0) - 1)
            """),
        },
        id="without bounds a mixed dim is split: its scalar summands in base=",
    ),
    pytest.param(
        dedent("""\
            t = multicast_like(out, tile, shape=(n, m))
            row = tl.program_id(0) * 2 + 1
            x = tl.sum(t[row, offs], axis=0)
        """),
        dedent("""\
            t = tile
            row = tl.program_id(0) * 2 + 1
            x = _castpile_reduce_gather(t, t.numel, None, out, offs, (row < n) & (offs < m), "sum", base=m*row)
        """),
        id="a tile's reduction: the row offset joins each pointer of the tile",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                x = tl.atomic_add(bufs[row, offs], 1)
        """),
        {
            "loop": dedent("""\
                bufs = table
                for row in range(tl.program_id(0), n, tl.num_programs(0)):
                    x = _castpile_atomic_loop(bufs, W, None, out, offs, (row < n) & (offs < m), "add", 1, base=m*row)
            """),
            "gather": dedent("""\
                bufs = table
                for row in range(tl.program_id(0), n, tl.num_programs(0)):
                    x = _castpile_atomic_gather(bufs, W, None, out, offs, (row < n) & (offs < m), "add", 1, base=m*row)
            """),
        },
        id="an atomic in the row loop",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                x = bufs[row, offs[:, None] + offs[None, :]]
        """),
        {
            "loop": dedent("""\
                bufs = table
                for row in range(tl.program_id(0), n, tl.num_programs(0)):
                    x = _castpile_load_loop(bufs, W, None, out, offs[:, None] + offs[None, :], (row < n) & (offs[:, None] + offs[None, :] < m), base=m*row)
            """),
            "gather": dedent("""\
                bufs = table
                for row in range(tl.program_id(0), n, tl.num_programs(0)):
                    x = _castpile_load_gather(bufs, W, None, out, offs[:, None] + offs[None, :], (row < n) & (offs[:, None] + offs[None, :] < m), base=m*row)
            """),
        },
        id="a 2-D element index: the row offset in base=, no lower bound on either index",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), KERNEL_CASES)
def test_kernel_lines(source, expected, strategy):
    check_kernel_lines(source, expected, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES)
