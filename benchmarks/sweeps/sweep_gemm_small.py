"""Our persistent GEMM (castpile.gpu.fused.tp_gemm.matmul) over tile configurations, beside cuBLAS.

    python benchmarks/sweeps/sweep_gemm_small.py --out docs/data/bench-sweep-gemm-small.json
    python benchmarks/sweeps/sweep_gemm_small.py --shapes 4096x8192x8192 16384x8192x14336 \
        --configs 128x256x64:g8:w8:s3 128x256x64:g8:w8:s3:ptr --out docs/data/bench-sweep-gemm-large.json

One GPU, bf16.  By default the local problems of the TP GEMMs at M = 256 on 2
ranks: 256 x 8192 x 8192 (all-gather + GEMM) and 256 x 4096 x 8192 (GEMM +
reduce-scatter, K / 2 per rank); ``--shapes`` / ``--configs`` choose others.  Configurations as benchmarks/bench_tp_gemm.py's ``--config``
strings; each result checked against ``torch.matmul`` (bf16 output of fp32
accumulation: within 2^-7 relative + 1e-3 of the largest), then timed with CUDA
events, rounds interleaved (benchmarks/harness.py), medians.
"""

import torch
from bench_tp_gemm import parse_config

import sweepkit  # first: benchmarks/ and the repository root onto sys.path
from castpile.gpu.fused import tp_gemm
from harness import run_header, timed_one_gpu, write_result

SHAPES = [(256, 8192, 8192), (256, 4096, 8192)]
CONFIGS = [
    "128x128x64:g8:w8:s4",
    "128x128x64:g8:w4:s4",
    "128x128x64:g8:w8:s5",
    "128x128x64:g8:w8:s6",
    "128x128x64:g8:w4:s6",
    "128x128x128:g8:w8:s3",
    "128x128x128:g8:w4:s3",
    "64x128x64:g8:w4:s6",
    "64x256x64:g8:w4:s4",
    "64x256x64:g8:w4:s5",
    "128x128x64:g1:w8:s4",
    "128x128x64:g8:w8:s4:ptr",
]


def main():
    parser = sweepkit.command_line(__doc__, reps=9, out="docs/data/bench-sweep-gemm-small.json")
    parser.add_argument("--iters", type=int, default=100)
    parser.add_argument("--shapes", nargs="+", default=[f"{m}x{k}x{n}" for m, k, n in SHAPES], help="MxKxN")
    parser.add_argument("--configs", nargs="+", default=CONFIGS)
    args = parser.parse_args()
    dev = torch.device("cuda")
    result = run_header(dev, reps=args.reps, iters=args.iters, rows=[])
    for m, k, n in (tuple(map(int, shape.split("x"))) for shape in args.shapes):
        gen = torch.Generator(device=dev).manual_seed(m + k + n)
        a = (torch.randn((m, k), generator=gen, device=dev) / 8).to(torch.bfloat16)
        b = (torch.randn((k, n), generator=gen, device=dev) / 8).to(torch.bfloat16)
        ref = a @ b
        tol = 2**-7 * ref.float().abs() + 1e-3 * float(ref.float().abs().max())
        fns, errors, wrong = {"cublas_gemm": lambda a=a, b=b: torch.matmul(a, b)}, {}, []
        for text in args.configs:
            out = torch.empty((m, n), dtype=torch.bfloat16, device=dev)

            def fn(a=a, b=b, out=out, config=parse_config(text)):
                return tp_gemm.matmul(a, b, out, config=config)

            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # a configuration that does not compile is reported, not fatal
                errors[text] = f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            if not bool(((out.float() - ref.float()).abs() <= tol).all()):
                wrong.append(text)
            fns[text] = fn
        us = timed_one_gpu(fns, max(3, int(args.iters * 256 * 8192 * 8192 / (m * k * n))), args.reps)
        row = {
            "M": m,
            "K": k,
            "N": n,
            "eager_us": us,
            "errors": errors,
            "out_of_tolerance": wrong,
            "tflops": {name: 2.0 * m * k * n / (t * 1e-6) / 1e12 for name, t in us.items()},
        }
        result["rows"].append(row)
        print({name: round(t, 2) for name, t in us.items()}, errors or "", wrong or "", flush=True)
    write_result(args.out, result)


if __name__ == "__main__":
    main()
