"""A CPU multi-rank simulator: W forked processes stand in for W GPUs.

Buffers and signal pads live in anonymous shared memory mapped before the fork,
so every rank sees them at the same addresses.  Each rank then runs its own
kernels under the Triton interpreter (``TRITON_INTERPRET=1``) at the same time
as the others: spin-waits on signal pads really synchronise ranks, and a rank
that waits for a signal nobody sends is caught by a timeout, which names the
``castpile.wait`` each hung rank spins in (:mod:`castpile.gpu.hang_sites`)::

    handles = sim.symmetric_empty(4, (n,), torch.float32)
    def body(rank):
        symm = handles[rank]
        symm.tensor.copy_(inputs[rank])
        return collectives.all_reduce_one_shot(symm)
    outs = sim.run(body, 4, timeout=60)       # [rank 0's result, ..., rank 3's]

Every peer is load/store reachable, as on one NVLink domain, unless ``local_world_size``
splits the ranks into simulated nodes: then, as on torch's NVSHMEM backend, a peer on
another node has address 0 in this rank's ``buffer_ptrs``, ``signal_pad_ptrs`` and
scratch ``ptrs`` and ``reachable[peer]`` False (the memory stays shared, so a stand-in
for NVSHMEM's get/put can reach it through :func:`peer_address`, as
:mod:`castpile.gpu.sim_nvshmem` does); ``remote_ptrs`` tables then tag those peers'
entries for ``remote="nvshmem"`` kernels (``force_remote=True``: every other rank's).
"""

from __future__ import annotations

import mmap
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Sequence
from typing import NamedTuple

import torch
import triton

from . import hang_sites, race_record
from .backends import node_reachability, remote_table, table_reachability
from .races import RaceError, Region, check as check_races
from .symmetric import (
    Allocation,
    LowLatencyScratch,
    RemoteTables,
    Scratch,
    SymmetricTensor,
    low_latency_blocks,
    low_latency_words,
    push_scratch_elements,
    remote_ptrs_tensor,
)

#: Signal-pad slots per simulated rank; a barriered kernel may launch
#: ``SIM_PAD_SLOTS // world_size`` blocks at most.
SIM_PAD_SLOTS = 64
#: Largest grid of the simulated low-latency all-reduce.
SIM_LOW_LATENCY_BLOCKS = 4
#: Bytes of each rank's scratch for NVSHMEM transfers of ``remote="nvshmem"`` kernels (per simulated tensor).
SIM_REMOTE_SCRATCH_BYTES = 64 << 10
#: Seconds a timed-out run waits for its hung ranks to say where they are, before it kills them.
REPORT_WAIT_S = 3.0


class RankError(RuntimeError):
    """One or more simulated ranks raised; ``errors`` maps rank -> remote traceback."""

    def __init__(self, errors: dict[int, str], killed: list[int]):
        self.errors = errors
        self.killed = killed
        parts = [f"rank {r} raised:\n{tb}" for r, tb in sorted(errors.items())]
        if killed:
            parts.append(f"ranks {killed} were still running and were killed")
        super().__init__("\n".join(parts))


class RankTimeout(RuntimeError):
    """Some simulated ranks did not finish in time (typically: waiting on a signal never sent).

    ``hung`` lists them; ``sites`` maps each to where it was when time ran out
    (:func:`castpile.gpu.hang_sites.describe`'s words: the ``path:line`` of the
    ``castpile.wait`` it spins in, or of the innermost line of the rank's own code);
    ``threads``, the parent's threads at the fork, if it had any; ``deadlock``, whether they were killed at once,
    every one spinning in a wait with no flag changing, rather than at the timeout.
    """

    def __init__(
        self,
        hung: list[int],
        timeout: float,
        sites: dict[int, str] | None = None,
        threads: list[str] | None = None,
        deadlock: bool = False,
    ):
        self.hung = hung
        self.sites = dict(sites or {})
        self.deadlock = deadlock
        lines = [
            f"  rank {r} {self.sites.get(r, 'did not say where it was (it did not answer in time)')}" for r in hung
        ]
        ended = (
            f"deadlocked (every one spins in a wait and no flag changes) and were killed before the {timeout:g} s "
            "timeout"
            if deadlock
            else f"did not finish within {timeout:g} s and were killed"
        )
        message = (
            f"ranks {hung} {ended}; a rank that "
            "waits for a signal no peer sends (a missing or mismatched barrier, different grids "
            "on different ranks) hangs like this"
        )
        if threads:
            message += (
                f", and so does one that waits for a thread that did not survive the fork: {_forked_threads(threads)}"
            )
        super().__init__("\n".join([message + ":", *lines]))


