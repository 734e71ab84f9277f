"""One test per diagnostic: (source, the exact diagnostics: line, column, message) pairs, and the CLI's behaviour."""

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


SUBSCRIPTED_ONLY = "'bufs' is a multicast tensor and may only be subscripted, as in bufs[idx]"
# (body, every diagnostic as (line in the body, 1-based column in the file, message)); the
# body sits at BODY_LINE, indented by 4, so `x = bufs + 1` on body line 1 starts at column 5.
CASES = [
    (  # used other than by subscript
        "bufs = multicast_like(out, table[:W])\nx = bufs + 1\n",
        [(1, 9, SUBSCRIPTED_ONLY)],
    ),
    (  # passed to a function
        "bufs = multicast_like(out, table[:W])\nfoo(bufs)\n",
        [(1, 9, "'bufs' is a multicast tensor and cannot be passed to a function; pass bufs[idx]")],
    ),
    (  # wrong number of indices for shape
        "bufs = multicast_like(out, table[:W], shape=(n, m))\nx = bufs[offs]\n",
        [(1, 9, "'bufs' takes 2 indices (shape) but is indexed with 1")],
    ),
    (  # a second binding of the same name
        "bufs = multicast_like(out, table[:W])\nbufs = multicast_like(out, table[:W])\n",
        [(1, 5, "'bufs' is already bound by multicast_like in this function (one binding per name)")],
    ),
    (  # shape not a tuple literal: at the list
        "bufs = multicast_like(out, table[:W], shape=[n])\n",
        [(0, 49, "shape= must be a non-empty tuple literal such as (n,) or (m, n)")],
    ),
    (  # strides not a tuple literal
        "bufs = multicast_like(out, table[:W], strides=s)\n",
        [(0, 51, "strides= must be a non-empty tuple literal such as (n,) or (m, n)")],
    ),
    (  # shape and strides of different lengths: at the strides tuple (inside its parentheses)
        "bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1,))\n",
        [(0, 66, "strides= has 1 entries but shape= has 2")],
    ),
    (  # a slice as an index
        "bufs = multicast_like(out, table[:W])\nx = bufs[0:4]\n",
        [(1, 14, "slices are not multicast indices: index 'bufs' with tl.arange(...) tensors")],
    ),
    (  # a non-constexpr table slice: at the bound
        "bufs = multicast_like(out, table[:m])\n",
        [(0, 39, "table slice bounds must be constexpr: integer literals, tl.constexpr parameters or names, "
                 "tl.static_range loop variables, and + - * // % of those")],
    ),
    (  # an empty table slice
        "bufs = multicast_like(out, table[2:2])\n",
        [(0, 32, "empty table slice: it selects 0 buffers")],
    ),
    (  # a table slice without an upper bound
        "bufs = multicast_like(out, table[1:])\n",
        [(0, 32, "a table slice needs an upper bound: table[:WORLD] or table[lo:hi]")],
    ),
    (  # a stepped table slice: at the step (column 42: `2`)
        "bufs = multicast_like(out, table[0:W:2])\n",
        [(0, 42, "a table slice takes no step")],
    ),
    (  # not a plain assignment
        "a, b = multicast_like(out, table[:W]), 1\n",
        [(0, 12, "multicast_like must be bound by a plain assignment: `name = multicast_like(...)`")],
    ),
    (  # missing arguments
        "bufs = multicast_like(out)\n",
        [(0, 12, "multicast_like: missing argument 'ptr_tile'")],
    ),
    (  # unknown keyword: at the call
        "bufs = multicast_like(out, table[:W], shap=(n,))\n",
        [(0, 12, "multicast_like: unexpected keyword argument 'shap'")],
    ),
    (  # align not a power of two
        "bufs = multicast_like(out, table[:W], align=12)\n",
        [(0, 49, "align= must be a power-of-two integer literal (bytes), or None")],
    ),
    (  # remote= names no backend castpile knows: at the value
        "bufs = multicast_like(out, table[:W], remote='ucx')\n",
        [(0, 50, "remote= must be the string literal 'nvshmem'")],
    ),
    (  # remote= not a string literal
        "bufs = multicast_like(out, table[:W], remote=W)\n",
        [(0, 50, "remote= must be the string literal 'nvshmem'")],
    ),
    (  # remote= with a tensor tile: the scratch is named by the table's header
        "bufs = multicast_like(out, tl.load(table + offs), remote='nvshmem')\n",
        [(0, 62, "remote= needs a table slice or entry as ptr_tile (table[lo:hi] or table[r] of a remote_ptrs "
                 "table): its header names the scratch for NVSHMEM transfers")],
    ),
    (  # atomics on a remote binding: at the call
        "bufs = multicast_like(out, table[:W], remote='nvshmem')\nx = tl.atomic_add(bufs[offs], 1)\n",
        [(1, 9, "tl.atomic_add on 'bufs', a remote= binding: NVSHMEM atomics are not among torch's Triton device "
                "functions, and a get-modify-put would not be atomic; use castpile.signal/wait, or a binding without "
                "remote= for peers in one NVLink domain")],
    ),
    (  # atomic_cas too
        "bufs = multicast_like(out, table[:W], remote='nvshmem')\ntl.atomic_cas(bufs[offs], 0, 1)\n",
        [(1, 5, "tl.atomic_cas on 'bufs', a remote= binding: NVSHMEM atomics are not among torch's Triton device "
                "functions, and a get-modify-put would not be atomic; use castpile.signal/wait, or a binding without "
                "remote= for peers in one NVLink domain")],
    ),
    (  # block-pointer keywords on an access: at the value (inside its parentheses)
        "bufs = multicast_like(out, table[:W])\nx = tl.load(bufs[offs], boundary_check=(0,))\n",
        [(1, 45, "boundary_check= is for block pointers, not multicast accesses")],
    ),
    (  # signal needs a multicast access
        "castpile.signal(out + offs)\n",
        [(0, 21, "castpile.signal takes a multicast access such as bufs[idx]")],
    ),
    (  # a store without a value
        "bufs = multicast_like(out, table[:W])\ntl.store(bufs[offs])\n",
        [(1, 5, "store: missing argument 'value'")],
    ),
    (  # an access mask with one flag per buffer (v1.2): at the mask
        "bufs = multicast_like(out, table[:W])\nx = tl.load(bufs[offs], mask=tl.arange(0, W) != 0)\n",
        [(1, 34, "this mask= of load on 'bufs' is built from tl.arange(0, W), which spans the stack of 'bufs' (one flag "
                 "per buffer), but an access's mask is over its elements (shape I); mark the buffers with "
                 "multicast_like(..., ptr_mask=...) instead")],
    ),
    (  # ... not last
        "bufs = multicast_like(out, table[:W], shape=(W, BLOCK))\nx = bufs[..., 0]\n",
        [(1, 14, "'...' may only come last in a multicast index, as in bufs[i, ...]")],
    ),
    (  # ... without shape=
        "bufs = multicast_like(out, table[:W])\nx = bufs[...]\n",
        [(1, 14, "'...' needs the extents of 'bufs': give multicast_like a shape=")],
    ),
    (  # ... over an extent that is not constexpr
        "bufs = multicast_like(out, table[:W], shape=(n,))\nx = bufs[...]\n",
        [(1, 14, "'...' stands for full extents, which must be constexpr powers of two; 'n' is not")],
    ),
    (  # signal and wait return nothing: at the call
        "bufs = multicast_like(out, table[:W])\nx = castpile.wait(bufs[0])\n",
        [(1, 9, "castpile.wait returns nothing: call it as a statement of its own")],
    ),
    (
        "bufs = multicast_like(out, table[:W])\nx = (castpile.signal(bufs[0]), 1)\n",
        [(1, 10, "castpile.signal returns nothing: call it as a statement of its own")],
    ),
    (  # deleted
        "bufs = multicast_like(out, table[:W])\ndel bufs\n",
        [(1, 9, "a multicast tensor cannot be deleted")],
    ),
]


