"""One test per diagnostic: (source, expected `line:col: message` fragment) pairs, and the CLI's behaviour."""

import subprocess
import sys
import textwrap

import pytest

import castpile
from castpile import TranspileError

HEADER = """\
import triton
import triton.language as tl
from castpile import multicast_like
import castpile


@triton.jit
def k(out, table, n, m, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
"""
BODY_LINE = HEADER.count("\n") + 1  # line of the first body statement


def errors_of(body: str, header: str = HEADER) -> list[tuple[int, int, str]]:
    source = header + textwrap.indent(textwrap.dedent(body), "    ")
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "kern.py")
    return [(d.line, d.col, d.message) for d in info.value.diagnostics]


CASES = [
    (  # used other than by subscript
        "bufs = multicast_like(out, table[:W])\nx = bufs + 1\n",
        (1, "bufs + 1", "may only be subscripted"),
    ),
    (  # passed to a function
        "bufs = multicast_like(out, table[:W])\nfoo(bufs)\n",
        (1, "bufs)", "cannot be passed to a function"),
    ),
    (  # wrong number of indices for shape
        "bufs = multicast_like(out, table[:W], shape=(n, m))\nx = bufs[offs]\n",
        (1, "bufs[offs]", "takes 2 indices (shape) but is indexed with 1"),
    ),
    (  # a second binding of the same name
        "bufs = multicast_like(out, table[:W])\nbufs = multicast_like(out, table[:W])\n",
        (1, "bufs =", "already bound"),
    ),
    (  # shape not a tuple literal
        "bufs = multicast_like(out, table[:W], shape=[n])\n",
        (0, "[n]", "shape= must be a non-empty tuple literal"),
    ),
    (  # strides not a tuple literal
        "bufs = multicast_like(out, table[:W], strides=s)\n",
        (0, "s)", "strides= must be a non-empty tuple literal"),
    ),
    (  # shape and strides of different lengths
        "bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1,))\n",
        (0, "1,))", "strides= has 1 entries but shape= has 2"),
    ),
    (  # a slice as an index
        "bufs = multicast_like(out, table[:W])\nx = bufs[0:4]\n",
        (1, "0:4", "slices are not multicast indices"),
    ),
    (  # a non-constexpr table slice
        "bufs = multicast_like(out, table[:m])\n",
        (0, "m]", "table slice bounds must be constexpr"),
    ),
    (  # an empty table slice
        "bufs = multicast_like(out, table[2:2])\n",
        (0, "table[2:2]", "empty table slice"),
    ),
    (  # a table slice without an upper bound
        "bufs = multicast_like(out, table[1:])\n",
        (0, "table[1:]", "needs an upper bound"),
    ),
    (  # not a plain assignment
        "a, b = multicast_like(out, table[:W]), 1\n",
        (0, "multicast_like", "must be bound by a plain assignment"),
    ),
    (  # reassigning the bound name
        "bufs = multicast_like(out, table[:W])\nbufs = out\n",
        (1, "bufs =", "cannot be reassigned"),
    ),
    (  # missing arguments
        "bufs = multicast_like(out)\n",
        (0, "multicast_like", "missing argument 'ptr_tile'"),
    ),
    (  # unknown keyword
        "bufs = multicast_like(out, table[:W], shap=(n,))\n",
        (0, "multicast_like", "unexpected keyword argument 'shap'"),
    ),
    (  # align not a power of two
        "bufs = multicast_like(out, table[:W], align=12)\n",
        (0, "12)", "align= must be a power-of-two"),
    ),
    (  # block-pointer keywords on an access
        "bufs = multicast_like(out, table[:W])\nx = tl.load(bufs[offs], boundary_check=(0,))\n",
        (1, "0,))", "boundary_check= is for block pointers"),
    ),
    (  # signal needs a multicast access
        "castpile.signal(out + offs)\n",
        (0, "out + offs", "castpile.signal takes a multicast access"),
    ),
    (  # a store without a value
        "bufs = multicast_like(out, table[:W])\ntl.store(bufs[offs])\n",
        (1, "tl.store", "store: missing argument 'value'"),
    ),
    (  # ptr_mask with a table slice
        "bufs = multicast_like(out, table[:W], ptr_mask=offs < W)\n",
        (0, "offs < W", "ptr_mask applies to a tensor ptr_tile"),
    ),
]


@pytest.mark.parametrize("body,expected", CASES, ids=[c[1][2][:30] for c in CASES])
def test_each_diagnostic_is_located(body, expected):
    """The error sits on the expected line, at the column where ``marker`` starts."""
    found = errors_of(body)
    line, marker, fragment = expected
    col = textwrap.dedent(body).splitlines()[line].index(marker) + 1 + 4
    assert any(
        (l, c) == (BODY_LINE + line, col) and fragment in message for l, c, message in found
    ), found


def test_outside_a_jit_function():
    source = "from castpile import multicast_like\n\nx = multicast_like(a, b[:2])\n\ndef f():\n    castpile_wait = 1\n"
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "host.py")
    [d] = info.value.diagnostics
    assert (d.line, d.col) == (3, 5) and "only valid inside a @triton.jit function" in d.message


def test_every_error_of_a_file_in_one_run_and_rendered_with_a_caret():
    found = errors_of("bufs = multicast_like(out, table[:W])\nx = bufs + 1\ny = bufs[0:1]\nfoo(bufs)\n")
    assert len(found) == 3
    source = HEADER + "    x = multicast_like(out, table[:m])\n"
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "kern.py")
    assert str(info.value) == (
        f"kern.py:{BODY_LINE}:36: error: table slice bounds must be constexpr: "
        "integer literals, tl.constexpr parameters or names, tl.static_range loop variables, and + - * // % of those\n"
        "        x = multicast_like(out, table[:m])\n"
        "                                       ^"
    )


def test_syntax_error_is_located():
    with pytest.raises(TranspileError) as info:
        castpile.transpile("import castpile\n\ndef f(:\n    pass\n", "broken.py")
    [d] = info.value.diagnostics
    assert d.path == "broken.py" and d.line == 3 and "syntax error" in d.message


def test_cli_reports_errors_exits_1_and_writes_nothing(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(HEADER + "    bufs = multicast_like(out, table[:W])\n    x = bufs + 1\n    y = bufs[0:2]\n")
    out = tmp_path / "out.py"
    proc = subprocess.run(
        [sys.executable, "-m", "castpile", str(src), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert f"kern.py:{BODY_LINE + 1}:9: error:" in proc.stderr
    assert f"kern.py:{BODY_LINE + 2}:14: error:" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_failed_run_keeps_an_existing_output(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(HEADER + "    bufs = multicast_like(out, table[:W])\n    x = bufs + 1\n")
    out = tmp_path / "out.py"
    out.write_text("previous\n")
    proc = subprocess.run([sys.executable, "-m", "castpile", str(src), "-o", str(out)], capture_output=True)
    assert proc.returncode == 1 and out.read_text() == "previous\n"


def test_runtime_call_without_transpiling_says_how():
    with pytest.raises(RuntimeError, match="castpile kernel.py -o"):
        castpile.multicast_like(None, None)
    with pytest.raises(RuntimeError, match="install_import_hook"):
        castpile.signal(None)
