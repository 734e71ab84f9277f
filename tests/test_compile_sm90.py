"""Every kernel the semantic tests run in the interpreter compiles to an sm_90 cubin, and align= buys 128-bit loads.

The interpreter runs every scalar as a NumPy array, so a helper that treats a scalar as a
block passes there and fails only when Triton compiles it: each kernel of
tests/kernels_semantics.py, tests/kernels_v11.py, tests/kernels_v12_params.py and tests/kernels_reductions_v13.py is
compiled under both strategies, for the element types and constexpr values its tests run (one W padded, and W = 1),
and a test fails when a kernel of those files has no compiles.  So is every kernel of the benchmarks' kernel files
that CPU tests run (benchmarks/kernels/stack_kernels.py under both strategies, its hand-written twins in
hand_kernels.py), as the benchmarks launch them.
"""

import ast
import itertools
from pathlib import Path

import pytest

import castpile
from compile_sm90 import Job, compile_for_sm90, signature

HERE = Path(__file__).parent
# The parameters that are not the buffers' element pointers ("*<dtype>") or i32 scalars.
TYPES = {
    "table": "*i64",
    "ctr": "*i32",
    "pad": "*i32",
    "buf_ptrs": "*i64",
    "pad_ptrs": "*i64",
    "gathered_ptrs": "*i64",
    "ctr_ptrs": "*i64",
    "x": "*fp32",
    "buf": "*fp32",
    "sums": "*fp32",
    "others": "*fp32",
    "gathered": "*fp32",
}


def variants(dtypes, addresses="*i64", **constexprs):
    """One compile per element type and combination of constexpr values (a list is a choice of values)."""
    choices = {name: value if isinstance(value, list) else [value] for name, value in constexprs.items()}
    return [
        (dtype, addresses, dict(zip(choices, combo)))
        for dtype in dtypes
        for combo in itertools.product(*choices.values())
    ]


ALL_TYPES, ARITHMETIC = ["fp32", "bf16", "i32"], ["fp32", "i32"]
ATOMIC_OPS = ["add", "max", "min", "and", "or", "xor", "xchg", "cas"]
COMPILES = {
    "kernels_semantics.py": {
        "load_stack": variants(ALL_TYPES, W=[1, 3], BLOCK=16) + variants(["fp32"], "*u64", W=3, BLOCK=16),
        "reduce_stack": variants(ARITHMETIC, OP=["sum", "max", "min", "sum_f32", "masked_max"], W=[1, 3], BLOCK=16)
        + variants(["bf16"], OP="sum_f32", W=3, BLOCK=16),
        "store_row": variants(ALL_TYPES, W=[1, 3], BLOCK=8),
        "store_full": variants(["fp32"], W=[1, 3], BLOCK=8),
        "scatter_rank": variants(["i32"], W=[1, 4]),
        "augmented": variants(ARITHMETIC, W=[1, 3], BLOCK=8),
        "load_store_calls": variants(["fp32"], W=[1, 3], BLOCK=16),
        "atomics": variants(["i32"], OP=ATOMIC_OPS, W=3, BLOCK=16) + variants(["fp32"], OP="add", W=[1, 3], BLOCK=16),
        "elements_2d": variants(["fp32"], W=[1, 3], BI=4, BJ=8),
        "strided_2d": variants(["fp32"], W=[1, 3], BI=4, BJ=8),
        "tile_2d": variants(["fp32"], R=2, C=4, W=[1, 5], BLOCK=8),
        "tile_1d_sum": variants(["fp32"], W=[1, 3], BLOCK=8),
        "signal_then_wait": variants(["i32"], W=[1, 3]),
        "signal_exchange_wait_plain": variants(["i32"], W=[2, 3]),
    },
    "kernels_v11.py": {
        "cube_load": variants(["fp32"], W=[1, 3], B=16),
        "load_at_counter": variants(["fp32"], W=[1, 3]),
        "flat_at_counter": variants(["fp32"], W=[1, 3]),
        "bump_at_counter": variants(["fp32"], W=[1, 3]),
        "store_value_first": variants(["i32"], W=[1, 3]),
        "lookalike_names": variants(["fp32"], W=3, B=16),
        "helper_lookalike": variants(["fp32"], W=3),
        "make_kernel()": variants(["fp32"], W=[1, 3]),
        "full_extent": variants(["fp32"], M=2, N=4, W=[1, 3]),
        "named_slice": variants(["fp32"], W=[2, 3]),
        "group_sums": variants(["fp32"], R=2, C=3, B=16),
        "stack_extrema": variants(["fp32"], OP=["max", "min"], W=[1, 3], B=16),
        "scatter_add_unused": variants(["fp32"], W=[1, 4], B=16),
        "scatter_add_by_hand": variants(["fp32"], W=4, B=16),
        "bump_multiline": variants(["fp32"], W=3, B=8),
        "extrema_spellings": variants(["fp32"], W=[1, 3], B=16),
        "direct_imports": variants(["fp32"], W=[1, 3], B=16),
        "masked_old_values": variants(["fp32"], W=[1, 3], B=16),
        "keywords_in_source_order": variants(["fp32"], W=3, B=16),
        "flags_in_source_order": variants(["i32"], W=[1, 3]),
    },
    "kernels_v12_params.py": {
        "all_reduce_gather": variants(["fp32"], WORLD=[2, 3, 4], BLOCK=16),
        "columns_and_counters": variants(["fp32"], WORLD=[2, 3, 4], BLOCK=8),
        "stamp_next": variants(["i32"], WORLD=[2, 3, 4], BLOCK=8),
        "with_and_without_shape": variants(["fp32"], WORLD=[2, 3, 4], BLOCK=8),
    },
    "kernels_reductions_v13.py": {
        "bitwise": variants(["i32"], W=[1, 3, 8], B=16),
        "ordered": variants(["fp32"], W=[1, 3], B=16),
        "functions": variants(["fp32"], W=[1, 3], B=16),
        "positions": variants(["fp32", "i32"], W=[1, 3], B=16),
        "table_only": variants(["i32"], W=[1, 3], B=16),
        "tile_rows": variants(["i32"], R=[1, 4], C=2, B=16),
    },
}
# jit functions that are no kernels: compiled through the kernels that call them.
CALLED_ONLY = {
    "kernels_v11.py": {"_castpile_load_loop"},
    "kernels_v12_params.py": {
        "meet",
        "stack_total",
        "total_into",
        "push_row",
        "column_total",
        "count_into",
        "fill",
        "window_total",
    },
    "kernels_reductions_v13.py": {"bit_and", "bit_or", "first", "last"},
}


