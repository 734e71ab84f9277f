"""Kernels that signal and wait between simulated ranks, and the checks run on them (tests/test_signal_wait.py, test_remote.py).

Every check runs W simulated ranks at once over shared memory, under a timeout, and compares with torch.
"""

import time

import torch
import triton

from castpile.gpu import sim
from testkit import transpiled

KERNELS = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def publish(data, src, buf_ptrs, pad, pad_ptrs, rank, n, W: tl.constexpr, BLOCK: tl.constexpr, WAIT_FOR: tl.constexpr):
    """Write ``src`` into row ``rank`` of every rank's ``data``, then raise flag ``rank`` on every rank."""
    rows = cp.multicast_like(data, buf_ptrs[:W], shape=(W, n))
    offs = tl.arange(0, BLOCK)
    rows[rank, offs] = tl.load(src + offs, mask=offs < n)
    tl.debug_barrier()
    flags = cp.multicast_like(pad, pad_ptrs[:W], shape=(W,))
    if WAIT_FOR:
        cp.signal(flags[rank], wait_for=0)
    else:
        cp.signal(flags[rank])


@triton.jit
def collect(out, data, pad, pad_ptrs, rank, n, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr,
            ACCESS: tl.constexpr):
    """Wait for (and lower) every rank's flag on this rank, then copy this rank's W rows of ``data`` to ``out``."""
    peers = tl.arange(0, WP)
    if ACCESS:
        mine = cp.multicast_like(pad, tl.load(pad_ptrs + rank + tl.arange(0, 1)), shape=(W,))
        cp.wait(mine[peers])
    else:
        cp.wait(pad + peers, mask=peers < W)
    tl.debug_barrier()
    offs = tl.arange(0, BLOCK)
    where = peers[:, None] * n + offs[None, :]
    live = (peers[:, None] < W) & (offs[None, :] < n)
    tl.store(out + where, tl.load(data + where, mask=live), mask=live)


@triton.jit
def signal_rounds(pad, pad_ptrs, rank, peer, W: tl.constexpr, ROUNDS: tl.constexpr):
    """Raise flag ``rank`` on rank ``peer`` ROUNDS times, each time once the peer has lowered it."""
    to_peer = cp.multicast_like(pad, tl.load(pad_ptrs + peer + tl.arange(0, 1)), shape=(W,))
    for _ in tl.static_range(ROUNDS):
        cp.signal(to_peer[rank], wait_for=0)


@triton.jit
def wait_rounds(pad, peer, ROUNDS: tl.constexpr):
    """Wait ROUNDS times for flag ``peer`` on this rank, lowering it each time."""
    for _ in tl.static_range(ROUNDS):
        cp.wait(pad + peer + tl.arange(0, 1))


@triton.jit
def signal_rounds_one_peer(pad, pad_ptrs, rank, peer, W: tl.constexpr, ROUNDS: tl.constexpr):
    """signal_rounds through a rank-0 tile (the peer's pad alone): the flag is a scalar, P + I = ()."""
    to_peer = cp.multicast_like(pad, tl.load(pad_ptrs + peer), shape=(W,))
    for _ in tl.static_range(ROUNDS):
        cp.signal(to_peer[rank], wait_for=0)


@triton.jit
def wait_rounds_scalar(pad, peer, ROUNDS: tl.constexpr):
    """wait_rounds on the scalar pointer ``pad + peer``."""
    for _ in tl.static_range(ROUNDS):
        cp.wait(pad + peer)
