"""The v1.3 samples on simulated ranks against torch: samples/semaphore_queue.py (counting semaphores) and
samples/count_exchange.py (counts taken from a wait's value), both strategies, W = 2..8 (semaphores) and 2..4
(counts), one rank late; every flag must end at 0."""

import time
from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from testkit import import_file, padded

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sample(name: str, strategy: str, directory: Path):
    """samples/<name>.py transpiled under ``strategy``, imported."""
    source = SAMPLES / f"{name}.py"
    path = directory / f"{name}_{strategy}.py"
    path.write_bytes(castpile.transpile(source.read_bytes(), str(source), strategy=strategy))
    return import_file(path, f"{name}_{strategy}")


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("world", "late"), [(2, 1), (3, 0), (4, 2), (8, 5)])
def test_the_semaphore_queue_sums_every_round(world, late, strategy, tmp_path):
    queue = sample("semaphore_queue", strategy, tmp_path)
    rounds, n, block = 3, 5, 8
    slots = sim.symmetric_scratch(world, (world, n), torch.float32)
    pads = sim.symmetric_scratch(world, (2,), torch.int32)
    rows = {p: torch.arange(rounds * n, dtype=torch.float32).reshape(rounds, n) * p + p for p in range(1, world)}

    def body(rank):
        slot, pad = slots[rank], pads[rank]
        if rank == late:
            time.sleep(0.3)
        if rank == 0:
            out = torch.full((rounds, n), float("nan"))
            queue.consume[(1,)](out, slot.tensor, pad.tensor, pad.ptrs, rounds, n, world, padded(world), block)
            return out
        queue.produce[(1,)](rows[rank], slot.tensor, slot.ptrs, pad.tensor, pad.ptrs, rank, rounds, n, world, block)
        return None

    outs = sim.run(body, world, timeout=120)
    expected = sum(rows.values())
    assert torch.equal(outs[0], expected), f"rank 0 summed {outs[0].tolist()}, not {expected.tolist()}"
    for rank, pad in enumerate(pads):
        assert pad.tensor.tolist() == [0, 0], f"rank {rank}'s semaphores end at {pad.tensor.tolist()}"


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("world", "late", "seed"), [(2, 1, 0), (3, 2, 1), (4, 0, 2)])
def test_the_count_exchange_packs_every_sender_s_rows(world, late, seed, strategy, tmp_path):
    exchange = sample("count_exchange", strategy, tmp_path)
    cap, h = 4, 6
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, cap + 1, (world, world), generator=g, dtype=torch.int32)  # counts[src, dst]
    parts = torch.randn(world, world, cap, h, generator=g)  # parts[src, dst]
    recv = sim.symmetric_scratch(world, (world, cap, h), torch.float32)
    pads = sim.symmetric_scratch(world, (world,), torch.int32)

    def body(rank):
        buf, pad = recv[rank], pads[rank]
        if rank == late:
            time.sleep(0.3)
        exchange.send[(1,)](
            parts[rank], counts[rank], buf.tensor, buf.ptrs, pad.tensor, pad.ptrs, rank, h, world, cap, 8
        )
        out = torch.full((world * cap, h), float("nan"))
        total = torch.full((1,), -1, dtype=torch.int32)
        exchange.receive[(1,)](out, total, buf.tensor, pad.tensor, h, world, padded(world), cap, 8)
        return out, total

    outs = sim.run(body, world, timeout=120)
    for rank, (out, total) in enumerate(outs):
        expected = torch.cat([parts[src, rank, : counts[src, rank]] for src in range(world)])
        assert total.item() == expected.shape[0], f"rank {rank} counted {total.item()} rows"
        assert torch.equal(out[: expected.shape[0]], expected), f"rank {rank} packed the wrong rows"
        assert torch.isnan(out[expected.shape[0] :]).all(), f"rank {rank} wrote past its rows"
        assert pads[rank].tensor.eq(0).all(), f"rank {rank}'s flags end at {pads[rank].tensor.tolist()}"
