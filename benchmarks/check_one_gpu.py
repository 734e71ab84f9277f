"""Check every collective and fused op of the library with W ranks on one GPU (castpile.gpu.one_gpu), many times over.

For each W and each case: ``--iters`` back-to-back calls on every rank, each on new
integer-valued inputs (so sums are exact), against torch references computed from the
inputs alone (every rank can make every rank's input); then every signal pad and flag
must be zero.  Ranks are skewed: their threads start in reverse rank order, and at random
calls a rank sleeps on the host or queues a GPU sleep on its stream before the call.
Each W runs in a child process under a time limit, so a hang costs that W alone.

    python benchmarks/check_one_gpu.py --worlds 2 3 4 8 --iters 1000 --out docs/data/check-one-gpu.json

``--set collectives_sweep`` checks instead every collective at each size and dtype of
benchmarks/check_collectives.py (the two-GPU check against NCCL), against torch:

    python benchmarks/check_one_gpu.py --set collectives_sweep --worlds 2 8 --iters 100 --out ...

``--phased`` (what benchmarks/sanitize_one_gpu.sh runs under compute-sanitizer) puts a host
barrier between making the inputs, the library calls and the comparison, and
no sleeps: with ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` every free synchronises the device,
which must never happen while a peer's kernel waits for this rank.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]

from castpile.gpu import local_memory, one_gpu
from harness import run_header
from one_gpu_cases import CASE_SETS, Case

#: Seconds a case may take in a child before it counts as hung.
CASE_LIMIT_S = 150.0


def wrong_elements(got: torch.Tensor, want: torch.Tensor, tolerance) -> torch.Tensor:
    """Elements of ``got`` that are not ``want`` (exactly, or within ``tolerance``), as a device scalar."""
    if tolerance is None:
        return (got != want).sum()
    rtol, atol = tolerance
    return ((got.float() - want.float()).abs() > atol + rtol * want.float().abs()).sum()


def check_case(case: Case, world: int, iters: int, phased: bool, seed: int) -> dict:
    """``iters`` calls on every rank; wrong elements per result, pads left non-zero, seconds."""
    barrier = threading.Barrier(world)
    stream_of = one_gpu.streams(world, case.device)

    def body(rank):
        rng = random.Random(seed * 131 + rank)
        wrong = {}

        def pause():
            if phased:
                stream_of[rank].synchronize()
                barrier.wait()

        if not phased:
            time.sleep(0.002 * (world - rank))  # the threads start in reverse rank order
        for it in range(iters):
            refs = case.prepare(rank, it)
            pause()
            if not phased:
                roll = rng.random()
                if roll < 0.05:
                    time.sleep(rng.uniform(0, 0.002))  # a sleeping rank
                elif roll < 0.15:
                    torch.cuda._sleep(rng.randrange(1000, 200_000))  # its stream starts late on the GPU
            got = case.launch(rank, it, pause)
            pause()
            for key, want in refs.items():
                count = wrong_elements(got[key], want, case.tolerance)
                wrong[key] = count if key not in wrong else wrong[key] + count
        return {k: int(v) for k, v in wrong.items()}

    for rank in range(world):  # the references' libraries (cuBLAS) start here, not while a peer's kernel waits
        case.prepare(rank, 0)
    torch.cuda.synchronize(case.device)
    start = time.perf_counter()
    per_rank = one_gpu.run(body, world, timeout=CASE_LIMIT_S * 0.7, device=case.device)
    seconds = time.perf_counter() - start
    total = {}
    for counts in per_rank:
        for key, v in counts.items():
            total[key] = total.get(key, 0) + v
    return dict(
        wrong_elements=total,
        pads_nonzero_after=int(sum(int(p.count_nonzero()) for p in case.pads())),
        stack_limit_after=local_memory.stack_limit(),  # the local memory per thread the ranks' kernels needed
        seconds=round(seconds, 2),
    )


def child(world: int, iters: int, only: list[str] | None, phased: bool, case_set: str) -> None:
    """Check every case of ``case_set`` at ``world`` ranks, printing one JSON line per case as it ends."""
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    if phased:
        gc.disable()  # frees happen where the phases allow them, not inside a call
    for name, make in CASE_SETS[case_set](world, device).items():
        if only and name not in only:
            continue
        print(json.dumps(dict(starting=name)), flush=True)
        faulthandler.dump_traceback_later(CASE_LIMIT_S * 0.6, exit=False)  # every thread's stack, if it hangs
        row = dict(world=world, case=name, iters=iters)
        try:
            case = make()
            row.update(case.info)
            row.update(check_case(case, world, iters, phased, seed=world))
        except Exception as exc:  # recorded and reported: one failing case must not hide the others
            row["error"] = f"{type(exc).__name__}: {str(exc)[-3000:]}"
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps(row), flush=True)
        if row.get("error", "").startswith("RankTimeout"):
            os._exit(3)  # its kernels still spin on the GPU: the next cases run in a new child


_CHILD = None


def failed(row: dict) -> bool:
    """Whether a case's row records an error, a wrong element or a pad left non-zero."""
    return bool(row.get("error") or any(row.get("wrong_elements", {}).values()) or row.get("pads_nonzero_after"))


