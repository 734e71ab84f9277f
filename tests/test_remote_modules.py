"""remote="nvshmem" modules outside the simulator: every remote helper compiled for sm_90 up to NVSHMEM's linking, and
a module with remote kernels imported (and its kernels wrapped) without NVSHMEM's device library."""

import os
from pathlib import Path

import castpile
from compile_sm90 import Job, compile_for_sm90
from testkit.remote import TRANSFER_KERNELS, remote_source

# -- compiling for sm_90 -----------------------------------------------------------------------------------


def test_remote_kernels_compile_for_sm90_up_to_nvshmem_linking(tmp_path):
    """Every remote helper goes through Triton's whole pipeline to PTX for sm_90 with torch's NVSHMEM
    device functions; ptxas then stops at the first NVSHMEM symbol, which only libnvshmem_device.bc
    (absent on this CPU machine: torch's requires_nvshmem links it on GPUs) provides.  So do the GPU proof's kernels
    (benchmarks/kernels/generated/nvshmem_kernels_loop.py, as checked in), which tests/test_remote_gpu_scripts.py
    runs on the simulator."""
    source = remote_source() + TRANSFER_KERNELS.split("import castpile as cp\n", 1)[1]
    path = tmp_path / "remote_sm90.py"
    path.write_text(castpile.transpile(source.encode(), "remote_sm90.py").decode())
    table = {"table": "*i64", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}
    jobs = [
        ("load_stack", {"out": "*fp32", **table}, {"W": 3, "BLOCK": 64}),
        (
            "reduce_stack",
            {"out": "*fp32", "example": "*fp32", **table, "OP": "constexpr"},
            {"W": 4, "BLOCK": 64, "OP": "sum"},
        ),
        ("store_row", {"src": "*bf16", **table}, {"W": 2, "BLOCK": 128}),
        ("augmented", {"src": "*i32", **table}, {"W": 3, "BLOCK": 32}),
        ("signal_then_wait", {"example": "*i32", "table": "*i64", "W": "constexpr"}, {"W": 4}),
        (
            "gather_scatter",
            {"out": "*fp32", "src": "*fp32", **table, "STRIDE": "constexpr", "REVERSE": "constexpr"},
            {"W": 2, "BLOCK": 128, "STRIDE": 7, "REVERSE": False},
        ),
    ]
    gpu_script = Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py"
    all_reduce = [
        (
            "all_reduce_remote",
            {
                "buf": "*bf16",
                "buf_ptrs": "*i64",
                "pad": "*i32",
                "pad_ptrs": "*i64",
                "out": "*bf16",
                "rank": "i32",
                "n": "i32",
                "WORLD": "constexpr",
                "BLOCK": "constexpr",
            },
            {"WORLD": 2, "BLOCK": 1024},
        ),
        (
            "all_reduce_residual_rmsnorm_remote",
            {
                "buf": "*bf16",
                "buf_ptrs": "*i64",
                "pad": "*i32",
                "pad_ptrs": "*i64",
                "residual": "*bf16",
                "weight": "*bf16",
                "out": "*bf16",
                "rank": "i32",
                "m": "i32",
                "d": "i32",
                "eps": "fp32",
                "WORLD": "constexpr",
                "BLOCK": "constexpr",
            },
            {"WORLD": 2, "BLOCK": 8192},
        ),
        (
            "all_gather_remote",
            {
                "buf": "*bf16",
                "buf_ptrs": "*i64",
                "pad": "*i32",
                "pad_ptrs": "*i64",
                "rank": "i32",
                "n": "i32",
                "WORLD": "constexpr",
                "BLOCK": "constexpr",
            },
            {"WORLD": 2, "BLOCK": 1024},
        ),
    ]
    compiles = [Job(path, *job, nvshmem=True) for job in jobs]
    compiles += [Job(gpu_script, *job, name=f"generated {job[0]}", nvshmem=True) for job in all_reduce]
    results = compile_for_sm90(compiles, tmp_path)
    assert {name: r.error for name, r in results.items() if not r.ok} == {}


# -- a module without NVSHMEM's device library -------------------------------------------------------------

WITHOUT_LIBRARY = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("remote_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("imported:", type(module.plain).__name__, type(module.remote).__name__)
try:
    module.remote[(1,)](None, None, 1, 2, 16)
except RuntimeError as exc:
    print("launch:", exc)
"""


def without_nvshmem(tmp_path: Path, source: str, script: str) -> tuple[list[str], Path]:
    """``script`` run on ``source`` transpiled (its path in ``sys.argv[1]``) in a subprocess without
    TRITON_INTERPRET, NVSHMEM_LIB_DIR naming an empty folder: the lines it printed, and that folder."""
    import subprocess
    import sys

    path = tmp_path / "remote_module.py"
    path.write_bytes(castpile.transpile(source.encode(), str(path)))
    empty = tmp_path / "no-nvshmem"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(NVSHMEM_LIB_DIR=str(empty), TRITON_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines(), empty


def test_a_module_with_a_remote_kernel_imports_without_the_nvshmem_library(tmp_path):
    """Without TRITON_INTERPRET and without libnvshmem_device.bc (NVSHMEM_LIB_DIR names an empty folder): the
    module imports with every kernel, and the remote kernel's first launch raises torch's error."""
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"
        "@triton.jit\ndef plain(out):\n    tl.store(out, 1)\n\n\n"
        "@triton.jit\ndef remote(out, table, n, W: tl.constexpr, B: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W], shape=(n,), remote='nvshmem')\n"
        "    bufs[tl.arange(0, B)] = 1\n"
    )
    printed, empty = without_nvshmem(tmp_path, source, WITHOUT_LIBRARY)
    assert printed == [
        "imported: JITFunction JITFunction",
        f"launch: NVSHMEM device library not found at specified path: {empty}",
    ]


EARLY_WRAP = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("remote_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.WRAPPED_AT_THE_TIME, module.second.run.__name__)
before = module.first.run
module._castpile_remote_kernel(module.first)
print("wrapping again changes nothing:", module.first.run is before)
try:
    module.first[(1,)](None, None, 2)
except RuntimeError as exc:
    print("launch:", exc)
"""


def test_module_level_code_after_a_remote_kernel_finds_it_wrapped(tmp_path):
    """The helpers defined early (for module-level code that may launch kernels) wrap the remote kernels
    defined so far; the last lines wrap the others, and the ones wrapped already are left as they are."""
    kernel = (
        "@triton.jit\ndef {name}(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W], remote='nvshmem')\n    bufs[0] = 1\n"
    )
    source = (
        "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"
        + kernel.format(name="first")
        + "\n\nWRAPPED_AT_THE_TIME = getattr(first.run, '__name__')\n\n\n"
        + kernel.format(name="second")
    )
    printed, empty = without_nvshmem(tmp_path, source, EARLY_WRAP)
    assert printed == [
        "run_with_nvshmem run_with_nvshmem",
        "wrapping again changes nothing: True",
        f"launch: NVSHMEM device library not found at specified path: {empty}",
    ]
