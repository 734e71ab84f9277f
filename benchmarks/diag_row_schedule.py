"""Why a persistent row loop around a stacked reduction runs in a fast or a slow schedule (one GPU; issue 35).

    python benchmarks/diag_row_schedule.py --out docs/data/diag-row-schedule.json --asm-dir OUT/asm
    ncu ... python benchmarks/diag_row_schedule.py --ncu        # each chosen kernel once, for Nsight Compute

Kernels: bodies of benchmarks/kernels/row_bodies.py (``--bodies``) as castpile wrote them before issue 35's rule
(``cur``: the lowering at 7e43397, which the committed docs/data/diag-row-schedule.json measured; rebuilt from today's
output by ``row_bodies_spec.before_rule``) and in text variants of that output that change one thing each, against
the hand twins of hand_row_bodies.py (the lowering with the rule, docs/language.md, is probe ``A1`` without the
``cols >= 0``, and equals the hand twin's PTX: tests/test_index_rule.py):

* ``A``: the row's scalar offset added to the buffer's pointer first (``peer + D*row`` then ``+ cols``, as
  hand code writes ``ptr + row * D + cols``) instead of ``peer + (D*row + cols)``;
* ``B``: no bounds on the row (2-D: ``(cols >= 0) & (cols < D)`` only; 1-D: no bounds mask);
* ``AB``: both (the hand twin's access; not a correct lowering of ``shape=``, a probe);
* ``C``: ``A`` with the row's bounds kept off the lanes: 2-D, a branch on ``(row >= 0) & (row < M)`` around the
  reduction and ``(cols >= 0) & (cols < D)`` on the lanes; 1-D, ``(cols >= -(D*row)) & (cols < n - D*row)``.

For every M x D shape, W and kernel: graph and eager medians (``timed_one_gpu``, competitors of a cell
interleaved in one run), bytes per second (the stack, the residual, the output once each, the weight row
once), registers, and the blocks per SM the driver allows (cuOccupancyMaxActiveBlocksPerMultiprocessor), with
the grid at 4 programs per SM and, where fewer fit, also at the blocks that fit (``fit`` rows).
"""

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from harness import GRAPH_CALLS, graphed, load_variant, run_header, timed_one_gpu, write_result
from kernels.row_bodies_spec import before_rule

GENERATED = HERE / "kernels" / "generated" / "row_bodies_loop.py"
HAND = HERE / "kernels" / "hand_row_bodies.py"
CALL = re.compile(r'_castpile_reduce_loop\((\w+), W, None, ex, D\*row \+ cols, (.*?), "sum", ')
GUARDED = '''

@triton.jit
def _cp_guarded(guard, src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                other=None, steps: tl.constexpr = tl.constexpr(""), operands=None, align: tl.constexpr = None, base=None):
    """Probe C: the reduction only where ``guard`` (a scalar) holds, else 0 (fp32 sums only)."""
    acc = tl.zeros(offs.shape, tl.float32)
    if guard:
        acc = _castpile_reduce_loop(src, count, smask, example, offs, bounds, OP, mask, other, steps=steps,
                                    operands=operands, align=align, base=base)
    return acc
'''
VARIANTS = ("cur", "A", "B", "AB", "C")
#: Probe A1 (timed by sweeps/sweep_row_bodies.py, not here): A, and the 2-D row's bounds without ``row >= 0``.
PROBES = ("A1",)
SHAPES = {"4096x8192": (4096, 8192), "32768x4096": (32768, 4096)}
PER_SM = 4
CUOBJDUMP = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")
WARPS = 8


def variant_text(text: str, variant: str) -> str:
    """The generated module (as castpile writes it now) with every stack reduction's call changed as ``variant``
    says, from the lowering before issue 35's rule (``cur``; the helpers' ``base=`` carries the row offset)."""
    text = before_rule(text)
    if variant == "cur":
        return text
    text += GUARDED

    def call(m):
        src, bounds = m.group(1), m.group(2)
        two_d = bounds.startswith("(row >= 0)")
        cols_only = "(cols >= 0) & (cols < D)"
        if two_d:
            lanes = {"A": bounds, "A1": "(row < M) & " + cols_only}.get(variant, cols_only)
        else:
            n = re.search(r"< (\w+)\)$", bounds).group(1)
            lanes = {
                "A": bounds,
                "A1": bounds,
                "B": "None",
                "AB": "None",
                "C": f"(cols >= -(D*row)) & (cols < {n} - D*row)",
            }[variant]
        offs = "D*row + cols" if variant == "B" else "cols"
        head = "_castpile_reduce_loop("
        if variant == "C" and two_d:
            head = "_cp_guarded((row >= 0) & (row < M), "
        base = "" if variant == "B" else "base=D*row, "
        return f'{head}{src}, W, None, ex, {offs}, {lanes}, "sum", {base}'

    out, count = CALL.subn(call, text)
    assert count > 0
    # keyword arguments must follow the positional ones that castpile writes after "sum"
    out = re.sub(r'"sum", base=D\*row, ((?:mask|[^=,()]+), 0, )', r'"sum", \1base=D*row, ', out)
    return out


