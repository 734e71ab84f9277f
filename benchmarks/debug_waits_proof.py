"""Debug-mode waits on a GPU: a barrier whose peer never comes raises HangError naming its lines, and the GPU goes on.

    python benchmarks/debug_waits_proof.py --out docs/data/debug-waits-proof.json

Two ranks on one GPU (:mod:`castpile.gpu.one_gpu`).  Rank 0 calls the barrier of
benchmarks/kernels/hang_kernels.py twice, rank 1 never does.  The kernels are that file
transpiled with ``CASTPILE_DEBUG_WAITS=2`` (generated/hang_kernels_debug_waits.py, so no libcst
is needed): the first call's wait gives up on rank 0's flag 1 after 2 s; the second call's
``signal(..., wait_for=0)`` gives up on rank 1's flag 0, which nobody lowered, and its wait
gives up as the first did.  ``one_gpu.run`` must raise ``HangError`` with those three entries,
naming the file's lines.  Then, in the same process, a one-shot all-reduce over new buffers
must match torch's sum.  The result (each check, the message, the seconds) goes to ``--out``
as JSON; the exit status is 0 when every check holds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import torch

# one_gpu before the kernels: it sets CUDA_MODULE_LOADING=EAGER, and the debug-mode module starts CUDA on import
# (its record of the waits that give up is pinned host memory)
from castpile.gpu import HangError, allocation_names, collectives, one_gpu
from harness import run_header
from kernels.generated import hang_kernels_debug_waits as kernels

WORLD = 2
SOURCE = "benchmarks/kernels/hang_kernels.py"


def line_of(text: str) -> int:
    """The line of hang_kernels.py that is ``text``."""
    lines = (HERE / "kernels" / "hang_kernels.py").read_text().splitlines()
    [number] = [n for n, line in enumerate(lines, 1) if line.strip() == text]
    return number


def expected_entries() -> list[str]:
    """The three entries, in the order the waits give up."""
    signal, wait = line_of("castpile.signal(pads[rank], wait_for=0)"), line_of("castpile.wait(pad + tl.arange(0, W))")
    waited = f"block (0, 0, 0) gave up waiting at {SOURCE}:{wait} after 2 s: flag rank 0's signal_pad[1] == 1"
    return [
        f"{waited} expected, saw 0",
        (
            f"block (0, 0, 0) gave up signalling (wait_for=) at {SOURCE}:{signal} after 2 s: "
            "flag rank 1's signal_pad[0] == 0 expected, saw 1"
        ),
        f"{waited} expected, saw 0",
    ]


def barrier_without_its_peer() -> dict:
    handles = one_gpu.symmetric_empty(WORLD, (16,), torch.float32)

    def body(rank):
        if rank == 0:
            for _ in range(2):
                kernels.barrier[(1,)](handles[0].signal_pad, handles[0].signal_pad_ptrs, 0, WORLD)

    start = time.monotonic()
    try:
        one_gpu.run(body, WORLD, timeout=120)
    except HangError as error:
        lines = [entry.describe(allocation_names.name_of) for entry in error.entries]
        return {
            "raised": "HangError",
            "seconds": round(time.monotonic() - start, 2),
            "message": str(error),
            "entries": lines,
            "entries_as_expected": lines == expected_entries(),
            "pads": [h.signal_pad[:WORLD].tolist() for h in handles],
        }
    return {"raised": None, "seconds": round(time.monotonic() - start, 2), "entries_as_expected": False}


def all_reduce_after() -> dict:
    handles = one_gpu.symmetric_empty(WORLD, (1024,), torch.float32)
    inputs = [torch.arange(1024, dtype=torch.float32, device="cuda") * (rank + 1) for rank in range(WORLD)]

    def body(rank):
        handles[rank].tensor.copy_(inputs[rank])
        return collectives.all_reduce_one_shot(handles[rank])

    start = time.monotonic()
    outs = one_gpu.run(body, WORLD, timeout=120)
    want = sum(inputs)
    return {
        "seconds": round(time.monotonic() - start, 2),
        "exact": all(torch.equal(out, want) for out in outs),
        "pads_zero": all(not h.signal_pad.any().item() for h in handles),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where the JSON result goes")
    args = parser.parse_args(argv)
    result = run_header(0, "python ", hang=barrier_without_its_peer())
    result["next_call"] = all_reduce_after()
    result["ok"] = result["hang"]["entries_as_expected"] and result["next_call"]["exact"]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
