"""Lowering tl.atomic_* on a binding's elements: each helper returns the old values, masks and options in order.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone

KERNEL_CASES = [
    # atomics
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_add(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "add", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "add", v)
            """),
        },
        id="tl.atomic_add",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_max(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "max", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "max", v)
            """),
        },
        id="tl.atomic_max",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_min(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "min", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "min", v)
            """),
        },
        id="tl.atomic_min",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_and(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "and", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "and", v)
            """),
        },
        id="tl.atomic_and",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_or(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "or", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "or", v)
            """),
        },
        id="tl.atomic_or",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_xor(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "xor", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "xor", v)
            """),
        },
        id="tl.atomic_xor",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_xchg(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "xchg", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "xchg", v)
            """),
        },
        id="tl.atomic_xchg",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_max(bufs[offs], v, mask=offs < m)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "max", v, offs < m)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "max", v, offs < m)
            """),
        },
        id="tl.atomic_max with mask",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_min(bufs[offs], v, sem='relaxed', scope='gpu')
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "min", v, sem='relaxed', scope='gpu')
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "min", v, sem='relaxed', scope='gpu')
            """),
        },
        id="tl.atomic_min with sem and scope",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_cas(bufs[offs], 0, v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_cas_loop(bufs, W, None, out, offs, (offs < n), 0, v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_cas_gather(bufs, W, None, out, offs, (offs < n), 0, v)
            """),
        },
        id="tl.atomic_cas",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_cas(bufs[offs], val=v, cmp=0, sem='acq_rel')
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_cas_loop(bufs, W, None, out, offs, (offs < n), 0, v, sem='acq_rel')
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_cas_gather(bufs, W, None, out, offs, (offs < n), 0, v, sem='acq_rel')
            """),
        },
        id="tl.atomic_cas keywords out of order",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.atomic_add(bufs[offs], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "add", v, keep_old=False)
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "add", v, keep_old=False)
            """),
        },
        id="unused atomic result: keep_old=False",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.atomic_xchg(bufs[offs], v, mask=offs < m, sem='release')
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_atomic_loop(bufs, W, None, out, offs, (offs < n), "xchg", v, offs < m, sem='release', keep_old=False)
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_atomic_gather(bufs, W, None, out, offs, (offs < n), "xchg", v, offs < m, sem='release', keep_old=False)
            """),
        },
        id="unused atomic_xchg with mask and sem",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.atomic_cas(bufs[offs], 0, v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_atomic_cas_loop(bufs, W, None, out, offs, (offs < n), 0, v, keep_old=False)
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_atomic_cas_gather(bufs, W, None, out, offs, (offs < n), 0, v, keep_old=False)
            """),
        },
        id="unused atomic_cas result",
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
            def k(out, ctr, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                old = tl.atomic_add(out + offs, 1)
                tl.atomic_cas(ctr, 0, 1)
                tl.atomic_max(out + offs, old)
        """),
        id="atomics on plain pointers",
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