def modules(folder: Path) -> dict:
    text = GENERATED.read_text()
    paths = {}
    for v in VARIANTS:
        path = folder / f"row_bodies_{v}.py"
        path.write_text(variant_text(text, v))
        paths[v] = path
    paths["hand"] = HAND
    return paths


def kernel_names(bodies, loops, bindings) -> list[tuple[str, str, str]]:
    """(module key, kernel name, label) of every kernel timed."""
    out = []
    for body in bodies:
        for loop in loops:
            out.append(("hand", f"hand_{body}_{loop}", f"hand_{body}_{loop}"))
            for binding in bindings:
                name = f"cp_{body}_{loop}_{binding}_to"
                for v in VARIANTS if loop == "for" else ("cur",):
                    out.append((v, name, f"{v}_{body}_{loop}_{binding}"))
    return out


def _warm(job):
    """Compile one kernel into the shared Triton cache (a worker process)."""
    path, name, W, M, D, block_d = job
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    bf, i64, f32 = torch.bfloat16, torch.int64, torch.float32
    args = (bf, i64, i64, bf, bf, bf, f32, M, D, 1e-6, 0.5)
    try:
        getattr(module, name).warmup(*args, W=W, BLOCK_D=block_d, num_warps=WARPS, grid=(1,))
        return None
    except Exception as exc:
        return f"{name} W{W}: {type(exc).__name__}: {str(exc)[:300]}"


