"""castpile.wait with cmp= and reset=None, castpile.signal with op="add", between forked ranks (castpile.gpu.sim).

The kernels and the checks are in tests/testkit/flags.py: every comparison, a monotonic counter barrier
met many times in a row, epoch flags that several ranks read, each with a late rank, at W = 2, 3, 4.
Each check is also run with a helper broken (a comparison that is equality, an add that sets, a
reset=None that resets): the check must then fail, by an assertion or by the simulator's timeout.
"""

import re
import time
from pathlib import Path

import pytest
import torch

import castpile
from castpile.compiler.contract import WAIT_COMPARISONS
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import import_file
from testkit.flags import (
    BLOCK,
    KERNELS,
    REMOTE_KERNELS,
    SLOTS,
    check_counter_barrier,
    check_epoch_flags_read_by_several_ranks,
    check_every_comparison,
    check_remote_epoch_barrier,
    check_remote_wait_with_a_reset,
    kernels,
    remote_kernels,
)

HANG = 6.0  # seconds after which a run that must hang is called hung
FORMS = {0: "scalar_pointer", 1: "pointer_tensor", 2: "multicast_access"}

# Every comparison at W = 2, 3, 4, the forms and reset=None / a reset value in turn, both strategies.
COMPARISON_CASES = [
    pytest.param(
        cmp,
        world,
        k % 3,
        k % 2 == 0,
        castpile.STRATEGIES[k % 2],
        id=f"{cmp}-W{world}-{FORMS[k % 3]}-{'keep' if k % 2 == 0 else 'reset'}",
    )
    for k, (cmp, world) in enumerate((cmp, world) for cmp in WAIT_COMPARISONS for world in (2, 3, 4))
]


@pytest.mark.parametrize(("cmp", "world", "form", "keep", "strategy"), COMPARISON_CASES)
def test_every_comparison_waits_for_the_signal(cmp, world, form, keep, strategy, tmp_path):
    check_every_comparison(kernels(strategy, tmp_path), world, cmp, form=form, keep=keep)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("world", [2, 3, 4])
def test_a_counter_barrier_met_many_times_in_a_row(world, strategy, tmp_path):
    check_counter_barrier(kernels(strategy, tmp_path), world, rounds=6, form=world % 3)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("world", "root", "late"), [(2, 0, 1), (3, 1, 2), (4, 0, 3), (4, 2, 2)])
def test_epoch_flags_read_by_several_ranks(world, root, late, strategy, tmp_path):
    check_epoch_flags_read_by_several_ranks(kernels(strategy, tmp_path), world, epochs=4, root=root, late=late)


# remote="nvshmem": every peer remote (local_world_size 1) or mixed (2), through the NVSHMEM simulator.
@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("world", "lws", "late"), [(2, 1, 0), (3, 2, 2), (4, 1, 1), (4, 2, 3)])
def test_remote_epoch_flags_read_over_nvshmem(world, lws, late, strategy, tmp_path):
    check_remote_epoch_barrier(remote_kernels(strategy, tmp_path), world, 3, local_world_size=lws, late=late)


@pytest.mark.parametrize(("world", "lws"), [(2, 1), (3, 2), (4, 1)])
def test_remote_wait_with_a_comparison_and_a_reset(world, lws, tmp_path):
    check_remote_wait_with_a_reset(remote_kernels("loop", tmp_path), world, local_world_size=lws)


# samples/epoch_queue.py: rank 0 sends `count` rows to each other rank through a ring of Q slots.
EPOCH_QUEUE = Path(__file__).resolve().parents[1] / "samples" / "epoch_queue.py"


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize(("world", "late"), [(2, 1), (3, 2), (4, 1)])
def test_the_epoch_queue_sample_delivers_every_row_in_order(world, late, strategy, tmp_path):
    path = tmp_path / f"epoch_queue_{strategy}.py"
    path.write_bytes(castpile.transpile(EPOCH_QUEUE.read_bytes(), str(EPOCH_QUEUE), strategy=strategy))
    queue = import_file(path, f"epoch_queue_{strategy}")
    q, count, n, block = 2, 5, 6, 8
    rings = sim.symmetric_scratch(world, (q, n), torch.float32)
    pads = sim.symmetric_scratch(world, (q + world,), torch.int32)
    rows = {c: torch.arange(count * n, dtype=torch.float32).reshape(count, n) + 100 * c for c in range(1, world)}

    def body(rank):
        ring, pad = rings[rank], pads[rank]
        if rank == late:
            time.sleep(0.3)
        if rank == 0:
            for consumer in range(1, world):
                queue.produce[(1,)](
                    rows[consumer], ring.tensor, ring.ptrs, pad.tensor, pad.ptrs, consumer, count, n, q, block
                )
            return None
        out = torch.full((count, n), float("nan"))
        queue.consume[(1,)](out, ring.tensor, pad.tensor, pad.ptrs, 0, rank, count, n, q, block)
        return out

    outs = sim.run(body, world, timeout=90)
    for consumer in range(1, world):
        assert torch.equal(outs[consumer], rows[consumer]), f"rank {consumer} received {outs[consumer].tolist()}"
        epochs = torch.zeros(q + world, dtype=torch.int32)
        epochs[:q] = torch.tensor([len(range(slot, count, q)) for slot in range(q)])
        assert torch.equal(pads[consumer].tensor, epochs), f"rank {consumer}'s flags: {pads[consumer].tensor.tolist()}"
    acks = torch.zeros(q + world, dtype=torch.int32)
    acks[q + 1 :] = count
    assert torch.equal(pads[0].tensor, acks), f"the producer's flags: {pads[0].tensor.tolist()}"


