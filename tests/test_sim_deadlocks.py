"""A deadlock in the simulator is named at once (docs/races.md, "Hangs named at once"): when every unfinished rank
spins in a castpile.wait and no flag changes, sim.run raises RankTimeout long before its timeout, with each rank's
wait line, the value it waits for and the values it saw; a rank that is merely slow is waited for."""

import time

import pytest
import torch

from castpile.gpu import sim
from testkit import transpiled

pytestmark = pytest.mark.sim

SOURCE = """
import triton
import triton.language as tl
import castpile


@triton.jit
def wait_for_peer(pad, pad_ptrs, rank, value, WORLD: tl.constexpr):
    peer = tl.load(pad_ptrs + (rank + 1) % WORLD).to(tl.pointer_type(tl.int32)) + 1
    castpile.wait(pad + 1, value=value)
    castpile.signal(peer, value=1)
"""
WAIT_LINE = SOURCE.splitlines().index("    castpile.wait(pad + 1, value=value)") + 1


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_that_all_wait_for_each_other_are_named_at_once(world, tmp_path):
    kernels = transpiled(tmp_path, SOURCE, f"deadlock_{world}")
    pads = sim.symmetric_scratch(world, (2,), torch.int32)

    def body(rank):
        kernels.wait_for_peer[(1,)](pads[rank].tensor, pads[rank].ptrs, rank, 7, world)

    started = time.monotonic()
    with pytest.raises(sim.RankTimeout) as caught:
        sim.run(body, world, timeout=300)
    assert time.monotonic() - started < 150, "the deadlock was named only at the timeout"
    assert caught.value.hung == list(range(world))
    for rank in range(world):
        words = caught.value.sites[rank]
        assert f"deadlock_{world}.py:{WAIT_LINE}" in words, words
        assert words.endswith(": waits for flag eq 7; saw [0]"), words
    assert caught.value.deadlock and "deadlocked (every one spins in a wait and no flag changes)" in str(caught.value)


def test_a_rank_that_computes_while_its_peer_waits_is_not_a_deadlock(tmp_path):
    kernels = transpiled(tmp_path, SOURCE, "slow_peer")
    pads = sim.symmetric_scratch(2, (2,), torch.int32)

    def body(rank):
        if rank == 0:
            time.sleep(3 * sim.STALL_CHECK_S)  # rank 1 spins all this time, nothing changes, rank 0 waits in no wait
            pads[1].tensor[1] = 7
        kernels.wait_for_peer[(1,)](pads[rank].tensor, pads[rank].ptrs, rank, 1 if rank == 0 else 7, 2)

    # Rank 1 waits for rank 0's host to set its flag to 7, then raises rank 0's; rank 0's kernel then raises rank 1's.
    sim.run(body, 2, timeout=120)
    assert [pad.tensor.tolist() for pad in pads] == [[0, 0], [0, 1]]
