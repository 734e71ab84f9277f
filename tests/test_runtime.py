"""Runtime errors that can be checked without GPUs (a gloo group stands in for NCCL)."""

import socket

import pytest
import torch

from castpile.gpu import runtime, sim


def test_without_a_process_group_the_error_says_how_to_start_one():
    with pytest.raises(runtime.SymmetricMemoryError, match="torchrun --nproc_per_node"):
        runtime.symmetric_empty((4,), torch.float32)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_tensor_outside_symmetric_memory_is_refused_on_every_rank():
    port = _free_port()

    def body(rank):
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
        # Rank 1 passes a well-formed tensor; it must still hear about rank 0's problem, not hang.
        tensor = torch.zeros(4)
        try:
            runtime.rendezvous(tensor)
        except runtime.SymmetricMemoryError as exc:
            return str(exc)
        finally:
            dist.destroy_process_group()

    messages = sim.run(body, 2, timeout=60)
    assert all(m.startswith("rank 0: its tensor is on cpu; the tensor is not in symmetric memory") for m in messages)
    assert "castpile.gpu.runtime.symmetric_empty" in messages[0]


def test_layout_disagreement_names_every_rank():
    metas = [((8,), (1,), "torch.float32", 0), ((8,), (1,), "torch.bfloat16", 0), ((4,), (1,), "torch.float32", 0)]
    with pytest.raises(runtime.SymmetricMemoryError) as info:
        runtime.check_agreement(metas)
    text = str(info.value)
    assert "ranks disagree" in text
    assert "rank 1: shape (8,), strides (1,), dtype torch.bfloat16" in text
    assert "rank 2: shape (4,)" in text
    runtime.check_agreement(metas[:1] * 3)
