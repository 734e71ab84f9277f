"""The CPU multi-rank simulator, checked with a hand-written plain-Triton all-reduce."""

import os
import random
import re
import subprocess
import sys
import threading
import time
import types
import warnings

import pytest
import torch
import triton
import triton.language as tl

from castpile.gpu import sim
from testkit import rank1_after_rank0


@triton.jit
def _barrier(pad_ptrs, rank, slot, WORLD: tl.constexpr, WP: tl.constexpr):
    """Compare-and-swap barrier among block ``slot`` of every rank (plain Triton)."""
    peer = tl.arange(0, WP)
    live = peer < WORLD
    safe = tl.where(live, peer, rank)
    tl.debug_barrier()
    remote = tl.load(pad_ptrs + safe).to(tl.pointer_type(tl.int32)) + slot * WORLD + rank
    one = tl.full((WP,), 1, tl.int32)
    todo = live
    while tl.max(todo.to(tl.int32), axis=0) > 0:
        old = tl.atomic_cas(remote, tl.where(todo, 0, -1), one, sem="release", scope="sys")
        todo = todo & (old != 0)
    own = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int32)) + slot * WORLD + safe
    todo = live
    while tl.max(todo.to(tl.int32), axis=0) > 0:
        old = tl.atomic_cas(own, tl.where(todo, 1, -1), one * 0, sem="acquire", scope="sys")
        todo = todo & (old != 1)
    tl.debug_barrier()


@triton.jit
def _all_reduce(
    buf_ptrs, pad_ptrs, out, rank, n, WORLD: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr, BARRIER: tl.constexpr
):
    pid = tl.program_id(0)
    if BARRIER:
        _barrier(pad_ptrs, rank, pid, WORLD, WP)
    tile = pid
    while tile < tl.cdiv(n, BLOCK):  # not `for ... in range(runtime)`: see docs/collectives.md
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK,), tl.float32)
        for p in tl.static_range(WORLD):
            src = tl.load(buf_ptrs + p).to(tl.pointer_type(out.dtype.element_ty))
            acc += tl.load(src + offs, mask=offs < n, other=0).to(tl.float32)
        tl.store(out + offs, acc, mask=offs < n)
        tile += tl.num_programs(0)
    if BARRIER:
        _barrier(pad_ptrs, rank, pid, WORLD, WP)


def _hand_all_reduce(symm, barrier=True, grid=2, block=32):
    out = torch.empty_like(symm.tensor)
    world = symm.world_size
    _all_reduce[(grid,)](
        symm.buffer_ptrs,
        symm.signal_pad_ptrs,
        out,
        symm.rank,
        out.numel(),
        world,
        triton.next_power_of_2(world),
        block,
        barrier,
    )
    return out


def test_results_come_back_by_rank():
    assert sim.run(lambda rank, k: rank * k, 3, args=(10,)) == [0, 10, 20]


def test_shared_buffers_are_shared_at_one_address():
    handles = sim.symmetric_empty(3, (4,), torch.int32)
    for h in handles:
        h.tensor.zero_()

    def body(rank):
        time.sleep(0.05 * rank)
        handles[rank].tensor.fill_(rank + 1)
        return [h.tensor.data_ptr() for h in handles]

    ptrs = sim.run(body, 3)
    assert ptrs[0] == ptrs[1] == ptrs[2] == handles[0].buffer_ptrs.tolist()
    assert [int(h.tensor.sum()) for h in handles] == [4, 8, 12]
    assert all(int(h.signal_pad.abs().sum()) == 0 for h in handles)


def test_a_raising_rank_is_reported_with_its_traceback():
    def body(rank):
        if rank == 1:
            raise ValueError("boom on one rank")
        return rank

    with pytest.raises(sim.RankError) as info:
        sim.run(body, 2, timeout=20)
    assert list(info.value.errors) == [1]
    assert "ValueError: boom on one rank" in str(info.value)


def test_a_hung_rank_is_killed_and_named():
    pids = sim.shared_empty((3,), torch.int64).zero_()

    def body(rank):
        pids[rank] = os.getpid()
        while rank == 2:
            time.sleep(0.01)
        return rank

    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, 3, timeout=1.5)
    assert info.value.hung == [2]
    assert "ranks [2] did not finish within 1.5 s" in str(info.value)
    for pid in pids.tolist():
        with pytest.raises(ProcessLookupError):  # every rank has ended and been reaped, the hung one too
            os.kill(pid, 0)


@pytest.fixture
def thread_holding_a_lock():
    """A parent thread that holds a lock until the test ends: forked ranks inherit the lock held, not the thread."""
    lock, done = threading.Lock(), threading.Event()
    holder = threading.Thread(target=lambda: (lock.acquire(), done.wait(), lock.release()), name="lock-holder")
    holder.start()
    while not lock.locked():
        time.sleep(0.001)
    yield lock
    done.set()
    holder.join()


def test_forking_with_threads_warns_and_a_rank_waiting_on_one_is_explained(thread_holding_a_lock):
    """The deadlock of torch.compile's inductor backend in a rank after the parent used it, made deterministic."""
    # The names listed are every thread but this one: an earlier test in this process may have left others.
    with pytest.warns(
        sim.ForkWithThreadsWarning, match=r"had threads \[.*'lock-holder'.*TORCHINDUCTOR_COMPILE_THREADS=1"
    ):
        assert sim.run(lambda rank: rank, 2, timeout=20) == [0, 1]  # ranks that need no thread are fine
    with warnings.catch_warnings(record=True) as again, pytest.raises(sim.RankTimeout) as info:
        warnings.simplefilter("always")
        sim.run(lambda rank: thread_holding_a_lock.acquire(), 2, timeout=1.5, races=False)
    assert not [w for w in again if w.category is sim.ForkWithThreadsWarning], "the same threads were warned of twice"
    assert info.value.hung == [0, 1]
    assert re.search(
        r"waits for a thread that did not survive the fork: the parent process had threads \[.*'lock-holder'",
        str(info.value),
    ), str(info.value)


