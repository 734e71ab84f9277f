"""Lowering at binding time (v1.2): a binding's arguments are evaluated where the binding stands.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone

KERNEL_CASES = [
    # binding time (v1.2): arguments evaluated where the binding stands
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            n = n + 4
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table; bufs_shape0 = n
                n = n + 4
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < bufs_shape0))
            """),
            "gather": dedent("""\
                bufs = table; bufs_shape0 = n
                n = n + 4
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < bufs_shape0))
            """),
        },
        id="a shape name rebound after the binding is copied at it",
    ),
    pytest.param(
        dedent("""\
            m = n + 1
            bufs = multicast_like(out, table[:W], shape=(m,))
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                m = n + 1
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < m))
            """),
            "gather": dedent("""\
                m = n + 1
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < m))
            """),
        },
        id="left alone: a name assigned only before the binding is used as it is",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[offs]
            n = n + 4
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n))
                n = n + 4
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n))
                n = n + 4
            """),
        },
        id="left alone: a name rebound after the binding's last use is used as it is",
    ),
    pytest.param(
        dedent("""\
            for r in tl.static_range(W):
                tail = multicast_like(out, table[r:W])
                x = tail[offs]
            for r in tl.static_range(C):
                y = r
        """),
        {
            "loop": dedent("""\
                for r in tl.static_range(W):
                    tail = r + table
                    x = _castpile_load_loop(tail, -r + W, None, out, offs, None)
                for r in tl.static_range(C):
                    y = r
            """),
            "gather": dedent("""\
                for r in tl.static_range(W):
                    tail = r + table
                    x = _castpile_load_gather(tail, -r + W, None, out, offs, None)
                for r in tl.static_range(C):
                    y = r
            """),
        },
        id="left alone: a static_range variable reused by a later loop, after the binding's uses",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            for _ in range(2):
                x = bufs[offs]
                n = n - 1
        """),
        {
            "loop": dedent("""\
                bufs = table; bufs_shape0 = n
                for _ in range(2):
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs < bufs_shape0))
                    n = n - 1
            """),
            "gather": dedent("""\
                bufs = table; bufs_shape0 = n
                for _ in range(2):
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < bufs_shape0))
                    n = n - 1
            """),
        },
        id="a name rebound later in a loop around the uses but not the binding",
    ),
    pytest.param(
        dedent("""\
            for _ in range(2):
                bufs = multicast_like(out, table[:W], strides=(m,))
                m = m + 1
                x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                for _ in range(2):
                    bufs = table; bufs_stride0 = m
                    m = m + 1
                    x = _castpile_load_loop(bufs, W, None, out, bufs_stride0*offs, None)
            """),
            "gather": dedent("""\
                for _ in range(2):
                    bufs = table; bufs_stride0 = m
                    m = m + 1
                    x = _castpile_load_gather(bufs, W, None, out, bufs_stride0*offs, None)
            """),
        },
        id="a strides name rebound in the loop around the binding",
    ),
    pytest.param(
        dedent("""\
            out = multicast_like(out, table[:W], shape=(n,))
            x = out[offs]
        """),
        {
            "loop": dedent("""\
                out_example = out; out = table
                x = _castpile_load_loop(out, W, None, out_example, offs, (offs < n))
            """),
            "gather": dedent("""\
                out_example = out; out = table
                x = _castpile_load_gather(out, W, None, out_example, offs, (offs < n))
            """),
        },
        id="the example bound to its own name: copied before the name takes the stack",
    ),
    pytest.param(
        dedent("""\
            y = tl.load(out)
            out = multicast_like(out, table[:W], shape=(n - 1,))
            x = out[offs]
        """),
        {
            "loop": dedent("""\
                y = tl.load(out)
                out_example = out; out_shape0 = n - 1; out = table
                x = _castpile_load_loop(out, W, None, out_example, offs, (offs < out_shape0))
            """),
            "gather": dedent("""\
                y = tl.load(out)
                out_example = out; out_shape0 = n - 1; out = table
                x = _castpile_load_gather(out, W, None, out_example, offs, (offs < out_shape0))
            """),
        },
        id="read before its own binding; the stack stored last",
    ),
    pytest.param(
        dedent("""\
            tile = multicast_like(out, tile, ptr_mask=tile != 0)
            x = tile[offs]
        """),
        {
            "loop": dedent("""\
                tile_mask = tile != 0; tile = tile
                x = _castpile_load_loop(tile, tile.numel, tile_mask, out, offs, None)
            """),
            "gather": dedent("""\
                tile_mask = tile != 0; tile = tile
                x = _castpile_load_gather(tile, tile.numel, tile_mask, out, offs, None)
            """),
        },
        id="a tile bound to its own name, its ptr_mask reading it first",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            W = W + 1
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs_count: tl.constexpr = W; bufs = table
                W = W + 1
                x = _castpile_load_loop(bufs, bufs_count, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs_count: tl.constexpr = W; bufs = table
                W = W + 1
                x = _castpile_load_gather(bufs, bufs_count, None, out, offs, None)
            """),
        },
        id="a constexpr slice bound rebound after the binding: the count stays a constexpr",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(C, BLOCK))
            C = C + 1
            x = bufs[i, ...]
        """),
        {
            "loop": dedent("""\
                bufs = table; bufs_shape0: tl.constexpr = C
                C = C + 1
                x = _castpile_load_loop(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_trailing(i, 1) >= 0) & (_castpile_trailing(i, 1) < bufs_shape0) & (_castpile_span(BLOCK, 0, 1) < BLOCK), base=BLOCK*_castpile_trailing(i, 1))
            """),
            "gather": dedent("""\
                bufs = table; bufs_shape0: tl.constexpr = C
                C = C + 1
                x = _castpile_load_gather(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), (_castpile_trailing(i, 1) >= 0) & (_castpile_trailing(i, 1) < bufs_shape0) & (_castpile_span(BLOCK, 0, 1) < BLOCK), base=BLOCK*_castpile_trailing(i, 1))
            """),
        },
        id="a constexpr extent rebound after the binding",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            table = table + W
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                table = table + W
                x = _castpile_load_loop(bufs, W, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = table
                table = table + W
                x = _castpile_load_gather(bufs, W, None, out, offs, None)
            """),
        },
        id="left alone: the table rebound after the binding (the stack holds its start)",
    ),
    pytest.param(
        dedent("""\
            rows = table[:W]
            bufs = multicast_like(out, rows)
            rows = ptrs
            x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                rows = table
                bufs = rows
                rows = ptrs
                x = _castpile_load_loop(bufs, W, None, out, offs, None)
            """),
            "gather": dedent("""\
                rows = table
                bufs = rows
                rows = ptrs
                x = _castpile_load_gather(bufs, W, None, out, offs, None)
            """),
        },
        id="a named slice rebound after the binding",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), align=None)
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
        id="align=None is no alignment",
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
            def k(out, n, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                n = n + 4
                tl.store(out + offs, offs, mask=offs < n)
        """),
        id="a shape name rebound in a kernel without bindings",
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
