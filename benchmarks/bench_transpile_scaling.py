"""Transpile time per unit of source as the source grows: seconds for what tests/test_scaling.py counts in calls.

    python benchmarks/bench_transpile_scaling.py [--repeats 3]

The sources are the test's (more kernels in a file, more terms in one index, more
accesses in one kernel), at larger sizes: kernels from 1,000 to 100,000 lines.
Each size is timed in CPU seconds, the best of ``--repeats`` runs after a warm-up,
in this one interpreter, beside libcst's own parse of the same source (with the
cyclic GC off, as castpile runs it).  libcst's native parser takes time quadratic
in a long chain of ``+``: one C call, which the test's call count cannot see.
The script prints the figures and the spread of each column; it judges nothing.
"""

import argparse
import gc
import sys
import time
from pathlib import Path

import libcst

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_scaling import accesses_in_one_kernel, kernels_in_a_file, terms_in_one_index

from castpile import transpile

SIZES = {
    "kernels_in_a_file": (kernels_in_a_file, (10, 100, 1000), "lines", 100),
    "terms_in_one_index": (terms_in_one_index, (500, 1000, 2000), "terms", 1),
    "accesses_in_one_kernel": (accesses_in_one_kernel, (100, 200, 400), "accesses", 1),
}
"""name -> (source(size, tag), sizes, unit, units in one step of size)."""


def seconds(work, repeats: int) -> float:
    """Best CPU seconds of ``repeats`` runs of ``work()``, the cyclic GC off."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.process_time()
            work()
            best = min(best, time.process_time() - start)
    finally:
        gc.enable()
    return best


def spread(values) -> float:
    return max(values) / min(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    for name, (make, sizes, unit, per_size) in SIZES.items():
        transpile(make(sizes[0], "warmup"), "warmup.py")
        ours, theirs = [], []
        print(f"{name} (us per unit):")
        for size in sizes:
            source, units = make(size, f"s{size}"), size * per_size
            ours.append(seconds(lambda: transpile(source, "scaling.py"), options.repeats) / units * 1e6)
            theirs.append(seconds(lambda: libcst.parse_module(source), options.repeats) / units * 1e6)
            print(f"  {units:>7,} {unit}: transpile {ours[-1]:8.1f}, libcst's parse alone {theirs[-1]:8.1f}")
        print(f"  spread: transpile {spread(ours):.2f}x, libcst's parse {spread(theirs):.2f}x")


if __name__ == "__main__":
    main()
