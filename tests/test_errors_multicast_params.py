"""Multicast parameters misused: each mistake a located error that says how to write it, and no output."""

import textwrap

import pytest

import castpile

HEADER = """\
import triton
import triton.language as tl
import castpile as cp


@triton.jit
def total(bufs: cp.Multicast, offs):
    return tl.sum(bufs[offs], axis=0)


@triton.jit
def plain(x, offs):
    return tl.load(x + offs)


"""
KERNEL = """\
@triton.jit
def k(out, table, n, W: tl.constexpr):
    bufs = cp.multicast_like(out, table[:W], shape=(n,))
    rows = cp.multicast_like(out, table[:W], shape=(n, n))
    offs = tl.arange(0, 4)
"""
FIRST = HEADER.count("\n") + 1  # the line a case's source starts on
TOTAL_ACCESS = 8  # the line of total's access


def errors(source: str) -> list[tuple[int, int, str, dict]]:
    """``(line in the case, col, id, params)`` of each diagnostic (the ids: castpile.compiler.diagnostics)."""
    with pytest.raises(castpile.TranspileError) as info:
        castpile.transpile((HEADER + textwrap.dedent(source)).encode(), "k.py")
    return [(d.line - FIRST + 1, d.col, d.id, d.params) for d in info.value.diagnostics]


def in_kernel(line: str) -> str:
    return KERNEL + "    " + line + "\n"


BODY = KERNEL.count("\n") + 1  # the line of the statement in_kernel adds


@pytest.mark.parametrize(
    ("line", "col", "id", "params"),
    [
        ("x = total(out, offs)", 15, "E607", {"param": "bufs", "function": "total", "code": "out"}),
        ("x = total(bufs[0], offs)", 15, "E607", {"param": "bufs", "function": "total", "code": "bufs[0]"}),
        ("x = plain(bufs, offs)", 15, "E606", {"name": "bufs", "param": "x", "function": "plain"}),
        ("x = tl.sum(bufs, axis=0)", 16, "E202", {"name": "bufs"}),
        ("x = total(offs=offs)", 9, "E608", {"function": "total", "param": "bufs"}),
        ("x = total(*(offs,))", 9, "E605", {"function": "total"}),
    ],
)
def test_what_a_call_passes(line, col, id, params):
    assert errors(in_kernel(line)) == [(BODY, col, id, params)]


def test_tensors_of_other_layouts_at_two_calls():
    """The second call is the one that disagrees; the helper's accesses follow the first.  (With and without
    shape= is fine: tests/test_language_v12_params.py.)"""
    assert errors(in_kernel("x = total(bufs, offs) + total(rows, offs)")) == [
        (
            BODY,
            35,
            "E610",
            {
                "param": "bufs",
                "function": "total",
                "here": "a tensor of 2 element dims without remote=",
                "there": "a tensor of 1 element dim without remote=",
            },
        ),
    ]


def test_index_count_follows_the_tensors_passed():
    assert errors(in_kernel("x = total(rows, offs)")) == [
        (
            TOTAL_ACCESS - FIRST + 1,
            19,
            "E609",
            {"name": "bufs", "takes": "2 indices", "dims": "2 element dims", "given": 1},
        ),
    ]


@pytest.mark.parametrize(
    ("source", "errors_found"),
    [
        pytest.param(
            """\
        def host(bufs: cp.Multicast):
            return bufs
        """,
            [(1, 16, "E601", {"function": "host", "param": "bufs"})],
            id="not jit",
        ),
        pytest.param(
            """\
        def make():
            @triton.jit
            def inner(bufs: cp.Multicast):
                return bufs[0]
            return inner
        """,
            [(3, 21, "E603", {"function": "inner"})],
            id="nested",
        ),
        pytest.param(
            """\
        @triton.jit
        def defaulted(bufs: cp.Multicast = None):
            pass
        """,
            [(2, 36, "E604", {"param": "bufs"})],
            id="default",
        ),
        pytest.param(
            """\
        @triton.jit
        def starred(*bufs: cp.Multicast):
            pass
        """,
            [(2, 13, "E602", {"param": "bufs"})],
            id="*args",
        ),
        pytest.param(
            """\
        @triton.jit
        def rebound(bufs: cp.Multicast, table):
            bufs = cp.multicast_like(table, table[:2])
        """,
            [(3, 5, "E611", {"name": "bufs"})],
            id="rebound by multicast_like",
        ),
        pytest.param(
            """\
        @triton.jit
        def bare(bufs: cp.Multicast):
            return bufs + 1
        """,
            [(3, 12, "E201", {"name": "bufs"})],
            id="bare use",
        ),
        pytest.param(
            """\
        @triton.jit
        def spans(bufs: cp.Multicast):
            return bufs[...]
        """,
            [(3, 17, "E612", {"name": "bufs"})],
            id="ellipsis",
        ),
    ],
)
def test_misplaced_annotations(source, errors_found):
    assert errors(source) == errors_found


def test_atomics_through_a_parameter_that_receives_a_remote_binding():
    source = """\
        @triton.jit
        def bump(flags: cp.Multicast):
            tl.atomic_add(flags[0], 1)


        @triton.jit
        def k(out, table, W: tl.constexpr):
            flags = cp.multicast_like(out, table[:W], remote="nvshmem")
            bump(flags)
        """
    assert errors(source) == [(3, 5, "E410", {"op": "atomic_add", "name": "flags"})]


def test_a_keyword_the_helper_does_not_take():
    assert errors(in_kernel("x = total(bufz=bufs, offs=offs)")) == [
        (BODY, 9, "E608", {"function": "total", "param": "bufs"}),
        (BODY, 20, "E202", {"name": "bufs"}),
    ]


def test_remote_and_not_at_two_calls():
    assert errors(
        in_kernel(
            "x = total(bufs, offs)\n    far = cp.multicast_like(out, table[:W], shape=(n,), "
            "remote='nvshmem')\n    y = total(far, offs)"
        )
    ) == [
        (
            BODY + 2,
            15,
            "E610",
            {
                "param": "bufs",
                "function": "total",
                "here": "a tensor of 1 element dim with remote='nvshmem'",
                "there": "a tensor of 1 element dim without remote=",
            },
        ),
    ]
