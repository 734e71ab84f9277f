"""Probe (2 x H200): launch paths, the low-latency all-reduce, and NVLink bandwidth by engine.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/probe_launch_ll.py --out probe.json

1. Host microseconds per launch of one small kernel: ``kernel[grid]``, Triton's
   launcher bound once (``castpile.gpu.launch.bind``), ``cuLaunchKernel`` through
   ctypes (GIL released or held), a torch op, a CUDA-graph replay.
2. The low-latency all-reduce (``low_latency_all_reduce``: flags inside the
   data, no barrier) against NCCL, symm_mem and the library's one-shot, eager and
   in CUDA graphs, 4 KB - 2 MB, checked exact after timing.
3. 32 MB one-way transfers between the two GPUs, both ranks at once: copy
   engine pull/push (``copy_`` on a peer view) and Triton pull/push kernels.
"""

import argparse
import ctypes
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import triton
import triton.language as tl
from torch.distributed import _symmetric_memory as symm_mem

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import allreduce_variants as av  # noqa: E402
from bench_collectives import (GRAPH_CALLS, fill_pattern, graphed, host_times, max_abs_error,  # noqa: E402
                               pattern_sum, run_header, start_ranks, stop_ranks, timed, write_result)
from castpile import launch as cl, runtime  # noqa: E402
from castpile.gpu.collectives import kernels_triton as lib  # noqa: E402
from hand_kernels import _copy  # noqa: E402