class ForkWithThreadsWarning(RuntimeWarning):
    """:func:`run` forked while the parent process had other Python threads."""


def _forked_threads(names: list[str]) -> str:
    """What the threads ``names``, alive in the parent at the fork, mean for its ranks, and how to avoid them."""
    text = (
        f"the parent process had threads {names} when it forked the ranks; a forked rank has none of them, "
        "and it hangs when it waits for one of them or for a lock one of them held (torch.compile's "
        "inductor backend, used in the parent, starts such a thread; a rank's torch.compile then waits on "
        "it forever): start no threads before sim.run (torch.compile only inside the ranks), or set "
        "TORCHINDUCTOR_COMPILE_THREADS=1 before importing torch"
    )
    if "ipykernel" in sys.modules:
        text += (
            "; in a notebook, ipykernel's own threads (its heartbeat, IOPub and control threads) are always there "
            "and no rank waits for them, so this matters only after torch.compile ran in the notebook itself: "
            "then restart the kernel and, in its first cell, set os.environ['TORCHINDUCTOR_COMPILE_THREADS'] = '1' "
            "before importing torch (this warning is given once per set of threads)"
        )
    return text


#: The sets of parent threads :func:`run` has warned about: each once per process.
_WARNED_THREADS: set[frozenset[str]] = set()


def shared_empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor in shared memory: forked ranks see it at the same address."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    numel = 1
    for d in shape:
        numel *= d
    nbytes = numel * dtype.itemsize
    region = mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    flat = torch.frombuffer(region, dtype=torch.uint8, count=nbytes) if nbytes else torch.empty(0, dtype=torch.uint8)
    tensor = flat.view(dtype).view(shape)
    if nbytes:
        _SHARED[:] = [ref for ref in _SHARED if ref() is not None]
        _SHARED.append(weakref.ref(tensor))
    return tensor


#: Every live tensor of :func:`shared_empty` (symmetric ones included): what a rank may spin on.
_SHARED: list[weakref.ref] = []


def symmetric_empty(
    world_size: int,
    shape,
    dtype: torch.dtype,
    push_scratch=False,
    local_world_size: int | None = None,
    force_remote=False,
) -> list[SymmetricTensor]:
    """One :class:`SymmetricTensor` per rank, over shared host memory (call before :func:`run`).

    Signal pads start (and must end) all zero; ``buffer_ptrs`` and
    ``signal_pad_ptrs`` are int64 CPU tensors of the shared buffers' addresses.
    Small tensors get the low-latency all-reduce's scratch as on GPUs;
    ``push_scratch=True`` adds the pushing two-shot's.  ``local_world_size=k``
    simulates nodes of ``k`` consecutive ranks: peers on other nodes are remote
    (address 0, ``reachable`` False) and the tensors' ``backend`` is ``"nvshmem"``.
    ``force_remote=True`` (the backend then is ``"nvshmem"`` too) tags every other rank
    remote in the ``remote_ptrs`` tables, as ``runtime.symmetric_empty`` does.
    """
    nvshmem = local_world_size is not None or force_remote
    remote = _remote_scratch(world_size) if nvshmem else None  # one per rank, named by both tables (as on GPUs)
    bufs = symmetric_scratch(
        world_size,
        shape,
        dtype,
        local_world_size=local_world_size,
        remote_scratch=remote,
        force_remote=force_remote,
        name="buffer",
    )
    pads = symmetric_scratch(
        world_size,
        (SIM_PAD_SLOTS,),
        torch.int32,
        local_world_size=local_world_size,
        remote_scratch=remote,
        force_remote=force_remote,
        name="signal_pad",
    )
    scratch = _low_latency_scratch(world_size, bufs[0].tensor, local_world_size)
    pushes: Sequence[Scratch | None] = [None] * world_size
    if push_scratch:
        pushes = symmetric_scratch(
            world_size,
            (push_scratch_elements(bufs[0].tensor.numel(), world_size),),
            dtype,
            local_world_size=local_world_size,
            name="push_scratch",
        )
    return [
        SymmetricTensor(
            tensor=bufs[r].tensor,
            buffer_ptrs=bufs[r].ptrs,
            signal_pad=pads[r].tensor,
            signal_pad_ptrs=pads[r].ptrs,
            rank=r,
            world_size=world_size,
            max_blocks=SIM_PAD_SLOTS // world_size,
            allocation=Allocation("nvshmem" if nvshmem else "cuda"),
            reachability=bufs[r].reachability,
            remote=RemoteTables(bufs[r].remote_ptrs, pads[r].remote_ptrs, bufs[r].remote_scratch),
            low_latency=scratch[r],
            push_scratch=pushes[r],
        )
        for r in range(world_size)
    ]