def test_in_a_notebook_the_warning_says_what_a_notebook_can_do(monkeypatch):
    """ipykernel's threads are always there: the advice is one a notebook can follow, given once."""
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    done = threading.Event()
    heartbeat = threading.Thread(target=done.wait, name="Heartbeat")
    heartbeat.start()
    try:
        with pytest.warns(sim.ForkWithThreadsWarning, match=r"in a notebook, ipykernel's own threads .* first cell"):
            assert sim.run(lambda rank: rank, 2, timeout=20) == [0, 1]
        with warnings.catch_warnings(record=True) as again:
            warnings.simplefilter("always")
            assert sim.run(lambda rank: rank, 2, timeout=20) == [0, 1]
        assert not [w for w in again if w.category is sim.ForkWithThreadsWarning]
    finally:
        done.set()
        heartbeat.join()


def test_forking_without_threads_does_not_warn():
    """In a fresh interpreter: this one may hold threads that earlier tests started."""
    script = (
        "import warnings\nwarnings.simplefilter('error')\nfrom castpile.gpu import sim\n"
        "assert sim.run(lambda rank: rank, 2, timeout=20) == [0, 1]\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"TRITON_INTERPRET": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_what_the_parent_printed_before_run_is_written_once():
    """Output to a pipe is buffered: each forked rank held a copy of the parent's unwritten text and wrote it as it
    ended (W + 1 copies of a print before sim.run; in a notebook, of the ForkWithThreadsWarning)."""
    script = (
        "from castpile.gpu import sim\nprint('before')\n"
        "assert sim.run(lambda rank: print('rank', rank) or rank, 3, timeout=20) == [0, 1, 2]\nprint('after')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "before" and lines[-1] == "after" and sorted(lines[1:-1]) == ["rank 0", "rank 1", "rank 2"]


def test_a_kernel_waiting_for_a_missing_peer_times_out():
    handles = sim.symmetric_empty(2, (8,), torch.float32)

    def body(rank):
        if rank == 0:
            _hand_all_reduce(handles[rank], grid=1)

    with pytest.raises(sim.RankTimeout) as info:
        sim.run(body, 2, timeout=3)
    assert info.value.hung == [0]


def _check_hand_all_reduce(world, barrier, delays, dtype=torch.float32, n=100):
    gen = torch.Generator().manual_seed(world)
    inputs = [torch.randint(-50, 50, (n,), generator=gen).to(dtype) for _ in range(world)]
    handles = sim.symmetric_empty(world, (n,), dtype)
    for h in handles:
        h.tensor.fill_(float("nan"))

    def body(rank):
        time.sleep(delays[rank])
        handles[rank].tensor.copy_(inputs[rank])
        return _hand_all_reduce(handles[rank], barrier=barrier)

    outs = sim.run(body, world, timeout=60)
    expected = torch.stack(inputs).float().sum(0).to(dtype)
    pads_zero = all(int(h.signal_pad.abs().sum()) == 0 for h in handles)
    return all(torch.equal(o, expected) for o in outs), pads_zero


@pytest.mark.parametrize("world", [2, 3, 4])
def test_barrier_synchronises_ranks_started_at_random_times(world):
    rng = random.Random(world)
    exact, pads_zero = _check_hand_all_reduce(world, True, [rng.uniform(0, 0.3) for _ in range(world)])
    assert exact and pads_zero


def test_without_the_barrier_an_early_rank_reads_stale_data():
    """Rank 1 writes its input only once rank 0 has returned (a shared flag orders them, not a sleep)."""
    n = 100
    gen = torch.Generator().manual_seed(2)
    inputs = [torch.randint(-50, 50, (n,), generator=gen).float() for _ in range(2)]
    handles = sim.symmetric_empty(2, (n,), torch.float32)

    def reference(xs, rank):
        return torch.stack(xs).sum(0)

    assert rank1_after_rank0(handles, inputs, _hand_all_reduce, reference, barrier=False) == [False, True]
    assert rank1_after_rank0(handles, inputs, _hand_all_reduce, reference, barrier=True) == [True, True]


@pytest.mark.parametrize("value", [None, "0"], ids=["unset", "0"])
def test_run_without_the_interpreter_says_what_to_set(monkeypatch, value):
    """Without TRITON_INTERPRET=1 every rank would fail in Triton's driver lookup ("0 active drivers")."""
    if value is None:
        monkeypatch.delenv("TRITON_INTERPRET")
    else:
        monkeypatch.setenv("TRITON_INTERPRET", value)
    with pytest.raises(RuntimeError, match=r"set TRITON_INTERPRET=1 .*before .*import"):
        sim.run(lambda rank: rank, 2)


def test_library_modules_do_not_import_the_simulator():
    """Only the simulator's own modules import castpile.gpu.sim; the fused ops take its allocator from the caller."""
    import ast
    from pathlib import Path

    import castpile.gpu

    root = Path(castpile.gpu.__file__).parent
    simulator = {root / "sim.py", root / "sim_nvshmem.py"}
    importers = []
    for path in sorted(root.rglob("*.py")):
        package = ["castpile", *path.parent.relative_to(root.parent).parts]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
                names = {f"{module}.{alias.name}" for alias in node.names} | {module}
            elif isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            else:
                continue
            if "castpile.gpu.sim" in names and path not in simulator:
                importers.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert importers == []