# -- the checks fail when a helper is broken --------------------------------------------------

GE_IS_EQ = ("_castpile_holds", "return flags >= value", "return flags == value")
ADD_SETS = ("_castpile_signal_lanes", 'if op == "add":', "if False:")
KEEP_RESETS = ("_castpile_arrive", "if reset is not None:", "reset = 0\n        if True:")  # reset=None resets to 0


def test_a_ge_that_waits_for_equality_hangs(tmp_path):
    with pytest.raises(sim.RankTimeout) as hung:
        check_every_comparison(kernels("loop", tmp_path, GE_IS_EQ), 2, "ge", form=0, keep=True, timeout=HANG)
    assert hung.value.hung == [0, 1]


def test_an_add_that_sets_hangs_the_counter_barrier(tmp_path):
    with pytest.raises(sim.RankTimeout):
        check_counter_barrier(kernels("gather", tmp_path, ADD_SETS), 2, rounds=2, form=1, timeout=HANG)


def test_a_reset_none_that_resets_hangs_the_other_readers(tmp_path):
    with pytest.raises(sim.RankTimeout):
        check_epoch_flags_read_by_several_ranks(
            kernels("loop", tmp_path, KEEP_RESETS), 3, epochs=2, root=0, late=1, timeout=HANG
        )


REMOTE_KEEP_RESETS = (
    "_castpile_wait_remote",
    "if reset is not None:\n                    _castpile_remote_put(addr, pe, example, table, offs, arrived, reset)",
    "if True:\n                    _castpile_remote_put(addr, pe, example, table, offs, arrived, 0)",
)


def test_a_remote_reset_none_that_resets_fails_the_epoch_barrier(tmp_path):
    with pytest.raises((AssertionError, sim.RankTimeout)):
        check_remote_epoch_barrier(
            remote_kernels("loop", tmp_path, REMOTE_KEEP_RESETS), 2, 2, local_world_size=1, late=1, timeout=HANG
        )


# -- what these tests run compiles for sm_90 ----------------------------------------------------------

TYPES = {"out": "*fp32", "data": "*fp32", "src": "*fp32", "buf_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64"}
COMPILES = {
    "publish_then_set": [{"W": w, "SLOTS": SLOTS, "BLOCK": BLOCK} for w in (2, 3)],
    "counter_rounds": [{"W": 3, "WP": 4, "SLOTS": SLOTS, "FORM": form} for form in FORMS]
    + [{"W": 2, "WP": 2, "SLOTS": SLOTS, "FORM": 0}],
    "epoch_broadcast": [{"W": w, "SLOTS": SLOTS, "BLOCK": BLOCK} for w in (2, 3)],
    **{
        f"wait_{cmp}": [
            {"SLOTS": SLOTS, "BLOCK": BLOCK, "FORM": form, "KEEP": keep} for form in FORMS for keep in (False, True)
        ]
        for cmp in WAIT_COMPARISONS
    },
}
INT_OUT = {"counter_rounds": {"out": "*i32", "data": "*i32"}}
REMOTE_TYPES = {"out": "*i32", "data": "*i32", "data_table": "*i64", "pad": "*i32", "pad_table": "*i64"}
REMOTE_COMPILES = {
    "epoch_barrier_remote": [{"W": w, "SLOTS": sim.SIM_PAD_SLOTS} for w in (2, 3)],
    "wait_all_remote": [{"W": 3, "SLOTS": sim.SIM_PAD_SLOTS}],
    "set_own_flag": [{"SLOTS": sim.SIM_PAD_SLOTS}],
}


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_kernels_compile_for_sm90(strategy, tmp_path):
    assert sorted(COMPILES) == sorted(re.findall(r"^def (\w+)\(", KERNELS, re.M))
    path = tmp_path / f"flags_kernels_{strategy}.py"
    path.write_bytes(castpile.transpile(KERNELS.encode(), str(path), strategy=strategy))
    jobs = [
        Job(
            path,
            kernel,
            signature(KERNELS, kernel, {**TYPES, **INT_OUT.get(kernel, {})}),
            constexprs,
            name=f"{kernel} {constexprs}",
        )
        for kernel, variants in COMPILES.items()
        for constexprs in variants
    ]
    remote = tmp_path / f"flags_remote_kernels_{strategy}.py"
    remote.write_bytes(castpile.transpile(REMOTE_KERNELS.encode(), str(remote), strategy=strategy))
    assert sorted(REMOTE_COMPILES) == sorted(re.findall(r"^def (\w+)\(", REMOTE_KERNELS, re.M))
    jobs += [
        Job(
            remote,
            kernel,
            signature(REMOTE_KERNELS, kernel, REMOTE_TYPES),
            constexprs,
            name=f"{kernel} {constexprs}",
            nvshmem=True,
        )
        for kernel, variants in REMOTE_COMPILES.items()
        for constexprs in variants
    ]
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