def _remote_scratch(world_size: int) -> list[torch.Tensor]:
    """Each rank's scratch for the NVSHMEM transfers of ``remote="nvshmem"`` kernels."""
    return [shared_empty((SIM_REMOTE_SCRATCH_BYTES,), torch.uint8) for _ in range(world_size)]


def symmetric_scratch(
    world_size: int,
    shape,
    dtype: torch.dtype,
    local_world_size: int | None = None,
    remote_scratch: list[torch.Tensor] | None = None,
    force_remote=False,
    name: str = "scratch",
) -> list[Scratch]:
    """One zeroed shared-memory tensor per rank, each with every rank's address: ``runtime.symmetric_scratch``'s twin.

    With ``local_world_size``, a rank's ``ptrs`` hold 0 for peers on other simulated nodes, and its
    ``remote_ptrs`` table tags them and names the rank's scratch (``remote_scratch[rank]``, else a new one);
    ``force_remote`` tags every other rank there, as on GPUs (``backends.table_reachability``).
    ``name`` is what :class:`RaceError` calls the tensor (``"rank 1's scratch[3]"``).
    """
    tensors = [shared_empty(shape, dtype).zero_() for _ in range(world_size)]
    addresses = [t.data_ptr() for t in tensors]
    nbytes = tensors[0].numel() * dtype.itemsize
    if nbytes:
        _HEAP.append(
            _Allocation(
                tuple(addresses),
                nbytes,
                name,
                tuple(tensors[0].shape),
                dtype.itemsize,
                tuple(weakref.ref(t) for t in tensors),
            )
        )
    out = []
    for rank, tensor in enumerate(tensors):
        reachable = (
            (True,) * world_size
            if local_world_size is None
            else node_reachability(range(world_size), rank, local_world_size)
        )
        ptrs = [a if ok else 0 for a, ok in zip(addresses, reachable)]
        table = scratch = None
        if (local_world_size is not None or force_remote) and nbytes:  # remote peers: the table names a scratch
            scratch = remote_scratch[rank] if remote_scratch is not None else _remote_scratch(1)[0]
            table = remote_ptrs_tensor(
                remote_table(
                    ptrs,
                    table_reachability(reachable, rank, force_remote),
                    addresses[rank],
                    range(world_size),
                    scratch.data_ptr(),
                    scratch.numel(),
                ),
                "cpu",
            )
        out.append(
            Scratch(tensor, torch.tensor(ptrs, dtype=torch.int64), reachable, remote_ptrs=table, remote_scratch=scratch)
        )
    return out


class _Allocation(NamedTuple):
    """One symmetric allocation: each rank's address, its bytes, and what :class:`RaceError` calls it."""

    addresses: tuple[int, ...]
    nbytes: int
    name: str
    shape: tuple[int, ...]
    itemsize: int
    tensors: tuple[weakref.ref, ...]

    def alive(self) -> bool:
        """Whether every rank's tensor still lives (a freed one's memory may be unmapped or reused)."""
        return all(ref() is not None for ref in self.tensors)


#: Every symmetric allocation of this process, for :func:`peer_address` and the race checker.
_HEAP: list[_Allocation] = []


