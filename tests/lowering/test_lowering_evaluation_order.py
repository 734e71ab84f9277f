"""Lowering keeps Python's evaluation order: value arguments written out of the helper's order, and indices evaluated once.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone

KERNEL_CASES = [
    # value arguments with side effects written out of the helper's order: evaluated in the order
    # written.  A call that stands alone as a statement puts them (and impure indices before them) in
    # fresh names on its line; inside an expression they are handed over rearranged.
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[0], mask=tl.atomic_add(ctr, 1) > 0, value=tl.atomic_add(ctr, 1))
        """),
        dedent("""\
            bufs = table
            _castpile_v0 = tl.atomic_add(ctr, 1) > 0; _castpile_v1 = tl.atomic_add(ctr, 1); _castpile_signal(bufs, W, None, out, 0, None, _castpile_v1, None, _castpile_v0)
        """),
        id="signal: mask then value, wait_for's default between them",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[tl.atomic_add(ctr, 1)], mask=tl.load(idx) > 0, wait_for=tl.load(idx + 1))
        """),
        dedent("""\
            bufs = table
            _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_v1 = tl.load(idx) > 0; _castpile_v2 = tl.load(idx + 1); _castpile_signal(bufs, W, None, out, _castpile_i0, None, 1, _castpile_v2, _castpile_v1)
        """),
        id="signal at an impure index: mask then wait_for, value's default first",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.wait(bufs[offs], mask=tl.load(idx + offs) > 0, value=tl.load(idx))
        """),
        dedent("""\
            bufs = table
            _castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); _castpile_wait(bufs, W, None, out, offs, None, _castpile_v1, 0, _castpile_v0)
        """),
        id="wait: mask then value, reset's default between them",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs + offs, mask=tl.load(idx + offs) > 0, value=tl.load(idx))
        """),
        dedent("""\
            _castpile_p0 = ptrs + offs; _castpile_v1 = tl.load(idx + offs) > 0; _castpile_v2 = tl.load(idx); _castpile_wait_flags(_castpile_p0, _castpile_v2, 0, _castpile_v1)
        """),
        id="wait on plain pointers: the pointers first, then mask and value",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            tl.atomic_add(bufs[offs], mask=tl.load(idx + offs) > 0, val=tl.load(idx))
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); _castpile_atomic_loop(bufs, W, None, out, offs, None, "add", _castpile_v1, _castpile_v0, keep_old=False)
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); _castpile_atomic_gather(bufs, W, None, out, offs, None, "add", _castpile_v1, _castpile_v0, keep_old=False)
            """),
        },
        id="an unused atomic: mask then val, in fresh names",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.store(bufs[offs], mask=tl.load(idx + offs) > 0, value=tl.load(idx))
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); _castpile_store_loop(bufs, W, None, out, offs, (offs < n), _castpile_v1, _castpile_v0, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); _castpile_store_gather(bufs, W, None, out, offs, (offs < n), _castpile_v1, _castpile_v0, site='k.py:12')
            """),
        },
        id="tl.store: mask then value, in fresh names",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            x = tl.atomic_add(bufs[offs], mask=tl.load(idx + offs) > 0, val=tl.load(idx))
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, offs, None, "add", *_castpile_in_order((tl.load(idx + offs) > 0, tl.load(idx)), (1, 0)))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, offs, None, "add", *_castpile_in_order((tl.load(idx + offs) > 0, tl.load(idx)), (1, 0)))
            """),
        },
        id="an atomic inside an expression: mask then val, handed over rearranged",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            (castpile.signal(bufs[0], mask=tl.atomic_add(ctr, 1) > 0,
                             value=tl.atomic_add(ctr, 1)))
        """),
        dedent("""\
            bufs = table
            _castpile_v0 = tl.atomic_add(ctr, 1) > 0; _castpile_v1 = tl.atomic_add(ctr, 1); _castpile_signal(bufs, W, None, out, 0, None, _castpile_v1, None, _castpile_v0
            )
        """),
        id="a parenthesised two-line signal out of order: statements without the parentheses, the line break inside the last",
    ),
    # indices evaluated once
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            x = bufs[tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, tl.arange(0, BLOCK), None, base=BLOCK*tl.program_id(0))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, tl.arange(0, BLOCK), None, base=BLOCK*tl.program_id(0))
            """),
        },
        id="pure tl calls may repeat",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[tl.atomic_add(ctr, 1)]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)))
            """),
        },
        id="atomic index in a load: _castpile_index",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            x = bufs[tl.atomic_add(ctr, 1), offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1), offs), (n, m), (m, 1), (True, False)))
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1), offs), (n, m), (m, 1), (True, False)))
            """),
        },
        id="atomic index among two: every index and stride to _castpile_index",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = bufs[tl.load(idx + offs)] + 1
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_load_loop(bufs, W, None, out, *_castpile_index((tl.load(idx + offs),), (n,), (1,))) + 1
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_load_gather(bufs, W, None, out, *_castpile_index((tl.load(idx + offs),), (n,), (1,))) + 1
            """),
        },
        id="tl.load index inside an expression",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            idxs = multicast_like(idx, table[:W], shape=(n,))
            x = bufs[idxs[0]]
        """),
        {
            "loop": dedent("""\
                bufs = table
                idxs = table
                x = _castpile_load_loop(bufs, W, None, out, *_castpile_index((_castpile_load_loop(idxs, W, None, idx, 0, (0 < n)),), (n,), (1,)))
            """),
            "gather": dedent("""\
                bufs = table
                idxs = table
                x = _castpile_load_gather(bufs, W, None, out, *_castpile_index((_castpile_load_gather(idxs, W, None, idx, 0, (0 < n)),), (n,), (1,)))
            """),
        },
        id="multicast load as an index",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.sum(bufs[tl.atomic_add(ctr, 1)], axis=0)
        """),
        dedent("""\
            bufs = table
            x = _castpile_reduce_loop(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), "sum")
        """),
        id="atomic index in a reduction",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            x = tl.atomic_add(bufs[tl.atomic_add(ctr, 1)], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                x = _castpile_atomic_loop(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), "add", v)
            """),
            "gather": dedent("""\
                bufs = table
                x = _castpile_atomic_gather(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), "add", v)
            """),
        },
        id="atomic index in an atomic",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            tl.store(bufs[tl.atomic_add(ctr, 1)], v)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_store_loop(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_store_gather(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), v, site='k.py:12')
            """),
        },
        id="atomic index in tl.store: an expression, index before value",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[tl.atomic_add(ctr, 1)] = v
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_store_loop(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n), v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_store_gather(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n), v, site='k.py:12')
            """),
        },
        id="atomic index in a store statement: a temporary",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n, m))
            bufs[tl.atomic_add(ctr, 1), offs] = v
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_store_loop(bufs, W, None, out, _castpile_i0*m + offs, (_castpile_i0 >= 0) & (_castpile_i0 < n) & (offs < m), v, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_store_gather(bufs, W, None, out, _castpile_i0*m + offs, (_castpile_i0 >= 0) & (_castpile_i0 < n) & (offs < m), v, site='k.py:12')
            """),
        },
        id="atomic index among two in a store statement",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[tl.atomic_add(ctr, 1)] = tl.load(idx)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_v0 = tl.load(idx); _castpile_i1 = tl.atomic_add(ctr, 1); _castpile_store_loop(bufs, W, None, out, _castpile_i1, (_castpile_i1 >= 0) & (_castpile_i1 < n), _castpile_v0, site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_v0 = tl.load(idx); _castpile_i1 = tl.atomic_add(ctr, 1); _castpile_store_gather(bufs, W, None, out, _castpile_i1, (_castpile_i1 >= 0) & (_castpile_i1 < n), _castpile_v0, site='k.py:12')
            """),
        },
        id="impure value and index in a store statement: the value first",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,))
            bufs[tl.atomic_add(ctr, 1)] += tl.load(idx)
        """),
        {
            "loop": dedent("""\
                bufs = table
                _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_store_loop(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n), _castpile_load_loop(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n)) + tl.load(idx), site='k.py:12')
            """),
            "gather": dedent("""\
                bufs = table
                _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_store_gather(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n), _castpile_load_gather(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n)) + tl.load(idx), site='k.py:12')
            """),
        },
        id="atomic index in an augmented store: index, load, then value",
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
            def k(out, ptrs, ctr):
                x = tl.load(ptrs + tl.atomic_add(ctr, 1))
                tl.store(out + tl.atomic_add(ctr, 1), x)
        """),
        id="impure indices into plain pointers",
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
