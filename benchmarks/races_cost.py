"""Cost of the simulator's race checker: ``sim.run(races=True)`` against the same run without it, W = 4.

    TRITON_INTERPRET=1 python benchmarks/races_cost.py --out docs/data/races-cost.json

Each of the library's collectives (one-shot, two-shot, two-shot by pushes, low-latency all-reduce, all-gather,
reduce-scatter) runs ``--calls`` calls in one ``sim.run``; the two modes alternate in fresh processes, ``--runs``
times each; the report gives the median wall time of each and their ratio (docs/races.md: target <= 5x).  Memory:
the peak resident size of the process that ran the checked run, for ``--calls`` and ten times as many calls of
the one-shot all-reduce (the checker's state follows the bytes touched, not the run's length).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLLECTIVES = ("one_shot", "two_shot", "two_shot_push", "low_latency", "all_gather", "reduce_scatter")

CHILD = """
import resource, sys, time, torch
from castpile.gpu import collectives, sim
name, world, calls, races = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
n = 256
run = {
    "one_shot": lambda s: collectives.all_reduce_one_shot(s, block=64),
    "two_shot": lambda s: collectives.all_reduce_two_shot(s, block=64, push=False),
    "two_shot_push": lambda s: collectives.all_reduce_two_shot(s, block=64, push=True),
    "low_latency": lambda s: collectives.all_reduce_low_latency(s),
    "all_gather": lambda s: collectives.all_gather(s, block=64),
    "reduce_scatter": lambda s: collectives.reduce_scatter(s, block=64),
}[name]
handles = sim.symmetric_empty(world, (n,), torch.float32, push_scratch=True)
def body(rank):
    for call in range(calls):
        handles[rank].tensor.copy_(torch.full((n,), float(rank + call)))
        run(handles[rank])
started = time.perf_counter()
sim.run(body, world, races=races, timeout=1200)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def measure(name: str, world: int, calls: int, races: bool) -> tuple[float, int]:
    """(seconds of the sim.run, peak resident KiB of the process) for one fresh process."""
    env = dict(os.environ, TRITON_INTERPRET="1", CASTPILE_SIM_RACES="0")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(world), str(calls), "1" if races else "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    seconds, rss = out.stdout.split()
    return float(seconds), int(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for name in COLLECTIVES:
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.runs):
            for races in (False, True):
                times[races].append(measure(name, args.world, args.calls, races)[0])
        plain, checked = statistics.median(times[False]), statistics.median(times[True])
        rows.append({"collective": name, "plain_s": plain, "races_s": checked, "ratio": checked / plain})
        print(f"{name:15s} plain {plain:7.2f} s  races {checked:7.2f} s  {checked / plain:5.2f}x", flush=True)
    memory = {str(calls): measure("one_shot", args.world, calls, True)[1] for calls in (args.calls, 10 * args.calls)}
    print(f"peak RSS (KiB) of the checked one-shot run by calls: {memory}")
    report = {
        "command": "TRITON_INTERPRET=1 python benchmarks/races_cost.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d"),
        "world": args.world,
        "calls": args.calls,
        "runs": args.runs,
        "rows": rows,
        "peak_rss_kib_by_calls": memory,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
