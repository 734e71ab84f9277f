"""One test per diagnostic: (source, the exact diagnostics: line, column, id and parameters), and the CLI's behaviour.

The catalogue (castpile.compiler.diagnostics) holds each id's text; the tests that check rendering build the
expected first line from it (testkit.diagnostics.headline).
"""

import re
import subprocess
import sys
import textwrap

import pytest

import castpile
from castpile import TranspileError
from testkit.diagnostics import diagnostics_of, headline

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


def errors_of(body: str, header: str = HEADER) -> list[tuple[int, int, str, dict]]:
    return diagnostics_of(header + textwrap.indent(textwrap.dedent(body), "    "), "kern.py")


BUFS = {"name": "bufs"}
SLICE_INDEX = ("E301", BUFS)
REMOTE = "bufs = multicast_like(out, table[:W], remote='nvshmem')\n"
# (body, every diagnostic as (line in the body, 1-based column in the file, id, parameters)); the
# body sits at BODY_LINE, indented by 4, so `x = bufs + 1` on body line 1 starts at column 5.
CASES = [
    pytest.param("bufs = multicast_like(out, table[:W])\nx = bufs + 1\n", [(1, 9, "E201", BUFS)], id="not subscripted"),
    pytest.param("bufs = multicast_like(out, table[:W])\nfoo(bufs)\n", [(1, 9, "E202", BUFS)], id="passed"),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shape=(n, m))\nx = bufs[offs]\n",
        [(1, 9, "E304", {"name": "bufs", "takes": "2 indices", "what": "shape", "given": 1})],
        id="index count",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nx = bufs[offs, 0]\n",
        [(1, 9, "E304", {"name": "bufs", "takes": "1 index", "what": "no shape", "given": 2})],
        id="index count without shape",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nbufs = multicast_like(out, table[:W])\n",
        [(1, 5, "E102", BUFS)],
        id="bound twice",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shape=[n])\n",
        [(0, 49, "E103", {"keyword": "shape"})],
        id="shape a list: at the list",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], strides=s)\n",
        [(0, 51, "E103", {"keyword": "strides"})],
        id="strides a name",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1,))\n",
        [(0, 66, "E104", {"strides": 1, "shape": 2})],
        id="strides and shape lengths: inside the parentheses",
    ),
    pytest.param("bufs = multicast_like(out, table[:W])\nx = bufs[0:4]\n", [(1, 14, *SLICE_INDEX)], id="slice index"),
    pytest.param("bufs = multicast_like(out, table[:W])\nx = bufs[*offs]\n", [(1, 14, "E302", {})], id="starred index"),
    pytest.param("bufs = multicast_like(out, table[:m])\n", [(0, 39, "E110", {})], id="slice bound not constexpr"),
    pytest.param("bufs = multicast_like(out, table[2:2])\n", [(0, 32, "E111", {"count": 0})], id="empty slice"),
    pytest.param("bufs = multicast_like(out, table[1:])\n", [(0, 32, "E109", {})], id="slice unbounded"),
    pytest.param("bufs = multicast_like(out, table[0:W:2])\n", [(0, 42, "E108", {})], id="stepped slice: at the step"),
    pytest.param("a, b = multicast_like(out, table[:W]), 1\n", [(0, 12, "E101", {})], id="not a plain assignment"),
    pytest.param(
        "bufs = multicast_like(out)\n",
        [(0, 12, "E405", {"call": "multicast_like", "keyword": "ptr_tile"})],
        id="missing argument",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shap=(n,))\n",
        [(0, 12, "E403", {"call": "multicast_like", "keyword": "shap"})],
        id="unknown keyword: at the call",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], **opts)\n",
        [(0, 12, "E401", {"call": "multicast_like"})],
        id="starred argument",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], example=out)\n",
        [(0, 12, "E404", {"call": "multicast_like", "keyword": "example"})],
        id="argument given twice",
    ),
    pytest.param("bufs = multicast_like(out, table[:W], align=12)\n", [(0, 49, "E105", {})], id="align"),
    pytest.param("bufs = multicast_like(out, table[:W], align='16')\n", [(0, 49, "E105", {})], id="align a string"),
    pytest.param("bufs = multicast_like(out, table[:W], align=-4)\n", [(0, 49, "E105", {})], id="align negative"),
    pytest.param("bufs = multicast_like(out, table[:W], align=True)\n", [(0, 49, "E105", {})], id="align a bool"),
    pytest.param(
        "bufs = multicast_like(out, table[:W], remote='ucx')\n",
        [(0, 50, "E112", {"backends": "'nvshmem'"})],
        id="remote names no backend: at the value",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], remote=W)\n",
        [(0, 50, "E112", {"backends": "'nvshmem'"})],
        id="remote not a string literal",
    ),
    pytest.param(
        "bufs = multicast_like(out, tl.load(table + offs), remote='nvshmem')\n",
        [(0, 62, "E113", {})],
        id="remote with a tensor tile",
    ),
    pytest.param(
        REMOTE + "x = tl.atomic_add(bufs[offs], 1)\n",
        [(1, 9, "E410", {"op": "atomic_add", "name": "bufs"})],
        id="atomics on a remote binding: at the call",
    ),
    pytest.param(
        REMOTE + "tl.atomic_cas(bufs[offs], 0, 1)\n",
        [(1, 5, "E410", {"op": "atomic_cas", "name": "bufs"})],
        id="atomic_cas on a remote binding",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nx = tl.load(bufs[offs], boundary_check=(0,))\n",
        [(1, 45, "E407", {"keyword": "boundary_check"})],
        id="block-pointer keyword: at the value",
    ),
    pytest.param("castpile.signal(value=1)\n", [(0, 5, "E406", {"call": "signal"})], id="signal without its pointer"),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\ntl.store(bufs[offs])\n",
        [(1, 5, "E405", {"call": "store", "keyword": "value"})],
        id="store without a value",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nx = tl.load(bufs[offs], mask=tl.arange(0, W) != 0)\n",
        [(1, 34, "E411", {"op": "load", "name": "bufs", "arange": "arange(0, W)"})],
        id="an access mask with one flag per buffer: at the mask",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shape=(W, BLOCK))\nx = bufs[..., 0]\n",
        [(1, 14, "E305", BUFS)],
        id="ellipsis not last",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nx = bufs[...]\n", [(1, 14, "E306", BUFS)], id="ellipsis without shape"
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shape=(n,))\nx = bufs[...]\n",
        [(1, 14, "E308", {"extent": "n"})],
        id="ellipsis over an extent not constexpr",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W], shape=(W,))\nx = bufs[0, 1, ...]\n",
        [(1, 9, "E307", {"name": "bufs", "takes": "1 index", "given": 2})],
        id="ellipsis after too many indices",
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nx = (castpile.signal(bufs[0]), 1)\n",
        [(1, 10, "E409", {"call": "castpile.signal"})],
        id="signal used as a value",
    ),
    pytest.param("bufs = multicast_like(out, table[:W])\ndel bufs\n", [(1, 9, "E204", {})], id="deleted"),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nbufs[0]: int = 1\n", [(1, 5, "E205", {})], id="annotated store"
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nbufs[0] = x = 1\n", [(1, 5, "E210", BUFS)], id="chained store"
    ),
    pytest.param(
        "bufs = multicast_like(out, table[:W])\nbufs[0], y = 1, 2\n",
        [(1, 5, "E211", {"where": "a tuple assignment", "name": "bufs"})],
        id="access in a tuple target",
    ),
]


