"""Rows read in column blocks around a stacked reduction against their hand twins (one GPU, W buffers on it).

    python benchmarks/sweeps/sweep_column_blocks.py --out docs/data/bench-sweep-column-blocks.json

Kernels: benchmarks/kernels/column_blocks.py (the layer-norm tutorial's ``for off in range(0, D, BLOCK_D)`` loops
inside a persistent row loop; ``sum`` and the two-pass ``norm``; 1-D and 2-D bindings), transpiled here under
both strategies (``castpile_loop``, ``castpile_gather``), their hand twins (``hand``), and for the 1-D binding
``bounded``: the loop strategy's text with the bounds castpile emitted before the mask rule proved column blocks
(``row_bodies_spec.before_rule``).  bf16, M x D = 4096 x 8192, ``--blocks`` BLOCK_D, 8 warps, 4 programs per SM,
W = 2..8.  Each cell times its competitors interleaved in one run (``timed_one_gpu``, medians of ``--reps``
rounds, eager and in CUDA graphs) and writes bytes per second (each stack read once a pass, the output once)
beside hand time / each competitor's time.
"""

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent.parent)]

from sweep_row_bodies import PER_SM, D, M, checked_calls, expected, warm
from sweep_row_idioms import one_stack_inputs, one_stack_parser, printed, timed_cell

import castpile
from harness import GRAPH_CALLS, load_variant, run_header, write_result
from kernels.row_bodies_spec import before_rule

SOURCE = HERE.parent / "kernels" / "column_blocks.py"
BODIES, BINDINGS = ("sum", "norm"), ("1d", "2d")


def modules(folder: Path) -> dict[str, Path]:
    """The kernels' modules: each strategy's transpiled text, and the loop strategy's with the old bounds."""
    paths = {}
    for strategy in castpile.STRATEGIES:
        path = folder / f"column_blocks_{strategy}.py"
        path.write_bytes(castpile.transpile(SOURCE.read_bytes(), str(path), strategy=strategy))
        paths[f"castpile_{strategy}"] = path
    paths["bounded"] = folder / "column_blocks_bounded.py"
    paths["bounded"].write_text(before_rule(paths["castpile_loop"].read_text()))
    return paths


def competitors(body: str, binding: str) -> dict[str, tuple[str, str]]:
    """label -> (module label, kernel name) of one cell."""
    found = {label: (label, f"cp_{body}_{binding}") for label in ("castpile_loop", "castpile_gather")}
    found["hand"] = ("castpile_loop", f"hand_{body}")  # plain Triton, left as it was
    if binding == "1d":
        found["bounded"] = ("bounded", f"cp_{body}_1d")
    return found


def main(argv=None):
    parser = one_stack_parser(__doc__, "docs/data/bench-sweep-column-blocks.json")
    parser.add_argument("--blocks", nargs="+", type=int, default=[1024, 2048, 4096])
    args = parser.parse_args(argv)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "sweep_column_blocks"
    folder.mkdir(parents=True, exist_ok=True)
    paths = modules(folder)
    names = {(b, bd): competitors(b, bd) for b in BODIES for bd in BINDINGS}
    jobs = sorted(
        {(str(paths[m]), n, W, "bf16", block) for W in args.worlds for block in args.blocks
         for pair in names.values() for m, n in pair.values()}
    )  # fmt: skip
    with ProcessPoolExecutor(args.jobs) as pool:
        failed = [e for e in pool.map(warm, jobs) if e]
    for e in failed:
        print("compile failed:", e, flush=True)
    loaded = {label: load_variant(path.stem, path.read_text(), folder) for label, path in paths.items()}
    dev = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = run_header(dev, launcher="python ", M=M, D=D, blocks=args.blocks, num_warps=8, reps=args.reps,
                        graph_calls=GRAPH_CALLS, programs=PER_SM * sms, failed=failed, rows=[])  # fmt: skip
    dt = torch.bfloat16
    for W in args.worlds:
        torch.cuda.empty_cache()
        s0, res, w, out, stats, kargs = one_stack_inputs(W, dev, dt)
        want = {"sum": s0.float().sum(0), "norm": expected("none", (s0, s0), res, w)[0]}
        for block in args.blocks:
            for (body, binding), pair in names.items():
                kernels = {label: getattr(loaded[m], n) for label, (m, n) in pair.items()}
                grid = (PER_SM * sms,)
                fns, errors, regs = checked_calls(kernels, grid, kargs, W, (out, want[body]), (stats, None), block)
                moved = ((2 if body == "norm" else 1) * W + 1) * M * D * dt.itemsize
                row = {"body": body, "binding": binding, "BLOCK_D": block, "W": W} | timed_cell(fns, args.reps, moved)
                row |= {"registers": regs, "max_abs_error": errors}
                result["rows"].append(row)
                printed(row, ("body", "binding", "BLOCK_D", "W"))
                write_result(args.out, result)


if __name__ == "__main__":
    main()