def _stop(signum, frame):
    """On SIGTERM (a time limit around the whole check), end the running child too."""
    if _CHILD is not None:
        _CHILD.kill()
    sys.exit(2)


def run_child(
    world: int, iters: int, names: list[str], phased: bool, case_set: str
) -> tuple[list[dict], dict | None, str]:
    """Run the cases ``names`` in a child; its rows, the hung case's row (if one passed :data:`CASE_LIMIT_S`), stderr."""
    command = [
        sys.executable,
        __file__,
        "--child",
        str(world),
        "--iters",
        str(iters),
        "--case-limit",
        str(CASE_LIMIT_S),
        "--set",
        case_set,
        "--cases",
        *names,
    ]
    command += ["--phased"] if phased else []
    return follow(command, world, iters)


def follow(command: list[str], world: int, iters: int) -> tuple[list[dict], dict | None, str]:
    """Run a child that prints ``{"starting": case}`` before each case and its row after; see :func:`run_child`.

    Threads read the child's stdout and stderr as they come (lines that arrive in one write are
    all seen at once; a full stderr pipe never stops the child); each case has ``CASE_LIMIT_S``
    from its own start.
    """
    global _CHILD
    proc = _CHILD = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def read_stdout():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read_stdout, daemon=True).start()
    drain = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    drain.start()
    rows, current, hung = [], None, None
    deadline = time.monotonic() + CASE_LIMIT_S
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            hung = dict(world=world, case=current, iters=iters, error=f"hung: no result within {CASE_LIMIT_S:g} s")
            proc.kill()
            break
        if line is None:
            break
        if line.startswith("{"):
            row = json.loads(line)
            if "starting" in row:
                current, deadline = row["starting"], time.monotonic() + CASE_LIMIT_S
            else:
                rows.append(row)
                print(
                    f"W={world} {row['case']}: {'FAILED ' + json.dumps(row) if failed(row) else 'ok'} "
                    f"({row.get('seconds', '-')} s)",
                    flush=True,
                )
    proc.wait()
    drain.join(10)
    return rows, hung, "".join(errors)[-6000:]


def write(path, result: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=1) + "\n")


def main():
    global CASE_LIMIT_S
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 3, 4, 8])
    parser.add_argument("--iters", type=int, default=1000)
    parser.add_argument("--set", default="library", choices=list(CASE_SETS), help="which cases (one_gpu_cases.py)")
    parser.add_argument("--cases", nargs="*", help="only these cases of the set (default: every one)")
    parser.add_argument("--phased", action="store_true", help="host barriers between inputs, calls and checks")
    parser.add_argument("--case-limit", type=float, default=CASE_LIMIT_S, help="seconds before a case counts as hung")
    parser.add_argument("--out", help="write the results here (JSON)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    CASE_LIMIT_S = args.case_limit
    if args.child is not None:
        child(args.child, args.iters, args.cases, args.phased, args.set)
        return
    signal.signal(signal.SIGTERM, _stop)
    rows, failures, stderr = [], [], {}
    for world in args.worlds:
        names = [n for n in CASE_SETS[args.set](world, None) if not args.cases or n in args.cases]
        while names:  # a hung case costs its child: the cases after it run in a new one
            got, hung, tail = run_child(world, args.iters, names, args.phased, args.set)
            if hung:
                print(f"W={world} {hung['case']}: FAILED (hung)", flush=True)
                got.append(hung)
            if hung or len(got) < len(names):
                stderr[f"W{world}:{got[-1]['case'] if got else names[0]}"] = tail
            rows += got
            failures += [row for row in got if failed(row)]
            done = {row["case"] for row in got}
            if not got:
                failures.append(dict(world=world, case=names[0], error="the child ended without a result"))
                done = {names[0]}
            names = [n for n in names if n not in done]
        if args.out:  # after every W: a later W that hangs leaves the earlier results written
            write(
                args.out,
                run_header(
                    0,
                    "python ",
                    iters=args.iters,
                    phased=args.phased,
                    rows=rows,
                    failures=failures,
                    stderr_of_hung=stderr,
                ),
            )
    print(f"{len(rows)} rows, {len(failures)} failures")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