def peer_address(address: int, pe: int) -> int:
    """The address, in rank ``pe``'s copy, of the byte at ``address`` in any rank's copy of a simulated symmetric tensor.

    What NVSHMEM's symmetric heap gives get/put: a local address and a PE name a
    remote byte.  ValueError for an address outside every simulated allocation.
    """
    for bases, nbytes, *_ in reversed(_HEAP):  # the newest first: a freed region's addresses may be reused
        for base in bases:
            if base <= address < base + nbytes:
                if not 0 <= pe < len(bases):
                    raise ValueError(f"PE {pe} is not one of the {len(bases)} simulated ranks")
                return bases[pe] + (address - base)
    raise ValueError(f"address {address:#x} is not in a simulated symmetric tensor")


def _low_latency_scratch(world_size: int, like: torch.Tensor, local_world_size: int | None = None) -> list:
    """Each rank's low-latency scratch in shared memory (epochs too: they must outlive one :func:`run`)."""
    words = low_latency_words(like)
    if words is None:
        return [None] * world_size
    blocks = low_latency_blocks(words, SIM_LOW_LATENCY_BLOCKS)
    return [
        LowLatencyScratch(
            slots=s,
            epochs=shared_empty((blocks,), torch.int32).zero_(),
            words=words,
            tile_sums=torch.zeros(words, dtype=torch.float32),
            row_arrivals=torch.zeros(words, dtype=torch.int32),
        )
        for s in symmetric_scratch(
            world_size, (2 * world_size * words,), torch.int64, local_world_size, name="low_latency.slots"
        )
    ]


def run(
    fn,
    world_size: int,
    *,
    args=(),
    timeout: float = 60.0,
    races: bool | None = None,
    start_delays: dict[int, float] | None = None,
) -> list:
    """Run ``fn(rank, *args)`` in ``world_size`` forked processes at once; return their results.

    ``args`` follow the rank in every call; they reach the ranks through the fork, not
    pickled, so they may be anything (tensors, handles, functions)::

        outs = sim.run(lambda rank, scale: (rank * scale).item(), 2, args=(torch.tensor(3.0),))

    Results travel back pickled.  If a rank raises, :class:`RankError` carries its
    traceback (ranks still running a second later are killed).  If ranks are still
    running after ``timeout`` seconds, each is first asked where it is (for a rank spinning in
    a kernel's ``castpile.wait``: that line of the user's source, :mod:`castpile.gpu.hang_sites`),
    then they are killed and :class:`RankTimeout` names them and those places; when every rank
    still running spins in a wait and no byte of shared memory changes, that happens at once.
    ``races=True`` (default: ``CASTPILE_SIM_RACES=1`` in the environment) records the ranks'
    accesses to symmetric memory and raises :class:`RaceError` instead of returning when two race
    (docs/races.md).  ``start_delays`` maps ranks to seconds they wait before starting.  Without
    ``TRITON_INTERPRET=1`` nothing is forked: RuntimeError says to set it.  Forking while the
    parent has other Python threads (torch.compile's inductor backend starts one) warns with
    :class:`ForkWithThreadsWarning` (once per set of threads): a rank that waits on such a thread hangs.
    """
    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "castpile.gpu.sim runs every rank's kernels under the Triton interpreter: set TRITON_INTERPRET=1 "
            "in the environment, before Python imports the kernels (@triton.jit reads it when it decorates them)"
        )
    threads = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if threads and frozenset(threads) not in _WARNED_THREADS:
        _WARNED_THREADS.add(frozenset(threads))
        warnings.warn(_forked_threads(threads), ForkWithThreadsWarning, stacklevel=2)
    # A rank inherits what the parent's streams hold unwritten (the warning above, a print before sim.run with
    # output to a pipe or a notebook) and flushes it when it ends: written once, here, it is not repeated per rank.
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    if races is None:
        races = os.environ.get(RACES_VARIABLE, "") == "1"
    logs = _RaceLogs(world_size) if races else None
    delays = dict(start_delays or {})
    children: dict[int, tuple[int, int]] = {}  # rank -> (pid, read fd)
    reports: dict[int, int] = {}  # rank -> read fd of its whereabouts (hang_sites)
    for rank in range(world_size):
        rfd, wfd = os.pipe()
        report_rfd, report_wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            os.close(report_rfd)
            hang_sites.install_reporter(report_wfd)
            _child(fn, rank, args, wfd, logs, delays.get(rank, 0.0))
        os.close(wfd)
        os.close(report_wfd)
        children[rank] = (pid, rfd)
        reports[rank] = report_rfd

    try:
        chunks, stopped, sites, deadlock = _collect(children, reports, timeout)
        errors: dict[int, str] = {}
        results = []
        for rank in range(world_size):
            if rank in stopped:
                continue
            status, value = _decode(chunks[rank])
            if status == "ok":
                results.append(value)
            else:
                errors[rank] = str(value)  # the rank's traceback
        if errors:
            raise RankError(errors, stopped)
        if stopped:
            raise RankTimeout(stopped, timeout, sites, threads, deadlock)
        if logs is not None:
            found = check_races(logs.paths, _regions(), world_size)
            if found:
                raise RaceError(found)
        return results
    finally:
        if logs is not None:
            logs.remove()


