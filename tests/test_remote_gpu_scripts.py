"""The GPU proof's kernels (benchmarks/check_nvshmem.py and its generated kernels, as checked in) on the simulator with
remote peers, and the GPU scripts' own checks: ranks without a GPU each refused, phases and logs that keep failures."""

import os
from pathlib import Path

import pytest
import torch

from castpile.gpu import sim
from testkit import import_file

# -- the GPU proof's kernel (benchmarks/check_nvshmem.py), as checked in -------------------------------------


@pytest.mark.parametrize("w,lws", [(2, 1), (2, 2), (3, 1), (4, 2)])
def test_the_gpu_scripts_all_reduce(w, lws):
    """benchmarks/kernels/generated/nvshmem_kernels_loop.py's all-reduce on W simulated ranks, 2 blocks over 5 tiles,
    twice in a row (the barriers leave the pads zero), against torch's sum of the inputs."""
    generated = import_file(
        Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py", "nvshmem_kernels_loop"
    )
    n, block = 77, 16
    handles = sim.symmetric_empty(w, (n,), torch.float32, local_world_size=lws)
    inputs = [torch.randint(-100, 100, (n,)).float() for _ in range(w)]

    def body(rank):
        h = handles[rank]
        h.tensor.copy_(inputs[rank])
        outs = []
        for _ in range(2):
            out = torch.full((n,), float("nan"))
            generated.all_reduce_remote[(2,)](
                h.tensor, h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, out, rank, n, w, block
            )
            outs.append(out)
        return outs

    for rank, outs in enumerate(sim.run(body, w, timeout=120)):
        for out in outs:
            assert torch.equal(out, torch.stack(inputs).sum(0)), f"rank {rank}"
    assert all(not h.signal_pad.any() for h in handles)


@pytest.mark.parametrize("w,lws,force", [(2, None, True), (3, 2, False), (4, 1, False)])
def test_the_gpu_scripts_all_gather(w, lws, force):
    """The push all-gather with remote= bindings (stores become puts for remote peers): 2 programs over 3 tiles,
    twice with new rows; every rank ends with every rank's row, pads zero."""
    generated = import_file(
        Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py", "nvshmem_kernels_loop"
    )
    n, block = 37, 16
    handles = sim.symmetric_empty(w, (w, n), torch.float32, local_world_size=lws, force_remote=force)
    calls = [[torch.randint(-100, 100, (n,)).float() for _ in range(w)] for _ in range(2)]

    def body(rank):
        h, got = handles[rank], []
        for rows in calls:
            h.tensor.fill_(float("nan"))
            h.tensor[rank] = rows[rank]
            generated.all_gather_remote[(2,)](
                h.tensor, h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, rank, n, w, block
            )
            got.append(h.tensor.clone())
        return got

    for rank, got in enumerate(sim.run(body, w, timeout=120)):
        for rows, out in zip(calls, got):
            assert torch.equal(out, torch.stack(rows)), f"rank {rank}"
    assert all(not h.signal_pad.any() for h in handles)


@pytest.mark.parametrize("w,lws,force", [(2, None, True), (3, 2, False), (3, 1, False)])
def test_the_gpu_scripts_fused_rmsnorm(w, lws, force):
    """The fused all-reduce + residual + RMSNorm with remote= bindings on W simulated ranks (3 rows of 24 over 2
    programs, rows padded to 32 lanes): residual exact (integer data), y within one bf16 rounding of fp32 torch."""
    generated = import_file(
        Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py", "nvshmem_kernels_loop"
    )
    m, d, eps = 3, 24, 1e-6
    handles = sim.symmetric_empty(w, (m, d), torch.bfloat16, local_world_size=lws, force_remote=force)
    inputs = [torch.randint(-8, 9, (m, d)).bfloat16() for _ in range(w)]
    residual0 = torch.randint(-8, 9, (m, d)).bfloat16()
    weight = (torch.randint(1, 9, (d,)).float() / 4).bfloat16()
    h_ref = (torch.stack(inputs).float().sum(0) + residual0.float()).bfloat16()
    y_ref = h_ref.float() * torch.rsqrt((h_ref.float() ** 2).mean(-1, keepdim=True) + eps) * weight.float()

    def body(rank):
        h = handles[rank]
        h.tensor.copy_(inputs[rank])
        residual, out = residual0.clone(), torch.full((m, d), float("nan")).bfloat16()
        generated.all_reduce_residual_rmsnorm_remote[(2,)](
            h.tensor,
            h.remote_ptrs,
            h.signal_pad,
            h.signal_pad_remote_ptrs,
            residual,
            weight,
            out,
            rank,
            m,
            d,
            eps,
            w,
            32,
        )
        return residual, out

    for rank, (residual, out) in enumerate(sim.run(body, w, timeout=120)):
        assert torch.equal(residual, h_ref), f"rank {rank}"
        assert ((out.float() - y_ref).abs() <= 2**-7 * y_ref.abs() + 1e-30).all(), f"rank {rank}"
    assert all(not h.signal_pad.any() for h in handles)


