"""Ranks on one GPU launch a body's own Triton kernels in step: launch n of any rank after every rank loaded its n-th.

A rank that compiles or loads a kernel, or whose launch grows the device's local memory, waits
for the device; with ranks on one GPU (:mod:`castpile.gpu.one_gpu`) the device's work can be a
peer's kernel that waits for the very kernel this rank is loading, and neither finishes.  The
library's own launches are bound once at a barrier of the ranks (``one_gpu.launch_caches``); a
body's own ``kernel[grid](...)`` launches, a new JIT specialisation among them (``rank == 1``, a
value divisible by 16), go through Triton's launch hook, which :func:`installed` chains a gate
into for the length of a run::

    gate = LaunchGate(world_size)
    with installed(gate):
        ...                      # each rank thread: gate.enter(rank), its body, gate.leave()

Triton calls the hook after it compiled and loaded the kernel and before the driver launches it.
The gate holds a rank's n-th launch until every rank still running has reached its own n-th (so
has it loaded) or finished; the last to arrive first reserves the most local memory any rank's
n-th kernel needs (:mod:`castpile.gpu.local_memory`).  Every rank's earlier kernels were launched
before any rank loads its next, so nothing a load waits for waits for the load.  The ranks must
launch the same number of kernels through ``kernel[grid]`` in the same order, as SPMD bodies do; a
rank that launches one more than its peers waits for them until the run's timeout, and
:meth:`LaunchGate.state` says so.  Launches that bypass Triton's hook (the library's bound ones,
CUDA graph replays, torch's own kernels) are not held.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from triton import knobs

from . import local_memory


class GateBroken(RuntimeError):
    """The run stopped (a timeout) while this rank waited at the launch gate: its launch was not issued."""


class LaunchGate:
    """The launch gate of one run of ``world_size`` rank threads (see the module docstring)."""

    def __init__(self, world_size: int):
        self.world_size = world_size
        self.arrived = [0] * world_size  # launches each rank reached (its current one included)
        self.finished = [False] * world_size
        self.released = 0  # launches every rank may issue
        self.names: list[dict[int, str]] = [{} for _ in range(world_size)]  # rank -> launch n -> kernel name
        self.needed: dict[int, int] = {}  # launch n -> the most local memory a rank's kernel n needs
        self.broken = False
        self.on_done: list = []  # called once every rank has left (the hook's removal, deferred)
        self.condition = threading.Condition()
        self.local = threading.local()

    def enter(self, rank: int) -> None:
        """Make the calling thread rank ``rank``'s: its launches are gated from now on."""
        self.local.rank = rank

    def leave(self) -> None:
        """The calling rank is done (its body returned or raised): no peer waits for its next launch."""
        rank = getattr(self.local, "rank", None)
        if rank is None:
            return
        self.local.rank = None
        with self.condition:
            self.finished[rank] = True
            self._release()
            done = all(self.finished)
            calls, self.on_done = (self.on_done, []) if done else ([], self.on_done)
        for call in calls:
            call()

    def when_done(self, call) -> None:
        """Call ``call`` once every rank has left the gate: now if they all have."""
        with self.condition:
            if not all(self.finished):
                self.on_done.append(call)
                return
        call()

    def break_(self) -> None:
        """Stop the run: every rank waiting at the gate raises :class:`GateBroken` instead of launching."""
        with self.condition:
            self.broken = True
            self.condition.notify_all()

    def __call__(self, metadata) -> None:
        """Triton's launch-enter hook: hold this rank's launch until every running rank reached the same one."""
        rank = getattr(self.local, "rank", None)
        if rank is None:  # a thread of no rank of this run
            return
        data = getattr(metadata, "data", None) or {}
        with self.condition:
            if self.broken:
                raise GateBroken(f"rank {rank}'s launch of {data.get('name', '?')} came after the run stopped")
            self.arrived[rank] += 1
            launch = self.arrived[rank]
            self.names[rank][launch] = str(data.get("name", "?"))
            function = data.get("function")
            need = local_memory.function_local_bytes(function) if function else 0
            self.needed[launch] = max(self.needed.get(launch, 0), need)
            self._release()
            while self.released < launch and not self.broken:
                self.condition.wait()
            if self.released < launch:
                raise GateBroken(f"rank {rank}'s launch {launch} ({self.names[rank][launch]}) was not issued")

    def _release(self) -> None:
        """Release every launch that each rank still running has reached, reserving its local memory first."""
        running = [n for n, done in zip(self.arrived, self.finished) if not done]
        ready = min(running) if running else max(self.arrived, default=0)
        while self.released < ready:
            self.released += 1
            local_memory.reserve(self.needed.pop(self.released, 0))
        self.condition.notify_all()

    def state(self, rank: int) -> str | None:
        """Where rank ``rank`` stands at the gate, in words, if it waits there (else None)."""
        with self.condition:
            launch = self.arrived[rank]
            if self.finished[rank] or launch <= self.released:
                return None
            behind = [
                f"rank {r} ({self.arrived[r]} launches so far)"
                for r in range(self.world_size)
                if not self.finished[r] and self.arrived[r] < launch
            ]
            return (
                f"waits at the launch gate to launch {self.names[rank].get(launch, '?')} (its launch {launch}) "
                f"until {', '.join(behind)} reach their launch {launch}"
            )


def is_gate(hook) -> bool:
    """Whether ``hook`` is a :class:`LaunchGate` (castpile's own, which a bound launch may bypass)."""
    return isinstance(hook, LaunchGate)


@contextlib.contextmanager
def installed(gate: LaunchGate) -> Iterator[LaunchGate]:
    """Chain ``gate`` into Triton's launch-enter hook while the block runs (Triton 3.6's chain, or 3.5's one hook).

    Ranks still running when the block ends (a run that timed out) keep the gate, broken, until they
    leave: a rank that was compiling then raises :class:`GateBroken` at its launch instead of starting
    a kernel that no peer will meet.
    """
    hook = knobs.runtime.launch_enter_hook
    if hasattr(hook, "add"):
        hook.add(gate)
        try:
            yield gate
        finally:
            gate.when_done(lambda: hook.remove(gate))
        return
    knobs.runtime.launch_enter_hook = gate if hook is None else _Both(gate, hook)
    try:
        yield gate
    finally:
        gate.when_done(lambda: setattr(knobs.runtime, "launch_enter_hook", hook))


class _Both:
    """Triton 3.5's single launch hook holding the gate and the hook that was there."""

    def __init__(self, gate: LaunchGate, other):
        self.gate, self.other = gate, other

    def __call__(self, metadata) -> None:
        self.gate(metadata)
        self.other(metadata)
