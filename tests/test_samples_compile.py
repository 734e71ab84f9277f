"""Every transpiled sample kernel (both strategies) compiles for sm_90 down to a cubin, on the CPU.

The compiles run in tests/compile_sm90.py's driver (``TRITON_INTERPRET`` turns
``@triton.jit`` into an interpreter object), two children side by side, into a fresh
Triton cache.
"""

from pathlib import Path

import pytest

import castpile
from compile_sm90 import Job, compile_for_sm90

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
P, I32 = "*i64", "i32"
# (sample, kernel, {argument: type or constexpr value}); a spread of dtypes and world sizes.
KERNELS = [
    ("load_table", "stack_copy", {"out": "*bf16", "dev_ptrs": P, "n": I32, "WORLD": 3, "BLOCK": 256}),
    (
        "tile_2d_elements",
        "stack_tiles",
        {"out": "*fp32", "dev_ptrs": P, "M": I32, "N": I32, "WORLD": 4, "BI": 32, "BJ": 32},
    ),
    (
        "tile_2d_elements",
        "stack_transposed",
        {"out": "*bf16", "dev_ptrs": P, "M": I32, "N": I32, "WORLD": 8, "BI": 16, "BJ": 64},
    ),
    ("pointer_tile_2d", "grid_copy", {"out": "*bf16", "dev_ptrs": P, "n": I32, "R": 2, "C": 4, "BLOCK": 128}),
    ("pointer_tile_2d", "row_sums", {"out": "*fp32", "dev_ptrs": P, "n": I32, "R": 2, "C": 4, "BLOCK": 128}),
    ("masked_world3", "stack3", {"out": "*bf16", "dev_ptrs": P, "n": I32, "BLOCK": 256}),
    ("masked_world3", "add_one_masked", {"dev_ptrs": P, "n": I32, "example": "*bf16", "BLOCK": 256}),
    ("broadcast_store", "broadcast", {"src": "*bf16", "dev_ptrs": P, "n": I32, "WORLD": 8, "BLOCK": 512}),
    ("scatter_rank", "stamp_rank", {"dev_ptrs": P, "k": I32, "example": "*i32", "WORLD": 4}),
    ("scatter_rank", "scatter_rows", {"dev_ptrs": P, "n": I32, "example": "*fp32", "WORLD": 8, "BLOCK": 128}),
    ("allreduce_oneshot", "allreduce_oneshot", {"out": "*bf16", "dev_ptrs": P, "n": I32, "WORLD": 4, "BLOCK": 1024}),
    ("allreduce_oneshot", "allreduce_oneshot", {"out": "*fp32", "dev_ptrs": P, "n": I32, "WORLD": 3, "BLOCK": 512}),
    (
        "allreduce_rmsnorm",
        "allreduce_rmsnorm",
        {
            "x": "*bf16",
            "dev_ptrs": P,
            "residual": "*bf16",
            "weight": "*bf16",
            "out": "*bf16",
            "D": I32,
            "eps": "fp32",
            "WORLD": 2,
            "BLOCK": 8192,
        },
    ),
    ("allgather", "allgather", {"out": "*bf16", "dev_ptrs": "*u64", "n": I32, "WORLD": 8, "CHUNK": 1024, "BLOCK": 256}),
    (
        "moe_combine",
        "combine_rows",
        {
            "expert_out": "*bf16",
            "slots": "*i32",
            "weights": "*fp32",
            "src_rank": "*i32",
            "src_token": "*i32",
            "buf_ptrs": P,
            "example": "*bf16",
            "me": I32,
            "n": I32,
            "T": I32,
            "H": 7168,
            "K": 8,
            "RB": 8,
            "HB": 1024,
        },
    ),
    (
        "moe_dispatch",
        "dispatch_rows",
        {
            "x": "*bf16",
            "dests": "*i32",
            "rows": "*i32",
            "buf_ptrs": P,
            "example": "*bf16",
            "n": I32,
            "H": 7168,
            "WORLD": 2,
            "TB": 8,
            "HB": 1024,
        },
    ),
    ("atomics", "histogram", {"keys": "*i32", "n": I32, "dev_ptrs": P, "NBINS": I32, "WORLD": 4, "BLOCK": 256}),
    ("atomics", "peak", {"x": "*fp32", "n": I32, "dev_ptrs": P, "WORLD": 8, "BLOCK": 256}),
    ("atomics", "claim", {"owners_out": "*i32", "dev_ptrs": P, "slot": I32, "ticket": I32, "WORLD": 4}),
    (
        "fused_rs_rmsnorm_ag",
        "fused_rs_rmsnorm_ag",
        {
            "x": "*bf16",
            "x_ptrs": P,
            "weight": "*bf16",
            "out": "*bf16",
            "out_ptrs": P,
            "rank": I32,
            "M": I32,
            "D": I32,
            "eps": "fp32",
            "WORLD": 3,
            "BLOCK": 4096,
        },
    ),
    (
        "ring_allreduce",
        "ring_allreduce",
        {
            "x": "*bf16",
            "buf_ptrs": P,
            "pad_ptrs": P,
            "flags": "*i32",
            "rank": I32,
            "chunk": I32,
            "WORLD": 4,
            "BLOCK": 1024,
        },
    ),
    (
        "ring_allreduce",
        "ring_allreduce",
        {
            "x": "*fp32",
            "buf_ptrs": P,
            "pad_ptrs": P,
            "flags": "*i32",
            "rank": I32,
            "chunk": I32,
            "WORLD": 3,
            "BLOCK": 256,
        },
    ),
    (
        "epoch_queue",
        "produce",
        {
            "src": "*fp32",
            "ring": "*fp32",
            "ring_ptrs": P,
            "pad": "*i32",
            "pad_ptrs": P,
            "consumer": I32,
            "count": I32,
            "n": I32,
            "Q": 4,
            "BLOCK": 256,
        },
    ),
    (
        "epoch_queue",
        "consume",
        {
            "out": "*bf16",
            "ring": "*bf16",
            "pad": "*i32",
            "pad_ptrs": P,
            "producer": I32,
            "rank": I32,
            "count": I32,
            "n": I32,
            "Q": 2,
            "BLOCK": 512,
        },
    ),
    (
        "semaphore_queue",
        "produce",
        {
            "rows": "*fp32",
            "slots": "*fp32",
            "slot_ptrs": P,
            "pad": "*i32",
            "pad_ptrs": P,
            "rank": I32,
            "rounds": I32,
            "n": I32,
            "W": 4,
            "BLOCK": 256,
        },
    ),
    (
        "semaphore_queue",
        "consume",
        {
            "out": "*bf16",
            "slots": "*bf16",
            "pad": "*i32",
            "pad_ptrs": P,
            "rounds": I32,
            "n": I32,
            "W": 3,
            "WP": 4,
            "BLOCK": 256,
        },
    ),
    (
        "count_exchange",
        "send",
        {
            "parts": "*bf16",
            "counts": "*i32",
            "recv": "*bf16",
            "recv_ptrs": P,
            "pad": "*i32",
            "pad_ptrs": P,
            "rank": I32,
            "H": I32,
            "W": 4,
            "CAP": 8,
            "BLOCK_H": 128,
        },
    ),
    (
        "count_exchange",
        "receive",
        {
            "out": "*fp32",
            "total": "*i32",
            "recv": "*fp32",
            "pad": "*i32",
            "H": I32,
            "W": 3,
            "WP": 4,
            "CAP": 8,
            "BLOCK_H": 128,
        },
    ),
]
# jit functions that are no kernels (their parameters take multicast tensors): compiled through their callers.
CALLED_ONLY = {("fused_rs_rmsnorm_ag", "reduce_row"), ("fused_rs_rmsnorm_ag", "broadcast_row")}