def test_the_gpu_scripts_forced_remote_mode_runs_gets_and_the_library_on_one_tensor(monkeypatch):
    """``--force-remote`` (every peer reachable, tables tagging them remote): the all-reduce moves every peer's
    bytes through NVSHMEM gets (counted here), and the library's collectives run on the same tensor; both exact."""
    from castpile.gpu import collectives, sim_nvshmem

    generated = import_file(
        Path(__file__).parents[1] / "benchmarks/kernels/generated/nvshmem_kernels_loop.py", "nvshmem_kernels_loop"
    )
    w, n, block = 2, 40, 16
    handles = sim.symmetric_empty(w, (n,), torch.float32, force_remote=True)
    inputs = [torch.randint(-100, 100, (n,)).float() for _ in range(w)]
    calls = []
    real_get = sim_nvshmem.get
    monkeypatch.setattr(sim_nvshmem, "get", lambda *a, **kw: (calls.append(1), real_get(*a, **kw))[1])

    def body(rank):
        h = handles[rank]
        h.tensor.copy_(inputs[rank])
        out = torch.full((n,), float("nan"))
        generated.all_reduce_remote[(2,)](
            h.tensor, h.remote_ptrs, h.signal_pad, h.signal_pad_remote_ptrs, out, rank, n, w, block
        )
        return out, len(calls), collectives.all_reduce_one_shot(h)

    for rank, (out, gets, library) in enumerate(sim.run(body, w, timeout=120)):
        assert torch.equal(out, torch.stack(inputs).sum(0)) and torch.equal(library, out), f"rank {rank}"
        assert gets >= -(-n // block), f"rank {rank} made {gets} gets: the peer was read with loads"
    assert all(not h.signal_pad.any() for h in handles)


@pytest.mark.parametrize(
    "gpus,per_node,share,error",
    [
        (0, 1, False, "no CUDA device"),
        (1, 2, False, "2 ranks per node but 1 GPU"),
    ],
)
def test_the_benchmarks_refuse_ranks_without_a_gpu_each(monkeypatch, gpus, per_node, share, error):
    """benchmarks/harness.start_ranks: no GPU, or more ranks than GPUs without share_gpus (a gloo group would time
    gloo under NCCL's name), is a clear error before any process group starts."""
    import sys

    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "benchmarks"))
    sys.modules.pop("harness", None)
    harness = import_file(Path(__file__).parents[1] / "benchmarks/harness.py", "harness")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(harness.dist, "init_process_group", lambda *a, **k: pytest.fail("a group was started"))
    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": str(per_node),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": str(per_node),
    }.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=error):
        harness.start_ranks(share_gpus=share)


def test_the_gpu_scripts_phases_record_failures_and_c_level_output(tmp_path):
    """benchmarks/check_nvshmem.py's bookkeeping, without a GPU: a phase that fails is recorded with its error and
    what was written to file descriptors 1 and 2 (as NVSHMEM's C code writes), and the next phase still runs."""
    script = import_file(Path(__file__).parents[1] / "benchmarks/check_nvshmem.py", "check_nvshmem")
    run = script.Run(tmp_path / "nvshmem.json", 1)
    with run.phase("init", bytes=4):
        os.write(2, b"nvshmem: transport ibgda failed to load\n")
        raise RuntimeError("NVSHMEM initialisation failed")
    with run.phase("next") as entry:
        entry["value"] = 7
    saved = __import__("json").loads((tmp_path / "nvshmem.json.rank1.json").read_text())
    first, second = saved["phases"]
    assert first["status"] == "failed" and first["error"] == "RuntimeError: NVSHMEM initialisation failed"
    assert "transport ibgda failed to load" in first["output"] and first["bytes"] == 4
    assert second == {"phase": "next", "status": "ok", "value": 7, "seconds": second["seconds"]}
    assert "transport ibgda failed to load" in (tmp_path / "nvshmem.json.rank1.log").read_text()
    assert run.failed("init") and not run.failed("next")


def test_the_gpu_scripts_log_keeps_what_a_dying_process_printed(tmp_path):
    """NVSHMEM ends the process from C when its initialisation fails: what it printed must be in the log already."""
    script = import_file(Path(__file__).parents[1] / "benchmarks/check_nvshmem.py", "check_nvshmem")
    pid = os.fork()
    if pid == 0:  # the child dies inside the phase, as nvshmem_init's exit(-1) does
        try:
            with script.Run(tmp_path / "nvshmem.json", 0).phase("allocate"):
                os.write(2, b"NVSHMEM: ibgda: no usable device\n")
                os._exit(255)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 255
    assert "ibgda: no usable device" in (tmp_path / "nvshmem.json.rank0.log").read_text()
