"""Lowering castpile.signal and castpile.wait: one lowering under both strategies; their keywords' located errors.

The cases' form (the kernel a body's lines sit in, one expected text or one per strategy): tests/testkit/lowering.py.
"""

from textwrap import dedent

import pytest

import castpile
from castpile import TranspileError
from testkit.lowering import (
    HEADER,
    check_cases_compile_for_sm90,
    check_kernel_lines,
    check_left_alone,
    check_remote_kernel_lines,
    kernel_module,
    transpile,
)

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
    # v1.2: signal's op=, wait's cmp= and reset=None (string literals, passed on as constexpr keywords)
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[offs], 2, op="add")
        """),
        dedent("""\
            bufs = table
            _castpile_signal(bufs, W, None, out, offs, None, 2, op="add")
        """),
        id="signal with op add",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[0], 2, 0, 'release', 'sys', None, 'set')
        """),
        dedent("""\
            bufs = table
            _castpile_signal(bufs, W, None, out, 0, None, 2, 0, None, op='set', sem='release', scope='sys')
        """),
        id="signal with every argument by position, op set last",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.wait(bufs[offs], v, cmp="ge", reset=None)
        """),
        dedent("""\
            bufs = table
            _castpile_wait(bufs, W, None, out, offs, None, v, None, cmp="ge")
        """),
        id="wait on an access with cmp ge and reset None",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs + offs, 2, "lt", reset=3, mask=offs < m)
        """),
        dedent("""\
            _castpile_wait_flags(ptrs + offs, 2, 3, offs < m, cmp="lt")
        """),
        id="wait on plain pointers with cmp by position (after value), a reset and a mask",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs + i, cmp='ne', reset=None)
        """),
        dedent("""\
            _castpile_wait_flags(ptrs + i, 1, None, cmp='ne')
        """),
        id="wait on a scalar pointer with cmp ne and reset None",
    ),
    pytest.param(
        dedent("""\
            one = multicast_like(out, tile)
            castpile.wait(one[i], n, cmp="le", reset=None)
        """),
        dedent("""\
            one = tile
            _castpile_wait(one, one.numel, None, out, i, None, n, None, cmp="le")
        """),
        id="wait on a rank-0 tile with cmp le and reset None",
    ),
    pytest.param(
        dedent("""\
            castpile.wait(ptrs, reset=tl.load(idx), value=tl.atomic_add(ctr, 1), cmp="gt")
        """),
        dedent("""\
            _castpile_p0 = ptrs; _castpile_v1 = tl.load(idx); _castpile_v2 = tl.atomic_add(ctr, 1); _castpile_wait_flags(_castpile_p0, _castpile_v2, _castpile_v1, cmp="gt")
        """),
        id="wait with cmp: reset and value still evaluated in the order written",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W])
            castpile.signal(bufs[tl.atomic_add(ctr, 1)], op="add", mask=tl.load(idx) > 0, value=tl.load(idx + 1))
        """),
        dedent("""\
            bufs = table
            _castpile_i0 = tl.atomic_add(ctr, 1); _castpile_v1 = tl.load(idx) > 0; _castpile_v2 = tl.load(idx + 1); _castpile_signal(bufs, W, None, out, _castpile_i0, None, _castpile_v2, None, _castpile_v1, op="add")
        """),
        id="signal with op add: index, mask and value still evaluated in the order written",
    ),
]

REMOTE_CASES = [
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], remote="nvshmem")
            castpile.wait(bufs[offs], 4, cmp="ge", reset=None)
        """),
        dedent("""\
            bufs = table
            _castpile_wait_remote(bufs, W, None, out, offs, None, table, 4, None, cmp="ge")
        """),
        id="wait on a remote binding with cmp ge and reset None",
    ),
    pytest.param(
        dedent("""\
            bufs = multicast_like(out, table[:W], remote="nvshmem")
            castpile.wait(bufs[0], 2, cmp="ne", reset=5)
        """),
        dedent("""\
            bufs = table
            _castpile_wait_remote(bufs, W, None, out, 0, None, table, 2, 5, cmp="ne")
        """),
        id="wait on a remote binding with cmp ne and a reset",
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
    pytest.param(
        dedent("""\
            import triton
            import triton.language as tl
            import castpile


            def signal(flags, op):
                return flags


            @triton.jit
            def k(out, wait):
                signal(out, op="add")
                wait(out, cmp="ge", reset=None)
        """),
        id="a local signal with op= and a parameter named wait with cmp=",
    ),
]

# (body, the one diagnostic on its last line: the 1-based column within that line, its id and parameters)
CMPS = {"allowed": '"eq", "ne", "ge", "gt", "le", "lt"'}
OPS = {"allowed": '"set", "add"'}
ERRORS = [
    pytest.param("castpile.wait(ptrs, 1, 'gte')", 24, "E413", CMPS, id="cmp by position, unknown"),
    pytest.param("castpile.wait(ptrs, cmp=b'ge')", 25, "E413", CMPS, id="cmp bytes"),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\ncastpile.signal(bufs[0], op='sub')", 29, "E414", OPS, id="op unknown"
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\ncastpile.signal(bufs[0], op=f'add')",
        29,
        "E414",
        OPS,
        id="op an f-string",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\ncastpile.signal(bufs[0], op='add', wait_for=0)",
        45,
        "E415",
        {},
        id="add with wait_for",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], remote='nvshmem')\ncastpile.signal(bufs[0], op='add')",
        29,
        "E416",
        {"name": "bufs"},
        id="add on a remote binding",
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


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("source", "expected"), REMOTE_CASES)
def test_remote_kernel_lines(source, expected, strategy):
    check_remote_kernel_lines(source, expected, strategy)


@pytest.mark.parametrize(("body", "col", "id", "params"), ERRORS)
def test_a_bad_keyword_is_a_located_error(body, col, id, params):
    source = kernel_module(body + "\n")
    with pytest.raises(TranspileError) as info:
        transpile(source, "loop")
    line = HEADER.count("\n") + body.count("\n") + 1
    assert [(d.line, d.col, d.id, d.params) for d in info.value.diagnostics] == [(line, col + 4, id, params)]


def test_the_cases_compile_for_sm90(tmp_path):
    check_cases_compile_for_sm90(tmp_path, kernel_cases=KERNEL_CASES, remote_cases=REMOTE_CASES)
