"""Registers and local memory of the GEMM + reduce-scatter kernel at its wide default tile, compiled for sm_90 on the CPU.

    git show 1257797^:castpile/gpu/fused/tp_gemm/reduce_scatter_kernels_triton.py > /tmp/rs_unrolled.py
    python benchmarks/diag_rs_registers.py castpile/gpu/fused/tp_gemm/reduce_scatter_kernels_triton.py /tmp/rs_unrolled.py

For each module given (a generated reduce-scatter kernel module: the library's, or an older one),
compiles ``matmul_reduce_scatter`` as the JIT does for the library's default config from 1024
rows (tp_gemm.default_config: 128 x 256 x 64, 8 warps, 3 stages, TMA) at K = 256, for W = 2, 4
and 8 and for rank 0 and rank 1 (a constexpr, as the JIT makes it), and prints ``ptxas -v``'s
registers, stack frame and spills for each.  The ptxas is the one Triton assembles sm_90 with.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from castpile.gpu.fused import tp_gemm
from compile_sm90 import Job, compile_for_sm90, ptxas_for_sm90

SIGNATURE = dict.fromkeys(("a", "b", "out", "scratch"), "*bf16") | {"scratch_ptrs": "*i64", "flags": "*i32"}
SIGNATURE |= {"flag_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64", "rank": "i32", "Ms": "i32", "N": "i32"}


def jobs(module: str) -> list[Job]:
    config = tp_gemm.default_config(1024, "matmul_reduce_scatter")
    tile = {"BM": config.block_m, "BN": config.block_n, "BK": config.block_k, "GROUP_M": config.group_m}
    made = []
    for world in (2, 4, 8):
        for rank in (0, 1):
            signature = dict(SIGNATURE, rank="constexpr") if rank else SIGNATURE
            signature |= dict.fromkeys(("K", "WORLD", *tile, "TMA"), "constexpr")
            aligned = {i: [["tt.divisibility", 16]] for i, (p, t) in enumerate(signature.items()) if t[0] == "*"}
            aligned |= {i: [["tt.divisibility", 16]] for i, p in enumerate(signature) if p in ("Ms", "N")}
            constexprs = {"K": 256, "WORLD": world, **tile, "TMA": config.tma, **({"rank": 1} if rank else {})}
            options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
            made.append(Job(module, "matmul_reduce_scatter", signature, constexprs, aligned, f"W={world} rank {rank}",
                            options=options))  # fmt: skip
    return made


def ptxas_v(ptx: Path) -> str:
    """``ptxas -v``'s lines for sm_90a on the stack frame (spills) and the registers of ``ptx``, joined."""
    report = subprocess.run(
        [ptxas_for_sm90(), "-arch=sm_90a", "-v", str(ptx), "-o", os.devnull], capture_output=True, text=True, check=True
    )
    lines = [line.split(":", 1)[-1].strip() for line in report.stderr.splitlines() if "bytes stack" in line
             or "registers" in line]  # fmt: skip
    return " | ".join(lines)


def main(modules: list[str]) -> None:
    for module in modules:
        print(f"# {module}")
        with tempfile.TemporaryDirectory() as workdir:
            for name, result in compile_for_sm90(jobs(str(Path(module).resolve())), Path(workdir), processes=2).items():
                print(f"{name}: {ptxas_v(result.ptx) if result.ok else result.error}")


if __name__ == "__main__":
    main(sys.argv[1:])