@pytest.mark.parametrize("body,expected", CASES, ids=[c[1][0][2][:30] for c in CASES])
def test_each_diagnostic_is_located(body, expected):
    """Exactly the expected diagnostics, each at its line and column."""
    assert errors_of(body) == [(BODY_LINE + line, col, message) for line, col, message in expected]


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
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "kern.py")
    assert [(d.line, d.col, d.message) for d in info.value.diagnostics] == [
        (9, 9, "'k' has a remote= binding, so it is a kernel that castpile wraps for NVSHMEM by name: define it at "
               "the top level of the module")]


def test_reassigning_is_one_diagnostic():
    found = errors_of("bufs = multicast_like(out, table[:W])\nbufs = out\n")
    assert found == [(BODY_LINE + 1, 5, "'bufs' is a multicast tensor and cannot be reassigned")]


def test_outside_a_jit_function():
    source = "from castpile import multicast_like\n\nx = multicast_like(a, b[:2])\n\ndef f():\n    castpile_wait = 1\n"
    with pytest.raises(TranspileError) as info:
        castpile.transpile(source, "host.py")
    assert [(d.path, d.line, d.col, d.message) for d in info.value.diagnostics] == [
        ("host.py", 3, 5, "multicast_like is only valid inside a @triton.jit function")
    ]


