"""Lowering Multicast parameters, continued: parameters and calls over several lines, string annotations, binding-time
extents, a 2-D tile's contiguous strides, helpers that call each other, tensors with and without shape= at one
parameter.

The cases' form and the parameters a Multicast parameter becomes: tests/lowering/test_lowering_multicast_params.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_whole_file

FILE_CASES = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def bump(
                ctr,
                flags: cp.Multicast,
                at: cp.Multicast,
            ):
                cp.signal(flags[tl.atomic_add(ctr, 1)])
                tl.atomic_add(at[0], 1)


            @triton.jit
            def k(out, table, ctr, W: tl.constexpr):
                flags = cp.multicast_like(out, table[:W])
                bump(
                    ctr,
                    flags,
                    at=flags,
                )
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def bump(
                    ctr,
                    flags, flags_count: tl.constexpr, flags_smask, flags_example, flags_stride0, flags_align: tl.constexpr,
                    at, at_count: tl.constexpr, at_smask, at_example, at_stride0, at_align: tl.constexpr,
                ):
                    _castpile_signal(flags, flags_count, flags_smask, flags_example, *_castpile_index((tl.atomic_add(ctr, 1),), None, (flags_stride0,)), align=flags_align)
                    _castpile_atomic_loop(at, at_count, at_smask, at_example, 0, None, "add", 1, align=at_align, keep_old=False)


                @triton.jit
                def k(out, table, ctr, W: tl.constexpr):
                    flags = table
                    bump(ctr, flags, W, None, out, 1, None, at=flags, at_count=W, at_smask=None, at_example=out, at_stride0=1, at_align=None



                    )
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def bump(
                    ctr,
                    flags, flags_count: tl.constexpr, flags_smask, flags_example, flags_stride0, flags_align: tl.constexpr,
                    at, at_count: tl.constexpr, at_smask, at_example, at_stride0, at_align: tl.constexpr,
                ):
                    _castpile_signal(flags, flags_count, flags_smask, flags_example, *_castpile_index((tl.atomic_add(ctr, 1),), None, (flags_stride0,)), align=flags_align)
                    _castpile_atomic_gather(at, at_count, at_smask, at_example, 0, None, "add", 1, align=at_align, keep_old=False)


                @triton.jit
                def k(out, table, ctr, W: tl.constexpr):
                    flags = table
                    bump(ctr, flags, W, None, out, 1, None, at=flags, at_count=W, at_smask=None, at_example=out, at_stride0=1, at_align=None



                    )
            """),
        },
        id="one parameter per line, two Multicast parameters, a call over lines",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def scaled(bufs: "cp.Multicast", offs, s):
                return tl.sum(tl.load(bufs[offs], mask=offs < 4) * s, axis=0)


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W], shape=(n,))
                n = n + 1
                tl.store(out + tl.arange(0, BLOCK), scaled(bufs, tl.arange(0, BLOCK), 2))
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def scaled(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, offs, s):
                    return tl.sum(_castpile_load_loop(bufs, bufs_count, bufs_smask, bufs_example, bufs_stride0*offs, (offs >= 0) & (offs < bufs_shape0), offs < 4, align=bufs_align) * s, axis=0)


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table; bufs_shape0_ = n
                    n = n + 1
                    tl.store(out + tl.arange(0, BLOCK), scaled(bufs, W, None, out, bufs_shape0_, 1, None, tl.arange(0, BLOCK), 2))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def scaled(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, offs, s):
                    return tl.sum(_castpile_load_gather(bufs, bufs_count, bufs_smask, bufs_example, bufs_stride0*offs, (offs >= 0) & (offs < bufs_shape0), offs < 4, align=bufs_align) * s, axis=0)


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table; bufs_shape0_ = n
                    n = n + 1
                    tl.store(out + tl.arange(0, BLOCK), scaled(bufs, W, None, out, bufs_shape0_, 1, None, tl.arange(0, BLOCK), 2))
            """),
        },
        id="a string annotation; the extent evaluated at the binding",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def rows(src: cp.Multicast, r, BLOCK: tl.constexpr):
                return tl.max(src[r, tl.arange(0, BLOCK)], axis=0)


            @triton.jit
            def k(out, table, m, n, W: tl.constexpr, BLOCK: tl.constexpr):
                src = cp.multicast_like(out, tl.load(table + tl.arange(0, 2)[:, None] * 2 + tl.arange(0, 2)[None, :]), shape=(m, n))
                x = rows(src, 1, BLOCK)
        """),
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def rows(src, src_count: tl.constexpr, src_smask, src_example, src_shape0, src_shape1, src_stride0, src_stride1, src_align: tl.constexpr, r, BLOCK: tl.constexpr):
                return _castpile_reduce_passed(src, src_count, src_smask, src_example, tl.arange(0, BLOCK)*src_stride1, (r >= 0) & (r < src_shape0) & (tl.arange(0, BLOCK) < src_shape1), "max", align=src_align, base=r*src_stride0)


            @triton.jit
            def k(out, table, m, n, W: tl.constexpr, BLOCK: tl.constexpr):
                src = tl.load(table + tl.arange(0, 2)[:, None] * 2 + tl.arange(0, 2)[None, :])
                x = rows(src, src.numel, None, out, m, n, n, 1, None, 1, BLOCK)
        """),
        id="a 2-D tile with shape=: contiguous strides passed",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def ping(bufs: cp.Multicast, i):
                if i > 0:
                    pong(bufs, i)


            @triton.jit
            def pong(bufs: cp.Multicast, i):
                bufs[i] = 1
                ping(bufs, i - 1)


            @triton.jit
            def k(out, table, n, W: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W], shape=(n,), strides=(2,))
                ping(bufs, 3)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def ping(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, i):
                    if i > 0:
                        pong(bufs, bufs_count, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align, i)


                @triton.jit
                def pong(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, i):
                    _castpile_store_loop(bufs, bufs_count, bufs_smask, bufs_example, bufs_stride0*i, (i >= 0) & (i < bufs_shape0), 1, align=bufs_align, site='k.py:14')
                    ping(bufs, bufs_count, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align, i - 1)


                @triton.jit
                def k(out, table, n, W: tl.constexpr):
                    bufs = table
                    ping(bufs, W, None, out, n, 2, None, 3)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def ping(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, i):
                    if i > 0:
                        pong(bufs, bufs_count, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align, i)


                @triton.jit
                def pong(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, i):
                    _castpile_store_gather(bufs, bufs_count, bufs_smask, bufs_example, bufs_stride0*i, (i >= 0) & (i < bufs_shape0), 1, align=bufs_align, site='k.py:14')
                    ping(bufs, bufs_count, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align, i - 1)


                @triton.jit
                def k(out, table, n, W: tl.constexpr):
                    bufs = table
                    ping(bufs, W, None, out, n, 2, None, 3)
            """),
        },
        id="helpers that call each other with a Multicast parameter",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def window(bufs: cp.Multicast, ctr, BLOCK: tl.constexpr):
                a = bufs[tl.arange(0, BLOCK)]
                b = bufs[tl.atomic_add(ctr, 1)]


            @triton.jit
            def k(out, table, ctr, n, W: tl.constexpr, BLOCK: tl.constexpr):
                shaped = cp.multicast_like(out, table[:W], shape=(n,))
                flat = cp.multicast_like(out, table[:W])
                window(shaped, ctr, BLOCK)
                window(flat, ctr, BLOCK)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def window(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, ctr, BLOCK: tl.constexpr):
                    a = _castpile_load_loop(bufs, bufs_count, bufs_smask, bufs_example, tl.arange(0, BLOCK)*bufs_stride0, ((tl.arange(0, BLOCK) < bufs_shape0)) if bufs_shape0 is not None else None, align=bufs_align)
                    b = _castpile_load_loop(bufs, bufs_count, bufs_smask, bufs_example, *_castpile_index((tl.atomic_add(ctr, 1),), (bufs_shape0,) if bufs_shape0 is not None else None, (bufs_stride0,)), align=bufs_align)


                @triton.jit
                def k(out, table, ctr, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    shaped = table
                    flat = table
                    window(shaped, W, None, out, n, 1, None, ctr, BLOCK)
                    window(flat, W, None, out, None, 1, None, ctr, BLOCK)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile as cp


                @triton.jit
                def window(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, ctr, BLOCK: tl.constexpr):
                    a = _castpile_load_gather(bufs, bufs_count, bufs_smask, bufs_example, tl.arange(0, BLOCK)*bufs_stride0, ((tl.arange(0, BLOCK) < bufs_shape0)) if bufs_shape0 is not None else None, align=bufs_align)
                    b = _castpile_load_gather(bufs, bufs_count, bufs_smask, bufs_example, *_castpile_index((tl.atomic_add(ctr, 1),), (bufs_shape0,) if bufs_shape0 is not None else None, (bufs_stride0,)), align=bufs_align)


                @triton.jit
                def k(out, table, ctr, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    shaped = table
                    flat = table
                    window(shaped, W, None, out, n, 1, None, ctr, BLOCK)
                    window(flat, W, None, out, None, 1, None, ctr, BLOCK)
            """),
        },
        id="tensors with and without shape= at one parameter: None extents, bounds Triton decides",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, file_cases=FILE_CASES)
