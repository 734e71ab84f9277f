"""Kernels that wait with cmp=, reset=None and signal with op="add" between simulated ranks, and their checks (tests/test_flags.py).

Every check runs W simulated ranks at once over shared memory, one of them late (it sleeps before it
starts), under a timeout, and compares what each rank read and where its flags end with torch.
Each wait is written in three forms, chosen by ``FORM``: 0 a scalar pointer (``flags + slot``), 1 a
plain pointer tensor (one element), 2 a multicast access (a rank-0 tile of the rank's own flags).
"""

import time

import torch

from castpile.compiler.contract import WAIT_COMPARISONS
from castpile.gpu import sim
from testkit import transpiled

SLOTS = 8  # flags per rank
N, BLOCK = 5, 8  # elements of a published row; BLOCK > N, so the masks matter
TIMEOUT = 90.0  # seconds for a run that must finish
LATE_S = 0.3  # how long the late rank sleeps before it starts


def _wait_kernel(cmp: str) -> str:
    """The kernel ``wait_<cmp>``, written out for one comparison (``cmp=`` is a string literal)."""
    forms = [("pad + slot", "if FORM == 0"), ("pad + slot + tl.arange(0, 1)", "elif FORM == 1"), ("mine[slot]", "else")]
    waits = {
        reset: "".join(
            f'        {branch}:\n            cp.wait({flags}, value, cmp="{cmp}", reset={reset})\n'
            for flags, branch in forms
        )
        for reset in ("None", "reset")
    }
    return f'''

@triton.jit
def wait_{cmp}(out, data, pad, pad_ptrs, rank, slot, value, reset, n, SLOTS: tl.constexpr, BLOCK: tl.constexpr,
            FORM: tl.constexpr, KEEP: tl.constexpr):
    """Wait until this rank's flag ``slot`` {cmp} ``value`` (then reset it, unless ``KEEP``), then copy the row."""
    mine = cp.multicast_like(pad, tl.load(pad_ptrs + rank), shape=(SLOTS,))
    if KEEP:
{waits["None"]}    else:
{waits["reset"]}    tl.debug_barrier()
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(data + offs, mask=offs < n), mask=offs < n)
'''


