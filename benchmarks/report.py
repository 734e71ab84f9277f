"""Render the benchmark JSON files as markdown tables (stdout) and PNG plots.

    python benchmarks/report.py docs/data/bench-gpu.json docs/data/bench-collectives.json docs/data/bench-cpu.json \\
        --png-dir docs/data > /tmp/bench-tables.md   # the tables of docs/benchmarks.md, docs/data/bench-gpu.png
"""

import argparse
import json
from pathlib import Path


def gpu_tables(d):
    copy = d["copy"]
    yield f"Single GPU: {d['gpu']}, torch {d['torch']}, triton {d['triton']}, {d['helion']}, {d['date']}; `{d['command']}`\n"
    yield "Ratios are hand-written time / castpile time (>= 0.98 is the target); eager = kernel[grid] launches (bound launches: docs/data/bench-gpu.json).\n"
    yield "| kernel | W | size | hand µs | loop µs | gather µs | loop/hand | gather/hand | noalign hand / loop µs | torch µs | helion µs | graph hand / loop / gather µs | loop TB/s | copy TB/s |"
    yield "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for r in d["rows"]:
        e, g = r["eager_us"], r["graph_us"]
        h, lo, ga = e["hand"], e["castpile_loop"], e["castpile_gather"]
        tb = r["bytes_moved"] / lo / 1e6
        graph = " / ".join(f"{g[k]:.2f}" for k in ("hand", "castpile_loop", "castpile_gather")) if g else ""
        cp = copy[f"W{r['W']}"]["TBps"] if r["size"] == "64M" else None
        yield (
            f"| {r['kernel']} | {r['W']} | {r['size']} | {h:.1f} | {lo:.1f} | {ga:.1f} | {h / lo:.3f} | {h / ga:.3f} | "
            f"{e['hand_noalign']:.1f} / {e['castpile_loop_noalign']:.1f} | {e['torch']:.1f} | "
            f"{e['helion']:.1f} | "
            if "helion" in e
            else f"| {r['kernel']} | {r['W']} | {r['size']} | {h:.1f} | {lo:.1f} | {ga:.1f} | {h / lo:.3f} | {h / ga:.3f} | "
            f"{e['hand_noalign']:.1f} / {e['castpile_loop_noalign']:.1f} | {e['torch']:.1f} | - | "
        ) + f"{graph} | {tb:.2f} | {'' if cp is None else f'{cp:.2f}'} |"


def _cell(times: dict, name: str) -> str:
    return f"{times[name]:.1f}" if name in times else "-"


def coll_tables(d):
    yield f"Two GPUs: {d['gpu']} x{d['world_size']}, torch {d['torch']}, NCCL {d['nccl']}, triton {d['triton']}, {d['date']}; `{d['command']}`\n"
    names = [
        "nccl",
        "symm_mem_one_shot",
        "symm_mem_two_shot",
        "castpile_all_reduce_wrapper",
        "castpile_low_latency_wrapper",
        "castpile_one_shot_wrapper",
        "castpile_one_shot_bound",
        "castpile_two_shot_wrapper",
        "castpile_two_shot_tuned",
    ]
    yield "All-reduce, bf16, eager µs (bus bandwidth of the best castpile in GB/s):\n"
    yield "| bytes | " + " | ".join(names) + " | best castpile GB/s |"
    yield "|---" * (len(names) + 2) + "|"
    for r in d["rows"]:
        e = r["eager_us"]
        best = min(v for k, v in e.items() if k.startswith("castpile_") and not k.startswith(("all_gather", "reduce_")))
        yield f"| {r['bytes']} | " + " | ".join(_cell(e, k) for k in names) + f" | {r['bytes'] / best / 1e3:.0f} |"
    yield "\nAll-reduce inside CUDA graphs, µs per call:\n"
    gn = list(dict.fromkeys(k for r in d["rows"] for k in r["graph_us"]))
    yield "| bytes | " + " | ".join(gn) + " |"
    yield "|---" * (len(gn) + 1) + "|"
    for r in d["rows"]:
        yield f"| {r['bytes']} | " + " | ".join(_cell(r["graph_us"], k) for k in gn) + " |"
    yield "\nAll-gather and reduce-scatter (input bytes per rank), eager µs:\n"
    on = [
        "all_gather_nccl",
        "all_gather_castpile_wrapper",
        "all_gather_castpile_bound",
        "reduce_scatter_nccl",
        "reduce_scatter_castpile_wrapper",
        "reduce_scatter_castpile_bound",
    ]
    yield "| bytes | " + " | ".join(on) + " |"
    yield "|---" * (len(on) + 1) + "|"
    for r in d["rows"]:
        yield f"| {r['bytes']} | " + " | ".join(f"{r['eager_us'][k]:.1f}" for k in on) + " |"


