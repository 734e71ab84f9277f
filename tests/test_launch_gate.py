"""The one-GPU launch gate (castpile/gpu/launch_gate.py) and what a timed-out rank was doing (rank_activity.py).

On a GPU, Triton calls the gate from its launcher; here rank threads call it as Triton would,
with the launch metadata Triton passes (its ``data`` holds the kernel's name and handle).
benchmarks/check_one_gpu_own_kernels.py runs it under real launches on one H200.
"""

import random
import re
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch
from triton import knobs

from castpile.gpu import hang_sites, launch, launch_gate, local_memory, one_gpu, rank_activity, sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import import_file

ROOT = Path(__file__).resolve().parents[1]


def metadata(name: str, function: int = 0):
    return types.SimpleNamespace(data={"name": name, "function": function})


def ranks(world: int, body) -> list:
    """Run ``body(gate, rank)`` on ``world`` threads that entered one gate; their exceptions, by rank."""
    gate = launch_gate.LaunchGate(world)
    errors: dict[int, BaseException] = {}

    def thread(rank):
        gate.enter(rank)
        try:
            body(gate, rank)
        except BaseException as error:
            errors[rank] = error
        finally:
            gate.leave()

    threads = [threading.Thread(target=thread, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a rank is still at the gate"
    return [errors.get(r) for r in range(world)]


@pytest.mark.parametrize("world", [2, 3, 8])
def test_no_rank_issues_a_launch_before_every_rank_reached_it(world):
    events, lock = [], threading.Lock()

    def body(gate, rank):
        rng = random.Random(rank)
        for n in range(1, 6):
            time.sleep(rng.uniform(0, 0.02))  # compiling, loading: ranks reach each launch at their own time
            with lock:
                events.append(("arrive", n, rank))
            gate(metadata(f"k{n}"))
            with lock:
                events.append(("issue", n, rank))

    assert ranks(world, body) == [None] * world
    for n in range(1, 6):
        arrivals = [i for i, (kind, m, _) in enumerate(events) if kind == "arrive" and m == n]
        issues = [i for i, (kind, m, _) in enumerate(events) if kind == "issue" and m == n]
        assert len(arrivals) == len(issues) == world
        assert min(issues) > max(arrivals), f"launch {n} issued before every rank had loaded it"


def test_a_rank_that_finished_holds_no_peer():
    def body(gate, rank):
        for n in range(3 if rank == 0 else 2):  # rank 0 launches one kernel more, at the end
            gate(metadata(f"k{n}"))

    assert ranks(2, body) == [None, None]


def test_the_most_local_memory_a_launch_needs_is_reserved_before_any_rank_issues_it(monkeypatch):
    reserved, issued, lock = [], [], threading.Lock()
    monkeypatch.setattr(local_memory, "function_local_bytes", lambda function: function)
    monkeypatch.setattr(local_memory, "reserve", lambda nbytes: reserved.append((len(issued), nbytes)))

    def body(gate, rank):
        for n in range(1, 4):
            time.sleep(0.01 * rank)
            gate(metadata("k", function=100 * n + rank))  # rank r's copy of launch n spills 100 n + r bytes
            with lock:
                issued.append(n)

    assert ranks(3, body) == [None] * 3
    assert [nbytes for _, nbytes in reserved] == [102, 202, 302]
    for (issued_before, _), n in zip(reserved, (1, 2, 3)):
        assert issued_before == 3 * (n - 1), "a rank launched before the local memory was reserved"


def test_a_rank_waiting_for_a_peer_that_never_launches_says_so_and_breaks():
    gate = launch_gate.LaunchGate(2)
    failed = []

    def rank0():
        gate.enter(0)
        try:
            gate(metadata("ring_put"))
            gate(metadata("epoch_barrier"))
        except launch_gate.GateBroken as error:
            failed.append(str(error))

    def rank1():
        gate.enter(1)
        gate(metadata("ring_put"))  # and never launches again, nor finishes

    threads = [threading.Thread(target=rank0, daemon=True), threading.Thread(target=rank1, daemon=True)]
    for t in threads:
        t.start()
    threads[1].join(5)
    deadline = time.monotonic() + 5
    while gate.state(0) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.state(0) == (
        "waits at the launch gate to launch epoch_barrier (its launch 2) until rank 1 (1 launches so far) reach "
        "their launch 2"
    )
    assert gate.state(1) is None
    gate.break_()
    threads[0].join(5)
    assert failed == ["rank 0's launch 2 (epoch_barrier) was not issued"]


def test_threads_of_no_rank_pass_the_gate():
    gate = launch_gate.LaunchGate(2)
    gate(metadata("k"))  # the calling thread never entered: not held
    assert gate.arrived == [0, 0]


def test_the_gate_is_chained_into_triton_s_hook_and_bound_launches_still_bypass_it():
    before = launch.launch_hooked()
    gate = launch_gate.LaunchGate(1)
    with launch_gate.installed(gate):
        gate.enter(0)
        gate.leave()
        assert launch.launch_hooked() == before, "the gate alone must not turn bound launches into kernel[grid]"

        def profiler(metadata):
            pass

        knobs.runtime.launch_enter_hook.add(profiler)
        try:
            assert launch.launch_hooked()
        finally:
            knobs.runtime.launch_enter_hook.remove(profiler)
    assert gate not in getattr(knobs.runtime.launch_enter_hook, "calls", [])


# -- what a rank was doing -------------------------------------------------------------------------------------
def _fake_frame_in(path: str, function: str, inner):
    """A function ``function`` whose code says it lives in ``path``, calling ``inner``."""
    namespace = {"inner": inner}
    exec(compile(f"def {function}(self=None):\n    return inner()\n", path, "exec"), namespace)
    return namespace[function]


def _stack_of(call):
    """``call(innermost)`` on a thread, stopped in ``innermost``: (its current frame, the event that ends it)."""
    ready, done = threading.Event(), threading.Event()

    def innermost():
        ready.set()
        done.wait(10)

    thread = threading.Thread(target=call, args=(innermost,), daemon=True)
    thread.start()
    ready.wait(10)
    return sys._current_frames()[thread.ident], done


#: Where the stand-ins for Triton's and torch's frames say they live: library code, as Triton's own is.
LIBRARY = (*hang_sites.library_dirs(), "/x/")


def test_a_rank_compiling_a_kernel_is_named_compiling_with_the_user_s_launch_line():
    kernel = types.SimpleNamespace(__name__="ring_put")
    jit_run = _fake_frame_in("/x/triton/runtime/jit.py", "run", None)

    def users_body(innermost):
        compiling = _fake_frame_in("/x/triton/compiler/compiler.py", "compile", innermost)
        jit_run.__globals__["inner"] = compiling
        jit_run(kernel)  # the user's line: the launch

    frame, done = _stack_of(users_body)
    try:
        words = rank_activity.describe_frame(frame, LIBRARY)
    finally:
        done.set()
    line = users_body.__code__.co_firstlineno + 3
    assert words == f"compiles kernel ring_put (Triton's compiler), launched at {__file__}:{line} (in users_body)"


def test_a_rank_loading_a_module_and_one_waiting_for_its_stream_are_told_apart():
    def loading(innermost):
        _fake_frame_in("/x/triton/compiler/compiler.py", "_init_handles", innermost)()

    def syncing(innermost):
        _fake_frame_in("/x/torch/cuda/streams.py", "synchronize", innermost)()

    def preparing(innermost):
        _fake_frame_in("/x/triton/runtime/jit.py", "run", innermost)(types.SimpleNamespace(__name__="ring_put"))

    for body, words in (
        (loading, "loads kernel ?'s module onto the GPU, launched at"),
        (preparing, "prepares kernel ring_put's launch (Triton's JIT: arguments, specialisation), launched at"),
        (syncing, "waits for its stream's kernels (a kernel waiting for a signal no peer sends?), at"),
    ):
        frame, done = _stack_of(body)
        try:
            assert rank_activity.describe_frame(frame, LIBRARY).startswith(words)
        finally:
            done.set()


def test_a_finished_thread_is_said_to_have_finished():
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    assert rank_activity.describe(thread) == "has finished"


def test_the_timeout_says_a_rank_was_compiling_rather_than_blame_a_barrier():
    error = one_gpu.RankTimeout([1], 5.0, {1: "compiles kernel ring_put (Triton's compiler), launched at b.py:3"})
    assert "rank 1 compiles kernel ring_put" in str(error) and "longer timeout" in str(error)
    assert "mismatched barrier" not in str(error)
    waiting = one_gpu.RankTimeout([0], 5.0, {0: "waits for its stream's kernels (...), at b.py:9 (in body)"})
    assert "mismatched barrier" in str(waiting) and "rank 0 waits for its stream's kernels" in str(waiting)


def test_a_rank_still_running_after_the_run_keeps_the_broken_gate_until_it_leaves():
    gate = launch_gate.LaunchGate(2)
    gate.enter(1)
    gate.leave()  # rank 1 finished
    gate.enter(0)  # rank 0 outlives the run (it was compiling when the time ran out)
    with launch_gate.installed(gate):
        pass
    gate.break_()
    assert gate in knobs.runtime.launch_enter_hook.calls
    with pytest.raises(launch_gate.GateBroken):
        gate(metadata("late"))  # its launch is refused, not started
    gate.leave()
    assert gate not in knobs.runtime.launch_enter_hook.calls


# -- the GPU check's kernels, on simulated ranks and for sm_90 -------------------------------------------------
OWN_KERNELS = ROOT / "benchmarks" / "kernels" / "own_kernels.py"


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("late", ["none", "rank 0 last"])
def test_the_own_kernels_body_of_the_gpu_check_is_exact_and_race_free_on_simulated_ranks(world, late):
    own = import_file(OWN_KERNELS)
    n, calls, block = 300, 3, 128
    bufs = sim.symmetric_scratch(world, (world, n), torch.float32, name="buf")
    pads = sim.symmetric_scratch(world, (1,), torch.int32, name="pad")
    gen = torch.Generator().manual_seed(world)
    inputs = [[torch.randint(-9, 9, (n,), generator=gen).float() for _ in range(world)] for _ in range(calls)]

    def body(rank):
        outs = [torch.full((n,), float("nan")) for _ in range(calls)]
        for call in range(calls):
            own.ring_call(bufs, pads, rank, call, inputs[call][rank], outs[call], world, block)
        return outs, int(pads[rank].tensor[0])

    delays = {0: 0.3} if late == "rank 0 last" else None  # the ring's first sender starts after its peers
    for rank, (outs, count) in enumerate(sim.run(body, world, races=True, timeout=120, start_delays=delays)):
        assert count == 2 * calls * world
        for call in range(calls):
            assert torch.equal(outs[call], inputs[call][(rank - 1) % world])


def test_the_own_kernels_compile_for_sm90_in_every_specialisation_the_gpu_check_meets(tmp_path):
    source = OWN_KERNELS.read_text()
    types = {"buf": "*fp32", "table": "*i64", "x": "*fp32", "pad": "*i32", "pad_ptrs": "*i64"}
    jobs = []
    for world in (2, 3, 8):
        for rank in (0, 1, 2):  # rank 1 is a constexpr to the JIT
            sig = signature(source, "ring_put", types)
            constexprs = {"WORLD": world, "BLOCK": 256}
            if rank == 1:
                sig["rank"], constexprs["rank"] = "constexpr", 1
            jobs.append(Job(OWN_KERNELS, "ring_put", sig, constexprs, name=f"ring_put W{world} rank {rank}"))
        for epoch in (1, 2):  # epoch 1 is a constexpr
            sig = signature(source, "epoch_barrier", types)
            constexprs = {"WORLD": world}
            if epoch == 1:
                sig["epoch"], constexprs["epoch"] = "constexpr", 1
            jobs.append(Job(OWN_KERNELS, "epoch_barrier", sig, constexprs, name=f"epoch_barrier W{world} {epoch}"))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
    barrier = results["epoch_barrier W3 2"].ptx.read_text()
    atoms = re.findall(r"(?:atom|red)\.[\w.]+", barrier)
    assert any({"sys", "release", "add"} <= set(a.split(".")) for a in atoms), (
        f"the arrival: a release add at system scope, not among {atoms}"
    )