def job_id(sample, kernel, args, strategy):
    dtypes = ",".join(f"{k}={v}" for k, v in args.items())
    return f"{strategy}:{sample}.{kernel}({dtypes})"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Compile every kernel of every strategy; each job's result by its id."""
    tmp = tmp_path_factory.mktemp("compile")
    jobs = []
    for strategy in castpile.STRATEGIES:
        for sample in sorted({s for s, _, _ in KERNELS}):
            src = SAMPLES / f"{sample}.py"
            out = tmp / f"{sample}_{strategy}.py"
            out.write_bytes(castpile.transpile(src.read_bytes(), str(src), strategy=strategy))
            for s, k, args in KERNELS:
                if s == sample:
                    signature = {a: v if isinstance(v, str) else "constexpr" for a, v in args.items()}
                    constexprs = {a: v for a, v in args.items() if not isinstance(v, str)}
                    jobs.append(Job(out, k, signature, constexprs, name=job_id(s, k, args, strategy)))
    return compile_for_sm90(jobs, tmp, processes=2)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("sample,kernel,args", KERNELS, ids=[f"{s}.{k}-{i}" for i, (s, k, _) in enumerate(KERNELS)])
def test_compiles_for_sm90(results, sample, kernel, args, strategy):
    # S1 (= C1) of docs/history.md (helpers' string-default constexpr parameters) is
    # fixed: its error fails here like any other.
    result = results[job_id(sample, kernel, args, strategy)]
    assert result.ok, result.error
    assert ".target sm_90" in result.ptx.read_text()


def test_every_sample_kernel_is_compiled():
    """KERNELS names exactly the @jit kernels of samples/ (and CALLED_ONLY the other jit functions): none left out,
    none stale."""
    import ast

    compiled = {(s, k) for s, k, _ in KERNELS}
    found = set()
    for path in SAMPLES.glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                found.add((path.stem, node.name))
    compiled |= CALLED_ONLY
    assert found == compiled, f"not compiled: {sorted(found - compiled)}; not in samples/: {sorted(compiled - found)}"