#: The environment variable that turns the race checker on for every :func:`run` that does not say.
RACES_VARIABLE = "CASTPILE_SIM_RACES"
#: Seconds without a finished rank or a changed byte of symmetric memory before the ranks are asked
#: whether they all spin in waits.
STALL_CHECK_S = 1.0
#: CPU seconds each spinning rank must use, memory unchanged, before the ranks count as deadlocked.
SPIN_CPU_S = 0.2


class _RaceLogs:
    """Where the ranks' access logs go, and what they share: the lock and the counter that number accesses."""

    def __init__(self, world_size: int):
        import multiprocessing

        self.directory = tempfile.mkdtemp(prefix="castpile-races-")
        self.paths = [os.path.join(self.directory, f"rank{r}.log") for r in range(world_size)]
        self.lock = multiprocessing.get_context("fork").Lock()
        self.counter = shared_empty((1,), torch.int64).zero_().numpy()
        race_record.preload()

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _regions() -> list[Region]:
    """Every rank's copy of every live symmetric allocation."""
    taken: list[tuple[int, int]] = []
    out = []
    for allocation in reversed(_HEAP):
        if not allocation.alive():
            continue
        for rank, base in enumerate(allocation.addresses):
            end = base + allocation.nbytes
            if any(base < e and s < end for s, e in taken):
                continue
            taken.append((base, end))
            out.append(Region(base, allocation.nbytes, rank, allocation.name, allocation.shape, allocation.itemsize))
    return out


def _heap_digest() -> int:
    """A hash of every byte of shared memory (symmetric tensors, and the flags of ``shared_empty``), to see whether
    any flag moved (read through live tensors only: a collection during the reading may free the others)."""
    tensors = [ref() for ref in _SHARED]
    return hash(tuple(t.reshape(-1).view(torch.uint8).numpy().tobytes() for t in tensors if t is not None))


def _collect(children: dict[int, tuple[int, int]], reports: dict[int, int], timeout: float):
    """Read every rank's outcome until all finish, one fails (and a second passes), the timeout passes, or every
    rank still running spins in a wait while symmetric memory stays as it is; kill the ranks still running.

    Returns each rank's bytes, the ranks killed, where those were (:func:`_whereabouts`), and whether they were
    deadlocked.
    """
    chunks: dict[int, list[bytes]] = {r: [] for r in children}
    running = dict(children)
    deadline = time.monotonic() + timeout
    failed_at = None
    sites: dict[int, str] = {}
    deadlock = False
    quiet_since, digest = time.monotonic(), None
    try:
        while running:
            now = time.monotonic()
            if failed_at is not None and now > failed_at + 1.0:
                break
            if now > deadline:
                sites = _whereabouts({r: pid for r, (pid, _) in running.items()}, reports)
                break
            if failed_at is None and now > quiet_since + STALL_CHECK_S:
                stuck = _deadlocked(running, reports, digest)
                if stuck is not None:
                    sites, deadlock = stuck, True
                    break
                quiet_since, digest = now, _heap_digest()
            fds = {fd: r for r, (_, fd) in running.items()}
            ready, _, _ = select.select(list(fds), [], [], min(0.1, max(0.0, deadline - now)))
            for fd in ready:
                data = os.read(fd, 1 << 20)
                rank = fds[fd]
                if data:
                    chunks[rank].append(data)
                    continue
                os.close(fd)
                os.waitpid(running.pop(rank)[0], 0)
                quiet_since, digest = time.monotonic(), None
                if _decode(chunks[rank])[0] != "ok" and failed_at is None:
                    failed_at = time.monotonic()
    finally:
        stopped = sorted(running)
        for pid, fd in running.values():
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(fd)
        for fd in reports.values():
            os.close(fd)
    return chunks, stopped, sites, deadlock