@pytest.mark.parametrize("body,expected", CASES)
def test_each_diagnostic_is_located(body, expected):
    """Exactly the expected diagnostics, each at its line and column."""
    assert errors_of(body) == [(BODY_LINE + line, col, id, params) for line, col, id, params in expected]


def test_a_remote_kernel_must_be_defined_at_the_top_level():
    """castpile wraps it for NVSHMEM by its module-level name, after the last line."""
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"
        "def make():\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = multicast_like(out, table[:W], remote='nvshmem')\n"
        "        x = bufs[0]\n"
        "    return k\n"
    )
    assert diagnostics_of(source, "kern.py") == [(9, 9, "E114", {"kernel": "k"})]


def test_reassigning_is_one_diagnostic():
    found = errors_of("bufs = multicast_like(out, table[:W])\nbufs = out\n")
    assert found == [(BODY_LINE + 1, 5, "E203", BUFS)]


@pytest.mark.parametrize("call,col", [("x = multicast_like(a, b[:2])", 5), ("castpile.signal(a)", 1)])
def test_outside_a_jit_function(call, col):
    source = f"import castpile\nfrom castpile import multicast_like\n\n{call}\n\ndef f():\n    castpile_wait = 1\n"
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "host.py")
    assert [(d.path, d.line, d.col, d.id, d.params) for d in info.value.diagnostics] == [
        ("host.py", 4, col, "E501", {"call": call.split("(")[0].removeprefix("x = ")})
    ]


def test_every_error_of_a_file_in_one_run_and_rendered_with_a_caret():
    found = errors_of("bufs = multicast_like(out, table[:W])\nx = bufs + 1\ny = bufs[0:1]\nfoo(bufs)\n")
    assert found == [
        (BODY_LINE + 1, 9, "E201", BUFS),
        (BODY_LINE + 2, 14, *SLICE_INDEX),
        (BODY_LINE + 3, 9, "E202", BUFS),
    ]
    source = HEADER + "    x = multicast_like(out, table[:m])\n"
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "kern.py")
    assert str(info.value) == (
        f"{headline('kern.py', BODY_LINE, 36, 'E110')}\n"
        "        x = multicast_like(out, table[:m])\n"
        "                                       ^"
    )


def test_syntax_error_is_located():
    with pytest.raises(TranspileError) as info:
        castpile.transpile("import castpile\n\ndef f(:\n    pass\n", "broken.py")
    assert [(d.path, d.line, d.col, d.id, d.params) for d in info.value.diagnostics] == [
        ("broken.py", 3, 7, "E001", {"detail": "invalid syntax"})
    ]
    assert (
        str(info.value)
        == "broken.py:3:7: error: syntax error: invalid syntax [castpile:E001]\n    def f(:\n          ^"
    )


