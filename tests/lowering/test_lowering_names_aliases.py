"""Lowering follows aliases of castpile and triton.language: assignments, aliases of aliases, := and annotated ones, branches, enclosing functions.

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
            import triton.language as tl
            import castpile
            cp = castpile
            mcl = cp.multicast_like
            sig = castpile.signal
            ld = tl.load
            mx = tl.max


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = mcl(out, table[:W], shape=(n,))
                offs = tl.arange(0, BLOCK)
                top = mx(bufs[offs], axis=0)
                x = ld(bufs[offs], mask=offs < 2, other=-1)
                sig(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                cp = castpile
                mcl = cp.multicast_like
                sig = castpile.signal
                ld = tl.load
                mx = tl.max


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
                import triton.language as tl
                import castpile
                cp = castpile
                mcl = cp.multicast_like
                sig = castpile.signal
                ld = tl.load
                mx = tl.max


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="cp = castpile, mcl = cp.multicast_like, sig = castpile.signal, ld = tl.load, mx = tl.max",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            T = triton
            L = T.language


            @triton.jit
            def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                bufs = castpile.multicast_like(out, table[:W], shape=(n,))
                offs = L.arange(0, BLOCK)
                top = L.max(bufs[offs], axis=0)
                x = L.load(bufs[offs], mask=offs < 2, other=-1)
                castpile.signal(bufs[0])
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                T = triton
                L = T.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = L.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                import castpile
                T = triton
                L = T.language


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = L.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="aliases of aliases: T = triton, L = T.language",
    ),
    pytest.param(
        dedent("""\
            import triton
            import castpile
            tl: object = triton.language
            print(cp := castpile)


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
                import castpile
                tl: object = triton.language
                print(cp := castpile)


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
                tl: object = triton.language
                print(cp := castpile)


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="an annotated alias and one by :=",
    ),
    pytest.param(
        dedent("""\
            import triton
            import castpile
            try:
                import triton.language as tl
            except ImportError:
                tl = None


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
                try:
                    import triton.language as tl
                except ImportError:
                    tl = None


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
                try:
                    import triton.language as tl
                except ImportError:
                    tl = None


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="an import fallback: except ImportError does not shadow the try body's import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import castpile
            if castpile:
                import triton.language as tl
            else:
                from triton import language as tl


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
                if castpile:
                    import triton.language as tl
                else:
                    from triton import language as tl


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
                if castpile:
                    import triton.language as tl
                else:
                    from triton import language as tl


                @triton.jit
                def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
                    bufs = table
                    offs = tl.arange(0, BLOCK)
                    top = _castpile_reduce_loop(bufs, W, None, out, offs, (offs < n), "max")
                    x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < 2, -1)
                    _castpile_signal(bufs, W, None, out, 0, (0 < n))
            """),
        },
        id="if/else imports that agree",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            def make():
                lang = triton.language
                mcl = castpile.multicast_like

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = mcl(out, table[:W])
                    top = lang.max(bufs[0], axis=0)

                return k
        """),
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            def make():
                lang = triton.language
                mcl = castpile.multicast_like

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    top = _castpile_reduce_loop(bufs, W, None, out, 0, None, "max")

                return k
        """),
        id="aliases in an enclosing function",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, file_cases=FILE_CASES)
