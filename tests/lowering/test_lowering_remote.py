"""Lowering remote="nvshmem" bindings (docs/nvshmem.md): every access calls a ``_remote`` helper under both strategies.

The table (whose header names the scratch) comes after the bounds mask, and the kernel is rebound after
the helpers (testkit.lowering.REMOTE_TAIL).  The cases compile up to linking NVSHMEM's device library.
The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import (
    check_cases_compile_for_sm90,
    check_left_alone,
    check_remote_kernel_lines,
    kernel_module,
    transpile,
)

REMOTE_CASES = [
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            x = bufs[offs]
        """),
        dedent("""\
            bufs = table
            x = _castpile_load_remote(bufs, W, None, out, offs, (offs < n), table)
        """),
        id="remote load",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            bufs[offs] = v
        """),
        dedent("""\
            bufs = table
            _castpile_store_remote(bufs, W, None, out, offs, (offs < n), table, v, site='k.py:12')
        """),
        id="remote store",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            bufs[offs] += v
        """),
        dedent("""\
            bufs = table
            _castpile_store_remote(bufs, W, None, out, offs, (offs < n), table, _castpile_load_remote(bufs, W, None, out, offs, (offs < n), table) + v, site='k.py:12')
        """),
        id="remote augmented store",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            y = tl.load(bufs[offs], mask=offs < m, other=-1)
            tl.store(bufs[offs], v, mask=offs < m)
        """),
        dedent("""\
            bufs = table
            y = _castpile_load_remote(bufs, W, None, out, offs, (offs < n), table, offs < m, -1)
            _castpile_store_remote(bufs, W, None, out, offs, (offs < n), table, v, offs < m, site='k.py:13')
        """),
        id="remote tl.load and tl.store with masks",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            s = tl.sum(bufs[offs], axis=0)
        """),
        dedent("""\
            bufs = table
            s = _castpile_reduce_remote(bufs, W, None, out, offs, (offs < n), table, "sum")
        """),
        id="remote reduction",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            castpile.signal(bufs[0], wait_for=0)
            castpile.wait(bufs[0])
        """),
        dedent("""\
            bufs = table
            _castpile_signal_remote(bufs, W, None, out, 0, (0 < n), table, 1, 0)
            _castpile_wait_remote(bufs, W, None, out, 0, (0 < n), table)
        """),
        id="remote signal and wait",
    ),
    pytest.param(
        dedent("""\
            rows = table[1:W]
            peers = multicast_like(out, rows, remote="nvshmem", align=16)
            z = tl.max(peers[offs], axis=0)
        """),
        dedent("""\
            rows = table + 1
            peers = rows
            z = _castpile_reduce_remote(peers, W - 1, None, out, offs, None, table, "max", align=16)
        """),
        id="remote named slice with align",
    ),
    pytest.param(
        dedent("""\
            far = multicast_like(out, (table + 2)[:C], remote="nvshmem")
            far[offs] = v
        """),
        dedent("""\
            far = table + 2; far_table = (table + 2)
            _castpile_store_remote(far, C, None, out, offs, None, far_table, v, site='k.py:12')
        """),
        id="remote table expression, hoisted",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            table = table + 1
            x = bufs[offs]
        """),
        dedent("""\
            bufs = table; bufs_table = table
            table = table + 1
            x = _castpile_load_remote(bufs, W, None, out, offs, (offs < n), bufs_table)
        """),
        id="remote table rebound after the binding: copied at it",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
            near = multicast_like(out, table[:W])
            x = bufs[offs] + near[offs]
        """),
        {
            "loop": dedent("""\
                bufs = table
                near = table
                x = _castpile_load_remote(bufs, W, None, out, offs, (offs < n), table) + _castpile_load_loop(near, W, None, out, offs, None)
            """),
            "gather": dedent("""\
                bufs = table
                near = table
                x = _castpile_load_remote(bufs, W, None, out, offs, (offs < n), table) + _castpile_load_gather(near, W, None, out, offs, None)
            """),
        },
        id="a binding without remote= next to one with it",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile
            import other


            @triton.jit
            def k(out, table, W: tl.constexpr):
                bufs = other.multicast_like(out, table[:W], remote="nvshmem")
                x = bufs[0]
                other.put(out, remote="ucx")
        """),
        id="remote= on a lookalike multicast_like and on other calls",
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), REMOTE_CASES)
def test_remote_kernel_lines(source, expected, strategy):
    check_remote_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", LEFT_ALONE)
def test_left_alone_byte_for_byte(source, strategy):
    check_left_alone(source, strategy)


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, remote_cases=REMOTE_CASES)


def test_a_remote_kernel_named_with_the_helpers_prefix_keeps_its_name():
    source = kernel_module('bufs = multicast_like(out, table[:W], remote="nvshmem")\nx = bufs[offs]\n')
    out = transpile(source.replace("def k(", "def _castpile_k("), "loop")
    assert out.endswith(" launched with NVSHMEM ----\n_castpile_k = _castpile2_remote_kernel(_castpile_k)\n")
    assert "\ndef _castpile2_remote_kernel(" in out and "\n_castpile2_nvshmem = _castpile2_nvshmem_functions()\n" in out


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_remote_none_is_no_remote(strategy):
    source = "bufs = multicast_like(out, table[:W], shape=(n,){})\nx = bufs[offs]\n"
    assert transpile(kernel_module(source.format(", remote=None")), strategy) == transpile(
        kernel_module(source.format("")), strategy
    )  # the binding's line is replaced either way
