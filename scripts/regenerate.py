"""Regenerate (or, with --check, compare) every checked-in transpiled module.

    python scripts/regenerate.py           # write them
    python scripts/regenerate.py --check   # exit 1 and name the stale ones

The GPU machines have triton but not libcst, so the collectives and the GPU
benchmarks import these plain-Triton modules rather than transpiling on import.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import castpile

# (castpile-language source, output, strategy[, seconds of CASTPILE_DEBUG_WAITS]), paths relative to the repository root
GENERATED = [
    ("castpile/gpu/collectives/kernels.py", "castpile/gpu/collectives/kernels_triton.py", "loop"),
    ("benchmarks/kernels/stack_kernels.py", "benchmarks/kernels/generated/stack_kernels_loop.py", "loop"),
    ("benchmarks/kernels/stack_kernels.py", "benchmarks/kernels/generated/stack_kernels_gather.py", "gather"),
    ("benchmarks/kernels/row_bodies.py", "benchmarks/kernels/generated/row_bodies_loop.py", "loop"),
    ("benchmarks/kernels/row_bodies.py", "benchmarks/kernels/generated/row_bodies_gather.py", "gather"),
    ("benchmarks/kernels/nvshmem_kernels.py", "benchmarks/kernels/generated/nvshmem_kernels_loop.py", "loop"),
    ("benchmarks/kernels/hang_kernels.py", "benchmarks/kernels/generated/hang_kernels_debug_waits.py", "loop", 2.0),
    ("castpile/gpu/fused/moe_kernels.py", "castpile/gpu/fused/moe_kernels_triton.py", "gather"),
    ("castpile/gpu/fused/rmsnorm_kernels.py", "castpile/gpu/fused/rmsnorm_kernels_triton.py", "loop"),
    (
        "castpile/gpu/fused/tp_gemm/all_gather_kernels.py",
        "castpile/gpu/fused/tp_gemm/all_gather_kernels_triton.py",
        "loop",
    ),
    (
        "castpile/gpu/fused/tp_gemm/reduce_scatter_kernels.py",
        "castpile/gpu/fused/tp_gemm/reduce_scatter_kernels_triton.py",
        "loop",
    ),
]


def transpiled(source: str, strategy: str, debug_waits: float | None = None) -> bytes:
    """What castpile writes for ``source``."""
    return castpile.transpile((ROOT / source).read_bytes(), source, strategy=strategy, debug_waits=debug_waits)


def stale() -> list[str]:
    """The outputs whose checked-in bytes differ from what castpile writes now."""
    found = []
    for source, output, *options in GENERATED:
        if not (ROOT / output).exists() or (ROOT / output).read_bytes() != transpiled(source, *options):
            found.append(output)
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any output is stale")
    args = parser.parse_args(argv)
    outdated = stale()
    if args.check:
        for output in outdated:
            print(f"stale: {output} (run `make generated`)")
        return 1 if outdated else 0
    for source, output, *options in GENERATED:
        if output in outdated:
            (ROOT / output).write_bytes(transpiled(source, *options))
            print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
