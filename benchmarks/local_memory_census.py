"""The registers and local memory per thread of every kernel the library launches, as the GPU's JIT compiled them.

    python benchmarks/local_memory_census.py --worlds 8 2 --out docs/data/local-memory-census.json

Runs each case of benchmarks/one_gpu_cases.py for ``--iters`` calls at W ranks on one GPU
(check_one_gpu's check: exact against torch, pads zero) and records, for every launch the
ranks bind, the kernel's name, registers per thread and local memory per thread
(``CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES``, through Triton), and how many ranks bound that copy
(the JIT compiles ``rank == 1`` apart).  Local memory is a spill (registers that did not hold
what the kernel keeps live) or a stack frame; ``ptxas -v`` tells them apart.  Each W runs in a
child process; a child that dies or passes ``--limit`` is a failed row.  The result goes to
``--out`` as JSON; the exit status is 1 if any row failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from check_one_gpu import check_case, failed

from castpile.gpu import local_memory
from harness import run_header
from one_gpu_cases import cases


def census(world: int, iters: int) -> None:
    """Every case at ``world`` ranks: one JSON line per case with its kernels."""
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    seen: list[dict] = []
    lock = threading.Lock()
    measure = local_memory.local_bytes

    def recording(launch) -> int:
        nbytes = measure(launch)
        kernel = launch.kernel
        with lock:
            seen.append(dict(kernel=kernel.name, registers=kernel.n_regs, local_bytes=nbytes))
        return nbytes

    local_memory.local_bytes = recording
    for name, make in cases(world, device).items():
        seen.clear()
        row = dict(world=world, case=name)
        try:
            row.update(check_case(make(), world, iters, phased=False, seed=world))
        except Exception as exc:  # recorded: one failing case must not hide the others
            row["error"] = f"{type(exc).__name__}: {str(exc)[-1000:]}"
        kernels: dict[tuple, int] = {}
        for entry in seen:
            key = (entry["kernel"], entry["registers"], entry["local_bytes"])
            kernels[key] = kernels.get(key, 0) + 1
        row["kernels"] = [dict(kernel=k, registers=r, local_bytes=b, ranks=n) for (k, r, b), n in kernels.items()]
        print(json.dumps(row), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, nargs="+", default=[8, 2])
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--limit", type=float, default=300.0, help="seconds for each W's child")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        census(args.child, args.iters)
        return 0
    rows: list[dict] = []
    for world in args.worlds:
        command = [sys.executable, __file__, "--child", str(world), "--iters", str(args.iters)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.limit)
            out, ended = done.stdout, None if done.returncode == 0 else f"the child exited with {done.returncode}"
        except subprocess.TimeoutExpired as stopped:
            out = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else stopped.stdout or ""
            ended = f"the child did not finish within {args.limit:g} s"
        got = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if ended:  # the cases after the last row were not measured
            got.append(dict(world=world, case="(the cases after these)", error=ended))
        for row in got:
            local = [k for k in row.get("kernels", []) if k["local_bytes"]]
            print(f"W={world} {row['case']}: {'FAILED ' if failed(row) else ''}local memory {local}", flush=True)
        rows += got
        if args.out:
            result = run_header(0, "python ", rows=rows)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if any(failed(row) for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
