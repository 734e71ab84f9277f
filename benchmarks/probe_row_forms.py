"""Whether another form of the stacked reduction lifts a row loop out of the slow schedule (one GPU; issue 35).

    python benchmarks/probe_row_forms.py --out docs/data/probe-row-forms.json

The slow schedule (docs/perf-findings.md) is ptxas keeping fewer 128-bit loads in flight.  The forms below are
what castpile could emit for ``tl.sum(bufs[row, cols].to(tl.float32), axis=0)`` without touching a byte outside
the access, each written into the hand twin's loop (hand_row_bodies.py) in place of its ``tl.static_range`` sum:

- ``plain``: the hand twin itself (castpile's output since the rule: the same PTX);
- ``tree``: every buffer's row loaded, then summed pairwise (the loads no longer wait on one accumulator);
- ``barrier``: every row loaded, a ``tl.debug_barrier()``, then summed in stack order (ptxas cannot sink a
  load below the barrier);
- ``tile``: one ``tl.load`` of the (W', BLOCK_D) tile of pointers (W' the next power of two, padded rows masked
  off), reduced over axis 0 (the whole stack in one memory operation, as the gather strategy once did).

bf16, 4096 x 8192, BLOCK_D = D, 8 warps, 4 programs per SM, ``for`` loops of ``--bodies``, W = 2..8.  Each cell
times every form interleaved (``timed_one_gpu``, medians of ``--reps`` rounds, eager and in CUDA graphs) and
records its bytes per second, registers and, from its cubin's SASS, the most 128-bit loads a thread has in
flight in the row loop (diag_row_schedule.loads_in_flight).
"""

import json
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "sweeps"), str(HERE.parent)]

from diag_row_schedule import CUOBJDUMP, loads_in_flight
from sweep_row_bodies import PER_SM, WARPS, D, M, checked_calls, expected, warm
from sweep_row_idioms import one_stack_inputs, one_stack_parser

from harness import GRAPH_CALLS, graphed, load_variant, run_header, timed_one_gpu, write_result
from kernels.row_idioms import function, idiom_source

HAND = HERE / "kernels" / "hand_row_bodies.py"
PEER = "tl.load(_peer(table, {p}, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)"
STACK_SUM = (
    "h = tl.zeros((BLOCK_D,), tl.float32)\n        for p in tl.static_range(W):\n            h += " + PEER.format(p="p")
)
FORMS = ("plain", "tree", "barrier", "tile")


def form_lines(form: str, W: int) -> list[str]:
    """The statements that leave the stack's fp32 row sum in ``h``, written as ``form`` for ``W`` buffers.

    >>> form_lines("tree", 3)[-2:]
    ['t0 = v0 + v1', 'h = t0 + v2']
    """
    loads = [f"v{p} = {PEER.format(p=p)}" for p in range(W)]
    if form == "barrier":
        return [*loads, "tl.debug_barrier()", "h = " + " + ".join(f"v{p}" for p in range(W))]
    if form == "tree":
        names, lines = [f"v{p}" for p in range(W)], list(loads)
        while len(names) > 2:
            pairs = [names[i : i + 2] for i in range(0, len(names), 2)]
            names = []
            for pair in pairs:
                if len(pair) == 1:
                    names.append(pair[0])
                    continue
                names.append(f"t{len(lines) - W}")
                lines.append(f"{names[-1]} = {pair[0]} + {pair[1]}")
        return [*lines, "h = " + " + ".join(names)]
    padded = triton.next_power_of_2(W)
    return [
        f"pp = tl.arange(0, {padded})",
        f"pt = tl.multiple_of(tl.load(table + pp, mask=pp < {W}, other=0).to(tl.pointer_type(ex.dtype.element_ty)), 16)",
        (
            f"h = tl.sum(tl.load(pt[:, None] + (row * D + cols)[None, :], mask=(pp < {W})[:, None] & mask[None, :],"
            " other=0).to(tl.float32), axis=0)"
        ),
    ]


