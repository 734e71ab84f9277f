"""Host cost of one library all-reduce call, by part (2 ranks, 4 KB): diagnoses the wrappers' launch path.

    python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/probe_wrapper.py

Each rank prints host microseconds per call (``bench_collectives.host_times``, 300 calls) of:
``wrapper`` (``collectives.all_reduce_one_shot`` with ``out`` passed: a replay of its graph),
``launch_config`` (its ``_launch``), ``kernel[grid]``, ``bound`` (bound once with
``castpile.gpu.launch.bind``) and ``key`` (building the cache key of the bound-launch cache that was
tried and reverted, docs/perf-findings.md); and how many binds the wrapper made.
"""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import castpile.gpu.collectives as c  # noqa: E402
from bench_collectives import host_times, start_ranks, stop_ranks  # noqa: E402
from castpile.gpu import runtime  # noqa: E402
from castpile.gpu.collectives import kernels_triton as k  # noqa: E402


def main():
    rank, _, _, _ = start_ranks()  # no watchdog thread beside the host timings
    symm = runtime.symmetric_empty((2048,), torch.bfloat16)
    out = torch.empty_like(symm.tensor)
    binds = []
    real_bind = c.bind
    c.bind = lambda *a, **kw: binds.append(1) or real_bind(*a, **kw)
    grid, block, options = c._launch(symm, 2048, None)
    args = (symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, 2048)
    kw = dict(WORLD=symm.world_size, BLOCK=block, BARRIER=True, **options)
    bound = real_bind(k.one_shot_all_reduce, grid, *args, **kw)
    parts = {
        "wrapper": lambda: c.all_reduce_one_shot(symm, out),
        "launch_config": lambda: c._launch(symm, 2048, None),
        "kernel[grid]": lambda: k.one_shot_all_reduce[grid](*args, **kw),
        "bound": bound,
        "key": lambda: (k.one_shot_all_reduce, grid, tuple((a.data_ptr(), a.dtype) if isinstance(a, torch.Tensor) else a
                                                          for a in args), tuple(sorted(kw.items()))),
    }
    for _ in range(3):
        for fn in parts.values():
            fn()
    result = {name: round(us, 2) for name, us in host_times(parts, 300).items()}
    print(f"rank {rank}: binds during the wrapper calls: {len(binds)}; host us per call: {result}", flush=True)
    stop_ranks()


if __name__ == "__main__":
    main()