def test_every_error_of_a_file_in_one_run_and_rendered_with_a_caret():
    found = errors_of("bufs = multicast_like(out, table[:W])\nx = bufs + 1\ny = bufs[0:1]\nfoo(bufs)\n")
    assert found == [
        (BODY_LINE + 1, 9, SUBSCRIPTED_ONLY),
        (BODY_LINE + 2, 14, "slices are not multicast indices: index 'bufs' with tl.arange(...) tensors"),
        (BODY_LINE + 3, 9, "'bufs' is a multicast tensor and cannot be passed to a function; pass bufs[idx]"),
    ]
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
    assert [(d.path, d.line, d.col, d.message) for d in info.value.diagnostics] == [
        ("broken.py", 3, 7, "syntax error: invalid syntax")
    ]
    assert str(info.value) == "broken.py:3:7: error: syntax error: invalid syntax\n    def f(:\n          ^"


def test_cli_reports_errors_exits_1_and_writes_nothing(tmp_path):
    src = tmp_path / "kern.py"
    src.write_text(HEADER + "    bufs = multicast_like(out, table[:W])\n    x = bufs + 1\n    y = bufs[0:2]\n")
    out = tmp_path / "out.py"
    proc = subprocess.run(
        [sys.executable, "-m", "castpile", str(src), "-o", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"{src}:{BODY_LINE + 1}:9: error: {SUBSCRIPTED_ONLY}\n"
        "        x = bufs + 1\n"
        "            ^\n"
        f"{src}:{BODY_LINE + 2}:14: error: slices are not multicast indices: index 'bufs' with tl.arange(...) tensors\n"
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
    with pytest.raises(RuntimeError, match="castpile kernel.py -o"):
        castpile.multicast_like(None, None)
    with pytest.raises(RuntimeError, match="install_import_hook"):
        castpile.signal(None)


def file_errors(source: str) -> list[tuple[int, int, str]]:
    with pytest.raises(TranspileError) as info:
        castpile.transpile(textwrap.dedent(source), "kern.py")
    return [(d.line, d.col, d.message) for d in info.value.diagnostics]


AMBIGUOUS_TL = ("'tl' is bound to triton.language and also to something else, so castpile cannot "
                "tell what 'tl.max' calls; bind 'tl' once (an import under `try` with a fallback under "
                "`except ImportError` is fine)")


@pytest.mark.parametrize("rebinding", [
    "tl = None\n",
    "def tl():\n    pass\n",
    "if FAST:\n    import triton.language as tl\nelse:\n    import numpy as tl\n",
], ids=["assigned", "def", "conditional-import"])
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
    assert file_errors(source) == [(line, 11, AMBIGUOUS_TL)]


def test_a_triton_function_imported_by_name_and_bound_again_is_located_too():
    source = (
        "import triton\nimport triton.language as tl\nfrom triton.language import load as ld\n"
        "from castpile import multicast_like\nld = None\n\n\n"
        "@triton.jit\ndef k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    x = ld(bufs[0], mask=True)\n"
    )
    assert file_errors(source) == [(11, 9, "'ld' is bound to triton.language.load and also to something else, so "
                                           "castpile cannot tell what 'ld' calls; bind 'ld' once (an import under "
                                           "`try` with a fallback under `except ImportError` is fine)")]


README_BEFORE = '''\
    @triton.jit
    def allreduce_oneshot(out, dev_ptrs, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
        bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs], axis=0)      # (WORLD, BLOCK) loaded from every peer, reduced
        tl.store(out + offs, total, mask=offs < n)
'''


@pytest.mark.parametrize("imports,call,col,message", [
    ("", "bufs = multicast_like(out, table[:W])", 12,
     "'multicast_like' is not defined: add `from castpile import multicast_like` to use castpile's multicast_like"),
    ("from castpile import multicast_like\n", "signal(out)", 5,
     "'signal' is not defined: add `from castpile import signal` to use castpile's signal"),
    ("from castpile import multicast_like\n", "wait(out + 1, value=2)", 5,
     "'wait' is not defined: add `from castpile import wait` to use castpile's wait"),
    ("from castpile import multicast_like\n", "castpile.signal(out)", 5,
     "'castpile' is not defined: add `import castpile` to use castpile.signal"),
], ids=["multicast_like", "signal", "wait", "castpile.signal"])
def test_a_castpile_name_that_no_import_reaches_is_located_and_names_the_import(imports, call, col, message):
    source = (
        f"import triton\nimport triton.language as tl\n{imports}\n\n@triton.jit\n"
        f"def k(out, table, W: tl.constexpr):\n    {call}\n"
    )
    assert file_errors(source) == [(source.count("\n"), col, message)]


def test_the_readme_before_snippet_without_its_import_is_an_error():
    """No word 'castpile' in the file: the fast path that copies such files must not skip it."""
    source = "import triton\nimport triton.language as tl\n\n\n" + textwrap.dedent(README_BEFORE)
    assert b"castpile" not in source.encode()
    assert file_errors(source) == [(7, 12, "'multicast_like' is not defined: add `from castpile import multicast_like` "
                                           "to use castpile's multicast_like")]