def kernels_of(source: str) -> dict[str, str]:
    """The kernels of a module by how a job names them (``factory()`` for one a module-level function returns),
    each with the name of its ``def``."""
    found = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if any(ast.unparse(d).split("(")[0].endswith("jit") for d in node.decorator_list):
            found[node.name] = node.name
        else:
            found.update(
                {
                    f"{node.name}()": inner.name
                    for inner in ast.walk(node)
                    if isinstance(inner, ast.FunctionDef)
                    and any(ast.unparse(d).split("(")[0].endswith("jit") for d in inner.decorator_list)
                }
            )
    return found


@pytest.mark.parametrize("filename", COMPILES)
def test_every_kernel_of_the_semantic_files_has_compiles(filename):
    kernels = set(kernels_of((HERE / filename).read_text()))
    assert sorted(kernels) == sorted(set(COMPILES[filename]) | CALLED_ONLY.get(filename, set()))


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_semantic_kernels_compile_for_sm90(tmp_path, strategy):
    jobs = []
    for filename, kernels in COMPILES.items():
        source = (HERE / filename).read_text()
        module = tmp_path / f"{Path(filename).stem}_{strategy}.py"
        module.write_bytes(castpile.transpile(source.encode(), str(HERE / filename), strategy=strategy))
        defs = kernels_of(source)
        for kernel, compiles in kernels.items():
            for dtype, addresses, constexprs in compiles:
                types = {**TYPES, "table": addresses, **dict.fromkeys(("out", "example", "src", "flags"), f"*{dtype}")}
                jobs.append(
                    Job(
                        module,
                        kernel,
                        signature(source, defs[kernel], types),
                        constexprs,
                        name=f"{filename}:{kernel} {dtype} {addresses} {constexprs}",
                    )
                )
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
    assert ".target sm_90" in next(iter(results.values())).ptx.read_text()


ALIGN_KERNELS = b"""
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
"""


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


# -- the benchmarks' kernel files that CPU tests run (tests/test_reductions.py runs their row norms) ----------

BENCHMARKS = HERE.parent / "benchmarks" / "kernels"
BENCH_TYPES = {"ex": "*bf16", "out": "*bf16", "src": "*bf16", "dst": "*bf16", "vals": "*fp32", "eps": "fp32"}
STACK, ROWS, HAND = {"W": 4, "BLOCK": 1024}, {"W": 4, "BLOCK_D": 1024}, {"ALIGN": True}
# file -> kernel -> (types beside BENCH_TYPES, constexprs): bf16 buffers, fp32 for the atomics, as benchmarks/ launches them
BENCHMARK_COMPILES = {
    "stack_kernels.py": {
        **dict.fromkeys(
            (
                "stack_sum",
                "stack_sum_u",
                "stack_store",
                "stack_store_u",
                "stack_store_cs",
                "stack_gather",
                "stack_gather_u",
            ),
            ({}, STACK),
        ),
        "stack_scatter_add": ({"ex": "*fp32"}, STACK),
        "stack_row_norm": ({}, ROWS),
    },
    "hand_kernels.py": {
        **dict.fromkeys(("hand_sum", "hand_gather", "hand_gather_tile"), ({}, STACK | HAND)),
        "hand_store": ({}, STACK | HAND | {"CACHE": ".cs"}),
        "hand_scatter_add": ({"ex": "*fp32"}, STACK | HAND),
        "hand_row_norm": ({}, ROWS | HAND),
        "_copy": ({}, {"BLOCK": 4096}),
    },
}


def test_the_benchmark_kernels_compile_for_sm90(tmp_path):
    """Every kernel of the benchmarks' kernel files that the interpreter runs: castpile's under both strategies, the
    hand-written twins as they are."""
    jobs = []
    for filename, kernels in BENCHMARK_COMPILES.items():
        source = (BENCHMARKS / filename).read_text()
        modules = {"plain": BENCHMARKS / filename}
        if "multicast_like" in source:
            modules = {}
            for strategy in castpile.STRATEGIES:
                modules[strategy] = tmp_path / f"{Path(filename).stem}_{strategy}.py"
                modules[strategy].write_bytes(
                    castpile.transpile(source.encode(), str(BENCHMARKS / filename), strategy=strategy)
                )
        for kernel, (types, constexprs) in kernels.items():
            sig = signature(source, kernel, {**TYPES, **BENCH_TYPES, **types})
            for form, module in modules.items():
                jobs.append(Job(module, kernel, sig, constexprs, name=f"{filename}:{kernel} {form}"))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
