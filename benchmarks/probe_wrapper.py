"""Host cost of one library all-reduce call, by part (2 ranks, 4 KB): diagnoses the wrappers' launch path.

    python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/probe_wrapper.py
"""

import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path[:0] = [str(Path(__file__).resolve().parent.parent)]

import castpile.collectives as c  # noqa: E402
from castpile import runtime  # noqa: E402
from castpile.collectives import kernels_triton as k  # noqa: E402


def host_us(fn, calls=300):
    torch.cuda.synchronize()
    dist.barrier()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t) * 1e6 / calls
    torch.cuda.synchronize()
    return us


def main():
    rank = int(os.environ["RANK"])
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
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
    result = {name: round(host_us(fn), 2) for name, fn in parts.items()}
    print(f"rank {rank}: binds during the wrapper calls: {len(binds)}; host us per call: {result}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
