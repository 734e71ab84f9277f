"""A body that launches its own castpile kernels on one_gpu.run, with no warm-up: exact at each W, or hung.

Each rank, per call (``ring_call`` of benchmarks/kernels/own_kernels.py): ``ring_put`` writes its input into row ``rank`` of the next rank's buffer
(``table[peer]``, one peer's pointer), ``epoch_barrier`` (``signal op="add"`` to every rank,
``wait cmp="ge", reset=None`` on its own count) meets every rank, the rank copies the row it was
sent, and a second ``epoch_barrier`` closes the call.  Nothing is compiled before the run (each W
runs in a child process with an empty Triton cache), so every rank compiles and loads its kernels
mid-run, and new JIT specialisations arrive mid-run too: ``rank == 1`` and ``rank == 0`` for
``ring_put``, epochs 1 and 16, 32, ... (``== 1``, divisible by 16) for ``epoch_barrier``.

    python benchmarks/check_one_gpu_own_kernels.py --worlds 2 3 8 --calls 40 --out docs/data/x.json

Cases per W: ``gated`` (one_gpu.run as it is: exact every call), ``ungated`` (``--ungated W``: the
launch gate taken out, what a body met before it; expected to hang, the child is killed at its
limit) and ``timeout`` (a run given 0.05 s: its RankTimeout must say a rank compiles or loads).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import torch

from kernels.own_kernels import epoch_barrier, ring_call, ring_put

#: Seconds a child may run before its case counts as hung; one_gpu.run's own limit in it, by case.
CHILD_LIMIT_S = 120.0
RUN_LIMIT_S = {"gated": 90.0, "ungated": 30.0, "timeout": 0.05}
BLOCK = 256


def child(world: int, calls: int, n: int, case: str) -> dict:
    from castpile.gpu import one_gpu

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    bufs = one_gpu.symmetric_scratch(world, (world, n), torch.float32, device, name="buf")
    pads = one_gpu.symmetric_scratch(world, (1,), torch.int32, device, name="pad")
    gen = torch.Generator(device="cpu").manual_seed(world)
    inputs = [
        [torch.randint(-1000, 1000, (n,), generator=gen).float().to(device) for _ in range(world)] for _ in range(calls)
    ]
    outs = [[torch.full((n,), float("nan"), device=device) for _ in range(calls)] for _ in range(world)]
    torch.cuda.synchronize()

    def body(rank):
        for call in range(calls):
            ring_call(bufs, pads, rank, call, inputs[call][rank], outs[rank][call], world, BLOCK)

    if case == "ungated":
        one_gpu.launch_gate.installed = lambda gate: contextlib.nullcontext(gate)  # the run as it was
    row = dict(world=world, case=case, calls=calls, n=n)
    start = time.monotonic()
    try:
        one_gpu.run(body, world, timeout=RUN_LIMIT_S[case])
    except one_gpu.RankTimeout as error:
        row.update(error=f"RankTimeout: {error}", activities={str(r): a for r, a in error.activities.items()})
        row["seconds"] = round(time.monotonic() - start, 2)
        print(json.dumps(row), flush=True)
        os._exit(3)  # its kernels may still spin on the GPU
    row["seconds"] = round(time.monotonic() - start, 2)
    torch.cuda.synchronize()
    wrong = sum(int((outs[r][c] != inputs[c][(r - 1) % world]).sum()) for r in range(world) for c in range(calls))
    row.update(
        wrong_elements=wrong,
        flag_after=[int(p.tensor[0]) for p in pads],
        flag_expected=2 * calls * world,
        specialisations={
            "ring_put": len(ring_put.device_caches[0][0]),
            "epoch_barrier": len(epoch_barrier.device_caches[0][0]),
        },
    )
    return row


def run_child(world: int, calls: int, n: int, case: str) -> dict:
    with tempfile.TemporaryDirectory() as cache:  # nothing compiled before: every kernel compiles mid-run
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        command = [
            sys.executable,
            __file__,
            "--child",
            str(world),
            "--calls",
            str(calls),
            "--n",
            str(n),
            "--case",
            case,
        ]
        start = time.monotonic()
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=CHILD_LIMIT_S)
        except subprocess.TimeoutExpired as expired:
            return dict(
                world=world,
                case=case,
                calls=calls,
                hung=True,
                seconds=round(time.monotonic() - start, 1),
                stderr_tail=(expired.stderr or b"")[-1500:].decode(errors="replace")
                if isinstance(expired.stderr, bytes)
                else (expired.stderr or "")[-1500:],
            )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        return dict(world=world, case=case, exit=done.returncode, stderr_tail=done.stderr[-3000:])
    return rows[-1] | {"exit": done.returncode}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 3, 8])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--ungated", type=int, nargs="*", default=[], help="worlds to run once without the gate")
    parser.add_argument("--timeout-case", type=int, nargs="*", default=[], help="worlds to run with a 0.05 s limit")
    parser.add_argument("--out")
    parser.add_argument("--child", type=int)
    parser.add_argument("--case", default="gated")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.calls, args.n, args.case)), flush=True)
        return
    from harness import run_header

    rows = []
    plan = [(w, "gated") for w in args.worlds] + [(w, "timeout") for w in args.timeout_case]
    plan += [(w, "ungated") for w in args.ungated]
    for world, case in plan:
        rows.append(run_child(world, args.calls, args.n, case))
        print(json.dumps(rows[-1]), flush=True)
    result = run_header(0, launcher="python ", rows=rows)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
