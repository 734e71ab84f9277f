"""The transpiled semantics kernels compile to sm_90 cubins, and align= buys 128-bit loads."""

from pathlib import Path

import pytest

import castpile
from compile_sm90 import Job, compile_for_sm90

HERE = Path(__file__).parent
PTR = "*fp32"
T = {"table": "*i64"}

# (kernel, signature, constexprs): one job per helper family, world of 3 (padded to 4).
JOBS = [
    ("load_stack", {"out": PTR, **T, "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}, {"W": 3, "BLOCK": 64}),
    (
        "reduce_stack",
        {"out": PTR, "example": PTR, **T, "n": "i32", "OP": "constexpr", "W": "constexpr", "BLOCK": "constexpr"},
        {"OP": "max", "W": 3, "BLOCK": 64},
    ),
    (
        "reduce_stack",
        {"out": PTR, "example": PTR, **T, "n": "i32", "OP": "constexpr", "W": "constexpr", "BLOCK": "constexpr"},
        {"OP": "masked_max", "W": 3, "BLOCK": 64},
    ),
    ("store_row", {"src": PTR, **T, "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}, {"W": 3, "BLOCK": 64}),
    ("store_full", {"src": PTR, **T, "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}, {"W": 3, "BLOCK": 64}),
    ("scatter_rank", {"example": "*i32", **T, "k": "i32", "W": "constexpr"}, {"W": 4}),
    ("augmented", {"src": PTR, **T, "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}, {"W": 3, "BLOCK": 64}),
    (
        "load_store_calls",
        {"out": PTR, **T, "n": "i32", "m": "i32", "W": "constexpr", "BLOCK": "constexpr"},
        {"W": 3, "BLOCK": 64},
    ),
    (
        "atomics",
        {"out": "*i32", **T, "n": "i32", "OP": "constexpr", "W": "constexpr", "BLOCK": "constexpr"},
        {"OP": "add", "W": 3, "BLOCK": 64},
    ),
    (
        "atomics",
        {"out": "*i32", **T, "n": "i32", "OP": "constexpr", "W": "constexpr", "BLOCK": "constexpr"},
        {"OP": "cas", "W": 3, "BLOCK": 64},
    ),
    (
        "elements_2d",
        {"out": PTR, **T, "M": "i32", "N": "i32", "W": "constexpr", "BI": "constexpr", "BJ": "constexpr"},
        {"W": 3, "BI": 16, "BJ": 16},
    ),
    (
        "tile_2d",
        {"out": PTR, **T, "n": "i32", "R": "constexpr", "C": "constexpr", "W": "constexpr", "BLOCK": "constexpr"},
        {"R": 2, "C": 4, "W": 5, "BLOCK": 64},
    ),
    ("tile_1d_sum", {"out": PTR, **T, "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}, {"W": 3, "BLOCK": 64}),
    ("signal_then_wait", {"example": "*i32", **T, "W": "constexpr"}, {"W": 3}),
    ("signal_exchange_wait_plain", {"example": "*i32", **T, "W": "constexpr"}, {"W": 3}),
]

ALIGN_KERNELS = b'''
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def stack_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs].to(tl.float32), axis=0), mask=offs < n)


@triton.jit
def stack_sum_aligned(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,), align=16)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs].to(tl.float32), axis=0), mask=offs < n)
'''


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_every_helper_family_compiles_for_sm90(tmp_path, strategy):
    source = HERE / "kernels_semantics.py"
    module = tmp_path / f"kernels_{strategy}.py"
    module.write_bytes(castpile.transpile(source.read_bytes(), str(source), strategy=strategy))
    jobs = [Job(module, name, sig, const, name=f"{name}_{const.get('OP', '')}") for name, sig, const in JOBS]
    results = compile_for_sm90(jobs, tmp_path)
    failures = [f"{name}: {r.error}" for name, r in results.items() if not r.ok]
    assert not failures, "\n".join(failures)
    assert ".target sm_90" in results["load_stack_"].ptx.read_text()


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_align_gives_128_bit_loads(tmp_path, strategy):
    module = tmp_path / "aligned.py"
    module.write_bytes(castpile.transpile(ALIGN_KERNELS, "aligned.py", strategy=strategy))
    sig = {"out": "*bf16", "table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}
    # What Triton's JIT records at launch for arguments divisible by 16.
    attrs = {i: [["tt.divisibility", 16]] for i in range(3)}
    jobs = [Job(module, name, sig, {"W": 4, "BLOCK": 1024}, attrs) for name in ("stack_sum", "stack_sum_aligned")]
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {name: r.error for name, r in results.items()}
    plain = results["stack_sum"].ptx.read_text()
    aligned = results["stack_sum_aligned"].ptx.read_text()
    assert "ld.global.v4.b32" not in plain and "ld.global.b16" in plain
    assert "ld.global.v4.b32" in aligned