'''

N, BLOCK = 5, 8  # elements per row; BLOCK > N, so the masks matter
TIMEOUT = 60.0  # seconds for a run that must finish


def kernels(strategy: str, directory, broken: tuple[str, str, str] | None = None):
    """The transpiled kernels; ``broken`` = (helper, old, new) replaces ``old`` by ``new`` inside that helper first."""
    return transpiled(directory, KERNELS, f"signal_wait_kernels_{strategy}", broken, strategy=strategy)


def _rows(world: int) -> list[torch.Tensor]:
    """Each rank's row: distinct integers, so a row read from the wrong rank or too early shows."""
    return [torch.arange(N, dtype=torch.float32) + 100 * (rank + 1) for rank in range(world)]


def _handles(world: int):
    """Symmetric data (W rows of N, NaN until written) and signal pads (zero) over shared memory."""
    handles = sim.symmetric_empty(world, (world, N), torch.float32)
    for h in handles:
        h.tensor.fill_(float("nan"))
    return handles


def _publish(k, handles, rows, rank, wait_for):
    h = handles[rank]
    k.publish[(1,)](
        h.tensor, rows[rank], h.buffer_ptrs, h.signal_pad, h.signal_pad_ptrs, rank, N, h.world_size, BLOCK, wait_for
    )


def _collect(k, handles, rank, access):
    h = handles[rank]
    out = torch.full((h.world_size, N), float("nan"))
    k.collect[(1,)](
        out,
        h.tensor,
        h.signal_pad,
        h.signal_pad_ptrs,
        rank,
        N,
        h.world_size,
        triton.next_power_of_2(h.world_size),
        BLOCK,
        access,
    )
    return out


def _pads(handles) -> list[torch.Tensor]:
    return [h.signal_pad.clone() for h in handles]


def check_flags_rise_then_fall(k, world, *, wait_for, access, timeout=TIMEOUT, races=None):
    """Phase 1, every rank publishes: every rank's flag is raised on every rank, nothing else.
    Phase 2, every rank collects: it reads every row, and every flag is back at 0.  ``races``: ``sim.run``'s (a
    broken helper's test turns the race checker off, to see the numbers it gets wrong)."""
    handles, rows = _handles(world), _rows(world)
    sim.run(lambda rank: _publish(k, handles, rows, rank, wait_for), world, timeout=timeout, races=races)
    raised = torch.zeros(sim.SIM_PAD_SLOTS, dtype=torch.int32)
    raised[:world] = 1
    for rank, pad in enumerate(_pads(handles)):
        assert torch.equal(pad, raised), f"after every signal, rank {rank}'s flags are {pad.tolist()}"
    outs = sim.run(lambda rank: _collect(k, handles, rank, access), world, timeout=timeout, races=races)
    for rank, out in enumerate(outs):
        assert torch.equal(out, torch.stack(rows)), f"rank {rank} read {out.tolist()}"
    for rank, pad in enumerate(_pads(handles)):
        assert not pad.any(), f"after the waits, rank {rank}'s flags are {pad.tolist()}"


def check_waiting_ranks_read_what_was_written(
    k, world, *, wait_for, access, give_up_s=1.0, timeout=TIMEOUT, races=None
):
    """Every rank publishes and then collects, but ranks other than 0 publish only once rank 0 has
    collected, or after ``give_up_s`` seconds: a wait that returns before the flags rise lets rank 0
    read rows nobody has written yet (NaN).  The order comes from a shared flag, not from sleeps."""
    handles, rows = _handles(world), _rows(world)
    rank0_done = sim.shared_empty((1,), torch.int32).zero_()

    def body(rank):
        give_up = time.monotonic() + give_up_s
        while rank > 0 and not rank0_done.item() and time.monotonic() < give_up:
            time.sleep(0.01)
        _publish(k, handles, rows, rank, wait_for)
        out = _collect(k, handles, rank, access)
        rank0_done.fill_(1)
        return out

    outs = sim.run(body, world, timeout=timeout, races=races)
    for rank, out in enumerate(outs):
        assert torch.equal(out, torch.stack(rows)), f"rank {rank} read {out.tolist()}, not every rank's row"
    for rank, pad in enumerate(_pads(handles)):
        assert not pad.any(), f"rank {rank}'s flags end at {pad.tolist()}"


def check_two_signals_in_a_row_both_arrive(
    k, *, give_up_s=1.0, timeout=TIMEOUT, handles=None, signal_twice=None, scalar=False, races=None
):
    """Rank 1 signals rank 0 twice with ``wait_for=0``; rank 0 starts waiting only once rank 1 is done
    (or after ``give_up_s`` seconds), then waits twice.  The second signal must wait for the first to
    be lowered: one that overwrites it is lost, and rank 0's second wait never returns.  ``handles``
    and ``signal_twice(h)`` (rank 1's signals) replace the defaults (tests/test_remote.py's remote ones);
    ``scalar``: signal through a rank-0 tile and wait on a scalar pointer."""
    handles = _handles(2) if handles is None else handles
    rank1_done = sim.shared_empty((1,), torch.int32).zero_()
    signal_rounds, wait_rounds = (
        (k.signal_rounds_one_peer, k.wait_rounds_scalar) if scalar else (k.signal_rounds, k.wait_rounds)
    )

    def body(rank):
        h = handles[rank]
        if rank == 1:
            if signal_twice is None:
                signal_rounds[(1,)](h.signal_pad, h.signal_pad_ptrs, 1, 0, 2, 2)
            else:
                signal_twice(h)
            rank1_done.fill_(1)
            return
        give_up = time.monotonic() + give_up_s
        while not rank1_done.item() and time.monotonic() < give_up:
            time.sleep(0.01)
        wait_rounds[(1,)](h.signal_pad, 1, 2)

    sim.run(body, 2, timeout=timeout, races=races)
    for rank, pad in enumerate(_pads(handles)):
        assert not pad.any(), f"rank {rank}'s flags end at {pad.tolist()}"
