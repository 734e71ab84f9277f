"""Lowering finds castpile's names where Python's import forms and scopes put them.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
Aliases: test_lowering_names_aliases.py; spellings of triton.language: test_lowering_names_language.py;
lookalikes left alone: test_lowering_names_lookalikes.py.
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
            def k(out, table, W: tl.constexpr):
                bufs = cp.multicast_like(out, table[:W])
                cp.signal(bufs[0])
                cp.wait(bufs[0])
        """),
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = table
                _castpile_signal(bufs, W, None, out, 0, None)
                _castpile_wait(bufs, W, None, out, 0, None)
        """),
        id="import castpile as cp",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like as mcl, wait as cwait


            @triton.jit(do_not_specialize=['n'])
            def k(out, table, n, W: tl.constexpr):
                bufs = mcl(out, table[:W])
                cwait(bufs[n])
        """),
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like as mcl, wait as cwait


            @triton.jit(do_not_specialize=['n'])
            def k(out, table, n, W: tl.constexpr):
                bufs = table
                _castpile_wait(bufs, W, None, out, n, None)
        """),
        id="from castpile import ... as ...",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl


            def make():
                from castpile import multicast_like

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = multicast_like(out, table[:W])
                    x = bufs[0]

                return k
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl


                def make():
                    from castpile import multicast_like

                    @triton.jit
                    def k(out, table, W: tl.constexpr):
                        bufs = table
                        x = _castpile_load_loop(bufs, W, None, out, 0, None)

                    return k
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl


                def make():
                    from castpile import multicast_like

                    @triton.jit
                    def k(out, table, W: tl.constexpr):
                        bufs = table
                        x = _castpile_load_gather(bufs, W, None, out, 0, None)

                    return k
            """),
        },
        id="import in an enclosing function",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like
            try:
                from castpile import signal
            except ImportError:
                signal = None


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                signal(bufs[0])
        """),
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like
            try:
                from castpile import signal
            except ImportError:
                signal = None


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = table
                _castpile_signal(bufs, W, None, out, 0, None)
        """),
        id="import fallback: what the except handler binds does not shadow",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def host(bufs, table):
                x = bufs[0]
                bufs[1] = x
                return tl.sum(bufs[0:2])


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            class Host:
                bufs = [1, 2]
                y = bufs[0]
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                def host(bufs, table):
                    x = bufs[0]
                    bufs[1] = x
                    return tl.sum(bufs[0:2])


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_loop(bufs, W, None, out, 0, None)


                class Host:
                    bufs = [1, 2]
                    y = bufs[0]
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                def host(bufs, table):
                    x = bufs[0]
                    bufs[1] = x
                    return tl.sum(bufs[0:2])


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                class Host:
                    bufs = [1, 2]
                    y = bufs[0]
            """),
        },
        id="code outside @triton.jit is left alone",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, file_cases=FILE_CASES)
