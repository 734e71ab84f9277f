"""Lowering finds triton.language in every spelling a module gives it that Python resolves statically.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
(docs/language.md, Names.)
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_whole_file

FILE_CASES = [
    pytest.param(
        dedent("""\
            import triton
            import castpile
            tl = triton.language


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import castpile
                tl = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import castpile
                tl = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="tl = triton.language",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            language = triton.language


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = language.arange(0, BLOCK)
                top = language.max(bufs[offs], axis=0)
                x = language.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                language = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                language = triton.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="language = triton.language, next to tl",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like, signal


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = multicast_like(out, table[:W], shape=(n,))
                offs = triton.language.arange(0, BLOCK)
                top = triton.language.max(bufs[offs], axis=0)
                x = triton.language.load(bufs[offs], mask=offs < 2, other=-1)
                signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like, signal


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = triton.language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like, signal


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = triton.language.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="import triton; triton.language.max",
    ),
    pytest.param(
        dedent("""\
            import triton
            from triton import language as tl
            import castpile as cp


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = tl.max(bufs[offs], axis=0)
                x = tl.load(bufs[offs], mask=offs < 2, other=-1)
                cp.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                from triton import language as tl
                import castpile as cp


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                from triton import language as tl
                import castpile as cp


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="from triton import language as tl; import castpile as cp",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, file_cases=FILE_CASES)
