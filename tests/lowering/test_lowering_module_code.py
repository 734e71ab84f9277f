"""Module-level code after a rewritten kernel: the first statement that calls anything defines the helpers first.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
That statement inside a for, with or try statement: test_lowering_module_code_statements.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_left_alone, check_whole_file

FILE_CASES = [
    # Module-level code after a rewritten kernel: the first statement that calls anything defines the helpers first.
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]


            N = 4


            def main():
                k[(1,)](None, None, N)


            if __name__ == '__main__':
                main()
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


                N = 4


                def main():
                    k[(1,)](None, None, N)


                if __import__("castpile").define_helpers(globals()) or (__name__ == '__main__'):
                    main()
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                N = 4


                def main():
                    k[(1,)](None, None, N)


                if __import__("castpile").define_helpers(globals()) or (__name__ == '__main__'):
                    main()
            """),
        },
        id="an `if __name__ == '__main__':` block",
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


            k[(1,)](None, None, 4)  # at import
            k[(2,)](None, None, 4)
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


                __import__("castpile").define_helpers(globals()); k[(1,)](None, None, 4)  # at import
                k[(2,)](None, None, 4)
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                __import__("castpile").define_helpers(globals()); k[(1,)](None, None, 4)  # at import
                k[(2,)](None, None, 4)
            """),
        },
        id="a launch at import, then more",
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


            BLOCK = 4


            @triton.jit(do_not_specialize=['n'])
            def other(out, n):
                tl.store(out, tl.load(out) + n)


            class Host:
                size = len('abc')
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


                BLOCK = 4


                @triton.jit(do_not_specialize=['n'])
                def other(out, n):
                    tl.store(out, tl.load(out) + n)


                class Host:
                    size = len('abc')
            """),
            "gather": dedent("""\
                import triton
                import triton.language as tl
                from castpile import multicast_like


                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = table
                    x = _castpile_load_gather(bufs, W, None, out, 0, None)


                BLOCK = 4


                @triton.jit(do_not_specialize=['n'])
                def other(out, n):
                    tl.store(out, tl.load(out) + n)


                class Host:
                    size = len('abc')
            """),
        },
        id="definitions and constants only: nothing changes",
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
            def k(out):
                tl.store(out, 1)


            k[(1,)](None)
        """),
        id="a launch at import of a kernel castpile does not rewrite",
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
