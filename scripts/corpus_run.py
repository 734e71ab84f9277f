"""Real-world corpus: every .py file of installed packages, with ``import castpile`` appended,
must come back byte-identical (the file uses castpile but no multicast tensor).

    .venv/bin/python scripts/corpus_run.py [triton torch sympy] [--jobs N] [--strategy loop]

Prints one line per failure and a summary per package (files, identical, rejected as
invalid Python, failures, seconds); exit 1 if any file failed.  A file that Python
itself cannot parse must be rejected with a diagnostic, never crash.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import multiprocessing
import sys
import time
import warnings
from pathlib import Path


def package_files(name: str) -> list[Path]:
    """Every ``.py`` file under the installed package ``name``, sorted."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name} is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(root.rglob("*.py"))


def with_import(data: bytes) -> bytes:
    """``data`` with an ``import castpile`` line appended."""
    if data and not data.endswith((b"\n", b"\r")):
        data += b"\n"
    return data + b"import castpile\n"


def check_file(args: tuple[str, str]) -> tuple[str, str, str]:
    """(path, verdict, detail): identical, rejected (invalid Python, diagnosed) or a failure."""
    path, strategy = args
    from castpile import TranspileError, transpile

    data = with_import(Path(path).read_bytes())
    try:
        out = transpile(data, path, strategy=strategy)
    except TranspileError as exc:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return path, "rejected", exc.diagnostics[0].render().splitlines()[0]
        return path, "failure", "diagnosed valid Python: " + exc.render().splitlines()[0]
    except BaseException as exc:  # any crash is a castpile bug
        return path, "failure", f"internal error: {type(exc).__name__}: {exc}"[:300]
    if out != data:
        return path, "failure", "output differs from input"
    return path, "identical", ""


def run(package: str, jobs: int, strategy: str, every: int = 1) -> dict:
    """Check ``package``'s files (every ``every``-th one); the figures."""
    files = [str(p) for p in package_files(package)][::every]
    start = time.perf_counter()
    counts = {"identical": 0, "rejected": 0, "failure": 0}
    failures = []
    with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=200) as pool:
        for path, verdict, detail in pool.imap_unordered(check_file, [(f, strategy) for f in files], chunksize=4):
            counts[verdict] += 1
            if verdict == "failure":
                failures.append((path, detail))
                print(f"FAIL {path}: {detail}", flush=True)
    return {
        "package": package,
        "files": len(files),
        **counts,
        "seconds": time.perf_counter() - start,
        "failures": failures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=["triton", "torch", "sympy"])
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--strategy", default="loop")
    args = parser.parse_args()
    failed = 0
    print("| package | files | identical | rejected (invalid Python) | failures | seconds |")
    print("| --- | --- | --- | --- | --- | --- |")
    for package in args.packages:
        r = run(package, args.jobs, args.strategy)
        failed += r["failure"]
        print(
            f"| {package} | {r['files']} | {r['identical']} | {r['rejected']} | {r['failure']} | {r['seconds']:.0f} |",
            flush=True,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
