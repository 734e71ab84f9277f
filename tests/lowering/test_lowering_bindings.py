"""Lowering multicast_like bindings: the table form (slices, shape, strides, align), the tile form, named slices.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import (
    check_cases_compile_for_sm90,
    check_kernel_lines,
    check_left_alone,
    head_and_helpers,
    kernel_module,
    transpile,
)

KERNEL_CASES = [
    # bindings: table form
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, None)
            """),
        },
        id="table[:W]",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[1:W])
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table + 1
                x = _castpile_load_loop(bufs, W - 1, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = table + 1
                x = _castpile_load_gather(bufs, W - 1, None, out, offs, None)
            """),
        },
        id="table[1:W]: start and count",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[2:5])
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table + 2
                x = _castpile_load_loop(bufs, 3, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = table + 2
                x = _castpile_load_gather(bufs, 3, None, out, offs, None)
            """),
        },
        id="table[2:5]: literal count",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[W:2 * W])
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = W + table
                x = _castpile_load_loop(bufs, W, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = W + table
                x = _castpile_load_gather(bufs, W, None, out, offs, None)
            """),
        },
        id="table[W:2 * W]",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n))
            """),
        },
        id="shape=(n,): bounds mask",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            x = bufs[i, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (i >= 0) & (i < n) & (offs < m), base=i*m)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (i >= 0) & (i < n) & (offs < m), base=i*m)
            """),
        },
        id="shape=(n, m): row-major offsets",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, 8))
            x = bufs[offs[:, None], offs[None, :]]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, 8*offs[:, None] + offs[None, :], (offs[:, None] < n) & (offs[None, :] < 8))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, 8*offs[:, None] + offs[None, :], (offs[:, None] < n) & (offs[None, :] < 8))
            """),
        },
        id="shape=(n, 8): constant stride folded, broadcast indices",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, n, n))
            x = bufs[i, j, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (i >= 0) & (i < n) & (j >= 0) & (j < n) & (offs < n), base=i*n*n + j*n)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (i >= 0) & (i < n) & (j >= 0) & (j < n) & (offs < n), base=i*n*n + j*n)
            """),
        },
        id="shape=(n, n, n): products, never powers",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], strides=(m, 1))
            x = bufs[i, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, None, base=i*m)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, None, base=i*m)
            """),
        },
        id="strides without shape: no bounds",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1, n))
            x = bufs[i, offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, n*offs, (i >= 0) & (i < n) & (offs < m), base=i)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, n*offs, (i >= 0) & (i < n) & (offs < m), base=i)
            """),
        },
        id="shape and column-major strides",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out + 1, table[:W], shape=(n - 1, m), strides=(m * 2, 1))
            x = bufs[i, offs]
        """),
        {
            "loop": dedent("""\
                bufs_example = out + 1; bufs = table; bufs_shape0 = n - 1; bufs_stride0 = m * 2
                x = _castpile_load_loop(bufs, W, None, bufs_example, offs, (i >= 0) & (i < bufs_shape0) & (offs < m), base=bufs_stride0*i)
            """),
            "gather": dedent("""\
                bufs_example = out + 1; bufs = table; bufs_shape0 = n - 1; bufs_stride0 = m * 2
                x = _castpile_load_gather(bufs, W, None, bufs_example, offs, (i >= 0) & (i < bufs_shape0) & (offs < m), base=bufs_stride0*i)
            """),
        },
        id="hoisted example, shape and strides, in argument order",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), align=16)
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), align=16)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), align=16)
            """),
        },
        id="align=16",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), align=C * 8)
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table; _castpile_alignment(C * 8, 'k.py:11')
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), align=C * 8)
            """),
            "gather": dedent("""\
                bufs = table; _castpile_alignment(C * 8, 'k.py:11')
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), align=C * 8)
            """),
        },
        id="align= a constexpr expression (v1.3): as written, checked at the binding when Triton compiles",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), align=16 if C == 2 else None)
            bufs[offs] = v
        """),
        {
            "loop": dedent("""\
                bufs = table; _castpile_alignment(16 if C == 2 else None, 'k.py:11')
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), v, align=16 if C == 2 else None, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table; _castpile_alignment(16 if C == 2 else None, 'k.py:11')
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), v, align=16 if C == 2 else None, site='k.py:12')
            """),
        },
        id="align= a conditional of constexprs (v1.3)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), align=C * 8)
            C = C + 1
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table; bufs_align: tl.constexpr = C * 8; _castpile_alignment(bufs_align, 'k.py:11')
                C = C + 1
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), align=bufs_align)
            """),
            "gather": dedent("""\
                bufs = table; bufs_align: tl.constexpr = C * 8; _castpile_alignment(bufs_align, 'k.py:11')
                C = C + 1
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), align=bufs_align)
            """),
        },
        id="align= of a name rebound after the binding: evaluated at the binding, a constexpr",
    ),
    # bindings: tile form
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, tile)
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = tile
                x = _castpile_load_loop(bufs, bufs.numel, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = tile
                x = _castpile_load_gather(bufs, bufs.numel, None, out, offs, None)
            """),
        },
        id="tile",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, tile, ptr_mask=pm)
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = tile; bufs_mask = pm
                x = _castpile_load_loop(bufs, bufs.numel, bufs_mask, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = tile; bufs_mask = pm
                x = _castpile_load_gather(bufs, bufs.numel, bufs_mask, out, offs, None)
            """),
        },
        id="tile with ptr_mask",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, tile, shape=(n,), ptr_mask=pm != 0)
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = tile; bufs_mask = pm != 0
                x = _castpile_load_loop(bufs, bufs.numel, bufs_mask, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                bufs = tile; bufs_mask = pm != 0
                x = _castpile_load_gather(bufs, bufs.numel, bufs_mask, out, offs, (offs < n))
            """),
        },
        id="tile with shape and a ptr_mask expression",
    ),
    # named table slice and static_range slice bounds
    pytest.param(
        dedent("""\
            rows = table[:W]
            bufs = multicast_like(out, rows, shape=(n,))
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                rows = table
                bufs = rows
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                rows = table
                bufs = rows
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n))
            """),
        },
        id="named slice table[:W]",
    ),
    pytest.param(
        dedent("""\
            rows = table[1:W]
            bufs = multicast_like(out, rows, shape=(n,))
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                rows = table + 1
                bufs = rows
                x = _castpile_load_loop(bufs, W - 1, None, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                rows = table + 1
                bufs = rows
                x = _castpile_load_gather(bufs, W - 1, None, out, offs, (offs < n))
            """),
        },
        id="named slice table[1:W]",
    ),
    # The count (r + 1) * C - r * C, as sympy leaves it: C, evaluated when Triton compiles.
    pytest.param(
        dedent("""\
            for r in tl.static_range(2):
                bufs = multicast_like(out, table[r * C:(r + 1) * C], shape=(n,))
                x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                for r in tl.static_range(2):
                    bufs = C*r + table
                    x = _castpile_load_loop(bufs, C, None, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                for r in tl.static_range(2):
                    bufs = C*r + table
                    x = _castpile_load_gather(bufs, C, None, out, offs, (offs < n))
            """),
        },
        id="static_range variable in the slice bounds",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                rows = tl.load(table + offs)
                tl.store(out + offs, rows)
        """),
        id="a table of addresses read as plain data, never bound",
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


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_named_slice_is_read_where_it_was_taken(strategy):
    """``rows = table[:W]``, then ``table`` rebound: the stack is still the slice ``rows`` holds."""
    source = kernel_module("rows = table[:W]\ntable = out\nbufs = multicast_like(out, rows)\nx = bufs[offs]\n")
    head, _ = head_and_helpers(transpile(source, strategy))
    assert "    bufs = table\n" not in head
