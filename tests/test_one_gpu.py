"""The one-GPU backend (castpile.gpu.one_gpu): what its host side decides, on the CPU; its runs, where a GPU is.

CI has no GPU: the runs skip there (benchmarks/check_one_gpu.py is the full check on a GPU).
"""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from castpile.gpu import device_share
from castpile.gpu.fused import moe, tp_gemm
from castpile.gpu.launch_cache import LaunchCache

ROOT = Path(__file__).resolve().parents[1]
SMS = 132


@pytest.fixture
def fake_gpu(monkeypatch):
    """A CUDA device 0 of :data:`SMS` multiprocessors, as torch reports it; no ranks share it at first."""
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(multi_processor_count=SMS))
    monkeypatch.setattr(device_share, "_RANKS_ON", {})
    return torch.device("cuda", 0)


def test_a_rank_alone_gets_every_multiprocessor_and_sharing_ranks_a_share(fake_gpu):
    assert device_share.multiprocessors(fake_gpu) == SMS
    for ranks, share in ((2, 66), (3, 44), (8, 16), (200, 1)):
        device_share.share_device(fake_gpu, ranks)
        assert device_share.multiprocessors(fake_gpu) == share
    with pytest.raises(ValueError, match="at least 1"):
        device_share.share_device(fake_gpu, 0)


def test_fused_ops_size_their_grids_by_the_share(fake_gpu):
    device_share.share_device(fake_gpu, 8)
    plan = moe.MoE.plan(8, fake_gpu, tokens=4096, hidden=64, topk=2, experts=16)
    assert plan.blocks == SMS // 8
    ag = tp_gemm.AllGatherMatmul.plan(8, fake_gpu, m=8 * 512, k=256, n=4096)
    assert ag.comm_blocks + ag.consumers == SMS // 8
    rs = tp_gemm.MatmulReduceScatter.plan(8, fake_gpu, m=8 * 512, k=256, n=4096)
    assert rs.blocks == SMS // 8


class _Tensor:
    """Stands in for a CUDA tensor: the launch cache reads its address and whether it is on a GPU."""

    is_cuda = True

    def __init__(self, address):
        self.address = address

    def data_ptr(self):
        return self.address


def test_a_cache_without_replay_binds_late_launches_and_calls_after_bind_once_each(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    binds, launches, barriers = [], [], []

    def bind_for(tensors, **options):
        binds.append(options)
        return lambda **late: launches.append(late)

    cache = LaunchCache(replay=False, after_bind=lambda launch: barriers.append(len(launches)))
    out = _Tensor(0x1000)
    for _ in range(3):
        cache.issue("key", bind_for, {"out": out}, True, out)
    assert binds == [{"late": ("out",)}]  # never graph=True: no capture
    assert barriers == [0]  # after the one binding, before its first launch
    assert launches == [{"out": out}] * 3


RUN_ON_ONE_GPU = r"""
import torch
from castpile.gpu import collectives, one_gpu
for world in (2, 3):
    handles = one_gpu.symmetric_empty(world, (5000,), torch.float32)
    xs = [torch.randint(-8, 9, (5000,), device="cuda").float() for _ in range(world)]
    def body(rank):
        outs = []
        for _ in range(20):
            handles[rank].tensor.copy_(xs[rank])
            outs.append(collectives.all_reduce_one_shot(handles[rank]).clone())
        return outs
    want = torch.stack(xs).sum(0)
    for outs in one_gpu.run(body, world, timeout=120):
        assert all(torch.equal(o, want) for o in outs)
    assert all(not h.signal_pad.any() for h in handles)
print("exact")
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CI has none)")
def test_ranks_on_one_gpu_all_reduce_exactly():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-c", RUN_ON_ONE_GPU], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "exact" in done.stdout, done.stderr[-3000:]


def test_every_thread_that_launches_a_tensor_parallel_op_gets_an_allocator():
    """Triton keeps its allocator per context (a thread's own): a process-wide "already set" left later threads'
    TMA descriptors without one (one_gpu's ranks are threads)."""
    import threading

    from triton.runtime import _allocation

    from castpile.gpu.fused.tp_gemm import gemm

    has_one = []

    def launcher():
        gemm.ensure_allocator(torch.device("cuda", 0))
        has_one.append(not isinstance(_allocation._allocator.get(), _allocation.NullAllocator))

    for _ in range(2):
        thread = threading.Thread(target=launcher)
        thread.start()
        thread.join()
    assert has_one == [True, True]
