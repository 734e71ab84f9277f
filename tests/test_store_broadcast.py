"""A stored value that cannot broadcast to P + I fails at Triton compile time (and in the interpreter) with the
store's ``path:line``; values that do broadcast still compile."""

import re

import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit import import_file

KERNELS = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def too_long(out, table, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, table[:W])
    bufs[offs] = tl.zeros((2 * BLOCK,), tl.float32)


@triton.jit
def tl_store_rows(out, table, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, tl.load(table + tl.arange(0, W)))
    tl.store(bufs[offs],
             tl.zeros((2 * W, BLOCK), tl.float32), mask=offs < 3)


@triton.jit
def extra_dim(out, table, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, table[:W])
    bufs[offs] += tl.zeros((2, W, BLOCK), tl.float32)


@triton.jit
def fits(out, table, W: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bufs = multicast_like(out, table[:W])
    row = tl.arange(0, BLOCK).to(tl.float32)
    bufs[offs] = row[None, :]
    bufs[offs] = 2.0
    bufs[offs] = tl.zeros((W, BLOCK), tl.float32) + row
    bufs[offs] = tl.zeros((W, 1), tl.float32)
"""
SIGNATURE = {"out": "*fp32", "table": "*i64", "W": "constexpr", "BLOCK": "constexpr"}
BAD = {  # kernel: (the store's line, the value's shape, P + I) with W 2 and BLOCK 8
    "too_long": (10, (16,), (2, 8)),
    "tl_store_rows": (17, (4, 8), (2, 8)),
    "extra_dim": (25, (2, 2, 8), (2, 8)),
}


def message(path, kernel: str) -> str:
    line, value, target = BAD[kernel]
    return f"{path}:{line}: error: a stored value of shape {value} does not broadcast to the shape of the access, P + I = {target}"


@pytest.fixture(params=castpile.STRATEGIES)
def transpiled(request, tmp_path):
    source = tmp_path / "stores.py"
    source.write_text(KERNELS)
    out = tmp_path / f"stores_{request.param}.py"
    out.write_bytes(castpile.transpile(KERNELS, str(source), strategy=request.param))
    return source, out


def test_unbroadcastable_stores_name_their_line_when_compiled(transpiled, tmp_path):
    source, out = transpiled
    jobs = [Job(out, kernel, SIGNATURE, {"W": 2, "BLOCK": 8}) for kernel in [*BAD, "fits"]]
    results = compile_for_sm90(jobs, tmp_path / "sm90")
    assert results["fits"].ok, results["fits"].error
    for kernel in BAD:
        assert not results[kernel].ok and message(source, kernel) in results[kernel].error, results[kernel].error


def test_unbroadcastable_stores_name_their_line_in_the_interpreter(transpiled):
    source, out = transpiled
    kernels = import_file(out)
    bufs = [torch.zeros(8) for _ in range(2)]
    table = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    for kernel in BAD:
        with pytest.raises(Exception, match=re.escape(message(source, kernel))):
            getattr(kernels, kernel)[(1,)](bufs[0], table, W=2, BLOCK=8)
    kernels.fits[(1,)](bufs[0], table, W=2, BLOCK=8)
    for b in bufs:  # the last store: zeros of shape (W, 1) broadcast over the row
        assert torch.equal(b, torch.zeros(8))
