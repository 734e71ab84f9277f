"""Lowering Multicast parameters: a jit helper's ``bufs: castpile.Multicast`` becomes the binding's values as parameters, on its line, and every call passes them; lookalike annotations are left alone.

The cases' form (a whole file, one expected text or one per strategy): tests/testkit/lowering.py.  Each
expected signature was checked by hand against docs/language.md: after the parameter come the buffer count
(constexpr), ptr_mask (None for none), the example pointer, one extent per element dim when the tensors
passed have shape=, one stride per element dim (contiguous ones when strides= is not given) and align=
(constexpr); a call passes the binding's values in that order right after the tensor, by keyword when the
tensor is passed by keyword.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_left_alone, check_whole_file

FILE_CASES = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def total(bufs: cp.Multicast, offs):
                return tl.sum(bufs[offs], axis=0)


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                tl.store(out + offs, total(bufs, offs))
        """),
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def total(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, offs):
                return _castpile_reduce_passed(bufs, bufs_count, bufs_smask, bufs_example, bufs_stride0*offs, (offs >= 0) & (offs < bufs_shape0), "sum", align=bufs_align)


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = table
                offs = tl.arange(0, BLOCK)
                tl.store(out + offs, total(bufs, W, None, out, n, 1, None, offs))
        """),
        id="import castpile as cp: a table with shape= reduced in a helper",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import Multicast, multicast_like


            @triton.jit
            def put(value, dst: Multicast, at):
                dst[at] = value


            @triton.jit
            def k(out, table, pm, C: tl.constexpr, BLOCK: tl.constexpr):
                peers = tl.load(table + tl.arange(0, C))
                dsts = multicast_like(out, peers, ptr_mask=tl.load(pm + tl.arange(0, C)) != 0)
                put(7, at=tl.arange(0, BLOCK), dst=dsts)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import Multicast, multicast_like


                @triton.jit
                def put(value, dst, dst_count: tl.constexpr, dst_smask, dst_example, dst_stride0, dst_align: tl.constexpr, at):
                    _castpile_store_loop(dst, dst_count, dst_smask, dst_example, at*dst_stride0, None, value, align=dst_align, site='k.py:8')


                @triton.jit
                def k(out, table, pm, C: tl.constexpr, BLOCK: tl.constexpr):
                    peers = tl.load(table + tl.arange(0, C))
                    dsts = peers; dsts_mask = tl.load(pm + tl.arange(0, C)) != 0
                    put(7, at=tl.arange(0, BLOCK), dst=dsts, dst_count=dsts.numel, dst_smask=dsts_mask, dst_example=out, dst_stride0=1, dst_align=None)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import Multicast, multicast_like


                @triton.jit
                def put(value, dst, dst_count: tl.constexpr, dst_smask, dst_example, dst_stride0, dst_align: tl.constexpr, at):
                    _castpile_store_gather(dst, dst_count, dst_smask, dst_example, at*dst_stride0, None, value, align=dst_align, site='k.py:8')


                @triton.jit
                def k(out, table, pm, C: tl.constexpr, BLOCK: tl.constexpr):
                    peers = tl.load(table + tl.arange(0, C))
                    dsts = peers; dsts_mask = tl.load(pm + tl.arange(0, C)) != 0
                    put(7, at=tl.arange(0, BLOCK), dst=dsts, dst_count=dsts.numel, dst_smask=dsts_mask, dst_example=out, dst_stride0=1, dst_align=None)
            """),
        },
        id="from castpile import Multicast: a tile with ptr_mask passed by keyword",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import Multicast as MC
            from castpile import multicast_like


            @triton.jit
            def column(grid: MC, j, BLOCK: tl.constexpr):
                return grid[tl.arange(0, BLOCK), j]


            @triton.jit
            def columns(grid: MC, BLOCK: tl.constexpr):
                return column(grid, 0, BLOCK) + column(grid, 1, BLOCK)


            @triton.jit
            def k(out, table, m, n, W: tl.constexpr, BLOCK: tl.constexpr):
                grid = multicast_like(out, table[1:W], shape=(m, n), strides=(1, m), align=16)
                x = columns(grid, BLOCK)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import Multicast as MC
                from castpile import multicast_like


                @triton.jit
                def column(grid, grid_count: tl.constexpr, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align: tl.constexpr, j, BLOCK: tl.constexpr):
                    return _castpile_load_loop(grid, grid_count, grid_smask, grid_example, tl.arange(0, BLOCK)*grid_stride0, (tl.arange(0, BLOCK) < grid_shape0) & (j >= 0) & (j < grid_shape1), align=grid_align, base=grid_stride1*j)


                @triton.jit
                def columns(grid, grid_count: tl.constexpr, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align: tl.constexpr, BLOCK: tl.constexpr):
                    return column(grid, grid_count, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align, 0, BLOCK) + column(grid, grid_count, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align, 1, BLOCK)


                @triton.jit
                def k(out, table, m, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    grid = table + 1
                    x = columns(grid, W - 1, None, out, m, n, 1, m, 16, BLOCK)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import Multicast as MC
                from castpile import multicast_like


                @triton.jit
                def column(grid, grid_count: tl.constexpr, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align: tl.constexpr, j, BLOCK: tl.constexpr):
                    return _castpile_load_gather(grid, grid_count, grid_smask, grid_example, tl.arange(0, BLOCK)*grid_stride0, (tl.arange(0, BLOCK) < grid_shape0) & (j >= 0) & (j < grid_shape1), align=grid_align, base=grid_stride1*j)


                @triton.jit
                def columns(grid, grid_count: tl.constexpr, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align: tl.constexpr, BLOCK: tl.constexpr):
                    return column(grid, grid_count, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align, 0, BLOCK) + column(grid, grid_count, grid_smask, grid_example, grid_shape0, grid_shape1, grid_stride0, grid_stride1, grid_align, 1, BLOCK)


                @triton.jit
                def k(out, table, m, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    grid = table + 1
                    x = columns(grid, W - 1, None, out, m, n, 1, m, 16, BLOCK)
            """),
        },
        id="an alias of Multicast, 2-D with strides= and align=, passed on to another helper",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            @triton.jit
            def first(bufs: castpile.Multicast):
                return bufs[0]


            @triton.jit
            def k(out, table, idx, W: tl.constexpr, C: tl.constexpr):
                wide = castpile.multicast_like(out, table[:W])
                narrow = castpile.multicast_like(idx, table[W:W + C])
                tile = castpile.multicast_like(out, tl.load(table + tl.arange(0, 4)))
                a = first(wide)
                b = first(narrow)
                c = first(tile)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile


                @triton.jit
                def first(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_stride0, bufs_align: tl.constexpr):
                    return _castpile_load_loop(bufs, bufs_count, bufs_smask, bufs_example, 0, None, align=bufs_align)


                @triton.jit
                def k(out, table, idx, W: tl.constexpr, C: tl.constexpr):
                    wide = table
                    narrow = W + table
                    tile = tl.load(table + tl.arange(0, 4))
                    a = first(wide, W, None, out, 1, None)
                    b = first(narrow, C, None, idx, 1, None)
                    c = first(tile, tile.numel, None, out, 1, None)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile


                @triton.jit
                def first(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_stride0, bufs_align: tl.constexpr):
                    return _castpile_load_gather(bufs, bufs_count, bufs_smask, bufs_example, 0, None, align=bufs_align)


                @triton.jit
                def k(out, table, idx, W: tl.constexpr, C: tl.constexpr):
                    wide = table
                    narrow = W + table
                    tile = tl.load(table + tl.arange(0, 4))
                    a = first(wide, W, None, out, 1, None)
                    b = first(narrow, C, None, idx, 1, None)
                    c = first(tile, tile.numel, None, out, 1, None)
            """),
        },
        id="one helper called with tables of different W and a tile",
    ),
]


LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            from mylib import Multicast


            @triton.jit
            def h(bufs: Multicast, x):
                return tl.load(bufs + x)
        """),
        id="a Multicast imported from another module",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            class Multicast:
                pass


            @triton.jit
            def h(bufs: Multicast, x):
                return tl.load(bufs + x)


            @triton.jit
            def k(out, x):
                tl.store(out, h(out, x))
        """),
        id="a local class named Multicast",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            def make(cp):
                @triton.jit
                def h(bufs: cp.Multicast, x):
                    return tl.load(bufs + x)

                return h
        """),
        id="a parameter named like the castpile import",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, file_cases=FILE_CASES)
