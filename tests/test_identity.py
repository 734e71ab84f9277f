"""Output rules: untouched bytes stay, lines keep their numbers, look-alikes are left alone."""

import os

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import import_file

SM90 = {"out": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}


def assert_compiles_for_sm90(path, kernel, tmp_path):
    """What a test ran in the interpreter compiles for the GPU too."""
    [result] = compile_for_sm90([Job(path, kernel, SM90, {"W": 3, "BLOCK": 8})], tmp_path / "sm90").values()
    assert result.ok, result.error


def run_k(tmp_path, out: bytes, bufs: list) -> None:
    """The output's kernel ``k(out, table, n=5, W, BLOCK=8)`` run on ``bufs`` (it compiles for sm_90 too)."""
    compile(out, "out.py", "exec")
    path = tmp_path / "out.py"
    path.write_bytes(out)
    import_file(path).k[(1,)](bufs[0], torch.tensor([b.data_ptr() for b in bufs]), 5, len(bufs), 8)
    assert_compiles_for_sm90(path, "k", tmp_path)


KERNEL = (
    "import triton\n"
    "import triton.language as tl\n"
    "from castpile import multicast_like\n"
    "\n"
    "\n"
    "@triton.jit\n"
    "def stack_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
    "\tbufs = multicast_like(out, table[:W], shape=(n,))  # tab-indented, trailing comment\n"
    "\toffs = tl.arange(0, BLOCK)\n"
    "\ttotal = tl.sum(bufs[offs], axis=0)\n"
    "\ttl.store(out + offs, total, mask=offs < n)\n"
)


def transpile(source: bytes, strategy="loop") -> bytes:
    return castpile.transpile(source, "m.py", strategy=strategy)


def check_line_stable(source: bytes, out: bytes, newline: bytes = b"\n", rewritten=()):
    """Every input line keeps its number; lines outside rewritten expressions keep their bytes."""
    before = source.split(newline)
    after = out.split(newline)
    assert len(after) >= len(before)
    for i, line in enumerate(before):
        if b"bufs" not in line and i + 1 not in rewritten:
            assert after[i] == line, (i + 1, line, after[i])


@pytest.mark.parametrize(
    "source",
    [
        b"",
        b"import os\n",
        b"x = 1",  # no final newline
        b"# -*- coding: latin-1 -*-\ns = '\xe9'\r\nimport castpile\r\n",
        b"import castpile\r\n\r\ndef f():\r\n\treturn castpile.__version__\r\n",
        b"from castpile import *\n@triton.jit\ndef k(out, t):\n    bufs = multicast_like(out, t[:2])\n    x = bufs[0]\n",
    ],
    ids=["empty", "no-castpile", "no-final-newline", "latin1-crlf", "crlf-tabs-unused", "star-import"],
)
def test_files_without_a_multicast_use_are_byte_identical(source):
    assert transpile(source) == source


LEFT_ALONE = [
    # a local function that merely shares the name
    (
        b"import triton\n\ndef multicast_like(a, b):\n    return a\n\n@triton.jit\ndef k(out, t):\n"
        b"    bufs = multicast_like(out, t[:2])\n    x = bufs + 1\n# castpile\n"
    ),
    # a parameter shadowing the import
    (
        b"import triton\nfrom castpile import multicast_like\n\n@triton.jit\ndef k(out, t, multicast_like):\n"
        b"    bufs = multicast_like(out, t[:2])\n    x = bufs + 1\n"
    ),
    # a local variable shadowing the module alias
    (
        b"import triton\nimport castpile as cp\n\n@triton.jit\ndef k(out, t):\n    cp = out\n"
        b"    bufs = cp.multicast_like(out, t[:2])\n    x = bufs + 1\n"
    ),
    # an attribute of another object
    (
        b"import triton\nimport castpile\n\n@triton.jit\ndef k(out, t, other):\n"
        b"    bufs = other.multicast_like(out, t[:2])\n    x = bufs + 1\n"
    ),
]


@pytest.mark.parametrize("source", LEFT_ALONE, ids=["local-def", "param", "local-alias", "other-attr"])
def test_look_alikes_are_left_alone(source):
    assert transpile(source) == source


@pytest.mark.parametrize(
    "imports,call",
    [
        ("import castpile", "castpile.multicast_like"),
        ("import castpile as cp", "cp.multicast_like"),
        ("from castpile import multicast_like", "multicast_like"),
        ("from castpile import multicast_like as mcl", "mcl"),
    ],
)
def test_every_import_form_is_recognised(imports, call):
    source = (
        f"import triton\nimport triton.language as tl\n{imports}\n\n@triton.jit\n"
        f"def k(out, t, W: tl.constexpr):\n    bufs = {call}(out, t[:W])\n    x = bufs[0]\n"
    ).encode()
    out = transpile(source)
    assert b"_castpile_load_loop(bufs, W, None, out, 0, None)" in out
    assert out.startswith(source.split(b"    bufs =")[0])


