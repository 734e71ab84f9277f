"""Whether growing CUDA's local memory at a launch deadlocks ranks on one GPU, and whether reserving it ends that.

    python benchmarks/local_memory_proof.py --worlds 4 8 --out docs/data/local-memory-proof.json

It runs GEMM + reduce-scatter (benchmarks/one_gpu_cases.py's case).  Until its epilogue became a
loop that kernel spilled at W = 8, and the copy the JIT specialises for ``rank == 1`` more than the
others' (docs/data/local-memory-proof.json); now it needs no local memory, so every scenario
passes, reserved or not, and the run says that it shows nothing (``shows_the_growth`` false;
docs/data/local-memory-proof-after-loop.json).  Each scenario runs the case in a
child process of its own (the context starts at CUDA's default stack limit), with some ranks held
back for ``LATE_S`` seconds after the binding barrier of the first call, so that the order of the
first launches is fixed:

- ``rank 1 last, nothing reserved``: the others' kernels start and spin waiting for rank 1.  If
  rank 1's copy needs more local memory than the context then holds, its launch grows it; if
  growing waits for the device, this hangs (the child is killed at ``--limit``; its threads'
  stacks are kept).
- ``rank 1 first, nothing reserved``: rank 1's launch grows the limit while the device is idle.
- ``rank 1 last, reserved``: the library as it is (the binding barrier reserves the most any rank
  needs, castpile.gpu.local_memory).

Each child reports, once the first binding barrier has passed, every rank's local bytes per thread
(``CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES``, through Triton) and the stack limit, from which
:func:`expected` says whether the scenario must hang, must pass, or may do either.  A child
killed at ``--limit``, or whose ranks timed out, hung; one that gave no result failed.  ``ptxas -v`` of
rank 0's and rank 1's PTX is recorded too (the assembler Triton uses, on the same machine).
"Nothing reserved" replaces ``castpile.gpu.local_memory.reserve`` with a function that does
nothing, in that child alone.  Each child checks ``--iters`` calls against torch (check_one_gpu's
check) and reports the stack limit before and after and each rank's local bytes.  The result goes
to ``--out`` as JSON; the exit status is 0 when every scenario ended as expected.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from check_one_gpu import check_case

from castpile.gpu import local_memory
from harness import run_header
from one_gpu_cases import MatmulReduceScatter

#: Seconds the held-back ranks sleep after the first binding barrier.
LATE_S = 3.0

#: name -> (reserve, which ranks are held back).
SCENARIOS = {
    "rank 1 last, nothing reserved": (False, lambda world: [1]),
    "rank 1 first, nothing reserved": (False, lambda world: [r for r in range(world) if r != 1]),
    "rank 1 last, reserved": (True, lambda world: [1]),
}


def child(world: int, scenario: str, iters: int, ptx_dir: Path) -> None:
    """Run the case at ``world`` ranks under ``scenario``, printing JSON lines: the stack limit before, what the ranks
    bound (after the first binding barrier), then check_one_gpu's row; rank 0's and rank 1's PTX go to ``ptx_dir``."""
    reserve, held_back = SCENARIOS[scenario]
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    if not reserve:
        local_memory.reserve = lambda nbytes: None
    case = MatmulReduceScatter(world, device, m=world * 128, k=256, n=512)
    late = set(held_back(world))
    local_bytes: dict[int, int] = {}
    for rank, state in enumerate(case.states):
        barrier = state.launches.after_bind

        def after_bind(launch, barrier=barrier, rank=rank):
            local_bytes[rank] = local_memory.local_bytes(launch)
            if rank in (0, 1):
                (ptx_dir / f"rank{rank}.ptx").write_text(launch.kernel.asm["ptx"])
            barrier(launch)
            if rank == 0:
                bound = dict(local_bytes_per_rank=[local_bytes[r] for r in range(world)])
                print(json.dumps(dict(bound=bound, stack_limit_after_barrier=local_memory.stack_limit())), flush=True)
            if rank in late:
                time.sleep(LATE_S)

        state.launches.after_bind = after_bind
    print(json.dumps(dict(held_back=sorted(late), stack_limit_before=local_memory.stack_limit())), flush=True)
    try:
        row = check_case(case, world, iters, phased=False, seed=world)
    except Exception as exc:  # recorded: the parent decides what it means
        row = dict(error=f"{type(exc).__name__}: {str(exc)[-2000:]}")
    print(json.dumps(row), flush=True)


