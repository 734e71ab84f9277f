"""Language v1.3's heads and dtypes: every head of a castpile call resolved as Python would (``cp.signal`` with no
``cp``, ``(wait)``, a name bound by ``global`` + import in a function), the same diagnosis whether or not the file
says "castpile", a per-buffer mask inside a Multicast helper, and ``multicast_like(DT, ...)`` with ``DT`` a constexpr
parameter holding a ``tl.dtype`` (under the interpreter against torch, and compiled for sm_90).
"""

import subprocess
import sys

import pytest
import torch
import triton.language as tl

import castpile
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, transpiled
from testkit.diagnostics import diagnostics_of

PLAIN = """\
import triton
import triton.language as tl
{head}

@triton.jit
def k(flags, out, table, W: tl.constexpr):
    {call}
"""
CALL_LINE = 7  # the line of {call} in PLAIN, at column 5


def plain(call: str, head: str = "") -> str:
    return PLAIN.format(head=head, call=call)


def refused(source: str, line: int, col: int) -> tuple[dict, str]:
    """The one diagnostic of ``source`` (k.py), which must be E502 at ``line``:``col``, and its printed message."""
    with pytest.raises(castpile.TranspileError) as info:
        castpile.transpile(source.encode(), "k.py")
    [(got_line, got_col, id, params)] = [(d.line, d.col, d.id, d.params) for d in info.value.diagnostics]
    assert (got_line, got_col, id) == (line, col, "E502"), (got_line, got_col, id, params)
    message = str(info.value)
    assert f"k.py:{line}:{col}: error: '{params['name']}' is not defined" in message, message
    return params, message


# -- heads that no import reaches -------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,name,statement",
    [
        pytest.param("cp.wait(flags)", "cp", "import castpile as cp", id="cp.wait"),
        pytest.param("cp.signal(flags)", "cp", "import castpile as cp", id="cp.signal"),
        pytest.param("bufs = cp.multicast_like(out, table[:W])", "cp", "import castpile as cp", id="cp.multicast_like"),
        pytest.param("(cp).wait(flags)", "cp", "import castpile as cp", id="(cp).wait"),
        pytest.param("castpile.wait(flags)", "castpile", "import castpile", id="castpile.wait"),
        pytest.param("(wait)(flags)", "wait", "from castpile import wait", id="(wait)"),
    ],
)
def test_a_head_no_import_reaches_names_the_import(call, name, statement):
    col = 5 if not call.startswith("bufs") else 12
    params, message = refused(plain(call), CALL_LINE, col)
    assert params["name"] == name and params["statement"] == statement, params
    assert f"add `{statement}`" in message, message


@pytest.mark.parametrize(
    "head,call",
    [
        pytest.param("import mylib as cp", "cp.wait(flags)", id="a module of the user's"),
        pytest.param("cp = make_flags_api()", "cp.signal(flags)", id="a module-level object"),
        pytest.param("from mylib import wait", "(wait)(flags)", id="a function of the user's"),
        pytest.param("", "cp = flags\n    cp.wait(out)", id="a local variable"),
        pytest.param("", "table.wait(flags)", id="a parameter"),
        pytest.param("", "cp = flags\n    (cp).signal(out)", id="a parenthesized local"),
    ],
)
def test_a_head_bound_to_something_else_is_left_alone(head, call):
    source = plain(call, head).encode()
    assert castpile.transpile(source, "k.py") == source


# -- the same diagnosis with or without the word castpile -------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        pytest.param("(wait)(flags)", id="(wait)"),
        pytest.param("( signal )(flags)", id="( signal )"),
        pytest.param("cp.wait(flags)", id="cp.wait"),
        pytest.param("wait \\\n        (flags)", id="a continued line"),
        pytest.param("x = (multicast_like)(out, table[:W])", id="(multicast_like)"),
    ],
)
def test_the_word_castpile_changes_no_diagnosis(call):
    without = plain(call)
    with_word = without.replace("import triton\n", "import triton  # a castpile kernel\n", 1)
    assert "castpile" not in without
    found = diagnostics_of(without, "k.py")
    assert found and [d[2] for d in found] == ["E502"]
    assert diagnostics_of(with_word, "k.py") == found


