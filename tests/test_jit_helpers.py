"""``@castpile.jit`` kernels calling other jit functions of their cell: a castpile-language helper left to
``@triton.jit`` is named at decoration (E704), not found when the kernel first runs."""

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit.jit import run_cell, stacks

CELL = """import triton
import triton.language as tl
import castpile
from castpile import multicast_like


@triton.jit
def plain(x):
    return x * 2


@{decorator}
def total(bufs: castpile.Multicast, offs):
    return tl.sum(bufs[offs], axis=0)


@triton.jit
def through(bufs: castpile.Multicast, offs):
    return plain(total(bufs, offs))


@castpile.jit
def kernel(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, table[:W], shape=(n,))
    tl.store(out + offs, plain({call}(bufs, offs)), mask=offs < n)
"""


def test_a_castpile_helper_under_triton_jit_is_named_where_the_kernel_is_decorated():
    with pytest.raises(castpile.TranspileError) as info:
        run_cell(CELL.format(decorator="triton.jit", call="total"), "<castpile-test-helper-cell-1>", {})
    [found] = info.value.diagnostics
    assert (found.id, found.line, found.params) == ("E704", 13, {"function": "total", "kernel": "kernel"})
    assert "decorate total with @castpile.jit" in str(info.value)


def test_one_reached_through_a_plain_helper_is_named_too():
    with pytest.raises(castpile.TranspileError) as info:
        run_cell(CELL.format(decorator="triton.jit", call="through"), "<castpile-test-helper-cell-2>", {})
    assert sorted((d.id, d.line, d.params["function"]) for d in info.value.diagnostics) == [
        ("E704", 13, "total"),
        ("E704", 18, "through"),
    ]


def test_helpers_under_castpile_jit_and_plain_triton_helpers_run():
    scope = {}
    run_cell(CELL.format(decorator="castpile.jit", call="total"), "<castpile-test-helper-cell-3>", scope)
    bufs, table, out = stacks(3, 10)
    scope["kernel"][(1,)](out, table, 10, W=3, BLOCK=16)
    assert torch.equal(out[:10], torch.stack(bufs).sum(0) * 2)


def test_the_kernel_and_its_castpile_helper_compile_for_sm90(tmp_path):
    cell = tmp_path / "helper_cell.py"
    cell.write_text(CELL.format(decorator="castpile.jit", call="total"))
    signature = {"out": "*fp32", "table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}
    results = compile_for_sm90([Job(cell, "kernel", signature, {"W": 3, "BLOCK": 16})], tmp_path)
    assert results["kernel"].ok, results["kernel"].error