KERNELS = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def publish_then_set(data, src, buf_ptrs, pad, pad_ptrs, slot, value, n, W: tl.constexpr, SLOTS: tl.constexpr,
                     BLOCK: tl.constexpr):
    """Write ``src`` to every rank's ``data``, then set flag ``slot`` to ``value`` on every rank."""
    rows = cp.multicast_like(data, buf_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    rows[offs] = tl.load(src + offs, mask=offs < n)
    tl.debug_barrier()
    flags = cp.multicast_like(pad, pad_ptrs[:W], shape=(SLOTS,))
    cp.signal(flags[slot], value)


@triton.jit
def counter_rounds(out, data, buf_ptrs, pad, pad_ptrs, rank, slot, rounds, W: tl.constexpr, WP: tl.constexpr,
                   SLOTS: tl.constexpr, FORM: tl.constexpr):
    """``rounds`` rounds on one monotonic counter per rank (never reset): write round * W + rank into entry
    ``rank`` of every rank's ``data``, meet, sum this rank's W entries into ``out[round]``, meet again (so no
    rank writes the next round before every rank has read this one).  Meeting: add 1 to the counter on every
    rank, then wait until this rank's counter reaches W more than at the last meeting."""
    rows = cp.multicast_like(data, buf_ptrs[:W], shape=(W,))
    counters = cp.multicast_like(pad, pad_ptrs[:W], shape=(SLOTS,))
    mine = cp.multicast_like(pad, tl.load(pad_ptrs + rank), shape=(SLOTS,))
    peers = tl.arange(0, WP)
    r = 0
    while r < rounds:  # not `range(rounds)`: Triton 3.6's interpreter cannot loop to a run-time bound
        rows[rank] = r * W + rank
        for half in tl.static_range(2):
            tl.debug_barrier()
            cp.signal(counters[slot], op="add")
            value = (2 * r + half + 1) * W
            if FORM == 0:
                cp.wait(pad + slot, value, cmp="ge", reset=None)
            elif FORM == 1:
                cp.wait(pad + slot + tl.arange(0, 1), value, cmp="ge", reset=None)
            else:
                cp.wait(mine[slot], value, cmp="ge", reset=None)
            tl.debug_barrier()
            if half == 0:
                tl.store(out + r, tl.sum(tl.load(data + peers, mask=peers < W, other=0), axis=0))
        r += 1


@triton.jit
def epoch_broadcast(out, data, src, buf_ptrs, pad, pad_ptrs, rank, root, epoch_slot, ack_slot, epochs, n,
                    W: tl.constexpr, SLOTS: tl.constexpr, BLOCK: tl.constexpr):
    """``epochs`` epochs: the root writes ``src + e`` to every rank's ``data`` and sets its own epoch flag to
    ``e``; every other rank waits on that one flag with cmp="ge" (nobody resets it), copies the row to
    ``out[e - 1]`` and adds 1 to the root's ack counter, which the root waits on before the next epoch."""
    rows = cp.multicast_like(data, buf_ptrs[:W], shape=(n,))
    at_root = cp.multicast_like(pad, tl.load(pad_ptrs + root), shape=(SLOTS,))
    offs = tl.arange(0, BLOCK)
    e = 1
    while e <= epochs:
        if rank == root:
            cp.wait(pad + ack_slot, (e - 1) * (W - 1), cmp="ge", reset=None)
            tl.debug_barrier()
            rows[offs] = tl.load(src + offs, mask=offs < n) + e
            tl.debug_barrier()
            cp.signal(at_root[epoch_slot], e)
        else:
            cp.wait(at_root[epoch_slot], e, cmp="ge", reset=None)
            tl.debug_barrier()
            tl.store(out + (e - 1) * n + offs, tl.load(data + offs, mask=offs < n), mask=offs < n)
            tl.debug_barrier()
            cp.signal(at_root[ack_slot], op="add")
        e += 1
''' + "".join(_wait_kernel(cmp) for cmp in WAIT_COMPARISONS)

REMOTE_KERNELS = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def epoch_barrier_remote(out, data, data_table, pad, pad_table, rank, slot, epochs, W: tl.constexpr,
                         SLOTS: tl.constexpr):
    """``epochs`` epochs of: write 10 * e + rank into this rank's ``data[0]``, raise this rank's epoch flag to
    2e - 1, wait until every rank's flag (read over NVSHMEM where remote, never reset) is at least that, sum
    every rank's ``data[0]`` into ``out[e - 1]``, raise the flag to 2e and wait for every rank's again."""
    rows = cp.multicast_like(data, data_table[:W], shape=(1,), remote="nvshmem")
    flags = cp.multicast_like(pad, pad_table[:W], shape=(SLOTS,), remote="nvshmem")
    mine = cp.multicast_like(pad, tl.load(pad_table + rank), shape=(SLOTS,))
    e = 1
    while e <= epochs:
        tl.store(data, 10 * e + rank)
        tl.debug_barrier()
        cp.signal(mine[slot], 2 * e - 1)
        cp.wait(flags[slot], 2 * e - 1, cmp="ge", reset=None)
        tl.debug_barrier()
        tl.store(out + e - 1, tl.sum(rows[0], axis=0))
        tl.debug_barrier()
        cp.signal(mine[slot], 2 * e)
        cp.wait(flags[slot], 2 * e, cmp="ge", reset=None)
        e += 1


@triton.jit
def wait_all_remote(pad, pad_table, slot, value, W: tl.constexpr, SLOTS: tl.constexpr):
    """Wait until every rank's flag ``slot`` is above ``value``, resetting each to 0 (a put where remote)."""
    flags = cp.multicast_like(pad, pad_table[:W], shape=(SLOTS,), remote="nvshmem")
    cp.wait(flags[slot], value, cmp="gt", reset=0)


@triton.jit
def set_own_flag(pad, pad_table, rank, slot, value, SLOTS: tl.constexpr):
    """Set this rank's flag ``slot`` to ``value``."""
    mine = cp.multicast_like(pad, tl.load(pad_table + rank), shape=(SLOTS,))
    cp.signal(mine[slot], value)
'''

# Per comparison: (start, value, final): the flags start where `flag cmp value` fails (at the boundary where
# there is one), and the signal sets them where it holds, but never to `value` where "eq" would hold too.
CMP_FLAGS = {"eq": (0, 3, 3), "ne": (3, 3, -1), "ge": (2, 3, 4), "gt": (3, 3, 4), "le": (4, 3, 2), "lt": (3, 3, 2)}
RESET = 7  # where a wait that resets leaves its flag


def kernels(strategy: str, directory, broken: tuple[str, str, str] | None = None):
    """The transpiled kernels; ``broken`` = (helper, old, new) replaces ``old`` by ``new`` inside that helper first."""
    return transpiled(directory, KERNELS, f"flags_kernels_{strategy}", broken, strategy=strategy)


def remote_kernels(strategy: str, directory, broken: tuple[str, str, str] | None = None):
    """The transpiled remote="nvshmem" kernels (``broken``: as for :func:`kernels`)."""
    return transpiled(directory, REMOTE_KERNELS, f"flags_remote_kernels_{strategy}", broken, strategy=strategy)


def _late(rank: int, late: int) -> None:
    if rank == late:
        time.sleep(LATE_S)


def check_every_comparison(k, world, cmp, *, form, keep, timeout=TIMEOUT):
    """Every rank's flag starts at ``start``; rank 0, late, publishes a row to every rank and then sets the
    flags to ``final``; every rank waits for ``flag cmp value`` and copies the row.  Each must read the row
    (NaN: it returned before the signal), and the flags end at ``final`` (``keep``: reset=None) or RESET."""
    start, value, final = CMP_FLAGS[cmp]
    data = sim.symmetric_scratch(world, (N,), torch.float32)
    pads = sim.symmetric_scratch(world, (SLOTS,), torch.int32)
    slot = 5
    for d, p in zip(data, pads):
        d.tensor.fill_(float("nan"))
        p.tensor[slot] = start
    row = torch.arange(N, dtype=torch.float32) + 10
    wait = getattr(k, f"wait_{cmp}")

    def body(rank):
        d, p = data[rank], pads[rank]
        _late(rank, 0)
        if rank == 0:
            k.publish_then_set[(1,)](d.tensor, row, d.ptrs, p.tensor, p.ptrs, slot, final, N, world, SLOTS, BLOCK)
        out = torch.full((N,), float("nan"))
        wait[(1,)](out, d.tensor, p.tensor, p.ptrs, rank, slot, value, RESET, N, SLOTS, BLOCK, form, keep)
        return out

    outs = sim.run(body, world, timeout=timeout)
    for rank, out in enumerate(outs):
        assert torch.equal(out, row), f"rank {rank} read {out.tolist()}, not the row published before the signal"
    expected = torch.zeros(SLOTS, dtype=torch.int32)
    expected[slot] = final if keep else RESET
    for rank, p in enumerate(pads):
        assert torch.equal(p.tensor, expected), f"rank {rank}'s flags end at {p.tensor.tolist()}"


def check_counter_barrier(k, world, rounds, *, form, timeout=TIMEOUT):
    """``counter_rounds`` on every rank, rank W - 1 late: every rank's sums are those of every rank's
    entries of that round, and every counter ends at 2 * rounds * W (two meetings a round, never reset)."""
    data = sim.symmetric_scratch(world, (world,), torch.int32)
    pads = sim.symmetric_scratch(world, (SLOTS,), torch.int32)
    slot = 3

    def body(rank):
        d, p = data[rank], pads[rank]
        _late(rank, world - 1)
        out = torch.full((rounds,), -1, dtype=torch.int32)
        k.counter_rounds[(1,)](
            out,
            d.tensor,
            d.ptrs,
            p.tensor,
            p.ptrs,
            rank,
            slot,
            rounds,
            world,
            1 << (world - 1).bit_length(),
            SLOTS,
            form,
        )
        return out

    outs = sim.run(body, world, timeout=timeout)
    entries = torch.arange(rounds)[:, None] * world + torch.arange(world)[None, :]
    sums = entries.sum(dim=1).to(torch.int32)
    for rank, out in enumerate(outs):
        assert torch.equal(out, sums), f"rank {rank} summed {out.tolist()}, not {sums.tolist()}"
    expected = torch.zeros(SLOTS, dtype=torch.int32)
    expected[slot] = 2 * rounds * world
    for rank, p in enumerate(pads):
        assert torch.equal(p.tensor, expected), f"rank {rank}'s flags end at {p.tensor.tolist()}"


def check_epoch_flags_read_by_several_ranks(k, world, epochs, *, root, late, timeout=TIMEOUT):
    """``epoch_broadcast`` with rank ``late`` late: every other rank than the root reads ``src + e`` in epoch
    e; the root's epoch flag ends at ``epochs`` and its ack counter at ``epochs * (W - 1)``, nothing else set."""
    data = sim.symmetric_scratch(world, (N,), torch.float32)
    pads = sim.symmetric_scratch(world, (SLOTS,), torch.int32)
    epoch_slot, ack_slot = 1, 6
    for d in data:
        d.tensor.fill_(float("nan"))
    src = torch.arange(N, dtype=torch.float32) * 3

    def body(rank):
        d, p = data[rank], pads[rank]
        _late(rank, late)
        out = torch.full((epochs, N), float("nan"))
        k.epoch_broadcast[(1,)](
            out,
            d.tensor,
            src,
            d.ptrs,
            p.tensor,
            p.ptrs,
            rank,
            root,
            epoch_slot,
            ack_slot,
            epochs,
            N,
            world,
            SLOTS,
            BLOCK,
        )
        return out

    outs = sim.run(body, world, timeout=timeout)
    want = src[None, :] + torch.arange(1, epochs + 1, dtype=torch.float32)[:, None]
    for rank, out in enumerate(outs):
        if rank != root:
            assert torch.equal(out, want), f"rank {rank} read {out.tolist()}, not each epoch's row"
    for rank, p in enumerate(pads):
        expected = torch.zeros(SLOTS, dtype=torch.int32)
        if rank == root:
            expected[epoch_slot], expected[ack_slot] = epochs, epochs * (world - 1)
        assert torch.equal(p.tensor, expected), f"rank {rank}'s flags end at {p.tensor.tolist()}"


def check_remote_epoch_barrier(k, world, epochs, *, local_world_size, late, timeout=TIMEOUT):
    """``epoch_barrier_remote`` over simulated nodes of ``local_world_size`` ranks, rank ``late`` late: every
    rank's sums are those of every rank's epoch values, and every rank's flag ends at 2 * epochs."""
    data = sim.symmetric_empty(world, (1,), torch.int32, local_world_size=local_world_size)
    slot = 2

    def body(rank):
        h = data[rank]
        _late(rank, late)
        out = torch.full((epochs,), -1, dtype=torch.int32)
        k.epoch_barrier_remote[(1,)](
            out,
            h.tensor,
            h.remote_ptrs,
            h.signal_pad,
            h.signal_pad_remote_ptrs,
            rank,
            slot,
            epochs,
            world,
            sim.SIM_PAD_SLOTS,
        )
        return out

    outs = sim.run(body, world, timeout=timeout)
    sums = torch.tensor([sum(10 * e + r for r in range(world)) for e in range(1, epochs + 1)], dtype=torch.int32)
    for rank, out in enumerate(outs):
        assert torch.equal(out, sums), f"rank {rank} summed {out.tolist()}, not {sums.tolist()}"
    expected = torch.zeros(sim.SIM_PAD_SLOTS, dtype=torch.int32)
    expected[slot] = 2 * epochs
    for rank, h in enumerate(data):
        assert torch.equal(h.signal_pad, expected), f"rank {rank}'s flags end at {h.signal_pad.tolist()}"


def check_remote_wait_with_a_reset(k, world, *, local_world_size, timeout=TIMEOUT):
    """Ranks 1.. (late) set their own flag to 5; rank 0 sets its own, then waits for every flag > 0 with
    reset=0 (the remote ones reset by a put): it returns, and every flag ends at 0."""
    handles = sim.symmetric_empty(world, (1,), torch.int32, local_world_size=local_world_size)
    slot = 4

    def body(rank):
        h = handles[rank]
        _late(rank, 1)
        k.set_own_flag[(1,)](h.signal_pad, h.signal_pad_remote_ptrs, rank, slot, 5, sim.SIM_PAD_SLOTS)
        if rank == 0:
            k.wait_all_remote[(1,)](h.signal_pad, h.signal_pad_remote_ptrs, slot, 0, world, sim.SIM_PAD_SLOTS)

    sim.run(body, world, timeout=timeout)
    for rank, h in enumerate(handles):
        assert not h.signal_pad.any(), f"rank {rank}'s flags end at {h.signal_pad.tolist()}"
