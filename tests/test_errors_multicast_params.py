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


def errors(source: str) -> list[tuple[int, int, str]]:
    with pytest.raises(castpile.TranspileError) as info:
        castpile.transpile((HEADER + textwrap.dedent(source)).encode(), "k.py")
    return [(d.line - FIRST + 1, d.col, d.message) for d in info.value.diagnostics]


def in_kernel(line: str) -> str:
    return KERNEL + "    " + line + "\n"


BODY = KERNEL.count("\n") + 1  # the line of the statement in_kernel adds


@pytest.mark.parametrize(("line", "col", "message"), [
    ("x = total(out, offs)", 15, "parameter 'bufs' of 'total' is annotated castpile.Multicast, so it takes a multicast "
     "tensor: pass a name bound by multicast_like (or a Multicast parameter), not 'out'"),
    ("x = total(bufs[0], offs)", 15, "parameter 'bufs' of 'total' is annotated castpile.Multicast, so it takes a "
     "multicast tensor: pass a name bound by multicast_like (or a Multicast parameter), not 'bufs[0]'"),
    ("x = plain(bufs, offs)", 15, "'bufs' is a multicast tensor, but parameter 'x' of 'plain' is not annotated "
     "castpile.Multicast: annotate it `x: castpile.Multicast`, or pass bufs[idx]"),
    ("x = tl.sum(bufs, axis=0)", 16, "'bufs' is a multicast tensor and cannot be passed to a function; pass bufs[idx]"),
    ("x = total(offs=offs)", 9, "'total' takes a multicast tensor for its parameter 'bufs' (castpile.Multicast), but "
     "this call passes none: pass one, as in total(..., bufs=bufs)"),
    ("x = total(*(offs,))", 9, "'total' takes multicast tensors: pass its arguments by position or keyword, not "
     "through * or **"),
])
def test_what_a_call_passes(line, col, message):
    assert errors(in_kernel(line)) == [(BODY, col, message)]


def test_tensors_of_other_layouts_at_two_calls():
    """The second call is the one that disagrees; the helper's accesses follow the first.  (With and without
    shape= is fine: tests/test_language_v12_params.py.)"""
    assert errors(in_kernel("x = total(bufs, offs) + total(rows, offs)")) == [
        (BODY, 35, "'bufs' of 'total' (castpile.Multicast) receives a tensor of 2 element dims without remote= here "
                   "but a tensor of 1 element dim without remote= at another call: every tensor it receives must have "
                   "the same element dims, and remote= given to all or to none; write one helper for each"),
    ]


def test_index_count_follows_the_tensors_passed():
    assert errors(in_kernel("x = total(rows, offs)")) == [
        (TOTAL_ACCESS - FIRST + 1, 19, "'bufs' takes 2 indices (the multicast tensors passed to it have 2 element dims) but is indexed with 1"),
    ]


@pytest.mark.parametrize(("source", "errors_found"), [
    pytest.param("""\
        def host(bufs: cp.Multicast):
            return bufs
        """, [(1, 16, "'host' is not a @triton.jit function, so its parameter 'bufs' cannot take a multicast tensor: "
                      "decorate 'host' with @triton.jit, or drop the castpile.Multicast annotation")], id="not jit"),
    pytest.param("""\
        def make():
            @triton.jit
            def inner(bufs: cp.Multicast):
                return bufs[0]
            return inner
        """, [(3, 21, "'inner' takes a multicast tensor, so castpile rewrites its calls by name: define it once, at "
                      "the top level of the module")], id="nested"),
    pytest.param("""\
        @triton.jit
        def defaulted(bufs: cp.Multicast = None):
            pass
        """, [(2, 36, "the Multicast parameter 'bufs' takes no default: every call passes a multicast tensor")],
        id="default"),
    pytest.param("""\
        @triton.jit
        def starred(*bufs: cp.Multicast):
            pass
        """, [(2, 13, "'bufs' cannot take multicast tensors as *args or **kwargs: annotate a parameter of its own "
                      "`bufs: castpile.Multicast` for each")], id="*args"),
    pytest.param("""\
        @triton.jit
        def rebound(bufs: cp.Multicast, table):
            bufs = cp.multicast_like(table, table[:2])
        """, [(3, 5, "'bufs' is a Multicast parameter of this function; bind the new multicast tensor to a name of its "
                     "own")], id="rebound by multicast_like"),
    pytest.param("""\
        @triton.jit
        def bare(bufs: cp.Multicast):
            return bufs + 1
        """, [(3, 12, "'bufs' is a multicast tensor and may only be subscripted, as in bufs[idx]")], id="bare use"),
    pytest.param("""\
        @triton.jit
        def spans(bufs: cp.Multicast):
            return bufs[...]
        """, [(3, 17, "'...' needs the extents of 'bufs', which its callers pass: index a Multicast parameter's "
                      "element dims explicitly, with tl.arange(...) tensors")], id="ellipsis"),
])
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
    assert errors(source) == [
        (3, 5, "tl.atomic_add on 'flags', a remote= binding: NVSHMEM atomics are not among torch's Triton device "
               "functions, and a get-modify-put would not be atomic; use castpile.signal/wait, or a binding without "
               "remote= for peers in one NVLink domain"),
    ]


def test_a_keyword_the_helper_does_not_take():
    assert errors(in_kernel("x = total(bufz=bufs, offs=offs)")) == [
        (BODY, 9, "'total' takes a multicast tensor for its parameter 'bufs' (castpile.Multicast), but this call passes "
                  "none: pass one, as in total(..., bufs=bufs)"),
        (BODY, 20, "'bufs' is a multicast tensor and cannot be passed to a function; pass bufs[idx]"),
    ]


def test_remote_and_not_at_two_calls():
    assert errors(in_kernel("x = total(bufs, offs)\n    far = cp.multicast_like(out, table[:W], shape=(n,), "
                            "remote='nvshmem')\n    y = total(far, offs)")) == [
        (BODY + 2, 15, "'bufs' of 'total' (castpile.Multicast) receives a tensor of 1 element dim with "
                       "remote='nvshmem' here but a tensor of 1 element dim without remote= at another call: every "
                       "tensor it receives must have the same element dims, and remote= given to all or to none; "
                       "write one helper for each"),
    ]
