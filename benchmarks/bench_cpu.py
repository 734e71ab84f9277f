"""CPU benchmark of the transpiler, whole processes, ratios within one run.

    python benchmarks/bench_cpu.py --out docs/data/bench-cpu.json

1. a generated 3,000-line kernel module with 200 multicast bindings:
   ``python -m castpile big.py -o out.py`` against a process that parses the
   same file with libcst and writes ``module.code`` back (target <= 2x);
2. the same size of module that never mentions castpile: ``python -m castpile``
   against copying it with Python (target <= 1.15x);
3. importing a castpile module through the import hook with a warm cache
   against importing the already transpiled file (target <= 1.1x);
4. one kernel whose index has 1,000 and then 2,000 terms: transpile time must grow
   linearly (target: 2,000 terms <= 2.5x the time of 1,000; libcst's own parse and
   write of the 2,000-term file is timed beside them).
Each is the median wall time of ``--runs`` fresh processes, alternated;
``--case no_castpile`` (repeatable) runs only the cases named, and their results
replace those cases' in ``--out``.
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KERNEL = '''

@triton.jit
def kernel_{i}(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Sum of W buffers, tile {i}."""
    bufs = multicast_like(ex, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    scale = {i} * 0.5 + 1.0
    acc = tl.sum(bufs[offs].to(tl.float32), axis=0)
    acc = acc * scale
    acc = tl.where(mask, acc, 0.0)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)
'''

PLAIN = '''

@triton.jit
def kernel_{i}(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr):
    """Sum of W buffers, tile {i}."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    scale = {i} * 0.5 + 1.0
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in tl.static_range(W):
        acc += tl.load(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)) + offs, mask=mask).to(tl.float32)
    tl.store(out + offs, (acc * scale).to(out.dtype.element_ty), mask=mask)
'''


def module(template: str, header: str, bindings: int = 200, lines: int = 3000) -> str:
    body = "".join(template.format(i=i) for i in range(bindings))
    text = header + body
    filler = lines - text.count("\n")
    return text + "".join(f"CONSTANT_{i} = {i}  # padding line\n" for i in range(max(0, filler)))


PARSE_WRITE = (
    "import sys, libcst\n"
    "m = libcst.parse_module(open(sys.argv[1], 'rb').read())\n"
    "open(sys.argv[2], 'w').write(m.code)\n"
)
COPY = "import shutil, sys\nshutil.copyfile(sys.argv[1], sys.argv[2])\n"
IMPORT = "import sys\nsys.path.insert(0, sys.argv[1])\n{hook}import {name}\n"


def run(cmd, env=None) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def compare(pairs: dict, runs: int) -> dict:
    """Median seconds of each command, alternating between them."""
    times = {k: [] for k in pairs}
    for _ in range(runs):
        for k, cmd in pairs.items():
            times[k].append(run(cmd))
    return {k: statistics.median(v) for k, v in times.items()}


def warm_import(py: str, tmp: Path, big: Path, runs: int) -> dict:
    """Importing ``big`` through the hook's warm cache against importing ``tmp/big_out.py``."""
    hooked, pre = tmp / "hooked", tmp / "pre"
    hooked.mkdir()
    pre.mkdir()
    shutil.copyfile(big, hooked / "bigmod.py")
    shutil.copyfile(tmp / "big_out.py", pre / "bigmod.py")
    hook = f"import castpile; castpile.install_import_hook('bigmod', cache_dir={str(tmp / 'cache')!r})\n"
    hook_import = [py, "-c", IMPORT.format(hook=hook, name="bigmod"), str(hooked)]
    run(hook_import)  # fills the cache
    plain_import = [py, "-c", IMPORT.format(hook="", name="bigmod"), str(pre)]
    run(plain_import)  # writes its .pyc
    t = compare({"hook_warm": hook_import, "transpiled_import": plain_import}, runs)
    return {"seconds": t, "ratio": t["hook_warm"] / t["transpiled_import"], "target": 1.1}


LONG_INDEX = """import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def kernel(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    x = bufs[{terms}]
"""


def long_index(py: str, tmp: Path, runs: int) -> dict:
    """Transpiling one index of 1,000 terms against one of 2,000."""
    commands = {}
    for n in (1000, 2000):
        src = tmp / f"long_{n}.py"
        src.write_text(LONG_INDEX.format(terms=" + ".join(f"a{i}" for i in range(n))))
        commands[f"terms_{n}"] = [py, "-m", "castpile", str(src), "-o", str(tmp / f"long_{n}_out.py")]
    deep = "import sys; sys.setrecursionlimit(100_000)\n" + PARSE_WRITE  # libcst writes code back recursively
    commands["libcst_parse_write_2000"] = [py, "-c", deep, str(src), str(tmp / "long_cst.py")]
    t = compare(commands, runs)
    return {"seconds": t, "ratio": t["terms_2000"] / t["terms_1000"], "target": 2.5}


CASES = ("big_module", "no_castpile", "warm_import", "long_index")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-cpu.json")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable; default: all)")
    args = parser.parse_args(argv)
    cases = args.case or CASES
    py = sys.executable
    header = "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        big, plain = tmp / "big.py", tmp / "plain.py"
        big.write_text(module(KERNEL, header))
        plain.write_text(module(PLAIN, "import triton\nimport triton.language as tl\n"))
        results = {}
        transpile_big = [py, "-m", "castpile", str(big), "-o", str(tmp / "big_out.py")]
        if "big_module" in cases:
            t = compare(
                {
                    "castpile": transpile_big,
                    "libcst_parse_write": [py, "-c", PARSE_WRITE, str(big), str(tmp / "big_cst.py")],
                },
                args.runs,
            )
            results["big_module"] = {
                "lines": big.read_text().count("\n"),
                "bindings": 200,
                "seconds": t,
                "ratio": t["castpile"] / t["libcst_parse_write"],
                "target": 2.0,
            }
        if "no_castpile" in cases:
            t = compare(
                {
                    "castpile": [py, "-m", "castpile", str(plain), "-o", str(tmp / "plain_out.py")],
                    "python_copy": [py, "-c", COPY, str(plain), str(tmp / "plain_copy.py")],
                },
                args.runs,
            )
            results["no_castpile"] = {
                "lines": plain.read_text().count("\n"),
                "seconds": t,
                "ratio": t["castpile"] / t["python_copy"],
                "target": 1.15,
            }
        if "warm_import" in cases:
            if "big_module" not in cases:
                run(transpile_big)  # the transpiled file that the plain import reads
            results["warm_import"] = warm_import(py, tmp, big, args.runs)
        if "long_index" in cases:
            results["long_index"] = long_index(py, tmp, args.runs)
    command, date = " ".join(["python", *sys.argv]), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    for r in results.values():
        r.update(met=r["ratio"] <= r["target"], command=command, date=date)
    old = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    previous = old.get("results", {})
    for r in previous.values():  # files written before results carried their own command and date
        r.setdefault("command", old.get("command"))
        r.setdefault("date", old.get("date"))
    out = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "runs": args.runs,
        "results": {**previous, **results},
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