def test_the_command_line_refuses_a_file_without_the_word_castpile(tmp_path):
    src, out = tmp_path / "k.py", tmp_path / "out.py"
    src.write_text(plain("(wait)(flags)"))
    run = subprocess.run([sys.executable, "-m", "castpile", str(src), "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 1, run
    assert f"{src}:{CALL_LINE}:5: error: 'wait' is not defined" in run.stderr, run.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "source,compiled",
    [
        (b"import triton\n@triton.jit\ndef k(x):\n    (wait)(x)\n", True),
        (b"import triton\n@triton.jit\ndef k(x):\n    cp.signal(x)\n", True),
        (b"import triton\n@triton.jit\ndef k(x):\n    awaited = x\n", False),  # no word wait or signal
        (b"def f(x):\n    (wait)(x)\n", False),  # no jit function anywhere
    ],
)
def test_the_quick_check_skips_only_files_analysis_cannot_diagnose(source, compiled):
    from castpile.options import mentions_castpile

    assert mentions_castpile(source) is compiled


# -- global + import in a function ------------------------------------------------------------------


GLOBAL = """\
import triton
import triton.language as tl


def setup():
    global wait
    {binds}


@triton.jit
def k(flags):
    wait(flags)
"""


def test_a_name_bound_by_global_and_import_in_a_function_is_castpile_s():
    source = GLOBAL.format(binds="from castpile import wait").encode()
    out = castpile.transpile(source, "k.py").decode()
    assert "    wait(flags)\n" not in out and "_castpile" in out, out


def test_global_and_another_binding_leaves_the_call_alone():
    source = GLOBAL.format(binds="from mylib import wait").encode()
    assert castpile.transpile(source, "k.py") == source


def test_an_import_in_a_function_without_global_stays_local():
    source = GLOBAL.format(binds="from castpile import wait").replace("    global wait\n", "")
    refused(source, 11, 5)


def test_a_name_bound_by_global_runs_the_wait(tmp_path):
    source = GLOBAL.format(binds="from castpile import wait") + "\n\nsetup()\n"
    module = transpiled(tmp_path, source, "global_wait")
    flags = torch.ones(1, dtype=torch.int32)
    module.k[(1,)](flags)
    assert flags.item() == 0  # the wait returned and took the flag


# -- a per-buffer mask inside a Multicast helper ----------------------------------------------------


HELPER = """\
import triton
import triton.language as tl
import castpile
from castpile import multicast_like


@triton.jit
def helper(bufs: castpile.Multicast, offs, rank, S: tl.constexpr):
    {mask_line}
    return tl.load(bufs[offs], mask=m)


@triton.jit
def k(res, table, rank, n, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr):
    {binding}
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, tl.sum(helper(bufs, offs, rank, {extent}), axis=0))
"""
SLICE = "bufs = multicast_like(res, table[:W], shape=(n,))"


def helper_source(mask_line: str, binding: str = SLICE, extent: str = "W") -> str:
    return HELPER.format(mask_line=mask_line, binding=binding, extent=extent)


@pytest.mark.parametrize(
    "mask_line,binding,extent",
    [
        pytest.param("m = tl.arange(0, S) != rank", SLICE, "W", id="an arange of the parameter the slice's extent"),
        pytest.param(
            "m = tl.arange(0, S) != rank",
            "bufs = multicast_like(res, table[:W], ptr_mask=tl.arange(0, WP) != rank)",
            "WP",
            id="the ptr_mask's arange",
        ),
        pytest.param(
            "m = tl.arange(0, 4) != rank", "bufs = multicast_like(res, table[:3])", "3", id="a literal, padded"
        ),
    ],
)
def test_a_per_buffer_mask_in_a_helper_names_ptr_mask(mask_line, binding, extent):
    source = helper_source(mask_line, binding, extent)
    line = source.splitlines().index("    return tl.load(bufs[offs], mask=m)") + 1
    col = len("    return tl.load(bufs[offs], mask=") + 1
    with pytest.raises(castpile.TranspileError) as info:
        castpile.transpile(source.encode(), "k.py")
    [(got_line, got_col, id, params)] = [(d.line, d.col, d.id, d.params) for d in info.value.diagnostics]
    assert (got_line, got_col, id) == (line, col, "E411"), (got_line, got_col, id, params)
    assert params["name"] == "bufs" and params["op"] == "load", params
    assert f"k.py:{line}:{col}: error: this mask= of load on 'bufs'" in str(info.value)


def test_an_element_mask_in_a_helper_runs(tmp_path):
    source = helper_source("m = tl.arange(0, S) < 3", extent="BLOCK")
    module = transpiled(tmp_path, source, "helper_mask")
    w, n, block = 3, 6, 8
    bufs = [torch.arange(n, dtype=torch.float32) * (j + 1) for j in range(w)]
    res = torch.full((block,), 99.0)
    module.k[(1,)](res, address_table(bufs), 0, n, w, 4, block)
    want = torch.zeros(block)
    want[:3] = torch.stack(bufs).sum(0)[:3]
    assert torch.equal(res, want)


# -- multicast_like(DT, ...) with DT a constexpr parameter ------------------------------------------


DTYPES = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def by_param(res, table, n, DT: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(DT, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, tl.sum(bufs[offs].to(tl.float32), axis=0))
    bufs[offs] = (offs * 2).to(DT)


@triton.jit
def by_name(res, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(tl.float16, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, tl.sum(bufs[offs].to(tl.float32), axis=0))
    bufs[offs] = (offs * 2).to(tl.float16)


@triton.jit
def tile_by_param(res, table, n, DT: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(DT, tl.load(table + tl.arange(0, W)), shape=(n,))
    offs = tl.arange(0, BLOCK)
    tl.store(res + offs, tl.sum(bufs[offs].to(tl.float32), axis=0))


@triton.jit
def launch_f16(res, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    by_param(res, table, n, tl.float16, W, BLOCK)
    tile_by_param(res, table, n, tl.float16, W, BLOCK)
"""


def halves(w: int, n: int) -> list[torch.Tensor]:
    return [(torch.arange(n) * (j + 1) / 4).to(torch.float16) for j in range(w)]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("w", [2, 3, 4])
def test_a_constexpr_dtype_is_the_dtype_written_there(tmp_path, strategy, w):
    module = transpiled(tmp_path, DTYPES, f"dtypes_{strategy}", strategy=strategy)
    n, block = 5, 8
    want = torch.zeros(block)
    want[:n] = torch.stack([b.float() for b in halves(w, n)]).sum(0)
    written = (torch.arange(n) * 2.0).to(torch.float16)
    for launch in (
        lambda res, table: module.by_param[(1,)](res, table, n, tl.float16, w, block),
        lambda res, table: module.by_name[(1,)](res, table, n, w, block),
    ):
        bufs = halves(w, n)
        res = torch.full((block,), 99.0)
        launch(res, address_table(bufs))
        assert torch.equal(res, want)
        assert all(torch.equal(b, written) for b in bufs)
    if w & (w - 1) == 0:  # a tensor tile of tl.arange(0, W): W a power of two
        bufs = halves(w, n)
        res = torch.full((block,), 99.0)
        module.tile_by_param[(1,)](res, address_table(bufs), n, tl.float16, w, block)
        assert torch.equal(res, want)


@pytest.mark.sm90
@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_constexpr_dtype_compiles_for_sm90(tmp_path, strategy):
    path = tmp_path / f"dtypes_{strategy}.py"
    path.write_bytes(castpile.transpile(DTYPES.encode(), str(path), strategy=strategy))
    types = {"res": "*fp32", "table": "*i64"}
    jobs = [
        Job(path, kernel, signature(DTYPES, kernel, types), {"W": 4, "BLOCK": 8})
        for kernel in ("launch_f16", "by_name")
    ]
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_kernels_run_above_compile_for_sm90(tmp_path, strategy):
    # the global-bound wait and the helper with an element mask run in the interpreter above: compiled here
    sources = {
        "global_wait": (GLOBAL.format(binds="from castpile import wait") + "\n\nsetup()\n", {"flags": "*i32"}, {}),
        "helper_mask": (
            helper_source("m = tl.arange(0, S) < 3", extent="BLOCK"),
            {"res": "*fp32", "table": "*i64"},
            {"W": 3, "WP": 4, "BLOCK": 8},
        ),
    }
    jobs = []
    for name, (source, types, constexprs) in sources.items():
        path = tmp_path / f"{name}_{strategy}.py"
        path.write_bytes(castpile.transpile(source.encode(), str(path), strategy=strategy))
        jobs.append(Job(path, "k", signature(source, "k", types), constexprs, name=name))
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
