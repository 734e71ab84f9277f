"""Compile the benchmark kernels for sm_90 on the CPU and compare their PTX.

    python benchmarks/diag_ptx.py --out docs/data/bench-ptx.json

For every kernel (sum, store, gather), W and implementation (hand-written,
castpile loop, castpile gather; aligned and not) it counts the memory
instructions by width and the instructions in the kernel body, with the
divisibility facts Triton's JIT records at launch for 16-byte-aligned pointers
and sizes (n a multiple of 16: 4K, 1M and 64M elements all are).
"""

import argparse
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # the generated kernels import castpile
KERNEL_DIR = HERE / "kernels"
KERNELS = ("sum", "store", "gather")
WORLDS = (2, 4, 8)
PATTERNS = {
    "ld_v4": r"ld\.global(?:\.\w+)*\.v4\.b32",
    "ld_b16": r"ld\.global(?:\.\w+)*\.b16\b",
    "st_v4": r"st\.global(?:\.\w+)*\.v4\.b32",
    "st_b16": r"st\.global(?:\.\w+)*\.b16\b",
    "setp": r"\bsetp\.",
    "selp": r"\bselp\.",
}


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variants():
    """(label, module path, function name, extra constexprs) for every implementation."""
    for kernel in KERNELS:
        yield kernel, "hand", KERNEL_DIR / "hand_kernels.py", f"hand_{kernel}", {"ALIGN": True}
        yield kernel, "hand_noalign", KERNEL_DIR / "hand_kernels.py", f"hand_{kernel}", {"ALIGN": False}
        for strategy in ("loop", "gather"):
            path = KERNEL_DIR / "generated" / f"stack_kernels_{strategy}.py"
            yield kernel, f"castpile_{strategy}", path, f"stack_{kernel}", {}
            yield kernel, f"castpile_{strategy}_noalign", path, f"stack_{kernel}_u", {}


def stats(ptx: str) -> dict:
    body = ptx[ptx.index(".entry") :]
    counts = {k: len(re.findall(p, body)) for k, p in PATTERNS.items()}
    counts["instructions"] = sum(
        1 for line in body.splitlines() if line.strip() and line.strip()[0].isalpha() and line.strip().endswith(";")
    )
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/data/bench-ptx.json")
    parser.add_argument("--ptx-dir", help="also write each PTX file here")
    args = parser.parse_args(argv)
    sig = {"ex": "*bf16", "table": "*i64", "out": "*bf16", "n": "i32", "W": "constexpr", "BLOCK": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    rows, modules = [], {}
    for kernel, label, path, name, extra in variants():
        module = modules.setdefault(path, load(path))
        fn = getattr(module, name)
        signature = dict(sig)
        if kernel == "store":
            signature = {("src" if k == "out" else k): v for k, v in sig.items()}
        for world in WORLDS:
            constexprs = {"W": world, "BLOCK": 1024, **extra}
            signature_full = {**signature, **dict.fromkeys(extra, "constexpr")}
            compiled = triton.compile(
                ASTSource(fn, signature_full, constexprs, attrs), target=GPUTarget("cuda", 90, 32)
            )
            ptx = compiled.asm["ptx"]
            if args.ptx_dir:
                Path(args.ptx_dir).mkdir(parents=True, exist_ok=True)
                (Path(args.ptx_dir) / f"{kernel}_{label}_W{world}.ptx").write_text(ptx)
            rows.append({"kernel": kernel, "impl": label, "W": world, **stats(ptx)})
            print(json.dumps(rows[-1]), flush=True)
    result = {
        "command": " ".join(["python", *sys.argv]),
        "triton": triton.__version__,
        "target": "sm_90",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
