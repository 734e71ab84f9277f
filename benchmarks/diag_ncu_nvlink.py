"""NVLink traffic of peer reads and writes under Nsight Compute (2 x H200, one process per GPU).

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \\
        ncu --target-processes all --clock-control none -k regex:'_copy|all_reduce' --section SpeedOfLight \\
            --metrics nvlrx__bytes.sum.per_second,nvltx__bytes.sum.per_second --csv --page details \\
            python3 -m torch.distributed.run --nproc_per_node 2 benchmarks/diag_ncu_nvlink.py > docs/data/ncu-nvlink.csv

Each rank runs, on a 32 MB bf16 symmetric buffer: a Triton copy from the peer's
buffer (pull), a copy into it (push), and the library's one-shot and two-shot
all-reduces without their barriers (the same loads and stores as with them; the
profiler replays kernels one at a time, and a barrier would wait for a peer that
is not running).  Results of the barrier-less kernels are not used.
``--clock-control none`` keeps the GPU's own clocks (ncu locks them to base by default).
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed import _symmetric_memory as symm_mem

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu import collectives, launch, runtime
from harness import start_ranks, stop_ranks
from kernels.hand_kernels import _copy

NBYTES = 32 << 20


def main():
    rank, world, dev, dog = start_ranks(300)
    n = NBYTES // 2
    symm = runtime.symmetric_empty((n,), torch.bfloat16)
    symm.tensor.fill_(1)
    remote = symm_mem.rendezvous(symm.tensor, dist.group.WORLD.group_name).get_buffer(
        (rank + 1) % world, (n,), torch.bfloat16
    )
    local = torch.ones_like(symm.tensor)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    pull = launch.bind(_copy, (2 * sms,), remote, local, n, BLOCK=4096, num_warps=8)
    push = launch.bind(_copy, (2 * sms,), local, remote, n, BLOCK=4096, num_warps=8)
    steps = (
        pull,
        push,
        lambda: collectives.all_reduce_one_shot(symm, barrier=False),
        lambda: collectives.all_reduce_two_shot(symm, barrier=False),
    )
    for step in steps:
        torch.cuda.synchronize()
        dist.barrier()
        step()
        dog.tick("profiled step")
    torch.cuda.synchronize()
    stop_ranks()


if __name__ == "__main__":
    main()