@triton.jit
def _scale(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


def ctypes_launch(compiled, grid, pointers, ints, dll):
    """``cuLaunchKernel`` through ctypes, parameters packed once (pointer and int32 parameters only)."""
    fixed = [ctypes.c_uint64(p) for p in pointers] + [ctypes.c_int32(i) for i in ints]
    fixed += [ctypes.c_uint64(0), ctypes.c_uint64(0)]  # Triton's global and profile scratch pointers
    params = (ctypes.c_void_p * len(fixed))(*[ctypes.addressof(v) for v in fixed])
    fn = dll.cuLaunchKernel
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    stream = triton.runtime.driver.active.get_current_stream
    device = torch.cuda.current_device()
    threads, shared, function = 32 * compiled.metadata.num_warps, compiled.metadata.shared, compiled.function

    def launch():
        status = fn(function, grid[0], 1, 1, threads, 1, 1, shared, stream(device), params, None)
        assert status == 0, status

    launch.keep_alive = (fixed, params)
    return launch


def launch_costs(dog):
    x = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    grid = (4,)
    g = torch.cuda.CUDAGraph()
    bound = cl.bind(_scale, grid, x, y, 4096, BLOCK=1024)
    with torch.cuda.graph(g):
        bound()
    exact = {}
    fns = {
        "grid_call": lambda: _scale[grid](x, y, 4096, BLOCK=1024),
        "bound": bound,
        "ctypes_gil_released": ctypes_launch(bound.kernel, grid, (x.data_ptr(), y.data_ptr()), (4096,),
                                             ctypes.CDLL("libcuda.so.1")),
        "ctypes_gil_held": ctypes_launch(bound.kernel, grid, (x.data_ptr(), y.data_ptr()), (4096,),
                                         ctypes.PyDLL("libcuda.so.1")),
        "torch_mul": lambda: torch.mul(x, 2, out=y),
        "graph_replay": g.replay,
    }
    for name, fn in fns.items():
        y.zero_()
        fn()
        torch.cuda.synchronize()
        exact[name] = bool(torch.equal(y, x * 2))
    return {"exact": exact, "host_us": host_times(fns, 400), "device_us": timed(fns, 200, 5, dog)}


def ll_launch(x, out, ll, epochs, block, warps):
    m = x.numel() * x.element_size() // 4
    return cl.bind(lib.low_latency_all_reduce, (epochs.numel(),), x, ll.tensor, ll.buffer_ptrs, epochs, out, ll.rank,
                   m, WORLD=ll.world_size, BLOCK=block, num_warps=warps)


def ll_case(nbytes, rank, world, sms, group_name, dog, reps):
    n = nbytes // 2
    symm = runtime.symmetric_empty((n,), torch.bfloat16)
    x = symm.tensor
    outs = {}
    variants = {"ll_b1024_w4": (1024, 4), "ll_b512_w4": (512, 4), "ll_b2048_w8": (2048, 8)}
    lls = {}
    for name, (block, warps) in variants.items():
        m = n // 2
        ll = runtime.rendezvous(symm_mem.empty(2 * world * m, dtype=torch.int64, device=x.device).zero_())
        epochs = torch.zeros(max(1, min(sms, triton.cdiv(m, block))), dtype=torch.int32, device=x.device)
        outs[name] = torch.empty_like(x)
        lls[name] = (ll, epochs, block, warps)
    torch.cuda.synchronize()
    dist.barrier()
    out = torch.empty_like(x)
    nccl_buf = torch.empty_like(x)
    cfg = av.tuned_config(nbytes, sms)
    fill_pattern(x, rank)
    nccl_buf.copy_(x)
    fns = {
        "nccl": lambda: dist.all_reduce(nccl_buf),
        "symm_mem_one_shot": lambda: torch.ops.symm_mem.one_shot_all_reduce(x, "sum", group_name),
        "symm_mem_two_shot": lambda: torch.ops.symm_mem.two_shot_all_reduce_(x, "sum", group_name),
        "castpile_one_shot_tuned": av.one_shot(symm, out, **cfg),
    }
    for name, (ll, epochs, block, warps) in lls.items():
        fns[name] = ll_launch(x, outs[name], ll, epochs, block, warps)
    # symm_mem_two_shot is in place: refill before the exactness checks below.
    eager = timed(fns, 200, reps, dog)
    host = host_times({k: fns[k] for k in ("symm_mem_one_shot", "symm_mem_two_shot", "castpile_one_shot_tuned",
                                           "ll_b1024_w4")})
    graph_names = ["nccl", "symm_mem_one_shot", "castpile_one_shot_tuned", *variants]
    graphs = {k: graphed(fns[k]) for k in graph_names}
    graph = {k: v / GRAPH_CALLS for k, v in timed(graphs, 10, reps, dog).items()}
    errors = {}
    for salt in (0, 5):
        fill_pattern(x, rank, salt)
        torch.cuda.synchronize()
        dist.barrier()
        for name in variants:
            fns[name]()
            torch.cuda.synchronize()
            errors[f"{name}_salt{salt}"] = max_abs_error(outs[name], pattern_sum(n, world, x.device, salt))
        graphs["ll_b1024_w4"]()  # 20 more replays, then one checked call
        fns["ll_b1024_w4"]()
        torch.cuda.synchronize()
        errors[f"ll_after_graph_salt{salt}"] = max_abs_error(outs["ll_b1024_w4"], pattern_sum(n, world, x.device, salt))
    del graphs
    return {"bytes": nbytes, "eager_us": eager, "graph_us": graph, "host_us": host, "max_abs_error": errors,
            "ll_grid": {k: v[1].numel() for k, v in lls.items()}}


def bandwidth(world, rank, sms, dog, reps, nbytes=32 << 20):
    n = nbytes // 2
    buf = symm_mem.empty(n, dtype=torch.bfloat16, device="cuda")
    buf.fill_(rank + 1)
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
    peer = (rank + 1) % world
    remote = hdl.get_buffer(peer, (n,), torch.bfloat16)
    local = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    src = torch.ones(n, dtype=torch.bfloat16, device="cuda")
    grid = (2 * sms,)
    fns = {
        "ce_pull": lambda: local.copy_(remote),
        "ce_push": lambda: remote.copy_(src),
        "sm_pull": cl.bind(_copy, grid, remote, local, n, BLOCK=4096, num_warps=8),
        "sm_push": cl.bind(_copy, grid, src, remote, n, BLOCK=4096, num_warps=8),
        "sm_local_copy": cl.bind(_copy, grid, src, local, n, BLOCK=4096, num_warps=8),
    }
    us = timed(fns, 20, reps, dog)
    torch.cuda.synchronize()
    dist.barrier()
    return {"bytes": nbytes, "us": us, "GBps": {k: nbytes / v / 1e3 for k, v in us.items()}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/probe-launch-ll.json")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--sizes", default="4096,32768,262144,2097152")
    args = parser.parse_args(argv)
    rank, world, dev, dog = start_ranks(90)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    result = run_header(dev, reps=args.reps)

    def save(key, value):
        result[key] = value
        if rank == 0:
            print(key, json.dumps(value), flush=True)
            write_result(args.out, result)

    def section(key, fn, *fargs):
        try:
            return fn(*fargs)
        except Exception:  # a probe: record the failure and go on to the next part
            import traceback
            save(f"{key}_error", traceback.format_exc())
            torch.cuda.synchronize()
            dist.barrier()

    save("launch", section("launch", launch_costs, dog))
    rows = []
    for nbytes in [int(v) for v in args.sizes.split(",") if v]:
        rows.append(section(f"all_reduce_{nbytes}", ll_case, nbytes, rank, world, sms, dist.group.WORLD.group_name,
                            dog, args.reps))
        save("all_reduce", rows)
    save("bandwidth", section("bandwidth", bandwidth, world, rank, sms, dog, args.reps))
    stop_ranks()


if __name__ == "__main__":
    main()
