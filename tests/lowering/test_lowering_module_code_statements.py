"""Module-level code after a rewritten kernel, its first call inside a compound statement: for, with, try, a one-line try.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
The helpers are defined in the first thing that statement evaluates. Every output runs code at import, which
the sm_90 compile's child cannot import (see check_cases_compile_for_sm90), so none is compiled here.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_whole_file

FILE_CASES = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            for grid in (1,), (2,):
                k[grid](None, None, 4)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_loop(bufs, W, None, out, 0, None)


                for grid in __import__("castpile").define_helpers(globals()) or ((1,), (2,)):
                    k[grid](None, None, 4)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                for grid in __import__("castpile").define_helpers(globals()) or ((1,), (2,)):
                    k[grid](None, None, 4)
            """),
        },
        id="a for loop, its iterable in parentheses",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            with open('log') as log, open('x'):
                k[(1,)](None, None, 4)
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_loop(bufs, W, None, out, 0, None)


                with __import__("castpile").define_helpers(globals()) or (open('log')) as log, open('x'):
                    k[(1,)](None, None, 4)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                with __import__("castpile").define_helpers(globals()) or (open('log')) as log, open('x'):
                    k[(1,)](None, None, 4)
            """),
        },
        id="a with statement",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            try:
                def helper():
                    pass
                k[(1,)](None, None, 4)
            except RuntimeError:
                pass
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_loop(bufs, W, None, out, 0, None)


                try:
                    def helper():
                        pass
                    __import__("castpile").define_helpers(globals()); k[(1,)](None, None, 4)
                except RuntimeError:
                    pass
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                try:
                    def helper():
                        pass
                    __import__("castpile").define_helpers(globals()); k[(1,)](None, None, 4)
                except RuntimeError:
                    pass
            """),
        },
        id="a try statement: its body's first statement",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            try: k[(1,)](None, None, 4)
            except RuntimeError: pass
        """),
        {
            "loop": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_loop(bufs, W, None, out, 0, None)


                try: __import__("castpile").define_helpers(globals()); k[(1,)](None, None, 4)
                except RuntimeError: pass
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                try: __import__("castpile").define_helpers(globals()); k[(1,)](None, None, 4)
                except RuntimeError: pass
            """),
        },
        id="a one-line try",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), FILE_CASES)
def test_whole_files(source, expected, strategy):
    check_whole_file(source, expected, strategy)
