"""Compile transpiled kernels for sm_90 on the CPU (run without TRITON_INTERPRET).

    python tests/compile_sm90.py MODULE.py KERNEL SIGNATURE_JSON CONSTEXPRS_JSON [ATTRS_JSON] ...

Each job is four or five arguments; for each, prints ``ok KERNEL`` and writes
the PTX next to MODULE as ``KERNEL.ptx``, or prints ``fail KERNEL: error``.
"""

import importlib.util
import json
import sys
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


def compile_one(module, name, signature, constexprs, attrs):
    fn = getattr(module, name)
    attrs = {tuple(json.loads(k)): v for k, v in attrs.items()}
    kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32))
    assert kernel.asm["cubin"], "no cubin"
    return kernel.asm["ptx"]


def main(argv):
    path = Path(argv[0])
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    jobs = json.loads(argv[1])
    for job in jobs:
        name, signature, constexprs, attrs, out = job
        try:
            ptx = compile_one(module, name, signature, constexprs, attrs)
            (path.parent / f"{out}.ptx").write_text(ptx)
            print(f"ok {out}", flush=True)
        except Exception as exc:  # reported to the test, which fails on it
            first = str(exc).strip().splitlines()
            print(f"fail {out}: {type(exc).__name__}: {' | '.join(first[-6:])}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