def module_text(bodies, worlds) -> tuple[str, dict]:
    """One module holding every body's ``for`` kernel in every form and W, and the kernels' names by cell."""
    text = HAND.read_text()
    kernels, names = [], {}
    for body in bodies:
        source = function(text, f"hand_{body}_for")
        for W in worlds:
            for form in FORMS:
                suffix = f"{form}_W{W}"
                edits = [] if form == "plain" else [(STACK_SUM, "\n        ".join(form_lines(form, W)))]
                kernels.append(idiom_source(source, edits, suffix))
                names[body, W, form] = f"hand_{body}_for_{suffix}"
    return text[: text.index("@triton.jit\ndef hand_")] + "\n\n".join(kernels), names


def sass_loads(compiled, folder: Path) -> int:
    """The most 128-bit loads a thread has in flight in ``compiled``'s row loop (its cubin through cuobjdump)."""
    cubin = folder / "probe.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    return loads_in_flight(sass)["max_128_bit_loads_in_flight"]


def main(argv=None):
    args = one_stack_parser(__doc__, "docs/data/probe-row-forms.json").parse_args(argv)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "probe_row_forms"
    folder.mkdir(parents=True, exist_ok=True)
    text, names = module_text(args.bodies, args.worlds)
    path = folder / "row_forms_hand.py"
    path.write_text(text)
    with ProcessPoolExecutor(args.jobs) as pool:
        failed = [e for e in pool.map(warm, [(str(path), n, W, "bf16") for (_, W, _), n in names.items()]) if e]
    for e in failed:
        print("compile failed:", e, flush=True)
    module = load_variant("row_forms_hand", text, folder)
    dev = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = run_header(dev, launcher="python ", M=M, D=D, BLOCK_D=D, num_warps=WARPS, reps=args.reps,
                        graph_calls=GRAPH_CALLS, programs=PER_SM * sms, forms=FORMS, failed=failed, rows=[])  # fmt: skip
    dt = torch.bfloat16
    for W in args.worlds:
        torch.cuda.empty_cache()
        s0, res, w, out, stats, kargs = one_stack_inputs(W, dev, dt)
        for body in args.bodies:
            want, _ = expected(body, (s0, s0), res, w)
            kernels = {form: getattr(module, names[body, W, form]) for form in FORMS}
            fns, errors, regs = checked_calls(kernels, (PER_SM * sms,), kargs, W, (out, want), (stats, None))
            loads = {
                form: sass_loads(kernels[form].warmup(*kargs, W=W, BLOCK_D=D, num_warps=WARPS, grid=(1,)), folder)
                for form in fns
            }
            eager = timed_one_gpu(fns, 20, args.reps)
            graph = {
                k: t / GRAPH_CALLS
                for k, t in timed_one_gpu({k: graphed(f) for k, f in fns.items()}, 3, args.reps).items()
            }
            planes = W + 1 + (1 if body.startswith("res") else 0)
            moved = planes * M * D * dt.itemsize + (D * dt.itemsize if "weight" in body else 0)
            row = {
                "body": body, "W": W, "bytes_moved": moved, "eager_us": eager, "graph_us": graph,
                "graph_TBps": {k: moved / t / 1e6 for k, t in graph.items()},
                "eager_TBps": {k: moved / t / 1e6 for k, t in eager.items()},
                "plain_over": {k: graph["plain"] / t for k, t in graph.items()},
                "registers": regs, "loads_in_flight": loads, "max_abs_error": errors,
            }  # fmt: skip
            result["rows"].append(row)
            print(json.dumps({"body": body, "W": W} | {
                "TBps": {k: round(v, 2) for k, v in row["graph_TBps"].items()}, "regs": regs, "fly": loads,
                "err": {k: (round(v, 4) if isinstance(v, float) else v[:80]) for k, v in errors.items()},
            }), flush=True)  # fmt: skip
            write_result(args.out, result)


if __name__ == "__main__":
    main()
