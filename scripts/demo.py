"""``python scripts/demo.py`` (``make demo``): transpile the one-shot all-reduce sample and run it.

Shows what castpile rewrites in ``samples/allreduce_oneshot.py``, then runs the
output on 4 simulated GPUs (4 host buffers, the Triton interpreter) and checks
the result against ``torch.stack(inputs).sum(0)``.  Exits 1 on a mismatch.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported: kernels run on host memory

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "allreduce_oneshot.py"
WORLD, N, BLOCK = 4, 1000, 256


def rewritten_lines(source: str, output: str) -> tuple[list[str], int]:
    """The unified diff of the input's lines, and how many helper lines follow them."""
    before = source.splitlines(keepends=True)
    after = output.splitlines(keepends=True)
    diff = difflib.unified_diff(before, after[: len(before)], f"samples/{SAMPLE.name}", "transpiled", n=1)
    return list(diff), len(after) - len(before)


def main() -> int:
    import torch
    import triton

    import castpile

    if not SAMPLE.exists():
        print(f"error: {SAMPLE} not found (the demo runs from a source checkout)", file=sys.stderr)
        return 1
    source = SAMPLE.read_bytes()
    output = castpile.transpile(source, str(SAMPLE), strategy="loop")
    diff, helpers = rewritten_lines(source.decode(), output.decode())
    print(f"castpile {castpile.__version__}: samples/{SAMPLE.name}, strategy loop\n")
    print("".join(diff), end="")
    print(f"+ {helpers} lines of helper functions appended after the last input line\n")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "allreduce_oneshot_transpiled.py"
        path.write_bytes(output)  # Triton reads a kernel's source from its file
        spec = importlib.util.spec_from_file_location("allreduce_oneshot_transpiled", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)

        generator = torch.Generator().manual_seed(0)
        inputs = [torch.randint(-1000, 1000, (N,), generator=generator).float() for _ in range(WORLD)]
        dev_ptrs = torch.tensor([t.data_ptr() for t in inputs], dtype=torch.int64)
        expected = torch.stack(inputs).sum(0)
        worst = 0.0
        for _rank in range(WORLD):  # every rank runs the kernel into its own output
            out = torch.full((N,), float("nan"))
            module.allreduce_oneshot[(triton.cdiv(N, BLOCK),)](out, dev_ptrs, N, WORLD=WORLD, BLOCK=BLOCK)
            worst = max(worst, (out - expected).abs().max().item())

    if worst != worst or worst > 0:  # NaN: an element was never written
        print(f"MISMATCH: {WORLD} simulated GPUs, {N} elements, max |error| {worst:g}")
        return 1
    print(
        f"verified: {WORLD} simulated GPUs, {N} elements, max |error| {worst:g} "
        f"(each rank's output == torch.stack(inputs).sum(0))"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