def test_import_inside_the_function_is_recognised():
    source = (
        b"import triton\n\n@triton.jit\ndef k(out, t):\n    from castpile import multicast_like as m\n"
        b"    bufs = m(out, t[:2])\n    x = bufs[0]\n"
    )
    assert b"_castpile_load_loop(bufs, 2, None, out, 0, None)" in transpile(source)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_tabs_comments_and_line_numbers_survive(strategy):
    source = KERNEL.encode()
    out = transpile(source, strategy)
    check_line_stable(source, out)
    lines = out.decode().splitlines()
    assert lines[7] == "\tbufs = table  # tab-indented, trailing comment"


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_multi_line_accesses_keep_following_line_numbers(tmp_path, newline):
    source = (
        (
            "import triton\nimport triton.language as tl\nimport castpile\n\n\n@triton.jit\n"
            "def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
            "    bufs = castpile.multicast_like(\n"
            "        out, table[:W],\n"
            "        shape=(n,),\n"
            "    )\n"
            "    offs = tl.arange(0, BLOCK)\n"
            "    total = tl.sum(\n"
            "        bufs[offs],\n"
            "        axis=0,\n"
            "    )\n"
            "    tl.store(out + offs, total, mask=offs < n)\n"
            "    raise_here = 1\n"
        )
        .replace("\n", newline.decode())
        .encode()
    )
    out = transpile(source)
    check_line_stable(source, out, newline, rewritten={*range(8, 12), *range(13, 17)})
    after = out.split(newline)
    assert after[16] == b"    tl.store(out + offs, total, mask=offs < n)"
    if newline == b"\r\n":
        assert b"\n" not in out.replace(b"\r\n", b"")  # no stray LF in a CRLF file
    else:
        assert b"\r" not in out  # and no CR in an LF file
    path = tmp_path / "multi.py"
    path.write_bytes(out)
    module = import_file(path)
    bufs = [torch.arange(5.0) * (j + 1) for j in range(3)]
    table = torch.tensor([b.data_ptr() for b in bufs])
    result = torch.zeros(5)
    module.k[(1,)](result, table, 5, 3, 8)
    assert torch.equal(result, torch.stack(bufs).sum(0))


def test_helpers_are_appended_after_the_last_line_once():
    source = KERNEL.encode() + b"\nx = 1  # last line, no newline"
    out = transpile(source)
    assert out.count(b"def _castpile_reduce_loop(") == 1
    head = out.split(b"\n")[: source.count(b"\n") + 1]
    assert head[-1] == b"x = 1  # last line, no newline"
    assert b"_castpile_load_gather" not in out  # only what is used


def test_multi_line_indices_and_values_do_not_add_lines(tmp_path):
    """Lowering repeats an index (offsets, bounds mask, load and store of `+=`): it must not repeat its newlines."""
    source = (
        b"import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n@triton.jit\n"
        b"def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
        b"    bufs = multicast_like(out, table[:W], shape=(n,))\n"
        b"    offs = tl.arange(0, BLOCK)\n"
        b"    bufs[offs +\n"
        b"         0] = (offs +  # a comment inside the value\n"
        b"               1)\n"
        b"    bufs[offs] += (\n"
        b"        10)\n"
        b"    last_line = 1\n"
    )
    out = transpile(source)
    check_line_stable(source, out, rewritten={10, 11, 12, 13, 14})
    assert out.split(b"\n")[14] == b"    last_line = 1"
    path = tmp_path / "multi_index.py"
    path.write_bytes(out)
    module = import_file(path)
    bufs = [torch.full((6,), -1.0) for _ in range(3)]
    module.k[(1,)](bufs[0], torch.tensor([b.data_ptr() for b in bufs]), 5, 3, 8)
    expected = torch.tensor([11.0, 12, 13, 14, 15, -1])
    assert all(torch.equal(b, expected) for b in bufs)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_backslash_continuations_in_stores_keep_lines_and_parse(tmp_path, strategy):
    """A store continued with a backslash after or before its operator: the output parses and every
    later line keeps its number (the continuation is whitespace of the operator, not part of the value)."""
    source = (
        b"import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n@triton.jit\n"
        b"def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
        b"    bufs = multicast_like(out, table[:W], shape=(n,))\n"
        b"    offs = tl.arange(0, BLOCK)\n"
        b"    bufs[offs] = \\\n"
        b"        offs\n"
        b"    bufs[offs] += \\\n"
        b"        10\n"
        b"    bufs[offs] \\\n"
        b"        *= 2\n"
        b"    bufs[offs] \\\n"
        b"        -= \\\n"
        b"        1\n"
        b"    last_line = 1\n"
    )
    out = transpile(source, strategy)
    check_line_stable(source, out, rewritten=set(range(10, 19)))
    assert out.split(b"\n")[18] == b"    last_line = 1"
    bufs = [torch.full((6,), -1.0) for _ in range(3)]
    run_k(tmp_path, out, bufs)
    expected = torch.tensor([19.0, 21, 23, 25, 27, -1])  # (offs + 10) * 2 - 1
    assert all(torch.equal(b, expected) for b in bufs)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_line_breaks_in_parentheses_and_after_semicolons_are_not_counted_twice(tmp_path, strategy):
    """The parentheses around a rewritten expression and the `; \\` after a rewritten statement stay in the
    output with their line breaks: the replacement must not add those line breaks again."""
    source = (
        b"import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n@triton.jit\n"
        b"def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
        b"    bufs = multicast_like(out, table[:W], shape=(n,)); \\\n"
        b"        offs = tl.arange(0, BLOCK)\n"
        b"    total = (  # the stack sum\n"
        b"        tl.sum(bufs[offs], axis=0)\n"
        b"    )\n"
        b"    bufs[offs] = total; \\\n"
        b"        last = 1\n"
        b"    last_line = 1\n"
    )
    out = transpile(source, strategy)
    check_line_stable(source, out, rewritten={8, 11, 13})
    assert out.split(b"\n")[14] == b"    last_line = 1"
    bufs = [torch.arange(6.0) * (j + 1) for j in range(3)]
    run_k(tmp_path, out, bufs)
    for j, b in enumerate(bufs):  # the sum of the three buffers where in bounds, element 5 as it was
        assert torch.equal(b, torch.cat([torch.arange(5.0) * 6, torch.tensor([5.0 * (j + 1)])]))