def occupancy(kernel, warps: int) -> int:
    """Blocks of ``warps`` warps per SM that the driver allows for the compiled ``kernel``."""
    cuda = ctypes.CDLL("libcuda.so.1")
    blocks = ctypes.c_int()
    rc = cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks), ctypes.c_void_p(kernel.function), warps * 32, ctypes.c_size_t(kernel.metadata.shared)
    )
    return blocks.value if rc == 0 else -rc


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/diag-row-schedule.json")
    parser.add_argument("--asm-dir", default=None, help="write PTX and SASS of the --asm kernels here")
    parser.add_argument("--asm", nargs="*", default=["res_weight_for_2d", "res_weight_hoisted_for_2d"])
    parser.add_argument("--bodies", nargs="+", default=["none", "res_weight", "res_weight_hoisted"])
    parser.add_argument("--loops", nargs="+", default=["for", "while"])
    parser.add_argument("--bindings", nargs="+", default=["2d", "1d"])
    parser.add_argument("--worlds", nargs="+", type=int, default=[2, 3, 4, 8])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--reps", type=int, default=11)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--ncu", action="store_true", help="run the --ncu-kernels once each (W 2 and 4, 4096x8192)")
    parser.add_argument(
        "--ncu-kernels",
        nargs="*",
        default=["cur_res_weight_for_2d", "hand_res_weight_for", "C_res_weight_for_2d", "AB_res_weight_for_2d"],
    )
    args = parser.parse_args(argv)
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "diag_row_schedule"
    folder.mkdir(parents=True, exist_ok=True)
    paths = modules(folder)
    names = kernel_names(args.bodies, args.loops, args.bindings)
    if args.ncu:
        names = [n for n in names if n[2] in args.ncu_kernels]
        args.worlds, args.shapes = [2, 4], ["4096x8192"]
    jobs = [
        (str(paths[key]), name, W, *SHAPES[s], SHAPES[s][1])
        for s in args.shapes
        for W in args.worlds
        for key, name, _ in {(k, n, "") for k, n, _ in names}
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        failed = [e for e in pool.map(_warm, jobs) if e]
    for e in failed:
        print("compile failed:", e, flush=True)
    mods = {
        k: load_variant(f"row_bodies_{k}", Path(p).read_text(), folder) if k != "hand" else None
        for k, p in paths.items()
    }
    import importlib

    mods["hand"] = importlib.import_module("kernels.hand_row_bodies")
    dev = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = run_header(
        dev,
        launcher="",
        per_sm=PER_SM,
        num_warps=WARPS,
        reps=args.reps,
        graph_calls=GRAPH_CALLS,
        variants=__doc__.split("* ``A``")[1].split("For every")[0].strip(),
        rows=[],
        failed=failed,
    )
    result["command"] = "python " + " ".join(sys.argv)
    asm_dir = Path(args.asm_dir) if args.asm_dir else None
    asm_labels = {f"{v}_{a}" for a in args.asm for v in VARIANTS} | {
        f"hand_{a.rsplit('_', 2)[0]}_for" for a in args.asm
    }
    for s in args.shapes:
        M, D = SHAPES[s]
        for W in args.worlds:
            bufs = [torch.randn(M, D, device=dev, dtype=torch.bfloat16) for _ in range(W)]
            table = torch.tensor([b.data_ptr() for b in bufs], device=dev, dtype=torch.int64)
            res = torch.randn(M, D, device=dev, dtype=torch.bfloat16)
            w = torch.randn(D, device=dev, dtype=torch.bfloat16)
            out = torch.empty(M, D, device=dev, dtype=torch.bfloat16)
            stats = torch.empty(M, device=dev, dtype=torch.float32)
            summed = torch.stack(bufs).float().sum(0)
            kernel_args = (bufs[0], table, table, res, w, out, stats, M, D, 1e-6, 0.5)
            fns, info, fit_fns = {}, {}, {}
            for key, name, label in names:
                fn = getattr(mods[key], name)
                grid = (PER_SM * sms,)
                launch = lambda fn=fn, grid=grid: fn[grid](*kernel_args, W=W, BLOCK_D=D, num_warps=WARPS)  # noqa: E731
                out.zero_()
                try:
                    kern = launch()  # the compiled kernel
                    torch.cuda.synchronize()
                except Exception as exc:  # reported, not timed
                    info[label] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                    continue
                body = name.split("_", 1)[1].rsplit("_", 3 if key != "hand" else 1)[0]
                h = summed + res.float() if body.startswith("res") else summed
                expect = h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6)
                if "weight" in body:
                    expect = expect * w.float()
                blocks = occupancy(kern, WARPS)
                info[label] = {
                    "max_abs_error": float((out.float() - expect).abs().max()),
                    "registers": kern.n_regs,
                    "spills": kern.n_spills,
                    "blocks_per_sm": blocks,
                }
                fns[label] = launch
                if 0 < blocks < PER_SM:
                    fit = (blocks * sms,)
                    fit_fns[label + "@fit"] = lambda fn=fn, grid=fit: fn[grid](
                        *kernel_args, W=W, BLOCK_D=D, num_warps=WARPS
                    )
                if asm_dir is not None and label in asm_labels and W in (2, 4):
                    asm_dir.mkdir(parents=True, exist_ok=True)
                    stem = f"{label}_W{W}_{s}"
                    (asm_dir / f"{stem}.ptx").write_text(kern.asm["ptx"])
                    cubin = asm_dir / f"{stem}.cubin"
                    cubin.write_bytes(kern.asm["cubin"])
                    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True)
                    (asm_dir / f"{stem}.sass").write_text(sass.stdout or sass.stderr)
                    cubin.unlink()
            if args.ncu:
                for fn in fns.values():
                    for _ in range(2):
                        fn()
                torch.cuda.synchronize()
                continue
            everything = {**fns, **fit_fns}
            eager = timed_one_gpu(everything, 20, args.reps)
            graphs = {k: graphed(f) for k, f in everything.items()}
            graph = {k: t / GRAPH_CALLS for k, t in timed_one_gpu(graphs, 3, args.reps).items()}
            moved = (W + 2) * M * D * 2 + D * 2
            row = {
                "shape": s,
                "M": M,
                "D": D,
                "W": W,
                "programs": PER_SM * sms,
                "bytes_moved": moved,
                "kernels": info,
                "graph_us": graph,
                "eager_us": eager,
                "graph_TBps": {k: moved / t / 1e6 for k, t in graph.items()},
            }
            result["rows"].append(row)
            print(
                json.dumps(
                    {
                        "shape": s,
                        "W": W,
                        "TBps": {k: round(v, 2) for k, v in row["graph_TBps"].items()},
                        "regs": {k: v["registers"] for k, v in info.items()},
                    }
                ),
                flush=True,
            )
            write_result(args.out, result)
            del graphs, fns, fit_fns, everything, bufs, table, res, out
            torch.cuda.empty_cache()


