"""Lowering leaves lookalikes of castpile's names alone: shadowing parameters and locals, other modules' names, star imports.

Each case is a whole file, returned byte for byte under every strategy (tests/testkit/lowering.py).
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_left_alone

# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def multicast_like(example, tile):
                return tile


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
        """),
        id="a lookalike module-level function named multicast_like",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def make():
                def multicast_like(a, b):
                    return b

                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = multicast_like(out, table[:W])
                    x = bufs[0]

                return k
        """),
        id="a lookalike local function of an enclosing function",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, multicast_like, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
        """),
        id="a parameter shadowing the import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            def make(multicast_like):
                @triton.jit
                def k(out, table, W: tl.constexpr):
                    bufs = multicast_like(out, table[:W])
                    x = bufs[0]

                return k
        """),
        id="a parameter of an enclosing function shadowing the import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, table, W: tl.constexpr):
                multicast_like = tl.load
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
        """),
        id="a local variable shadowing the import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            import other


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = other.multicast_like(out, table[:W])
                x = bufs[0]
                other.signal(bufs[0])
                other.wait(out)
        """),
        id="other.multicast_like, other.signal, other.wait",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl


            @triton.jit
            def k(out, table, wait, W: tl.constexpr):
                def multicast_like(a, b):
                    return b
                bufs = multicast_like(out, table[:W])
                wait(bufs[0])
        """),
        id="a local def named multicast_like and a parameter named wait, no castpile import",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile as cp
            import other
            multicast_like = other.multicast_like
            signal = other.signal
            cp = other


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                more = cp.multicast_like(out, table[:W])
                signal(bufs[0])
        """),
        id="aliases of another module's names",
    ),
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import *


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = multicast_like(out, table[:W])
                x = bufs[0]
                signal(bufs[0])
                wait(out)
        """),
        id="star import",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)