def run_scenario(world: int, scenario: str, iters: int, limit: float) -> dict:
    """One scenario in a child (:func:`scenario_row`), with ``ptxas -v`` of rank 0's and rank 1's PTX."""
    with tempfile.TemporaryDirectory() as ptx_dir:
        command = [sys.executable, __file__, "--child", str(world), "--scenario", scenario, "--iters", str(iters)]
        command += ["--limit", str(limit), "--ptx-dir", ptx_dir]
        row = scenario_row(world, scenario, command, limit)
        row["ptxas_v"] = {p.stem: ptxas_report(p) for p in sorted(Path(ptx_dir).glob("*.ptx"))}
    return row


def scenario_row(world: int, scenario: str, command: list[str], limit: float) -> dict:
    """Run a child; its JSON lines merged into one row, with ``hung`` (killed at ``limit``, or its ranks timed out),
    its exit status, and, unless it gave a result, its stderr (with its threads' stacks)."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=limit)
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        killed = True
    row = dict(world=world, scenario=scenario, seconds=round(time.monotonic() - start, 1))
    for line in out.splitlines():
        if line.startswith("{"):
            row.update(json.loads(line))
    row["exit"] = None if killed else proc.returncode
    row["hung"] = killed or str(row.get("error", "")).startswith("RankTimeout")
    if "wrong_elements" not in row:
        row.setdefault("error", "hung" if killed else f"the child gave no result (exit {proc.returncode})")
        row["stderr"] = err[-5000:]
    return row


def ptxas_report(ptx: Path) -> str:
    """The lines of ``ptxas -v`` for sm_90a that give the kernel's registers, stack frame and spills."""
    from triton.backends.nvidia.compiler import get_ptxas

    report = subprocess.run(
        [get_ptxas(90).path, "-arch=sm_90a", "-v", str(ptx), "-o", os.devnull], capture_output=True, text=True
    )
    return " | ".join(line.split("info    : ")[-1] for line in report.stderr.splitlines() if "bytes" in line)


def expected(row: dict) -> str:
    """``"hang"``, ``"pass"`` or ``"either"``, from what the ranks bound.

    Nothing reserved, a held-back rank that needs more local memory than the stack limit and every rank
    that launched before it must hang (every peer's kernel is running when it launches).  A rank of the first
    group that needs more than the limit grows it at a launch that may or may not come after a peer's kernel
    started: either.  Anything else must pass, and so must a child that reported no binding (it failed).
    """
    reserve, held_back = SCENARIOS[row["scenario"]]
    if reserve or "bound" not in row:
        return "pass"
    need = row["bound"]["local_bytes_per_rank"]
    late = held_back(row["world"])
    first = [need[r] for r in range(row["world"]) if r not in late]
    limit = row["stack_limit_before"]
    if max(need[r] for r in late) > max([limit, *first]):
        return "hang"
    if len(first) > 1 and max(first) > limit:
        return "either"
    return "pass"


def passed(row: dict) -> bool:
    """A result, not hung, no error, every element exact and every pad zero."""
    return (
        "wrong_elements" in row
        and not row["hung"]
        and not row.get("error")
        and not any(row["wrong_elements"].values())
        and not row.get("pads_nonzero_after")
    )


def as_expected(row: dict) -> bool:
    return {"hang": row["hung"], "pass": passed(row), "either": row["hung"] or passed(row)}[row["expected"]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--limit", type=float, default=90.0, help="seconds before a scenario's child counts as hung")
    parser.add_argument("--out", type=Path, help="write the results here (JSON)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--scenario", choices=list(SCENARIOS), help=argparse.SUPPRESS)
    parser.add_argument("--ptx-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        faulthandler.dump_traceback_later(max(1.0, args.limit - 10), exit=False)  # every thread's stack, if it hangs
        child(args.child, args.scenario, args.iters, args.ptx_dir)
        return 0
    rows = []
    for world in args.worlds:
        for scenario in SCENARIOS:
            row = run_scenario(world, scenario, args.iters, args.limit)
            row["expected"] = expected(row)
            row["as_expected"] = as_expected(row)
            rows.append(row)
            print(
                f"W={world} {scenario}: {'hung' if row['hung'] else 'passed' if passed(row) else 'FAILED'}", flush=True
            )
    result = run_header(
        0,
        "python ",
        rows=rows,
        ok=all(row["as_expected"] for row in rows),
        # whether any scenario needed the limit to grow: else the run shows neither the deadlock nor the reservation
        shows_the_growth=any(row["expected"] != "pass" for row in rows),
    )
    if not result["shows_the_growth"]:
        print(
            "no scenario here needed the local memory to grow: this run shows neither the deadlock nor the reservation"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
