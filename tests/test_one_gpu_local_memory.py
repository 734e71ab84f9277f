"""Ranks on one GPU reserve the local memory a kernel needs before any rank starts it (on the CPU, a stand-in driver).

CUDA grows a context's per-thread local memory (its stack limit) when a launch needs more, and the
growth waits for the device's work in flight: a rank launching a kernel that spills more than any
before it, while peers' copies already spin waiting for it, never returns.  One kernel can need a
different amount per rank: the JIT specialises ``rank == 1``.
"""

import threading
from types import SimpleNamespace

from castpile.gpu import local_memory, one_gpu


def launch_needing(local_bytes: int):
    """A bound launch whose compiled kernel spills ``local_bytes`` per thread (Triton reports words: n_spills)."""
    return SimpleNamespace(kernel=SimpleNamespace(n_spills=local_bytes // 4))


def test_a_launch_tells_its_kernels_local_bytes():
    assert local_memory.local_bytes(launch_needing(4104)) == 4104
    assert local_memory.local_bytes(lambda: None) == 0  # an interpreted launch has no compiled kernel


def test_the_ranks_binding_barrier_reserves_the_most_any_rank_needs_before_releasing_them(monkeypatch):
    limit = {"bytes": 1024}
    seen_when_released = []
    monkeypatch.setattr(local_memory, "stack_limit", lambda: limit["bytes"])
    monkeypatch.setattr(local_memory, "set_stack_limit", lambda n: limit.update(bytes=n))
    caches = one_gpu.launch_caches(4)
    needs = [1280, 4104, 1280, 0]

    def rank(r):
        caches[r].after_bind(launch_needing(needs[r]))
        seen_when_released.append(limit["bytes"])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen_when_released == [4104] * 4  # every rank leaves the barrier with the limit already raised


def test_a_limit_already_high_enough_is_left_alone(monkeypatch):
    calls = []
    monkeypatch.setattr(local_memory, "stack_limit", lambda: 8192)
    monkeypatch.setattr(local_memory, "set_stack_limit", calls.append)
    local_memory.reserve(4104)
    assert calls == []
