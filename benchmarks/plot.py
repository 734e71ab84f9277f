"""PNG plots of the two-GPU benchmarks' results: microseconds against message size, one line per method.

    pip install '.[plot]'
    python benchmarks/plot.py docs/data/bench-rmsnorm.json docs/data/bench-rmsnorm.png
    python benchmarks/plot.py docs/data/bench-moe.json docs/data/bench-moe.png --x tokens
    python benchmarks/plot.py docs/data/bench-tp-gemm.json docs/data/bench-tp-gemm-ag.png --x M \
        --select op=all_gather_matmul

Reads a result file whose ``rows`` each carry the x value (``--x``, default
``bytes``; a row's ``label``, if any, names its tick), ``graph_us`` and/or
``eager_us`` (method -> microseconds), and draws one panel per timing mode, log-log.
``--select KEY=VALUE`` keeps the rows whose KEY is VALUE (files that mix operations; repeat it to keep the rows
that match every one).
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MODES = {"graph_us": "inside CUDA graphs", "eager_us": "eager"}


def plot(result: dict, title: str, path: Path, x_key: str = "bytes", x_label: str | None = None) -> None:
    rows = result["rows"]
    modes = [m for m in MODES if any(m in r for r in rows)]
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 4.5), squeeze=False)
    x = [r[x_key] for r in rows]
    for ax, mode in zip(axes[0], modes):
        methods = list(dict.fromkeys(k for r in rows for k in r.get(mode, {})))
        for method in methods:
            points = [(xv, r[mode][method]) for xv, r in zip(x, rows) if method in r.get(mode, {})]
            ax.plot(*zip(*points), marker="o", label=method)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels(
            [r.get("label") or (_size(r[x_key]) if x_key == "bytes" else str(r[x_key])) for r in rows],
            rotation=45,
            ha="right",
        )
        ax.set_xlabel(x_label or ("bytes per rank" if x_key == "bytes" else f"{x_key} per rank"))
        ax.set_ylabel("µs per call (median)")
        ax.set_title(f"{title}: {MODES[mode]}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _size(nbytes: int) -> str:
    for unit, shift in (("MB", 20), ("KB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):g} {unit}"
    return f"{nbytes} B"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--title", default=None)
    parser.add_argument("--x", default="bytes", help="the rows' key for the x axis")
    parser.add_argument("--xlabel", default=None, help="the x axis' label (default: '<x> per rank')")
    parser.add_argument(
        "--select", action="append", default=[], help="KEY=VALUE: plot only the rows whose KEY is VALUE (repeatable)"
    )
    args = parser.parse_args(argv)
    result = json.loads(args.result.read_text())
    for selected in args.select:
        key, _, value = selected.partition("=")
        result["rows"] = [r for r in result["rows"] if str(r.get(key)) == value]
        if not result["rows"]:
            parser.error(f"no row has {key} = {value}")
    plot(result, args.title or args.result.stem, args.png, args.x, args.xlabel)


if __name__ == "__main__":
    main()