def test_cli_reports_errors_exits_1_and_writes_nothing(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(HEADER + "    bufs = multicast_like(out, table[:W])\n    x = bufs + 1\n    y = bufs[0:2]\n")
    out = tmp_path / "out.py"
    proc = subprocess.run([sys.executable, "-m", "castpile", str(src), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr == (
        f"{headline(src, BODY_LINE + 1, 9, 'E201', **BUFS)}\n"
        "        x = bufs + 1\n"
        "            ^\n"
        f"{headline(src, BODY_LINE + 2, 14, *SLICE_INDEX[:1], **SLICE_INDEX[1])}\n"
        "        y = bufs[0:2]\n"
        "                 ^\n"
    )
    assert not out.exists() and list(tmp_path.iterdir()) == [src]


def test_failed_run_keeps_an_existing_output(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(HEADER + "    bufs = multicast_like(out, table[:W])\n    x = bufs + 1\n")
    out = tmp_path / "out.py"
    out.write_text("previous\n")
    proc = subprocess.run([sys.executable, "-m", "castpile", str(src), "-o", str(out)], capture_output=True)
    assert proc.returncode == 1 and out.read_text() == "previous\n"


def test_runtime_call_without_transpiling_says_how():
    with pytest.raises(RuntimeError, match=re.escape("castpile kernel.py -o")):
        castpile.multicast_like(None, None)
    with pytest.raises(RuntimeError, match="install_import_hook"):
        castpile.signal(None)


@pytest.mark.parametrize(
    "rebinding",
    [
        "tl = None\n",
        "def tl():\n    pass\n",
        "if FAST:\n    import triton.language as tl\nelse:\n    import numpy as tl\n",
    ],
    ids=["assigned", "def", "conditional-import"],
)
def test_a_triton_name_bound_to_two_things_is_located_where_a_kernel_uses_it(rebinding):
    """Left alone, tl.max of an access would reduce the padded stack; guessing could be wrong as well."""
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n" + rebinding + "\n\n"
        "@triton.jit\ndef k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    top = tl.max(bufs[0], axis=0)\n"
        "    tl.store(out, top)\n"
    )
    line = source.count("\n") - 1
    assert diagnostics_of(source) == [
        (line, 11, "E503", {"head": "tl", "meaning": "triton.language", "call": "tl.max"})
    ]


def test_a_triton_function_imported_by_name_and_bound_again_is_located_too():
    source = (
        "import triton\nimport triton.language as tl\nfrom triton.language import load as ld\n"
        "from castpile import multicast_like\nld = None\n\n\n"
        "@triton.jit\ndef k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    x = ld(bufs[0], mask=True)\n"
    )
    assert diagnostics_of(source) == [(11, 9, "E503", {"head": "ld", "meaning": "triton.language.load", "call": "ld"})]


README_BEFORE = """\
    @triton.jit
    def allreduce_oneshot(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
        bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs], axis=0)      # (WORLD, BLOCK) loaded from every peer, reduced
        tl.store(out + offs, total, mask=offs < n)
"""
IMPORT_MULTICAST_LIKE = {
    "name": "multicast_like",
    "statement": "from castpile import multicast_like",
    "what": "castpile's multicast_like",
}


@pytest.mark.parametrize(
    "imports,call,col,params",
    [
        ("", "bufs = multicast_like(out, table[:W])", 12, IMPORT_MULTICAST_LIKE),
        (
            "from castpile import multicast_like\n",
            "signal(out)",
            5,
            {"name": "signal", "statement": "from castpile import signal", "what": "castpile's signal"},
        ),
        (
            "from castpile import multicast_like\n",
            "wait(out + 1, value=2)",
            5,
            {"name": "wait", "statement": "from castpile import wait", "what": "castpile's wait"},
        ),
        (
            "from castpile import multicast_like\n",
            "castpile.signal(out)",
            5,
            {"name": "castpile", "statement": "import castpile", "what": "castpile.signal"},
        ),
    ],
    ids=["multicast_like", "signal", "wait", "castpile.signal"],
)
def test_a_castpile_name_that_no_import_reaches_is_located_and_names_the_import(imports, call, col, params):
    source = (
        f"import triton\nimport triton.language as tl\n{imports}\n\n@triton.jit\n"
        f"def k(out, table, W: tl.constexpr):\n    {call}\n"
    )
    assert diagnostics_of(source) == [(source.count("\n"), col, "E502", params)]


def test_the_readme_before_snippet_without_its_import_is_an_error():
    """No word 'castpile' in the file: the fast path that copies such files must not skip it."""
    source = "import triton\nimport triton.language as tl\n\n\n" + textwrap.dedent(README_BEFORE)
    assert b"castpile" not in source.encode()
    assert diagnostics_of(source) == [(7, 12, "E502", IMPORT_MULTICAST_LIKE)]