@pytest.mark.parametrize(
    "source,compiled",
    [
        (b"x = 1\n", False),
        (b"import signal, triton\nsignal.signal(2, None)\n@triton.jit\ndef k(e):\n    e.wait()\n", True),  # cp.wait too
        (b"import triton\n@triton.jit\ndef k(e):\n    await_all(e)\n", False),  # neither word
        (b"def f(x):\n    wait(x)\n", False),  # no jit function anywhere
        (b"@triton.jit\ndef k(x):\n    wait(x)\n", True),
        (b"@jit\ndef k(x):\n    signal (x)\n", True),
        (b"y = multicast_like(a, b)\n", True),
        (b"import castpile\n", True),
    ],
)
def test_the_fast_path_copies_only_files_that_cannot_reach_castpile(source, compiled):
    """Files that may call castpile's names without importing them go to the compiler (to be diagnosed)."""
    from castpile.options import mentions_castpile

    assert mentions_castpile(source) is compiled
    if not compiled:
        assert transpile(source) == source


SCRIPT = b'''\
"""A script that launches its kernel from module-level code."""
import sys

import torch
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def stack_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


def run(w=3, n=5):
    bufs = [torch.arange(n, dtype=torch.float32) * (j + 1) for j in range(w)]
    out = torch.zeros(n)
    stack_sum[(1,)](out, torch.tensor([b.data_ptr() for b in bufs]), n, w, 8)
    return out, torch.stack(bufs).sum(0)


AT_IMPORT = run(2) if "--at-import" in sys.argv else None

if __name__ == "__main__":
    got, expected = run()
    print("main:", torch.equal(got, expected))
'''


def test_a_script_launching_its_kernel_runs_as_main_and_as_a_module(tmp_path):
    """Contract v1.2: module-level code, an `if __name__ == "__main__":` block included, finds every helper;
    every input line keeps its number (the first statement after the kernel that calls anything gets the
    definition of the helpers in front), and the kernel's source is the file's."""
    import inspect
    import subprocess
    import sys

    out = transpile(SCRIPT)
    compile(out, "out.py", "exec")
    first_call = SCRIPT.split(b"\n").index(b'AT_IMPORT = run(2) if "--at-import" in sys.argv else None') + 1
    check_line_stable(SCRIPT, out, rewritten={first_call})
    path = tmp_path / "script_out.py"
    path.write_bytes(out)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    for args, expected in (([], "main: True"), (["--at-import"], "main: True")):
        proc = subprocess.run([sys.executable, str(path), *args], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout.splitlines() == [expected]
    module = import_file(path, "script_out")
    got, expected = module.run()
    assert torch.equal(got, expected)
    source = inspect.getsource(module.stack_sum.fn)
    assert source.startswith("@triton.jit\ndef stack_sum(") and source in out.decode()
    assert_compiles_for_sm90(path, "stack_sum", tmp_path)  # importing it runs the early helpers too


def test_module_level_code_after_the_kernel_launches_it_at_import(tmp_path):
    source = SCRIPT.replace(b'AT_IMPORT = run(2) if "--at-import" in sys.argv else None', b"AT_IMPORT = run(2)")
    path = tmp_path / "at_import.py"
    path.write_bytes(transpile(source))
    module = import_file(path, "at_import")
    got, expected = module.AT_IMPORT
    assert torch.equal(got, expected)