def cpu_tables(d):
    # bench_cpu.py records each case's command and date (--case reruns one case); older files, one for the file.
    whole = f", {d['date']}; `{d['command']}`" if "command" in d else ""
    yield f"Transpiler (CPU, {d['cpus']} cores, Python {d['python']}{whole}), medians of fresh processes:\n"
    yield "| case | seconds | ratio | target | met | run |"
    yield "|---|---|---|---|---|---|"
    for name, r in d["results"].items():
        times = ", ".join(f"{k} {v:.3f}" for k, v in r["seconds"].items())
        run = f"{r['date']}; `{r['command']}`" if "command" in r else ""
        yield f"| {name} | {times} | {r['ratio']:.2f} | {r['target']} | {'yes' if r['met'] else 'no'} | {run} |"


def plots(gpu, coll, out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    labels = [f"{r['kernel']}\nW{r['W']} {r['size']}" for r in gpu["rows"]]
    for key, mark in (("castpile_loop", "o"), ("castpile_gather", "s")):
        axes[0].plot(
            range(len(labels)),
            [r["eager_us"]["hand"] / r["eager_us"][key] for r in gpu["rows"]],
            mark,
            label=f"hand / {key}",
        )
    axes[0].axhline(0.98, color="r", lw=0.8, label="target 0.98")
    axes[0].set_xticks(range(len(labels)), labels, rotation=90, fontsize=6)
    axes[0].set_title(f"single {gpu['gpu']}: speed relative to hand-written Triton")
    axes[0].legend(fontsize=7)
    for name in (
        "nccl",
        "symm_mem_one_shot",
        "symm_mem_two_shot",
        "castpile_all_reduce_wrapper",
        "castpile_two_shot_wrapper",
    ):
        axes[1].loglog(
            [r["bytes"] for r in coll["rows"]], [r["eager_us"][name] for r in coll["rows"]], "o-", label=name
        )
    graphed = ("nccl", "symm_mem_one_shot", "castpile_all_reduce_wrapper")
    for name in graphed:
        axes[1].loglog(
            [r["bytes"] for r in coll["rows"]],
            [r["graph_us"][name] for r in coll["rows"]],
            "x--",
            label=f"{name} (CUDA graph)",
        )
    axes[1].set_xlabel("bytes")
    axes[1].set_ylabel("µs per call")
    axes[1].set_title(f"all-reduce, 2x {coll['gpu']}, {coll['date']}")
    axes[1].legend(fontsize=7)
    fig.text(0.01, 0.01, f"torch {gpu['torch']}, triton {gpu['triton']}, NCCL {coll['nccl']}", fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "bench-gpu.png", dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gpu")
    parser.add_argument("collectives")
    parser.add_argument("cpu")
    parser.add_argument("--png-dir")
    args = parser.parse_args(argv)
    gpu, coll, cpu = (json.loads(Path(p).read_text()) for p in (args.gpu, args.collectives, args.cpu))
    for lines in (gpu_tables(gpu), coll_tables(coll), cpu_tables(cpu)):
        print("\n".join(lines) + "\n")
    if args.png_dir:
        plots(gpu, coll, Path(args.png_dir))


if __name__ == "__main__":
    main()