# -- on the CPU: the SASS of the same kernels, how many loads each thread has in flight ------------------------


def _sass_lines(sass: str) -> list[tuple[int, str]]:
    return [
        (int(m.group(1), 16), m.group(2).strip())
        for m in re.finditer(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", sass, flags=re.M)
    ]


def loads_in_flight(sass: str) -> dict:
    """The row loop of a kernel's SASS (its longest backward branch): instructions, 128-bit loads, and the most
    loads issued and not yet read (a load is read at the first instruction whose sources name a register it
    writes) at any point in one pass over the loop body, in program order."""
    ins = _sass_lines(sass)
    spans = []
    for addr, text in ins:
        m = re.search(r"\bBRA\s+(?:`\()?(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < addr:
            spans.append((int(m.group(1), 16), addr))
    lo, hi = max(spans, key=lambda s: s[1] - s[0])
    body = [t for a, t in ins if lo <= a <= hi]
    pending, most, order = {}, 0, []
    for i, text in enumerate(body):
        text = re.sub(r"^@!?U?P\w+\s+", "", text)
        opcode, _, operands = text.partition(" ")
        if opcode.startswith("LDG"):
            first = int(re.search(r"R(\d+)", operands).group(1))
            width = {"128": 4, "64": 2}.get(next((w for w in ("128", "64") if w in opcode), ""), 1)
            pending[i] = set(range(first, first + width))
            most = max(most, sum(1 for k in pending if "128" in body[k]))
            order.append("L" if width == 4 else "p")
            continue
        sources = operands if opcode.startswith("STG") else operands.partition(",")[2]
        read = {int(r) for r in re.findall(r"\bR(\d+)\b", sources)}
        for k in [k for k, regs in pending.items() if regs & read]:
            del pending[k]
            order.append("u")
    return {
        "loop_instructions": len(body),
        "ldg_128": sum(1 for t in body if "LDG.E.128" in t),
        "max_128_bit_loads_in_flight": most,
        "order": "".join(order),
    }


def sass_stats(argv=None):
    """``python benchmarks/diag_row_schedule.py --sass-stats OUT.json``: compile the 4096 x 8192 kernels for sm_90 on
    the CPU (triton.compile; the same SASS as the GPU's JIT wrote) and count their loads in flight."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sass-stats", required=True)
    parser.add_argument("--bodies", nargs="+", default=["res_weight", "res_weight_hoisted"])
    parser.add_argument("--worlds", nargs="+", type=int, default=[2, 3, 4, 8])
    args = parser.parse_args(argv)
    import importlib.util

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "diag_row_schedule"
    folder.mkdir(parents=True, exist_ok=True)
    paths = modules(folder)
    rows = []
    for key, name, label in kernel_names(args.bodies, ["for"], ["2d"]):
        spec = importlib.util.spec_from_file_location(f"sass_{key}", paths[key])
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        fn = getattr(module, name)
        types = {"table": "*i64", "table2": "*i64", "stats": "*fp32", "M": "i32", "D": "i32", "eps": "fp32"}
        types["alpha"] = "fp32"
        sig = {a: "constexpr" if a in ("W", "BLOCK_D") else types.get(a, "*bf16") for a in fn.arg_names}
        attrs = {(i,): [["tt.divisibility", 16]] for i, a in enumerate(fn.arg_names) if sig[a][0] == "*" or a in "MD"}
        for W in args.worlds:
            src = ASTSource(fn, sig, {"W": W, "BLOCK_D": 8192}, attrs)
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": WARPS})
            cubin = folder / f"{label}_W{W}.cubin"
            cubin.write_bytes(compiled.asm["cubin"])
            sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True).stdout
            usage = subprocess.run([CUOBJDUMP, "-res-usage", str(cubin)], capture_output=True, text=True).stdout
            rows.append(
                {
                    "kernel": label,
                    "W": W,
                    "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
                    **loads_in_flight(sass),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    head = {"command": "python " + " ".join(sys.argv), "triton": triton.__version__, "target": "sm_90"}
    write_result(args.sass_stats, {**head, "shape": "4096x8192", "BLOCK_D": 8192, "num_warps": WARPS, "rows": rows})


if __name__ == "__main__":
    if "--sass-stats" in sys.argv:
        sass_stats()
    else:
        main()
