"""``one_gpu.run`` when a rank raises while debug-mode waits gave up: on the CPU, with the CUDA calls stood in for.

The waits' entries are read and cleared with the rank's error (chained to it), so that the next ``run`` does not
report waits of an earlier one.
"""

import contextlib
import re
from types import SimpleNamespace

import pytest
import torch

from castpile.gpu import HangError, one_gpu, wait_deadlines
from castpile.gpu.wait_deadlines import ENTRY_WORDS, RECORD_WORDS


@pytest.fixture
def cpu_ranks(monkeypatch):
    """one_gpu.run's CUDA calls as no-ops, and a record (ordinary host memory) holding one wait that gave up."""
    stream = SimpleNamespace(synchronize=lambda: None)
    monkeypatch.setattr(one_gpu, "_device", lambda device: torch.device("cpu"))
    monkeypatch.setattr(one_gpu, "streams", lambda world, device=None: [stream] * world)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: stream)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    words = torch.zeros(RECORD_WORDS, dtype=torch.int64)
    words[0] = 1
    site = int.from_bytes(b"k.py:7".ljust(8, b"\0"), "little", signed=True)
    words[1 : 1 + ENTRY_WORDS][:11] = torch.tensor([0x1000, 0, 1, 0, 10**9, 0, 0, 0, -1, 0, site])
    monkeypatch.setattr(wait_deadlines, "_record", words)
    return words


def test_a_rank_error_comes_with_the_waits_that_gave_up_and_clears_them(cpu_ranks):
    def body(rank):
        if rank == 1:
            raise ValueError("rank 1 went another way")

    with pytest.raises(one_gpu.RankError, match="rank 1 went another way") as info:
        one_gpu.run(body, 2, timeout=10)
    assert isinstance(info.value.__cause__, HangError) and "k.py:7" in str(info.value.__cause__)
    assert one_gpu.run(lambda rank: rank, 2, timeout=10) == [0, 1]  # nothing left over for the next run


def test_waits_that_gave_up_alone_raise_hang_error(cpu_ranks):
    with pytest.raises(HangError, match=re.escape("gave up waiting at k.py:7")):
        one_gpu.run(lambda rank: rank, 2, timeout=10)
    assert not cpu_ranks.any()
