"""Lowering loads and stores through a binding: subscripts, augmented stores, tl.load and tl.store with masks and options.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone

KERNEL_CASES = [
    # load, store, augmented store
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[offs] * 2
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n)) * 2
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n)) * 2
            """),
        },
        id="load in an expression",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] = v
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), v, site='k.py:12')
            """),
        },
        id="store",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] = bufs[offs + 1]
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), _castpile_load_loop(bufs, W, None, out, offs + 1, (offs + 1 < n)), site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), _castpile_load_gather(bufs, W, None, out, offs + 1, (offs + 1 < n)), site='k.py:12')
            """),
        },
        id="store of a multicast load (pure index: no temporary)",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] += v
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), _castpile_load_loop(bufs, W, None, out, offs, (offs < n)) + v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), _castpile_load_gather(bufs, W, None, out, offs, (offs < n)) + v, site='k.py:12')
            """),
        },
        id="augmented store +=",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] *= v + 1
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), _castpile_load_loop(bufs, W, None, out, offs, (offs < n)) * (v + 1), site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), _castpile_load_gather(bufs, W, None, out, offs, (offs < n)) * (v + 1), site='k.py:12')
            """),
        },
        id="augmented store *= parenthesises the value",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] <<= 1
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), _castpile_load_loop(bufs, W, None, out, offs, (offs < n)) << 1, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), _castpile_load_gather(bufs, W, None, out, offs, (offs < n)) << 1, site='k.py:12')
            """),
        },
        id="augmented store <<=",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[offs] = v; x = bufs[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), v, site='k.py:12'); x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n))
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), v, site='k.py:12'); x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n))
            """),
        },
        id="two statements on a line",
    ),
    # tl.load / tl.store
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.load(bufs[offs], mask=offs < m, other=-1.0)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < m, -1.0)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < m, -1.0)
            """),
        },
        id="tl.load with mask and other",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.load(bufs[offs], other=-1.0, mask=offs < m)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < m, -1.0)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < m, -1.0)
            """),
        },
        id="tl.load keywords out of order: by position in the contract's order",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.load(bufs[offs], other=-1.0)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), None, -1.0)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), None, -1.0)
            """),
        },
        id="tl.load with other only: mask defaults to None",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.load(bufs[offs], offs < m, cache_modifier='.cg', volatile=True)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, offs, (offs < n), offs < m, cache_modifier='.cg', volatile=True)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, offs, (offs < n), offs < m, cache_modifier='.cg', volatile=True)
            """),
        },
        id="tl.load with a positional mask and options",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.store(bufs[offs], v, mask=offs < m)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), v, offs < m, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), v, offs < m, site='k.py:12')
            """),
        },
        id="tl.store with mask",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.store(bufs[offs], mask=offs < m, value=v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), v, offs < m, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), v, offs < m, site='k.py:12')
            """),
        },
        id="tl.store with keyword value after mask",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.store(bufs[offs], v, eviction_policy='evict_last')
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, offs, (offs < n), v, eviction_policy='evict_last', site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, offs, (offs < n), v, eviction_policy='evict_last', site='k.py:12')
            """),
        },
        id="tl.store with eviction_policy",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from castpile import multicast_like


            @triton.jit
            def k(out, ptrs, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                x = tl.load(ptrs + offs, mask=offs < 4, other=0)
                tl.store(out + offs, x + 1)
        """),
        id="loads and stores through plain pointers",
    ),
]

# Cases whose options plain Triton refuses too (ptxas: the message); they must get that far.
PTXAS_REFUSES = {
    "tl.load with a positional mask and options": "Modifier '.volatile' cannot be combined with modifier '.cg'"
}


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), KERNEL_CASES)
def test_kernel_lines(source, expected, strategy):
    check_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES, ptxas_refuses=PTXAS_REFUSES)
