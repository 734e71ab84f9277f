"""Lowering castpile.signal and castpile.wait: one lowering under both strategies.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from testkit.lowering import check_cases_compile_for_sm90, check_kernel_lines, check_left_alone


KERNEL_CASES = [
    # signal and wait (one lowering under both strategies)
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[0])
        """),
        dedent("""\
            bufs = table
            _castpile_signal(bufs, W, None, out, 0, None)
        """),
        id="signal",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[0], 2, wait_for=0)
        """),
        dedent("""\
            bufs = table
            _castpile_signal(bufs, W, None, out, 0, None, 2, 0)
        """),
        id="signal with value and wait_for",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[offs], mask=offs < m, sem='relaxed', scope='gpu')
        """),
        dedent("""\
            bufs = table
            _castpile_signal(bufs, W, None, out, offs, None, 1, None, offs < m, sem='relaxed', scope='gpu')
        """),
        id="signal with mask, sem and scope: value and wait_for defaults filled in",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.wait(bufs[0])
        """),
        dedent("""\
            bufs = table
            _castpile_wait(bufs, W, None, out, 0, None)
        """),
        id="wait on an access",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.wait(bufs[offs], 2, reset=1, mask=offs < m, scope='gpu')
        """),
        dedent("""\
            bufs = table
            _castpile_wait(bufs, W, None, out, offs, None, 2, 1, offs < m, scope='gpu')
        """),
        id="wait on an access with value, reset, mask and scope",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs + offs)
        """),
        dedent("""\
            _castpile_wait_flags(ptrs + offs)
        """),
        id="wait on plain pointers",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs + offs, 3, mask=offs < m, sem='relaxed')
        """),
        dedent("""\
            _castpile_wait_flags(ptrs + offs, 3, 0, offs < m, sem='relaxed')
        """),
        id="wait on plain pointers with value, mask and sem",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs + offs, reset=5)
        """),
        dedent("""\
            _castpile_wait_flags(ptrs + offs, 1, 5)
        """),
        id="wait on plain pointers with reset",
    ),
]


# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            from signal import signal
            from threading import Event
            wait = Event().wait


            @triton.jit
            def k(out):
                signal(out)
                wait(out)
        """),
        id="signal and wait from other modules, no castpile anywhere",
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
