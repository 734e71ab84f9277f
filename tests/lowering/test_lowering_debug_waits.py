"""Lowering in debug mode (``debug_waits=``, CASTPILE_DEBUG_WAITS): each spinning call names its line and deadline.

A wait (on plain pointers, on an access, through a ``remote=`` binding) and ``castpile.signal(..., wait_for=)`` call
the helpers that give up, with ``site=`` (the ``path:line`` of the call's first line) and ``deadline_ns=``; every
other use lowers as in normal mode.  The cases' form: tests/testkit/lowering.py (the body starts at k.py:11).
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import (
    check_cases_compile_for_sm90,
    check_kernel_lines,
    check_remote_kernel_lines,
    kernel_module,
    transpile,
)

SECONDS = 0.25  # deadline_ns=250000000

KERNEL_CASES = [
    pytest.param(
        "castpile.wait(ptrs + offs, mask=offs < n)\n",
        "_castpile_wait_flags_until(ptrs + offs, 1, 0, offs < n, site='k.py:11', deadline_ns=250000000)\n",
        id="wait on plain pointers",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.wait(bufs[offs], 2, cmp='ge', scope='gpu')
        """),
        dedent("""\
            bufs = table
            _castpile_wait_until(bufs, W, None, out, offs, None, 2, cmp='ge', scope='gpu', site='k.py:12', deadline_ns=250000000)
        """),
        id="wait on an access with cmp and scope",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[0], wait_for=0)
            castpile.signal(bufs[1])
            castpile.signal(bufs[2], 3, op='add')
        """),
        dedent("""\
            bufs = table
            _castpile_signal_until(bufs, W, None, out, 0, None, 1, 0, site='k.py:12', deadline_ns=250000000)
            _castpile_signal(bufs, W, None, out, 1, None)
            _castpile_signal(bufs, W, None, out, 2, None, 3, op='add')
        """),
        id="signal: with wait_for it gives up, without it never spins",
    ),
]

REMOTE_CASES = [
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], remote="nvshmem")
            castpile.wait(bufs[offs], 4, cmp="ge", reset=None)
            castpile.signal(bufs[0], wait_for=0)
        """),
        dedent("""\
            bufs = table
            _castpile_wait_remote_until(bufs, W, None, out, offs, None, table, 4, None, cmp="ge", site='k.py:12', deadline_ns=250000000)
            _castpile_signal_remote(bufs, W, None, out, 0, None, table, 1, 0)
        """),
        id="remote wait gives up; a remote signal's wait_for spin does not",
    ),
]

NOT_SPINNING = [
    dedent("""\
        bufs = multicast_like(out, table[:W], shape=(n,))
        bufs[offs] = tl.load(ptrs + offs)
        x = tl.sum(bufs[offs], axis=0)
        castpile.signal(bufs[0])
    """),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), KERNEL_CASES)
def test_kernel_lines(source, expected, strategy):
    check_kernel_lines(source, expected, strategy, debug_waits=SECONDS)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), REMOTE_CASES)
def test_remote_kernel_lines(source, expected, strategy):
    check_remote_kernel_lines(source, expected, strategy, debug_waits=SECONDS)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("source", NOT_SPINNING)
def test_a_module_that_never_spins_is_written_as_in_normal_mode(source, strategy):
    assert transpile(kernel_module(source), strategy, SECONDS) == transpile(kernel_module(source), strategy)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_wait_written_over_several_lines_names_its_first(strategy):
    source = "castpile.wait(\n    ptrs + offs,\n    mask=offs < n,\n)\nx = tl.load(ptrs + offs)\n"
    lines = transpile(kernel_module(source), strategy, SECONDS).splitlines()
    assert lines[10].strip() == (
        "_castpile_wait_flags_until(ptrs + offs, 1, 0, offs < n, site='k.py:11', deadline_ns=250000000"
    )
    assert [line.strip() for line in lines[11:15]] == ["", "", ")", "x = tl.load(ptrs + offs)"]


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES, remote_cases=REMOTE_CASES, debug_waits=SECONDS)
