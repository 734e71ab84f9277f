"""``@castpile.jit``: kernels in plain modules, notebook cells and scripts, transpiled where they are decorated.

Each launch runs in the interpreter and is compared with torch on the same data; the same kernels
compile for sm_90 (``test_the_jit_kernels_compile_for_sm90``).
"""

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import kernels_jit
import pytest
import torch
import triton.language as tl

import castpile
import castpile.compiler
from compile_sm90 import Job, compile_for_sm90
from testkit import import_file
from testkit.jit import (
    BAD_CELL,
    BAD_COL,
    BAD_LINE,
    BAD_MESSAGE,
    CELL,
    LAUNCH,
    MIXED_CELL,
    SECOND_CELL,
    run_cell,
    stacks,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SIGNATURE = {"out": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    directory = tmp_path_factory.getbasetemp() / "castpile-jit-cache"
    monkeypatch.setenv("CASTPILE_CACHE_DIR", str(directory))
    return directory


def test_a_module_kernel_is_what_triton_jit_gives_and_runs():
    assert type(kernels_jit.scaled_sum) is type(kernels_jit.scaled) is type(kernels_jit.broadcast)
    bufs, table, out = stacks()
    kernels_jit.scaled_sum[(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, 3 * torch.stack(bufs).sum(dim=0))
    out = torch.arange(10, dtype=torch.float32) + 0.5
    kernels_jit.broadcast[(1,)](out, table, 10, W=3, BLOCK=16)
    assert all(torch.equal(b, out) for b in bufs)


def test_a_kernel_under_heuristics_calls_a_function_defined_after_it():
    bufs, table, out = stacks()
    kernels_jit.sum_plus_one[(1,)](out, table, 10, W=3)
    assert torch.equal(out, torch.stack(bufs).sum(dim=0) + 1)


def test_inspect_finds_the_transpiled_text_at_the_users_lines():
    fn = kernels_jit.scaled_sum.fn
    text = inspect.getsource(fn)
    assert "multicast_like" not in text and "_castpile_reduce_loop(" in text
    lines = (HERE / "kernels_jit.py").read_text().splitlines()
    assert lines[fn.__code__.co_firstlineno - 1].startswith("def scaled_sum(")
    assert fn.__globals__ is vars(kernels_jit)  # the module's helpers and constants resolve


def test_a_notebook_cell_kernel_runs():
    namespace = {"__name__": "__main__"}
    run_cell(CELL, "<ipython-input-1-a1b2c3>", namespace)
    bufs, table, out = stacks()
    namespace["stack_max"][(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, torch.stack(bufs).max(dim=0).values + 10)
    fn = namespace["stack_max"].fn
    assert CELL.splitlines()[fn.__code__.co_firstlineno - 1].startswith("def stack_max(")
    assert "multicast_like" not in inspect.getsource(fn)


def test_a_later_cell_finds_the_same_helpers():
    namespace = {"__name__": "__main__"}
    run_cell(CELL, "<ipython-input-1-d4e5f6>", namespace)
    helpers = {name: value for name, value in namespace.items() if name.startswith("_castpile_")}
    run_cell(SECOND_CELL, "<ipython-input-2-d4e5f6>", namespace)
    assert helpers and all(namespace[name] is value for name, value in helpers.items())
    bufs, table, out = stacks()
    namespace["stack_min"][(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, torch.stack(bufs).min(dim=0).values)
    namespace["stack_max"][(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, torch.stack(bufs).max(dim=0).values + 10)


def test_a_cell_diagnostic_names_the_cell_and_line():
    with pytest.raises(castpile.TranspileError) as caught:
        run_cell(BAD_CELL, "<ipython-input-3-0f0f0f>", {"__name__": "__main__"})
    [diagnostic] = caught.value.diagnostics
    assert (diagnostic.path, diagnostic.line, diagnostic.col) == ("<ipython-input-3-0f0f0f>", BAD_LINE, BAD_COL)
    assert str(caught.value).startswith(f"<ipython-input-3-0f0f0f>:{BAD_LINE}:{BAD_COL}: error: {BAD_MESSAGE}")


def test_errors_of_other_kernels_are_theirs():
    namespace = {"__name__": "__main__"}
    run_cell(MIXED_CELL, "<ipython-input-4-aa>", namespace)
    bufs, table, out = stacks()
    namespace["copy_first"][(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, torch.stack(bufs).sum(dim=0))
    with pytest.raises(castpile.TranspileError) as caught:
        namespace["later"]()
    assert [(d.line, d.col) for d in caught.value.diagnostics] == [(11, 17)]


def test_decorating_the_same_source_again_does_not_transpile(monkeypatch):
    namespace = {"__name__": "__main__"}
    run_cell(CELL, "<ipython-input-5-bb>", namespace)

    def refuse(*args, **kwargs):
        raise AssertionError("transpiled again")

    monkeypatch.setattr(castpile.compiler, "transpile_source", refuse)
    run_cell(CELL, "<ipython-input-5-bb>", namespace)
    bufs, table, out = stacks()
    namespace["stack_max"][(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, torch.stack(bufs).max(dim=0).values + 10)


def test_a_nested_kernel_keeps_its_defaults_and_closure():
    width = tl.constexpr(16)

    @castpile.jit
    def nested(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr = 16):
        bufs = castpile.multicast_like(out, table[:W], shape=(n,))
        offs = tl.arange(0, BLOCK) + 0 * width
        tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)

    fn = nested.fn
    assert fn.__defaults__ == (16,) and fn.__annotations__["W"] is tl.constexpr
    assert fn.__code__.co_freevars == ("width",) and fn.__closure__[0].cell_contents is width
    assert "multicast_like" not in inspect.getsource(fn)


def undecorated(out, table, W: tl.constexpr):
    bufs = castpile.multicast_like(out, table[:W])
    tl.store(out, bufs[0])


def test_castpile_jit_must_decorate_the_def():
    with pytest.raises(
        castpile.TranspileError, match=re.escape("castpile.jit must decorate undecorated where it is defined")
    ) as info:
        castpile.jit(undecorated)
    assert [d.id for d in info.value.diagnostics] == ["E703"]
    with pytest.raises(TypeError, match=re.escape("castpile.jit decorates a Python function")):
        castpile.jit(kernels_jit.scaled)


def test_a_transpiled_module_goes_to_triton_as_it_is(tmp_path):
    output = tmp_path / "kernels_jit_out.py"
    output.write_bytes(castpile.transpile((HERE / "kernels_jit.py").read_bytes(), "kernels_jit.py"))
    module = import_file(output)
    assert module.scaled_sum.fn.__code__.co_filename == str(output)
    bufs, table, out = stacks()
    module.scaled_sum[(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out, 3 * torch.stack(bufs).sum(dim=0))


def run_script(command: list, cache: Path, interpret: bool = True) -> subprocess.CompletedProcess:
    """``command`` (``[sys.executable, script]``: the test's body names it, for its tier) with this tree's castpile."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CASTPILE_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([str(c) for c in command], env=env, capture_output=True, text=True, timeout=240)


def test_a_script_runs_and_reuses_the_cache(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(CELL + LAUNCH)
    first, second = (
        run_script([sys.executable, script], tmp_path / "cache"),
        run_script([sys.executable, script], tmp_path / "cache"),
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout == "equal: True\nlibcst: True\ntranspiled: True\n"
    assert second.stdout == "equal: True\nlibcst: False\ntranspiled: True\n", second.stderr


def test_a_script_diagnostic_names_its_path_and_line(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(BAD_CELL)
    result = run_script([sys.executable, script], tmp_path / "cache")
    assert result.returncode == 1
    assert f"{script}:{BAD_LINE}:{BAD_COL}: error: {BAD_MESSAGE}" in result.stderr
    # the traceback: the user's decorator line, then castpile.jit's one raise; none of castpile's internals
    frames = [line for line in result.stderr.splitlines() if line.startswith('  File "')]
    assert frames[0].startswith(f'  File "{script}"') and len(frames) == 2, result.stderr


def test_an_unusable_cache_warns_at_the_decorator_and_the_kernel_runs(tmp_path):
    script, cache = tmp_path / "script.py", tmp_path / "open-cache"
    script.write_text(CELL + LAUNCH)
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)
    result = run_script([sys.executable, script], cache)
    assert result.stdout == "equal: True\nlibcst: True\ntranspiled: True\n", result.stderr
    line = CELL.splitlines().index("@castpile.jit") + 1
    assert f"{script}:{line}: CacheWarning: castpile cannot use its compile cache {cache}" in result.stderr
    assert os.listdir(cache) == []


KEYWORDS = """
import triton.language as tl
import castpile

def describe(specialization):
    return "described"

def metadata(grid, kernel, args):
    return {}

@castpile.jit(do_not_specialize=["n"], debug=True, noinline=True, repr=describe, launch_metadata=metadata)
def kernel(out, table, n, W: tl.constexpr):
    bufs = castpile.multicast_like(out, table[:W], shape=(n,))
    tl.store(out, tl.sum(bufs[0], axis=0))

print(type(kernel).__name__, kernel.do_not_specialize, kernel.debug, kernel.noinline,
      kernel._repr is describe, kernel.launch_metadata is metadata)
"""


def test_triton_jit_keywords_pass_through(tmp_path):
    script = tmp_path / "keywords.py"
    script.write_text(KEYWORDS)
    result = run_script([sys.executable, script], tmp_path / "cache", interpret=False)
    assert result.stdout == "JITFunction ['n'] True True True True\n", result.stderr


REMOTE = """
import triton.language as tl
import castpile

@castpile.jit
def remote_sum(out, table, n, W: tl.constexpr):
    bufs = castpile.multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
    tl.store(out, tl.sum(bufs[0], axis=0))

@castpile.jit
def local_sum(out, table, n, W: tl.constexpr):
    bufs = castpile.multicast_like(out, table[:W], shape=(n,))
    tl.store(out, tl.sum(bufs[0], axis=0))

print(remote_sum.run.__name__, local_sum.run.__name__)  # the wrap launches through its own run
"""


def test_a_remote_kernel_is_wrapped_for_nvshmem_as_in_a_transpiled_module(tmp_path):
    script = tmp_path / "remote.py"
    script.write_text(REMOTE)
    result = run_script([sys.executable, script], tmp_path / "cache", interpret=False)
    assert result.stdout == "run_with_nvshmem run\n", result.stderr


def test_the_jit_kernels_compile_for_sm90(tmp_path):
    cells = tmp_path / "cells.py"
    cells.write_text(CELL + SECOND_CELL + MIXED_CELL)
    constexprs = {"W": 3, "BLOCK": 16}
    jobs = [
        Job(HERE / "kernels_jit.py", name, SIGNATURE, constexprs)
        for name in ("scaled_sum", "broadcast", "sum_plus_one_kernel()")
    ]
    jobs += [Job(cells, name, SIGNATURE, constexprs) for name in ("stack_max", "stack_min", "copy_first")]
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())


def test_castpile_jit_says_when_it_cannot_read_or_find_the_source():
    """No source text (code compiled from a string no linecache entry holds): E701; a cell whose text changed after
    it ran, so its def is no longer at the line its code names: E702."""
    import linecache

    scope = {}
    exec(compile("def lost(x):\n    pass\n", "<castpile-test-no-source>", "exec"), scope)
    with pytest.raises(castpile.TranspileError) as info:
        castpile.jit(scope["lost"])
    assert [(d.id, d.line, d.params) for d in info.value.diagnostics] == [("E701", 1, {"function": "lost"})]
    cell = "<castpile-test-edited-cell>"
    exec(compile("def moved(x):\n    pass\n", cell, "exec"), scope)
    linecache.cache[cell] = (14, None, ["x = 1\n", "y = 2\n"], cell)
    try:
        with pytest.raises(castpile.TranspileError) as info:
            castpile.jit(scope["moved"])
    finally:
        del linecache.cache[cell]
    assert [(d.id, d.line, d.params) for d in info.value.diagnostics] == [("E702", 1, {"function": "moved"})]