def _deadlocked(running: dict[int, tuple[int, int]], reports: dict[int, int], digest: int | None):
    """Where the running ranks are, if they are deadlocked; else None.

    Deadlocked: shared memory is as it was at ``digest`` (taken a moment ago; None: no digest yet), every rank
    spins in a wait, and then, after each has had :data:`SPIN_CPU_S` seconds of CPU time (a rank that got none
    cannot have polled), every rank still spins and memory is still unchanged: polls of unchanged memory see
    nothing new, so no rank can leave its wait.
    """
    pids = {r: pid for r, (pid, _) in running.items()}
    if digest is None or _heap_digest() != digest:
        return None
    sites = _whereabouts(pids, reports)
    if len(sites) != len(running) or not all(text.startswith("spins in") for text in sites.values()):
        return None
    started = {r: _cpu_seconds(pid) for r, pid in pids.items()}
    give_up = time.monotonic() + 4 * STALL_CHECK_S
    while any(_cpu_seconds(pid) < started[r] + SPIN_CPU_S for r, pid in pids.items()):
        if time.monotonic() > give_up or _heap_digest() != digest:
            return None
        time.sleep(0.05)
    sites = _whereabouts(pids, reports)
    if len(sites) != len(running) or not all(text.startswith("spins in") for text in sites.values()):
        return None
    if _heap_digest() != digest:
        return None
    return sites


def _cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user and system), from /proc; 0 where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _whereabouts(pids: dict[int, int], reports: dict[int, int]) -> dict[int, str]:
    """Ask each rank of ``pids`` where it is (:data:`hang_sites.REPORT_SIGNAL`); its line, by rank, as they answer.

    A rank that has not answered within :data:`REPORT_WAIT_S` seconds is left out.
    """
    for pid in pids.values():
        os.kill(pid, hang_sites.REPORT_SIGNAL)
    text: dict[int, bytes] = dict.fromkeys(pids, b"")
    waiting = {reports[r]: r for r in pids}
    give_up = time.monotonic() + REPORT_WAIT_S
    while waiting and time.monotonic() < give_up:
        ready, _, _ = select.select(list(waiting), [], [], max(0.0, give_up - time.monotonic()))
        for fd in ready:
            rank = waiting[fd]
            data = os.read(fd, 1 << 16)
            text[rank] += data
            if not data or text[rank].endswith(b"\n"):
                del waiting[fd]
    return {r: t.decode("utf-8", "replace").strip() for r, t in text.items() if t.strip()}


def _child(fn, rank: int, args, wfd: int, logs: _RaceLogs | None, delay: float) -> None:
    """Body of a forked rank: run (logging its accesses when ``logs``), send the pickled outcome, and leave without
    cleanup."""
    code = 0
    try:
        try:
            if delay:
                time.sleep(delay)
            if logs is None:
                payload = pickle.dumps(("ok", fn(rank, *args)))
            else:
                regions = [(r.start, r.nbytes) for r in _regions()]
                recorder, host = race_record.install(logs.paths[rank], regions, logs.lock, logs.counter)
                with host:
                    value = fn(rank, *args)
                recorder.close()
                payload = pickle.dumps(("ok", value))
        except BaseException:
            payload = pickle.dumps(("error", traceback.format_exc()))
            code = 1
        with os.fdopen(wfd, "wb") as out:
            out.write(payload)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _decode(chunks: list[bytes]) -> tuple[str, object]:
    if not chunks:
        return "error", "the process died without reporting (killed by a signal?)"
    return pickle.loads(b"".join(chunks))
