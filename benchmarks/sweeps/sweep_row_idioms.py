"""The mask rule's idioms and Triton's pipelining, in 1-D row loops around a stacked reduction, against hand twins (one GPU).

    python benchmarks/sweeps/sweep_row_idioms.py --out docs/data/bench-sweep-row-idioms.json

Kernels: the ``for`` 1-D, cast-before-the-reduction kernels of benchmarks/kernels/row_bodies.py for ``--bodies``,
and their hand twins (hand_row_bodies.py), each written plain and in every spelling of row_idioms.py, the same
text edit made to both (``IDIOMS``: what docs/language.md's third rule proves; ``PIPELINED``: ``tl.range(...,
num_stages=n)``); castpile's are transpiled here (the loop strategy).  bf16, M x D = 4096 x 8192, BLOCK_D = D,
8 warps, 4 programs per SM (``row guarded by if``: one program per row), W = 2..8.  Each cell times castpile and
hand interleaved in one run (``timed_one_gpu``, medians of ``--reps`` rounds, eager and in CUDA graphs), and
writes bytes per second beside hand time / castpile time; a kernel that does not compile or launch is reported.
"""

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent.parent)]

from sweep_row_bodies import ALPHA, EPS, PER_SM, WARPS, D, M, checked_calls, expected, warm

import castpile
from harness import GRAPH_CALLS, graphed, load_variant, run_header, timed_one_gpu, write_result
from kernels.row_idioms import IDIOMS, PIPELINED, function, idiom_source

KERNELS = HERE.parent / "kernels"
SPELLINGS = {"plain": (), **IDIOMS, **PIPELINED}
HEAD = "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n\n\n"


def modules(bodies, folder: Path) -> tuple[Path, Path, dict]:
    """The castpile (transpiled) and hand modules of every body and spelling, and the kernels' names in them."""
    cp_text, hand_text = (KERNELS / "row_bodies.py").read_text(), (KERNELS / "hand_row_bodies.py").read_text()
    ours, hands, names = [], [], {}
    for body in bodies:
        for k, (spelling, edits) in enumerate(SPELLINGS.items()):
            suffix = f"s{k}"
            ours.append(idiom_source(function(cp_text, f"cp_{body}_for_1d_to"), edits, suffix))
            hands.append(idiom_source(function(hand_text, f"hand_{body}_for"), edits, suffix))
            names[body, spelling] = (f"cp_{body}_for_1d_to_{suffix}", f"hand_{body}_for_{suffix}")
    cp_path, hand_path = folder / "row_idioms_castpile.py", folder / "row_idioms_hand.py"
    cp_path.write_bytes(castpile.transpile((HEAD + "\n\n".join(ours)).encode(), str(cp_path), strategy="loop"))
    hand_path.write_text(hand_text[: hand_text.index("@triton.jit\ndef hand_")] + "\n\n".join(hands))
    return cp_path, hand_path, names


def one_stack_parser(doc: str, out: str) -> argparse.ArgumentParser:
    """The options of a one-GPU run over one-stack row kernels: ``--out`` (default ``out``), ``--bodies``,
    ``--worlds``, ``--reps`` and ``--jobs``; ``doc``'s first line describes it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", default=out)
    parser.add_argument("--bodies", nargs="+", default=["none", "res_after", "res_weight_hoisted"])
    parser.add_argument("--worlds", nargs="+", type=int, default=list(range(2, 9)))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    return parser


def one_stack_inputs(W: int, dev, dt) -> tuple:
    """Random inputs of the row kernels with one stack of ``W`` buffers (``table2`` is ``table``): the stacked
    buffers ``s0``, ``res``, ``w``, ``out``, ``stats`` and the kernels' positional arguments.  The table's
    addresses are those of ``s0``'s buffers, which the arguments' ``s0[0]`` keeps alive (addresses of buffers
    freed once stacked would be reused, or given back by a CUDA graph's capture: an illegal access)."""
    s0 = torch.randn(W, M, D, device=dev, dtype=dt)
    table = torch.tensor([b.data_ptr() for b in s0], device=dev, dtype=torch.int64)
    res, w = torch.randn(M, D, device=dev, dtype=dt), torch.randn(D, device=dev, dtype=dt)
    out, stats = torch.empty(M, D, device=dev, dtype=dt), torch.empty(M, device=dev, dtype=torch.float32)
    return s0, res, w, out, stats, (s0[0], table, table, res, w, out, stats, M, D, EPS, ALPHA)


def timed_cell(fns: dict, reps: int, moved: int) -> dict:
    """One cell's timings of ``fns`` (label -> call, ``hand`` among them), eager and in CUDA graphs (medians of
    ``reps`` rounds, interleaved), for ``moved`` bytes a call: microseconds, TB/s, and hand time / each other
    label's time."""
    eager = timed_one_gpu(fns, 20, reps) if fns else {}
    graphs = {k: graphed(f) for k, f in fns.items()}
    graph = {k: t / GRAPH_CALLS for k, t in timed_one_gpu(graphs, 3, reps).items()} if fns else {}
    both = (("graph", graph), ("eager", eager))
    return {
        "bytes_moved": moved, "eager_us": eager, "graph_us": graph,
        "graph_TBps": {k: moved / t / 1e6 for k, t in graph.items()},
        "eager_TBps": {k: moved / t / 1e6 for k, t in eager.items()},
        "hand_over": {f"{mode}_{k}": times["hand"] / t for mode, times in both if "hand" in times
                      for k, t in times.items() if k != "hand"},
    }  # fmt: skip


def printed(row: dict, keys) -> None:
    """A line of progress: ``row``'s ``keys``, its graph TB/s, its ratios and its errors."""
    print(json.dumps({k: row[k] for k in keys} | {
        "TBps": {k: round(v, 2) for k, v in row["graph_TBps"].items()},
        "ratio": {k: round(v, 3) for k, v in row["hand_over"].items()},
        "err": {k: (round(v, 4) if isinstance(v, float) else v[:80]) for k, v in row["max_abs_error"].items()},
    }), flush=True)  # fmt: skip


def main(argv=None):
    args = one_stack_parser(__doc__, "docs/data/bench-sweep-row-idioms.json").parse_args(argv)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "sweep_row_idioms"
    folder.mkdir(parents=True, exist_ok=True)
    cp_path, hand_path, names = modules(args.bodies, folder)
    jobs = [
        (str(p), n, W, "bf16")
        for W in args.worlds
        for pair in names.values()
        for p, n in zip((cp_path, hand_path), pair)
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        failed = [e for e in pool.map(warm, jobs) if e]
    for e in failed:
        print("compile failed:", e, flush=True)
    ours, hand = (
        load_variant("row_idioms_castpile", cp_path.read_text(), folder),
        load_variant("row_idioms_hand", hand_path.read_text(), folder),
    )
    dev = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = run_header(dev, launcher="python ", M=M, D=D, BLOCK_D=D, num_warps=WARPS, reps=args.reps,
                        graph_calls=GRAPH_CALLS, programs=PER_SM * sms, failed=failed, rows=[])  # fmt: skip
    dt = torch.bfloat16
    for W in args.worlds:
        torch.cuda.empty_cache()
        s0, res, w, out, stats, kargs = one_stack_inputs(W, dev, dt)
        for body in args.bodies:
            want, _ = expected(body, (s0, s0), res, w)
            for spelling in SPELLINGS:
                grid = (M,) if spelling == "row guarded by if" else (PER_SM * sms,)
                kernels = dict(
                    zip(("castpile", "hand"), (getattr(m, n) for m, n in zip((ours, hand), names[body, spelling])))
                )
                fns, errors, regs = checked_calls(kernels, grid, kargs, W, (out, want), (stats, None))
                planes = W + 1 + (1 if body.startswith("res") else 0)
                moved = planes * M * D * dt.itemsize + (D * dt.itemsize if "weight" in body else 0)
                row = {"body": body, "spelling": spelling, "W": W} | timed_cell(fns, args.reps, moved)
                row |= {"registers": regs, "max_abs_error": errors}
                result["rows"].append(row)
                printed(row, ("body", "spelling", "W"))
                write_result(args.out, result)


if __name__ == "__main__":
    main()
