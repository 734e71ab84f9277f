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
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Sequence

import torch
import triton

from . import hang_sites
from .backends import node_reachability, remote_table, table_reachability
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
    ``threads``, the parent's threads at the fork, if it had any.
    """

    def __init__(
        self, hung: list[int], timeout: float, sites: dict[int, str] | None = None, threads: list[str] | None = None
    ):
        self.hung = hung
        self.sites = dict(sites or {})
        lines = [
            f"  rank {r} {self.sites.get(r, 'did not say where it was (it did not answer in time)')}" for r in hung
        ]
        message = (
            f"ranks {hung} did not finish within {timeout:g} s and were killed; a rank that "
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
    return (
        f"the parent process had threads {names} when it forked the ranks; a forked rank has none of them, "
        "and it hangs when it waits for one of them or for a lock one of them held (torch.compile's "
        "inductor backend, used in the parent, starts such a thread; a rank's torch.compile then waits on "
        "it forever): start no threads before sim.run (torch.compile only inside the ranks), or set "
        "TORCHINDUCTOR_COMPILE_THREADS=1 before importing torch"
    )


def shared_empty(shape, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised CPU tensor in shared memory: forked ranks see it at the same address."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    numel = 1
    for d in shape:
        numel *= d
    nbytes = numel * dtype.itemsize
    region = mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    flat = torch.frombuffer(region, dtype=torch.uint8, count=nbytes) if nbytes else torch.empty(0, dtype=torch.uint8)
    return flat.view(dtype).view(shape)


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
        world_size, shape, dtype, local_world_size=local_world_size, remote_scratch=remote, force_remote=force_remote
    )
    pads = symmetric_scratch(
        world_size,
        (SIM_PAD_SLOTS,),
        torch.int32,
        local_world_size=local_world_size,
        remote_scratch=remote,
        force_remote=force_remote,
    )
    scratch = _low_latency_scratch(world_size, bufs[0].tensor, local_world_size)
    pushes: Sequence[Scratch | None] = [None] * world_size
    if push_scratch:
        pushes = symmetric_scratch(
            world_size,
            (push_scratch_elements(bufs[0].tensor.numel(), world_size),),
            dtype,
            local_world_size=local_world_size,
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
) -> list[Scratch]:
    """One zeroed shared-memory tensor per rank, each with every rank's address: ``runtime.symmetric_scratch``'s twin.

    With ``local_world_size``, a rank's ``ptrs`` hold 0 for peers on other simulated nodes, and its
    ``remote_ptrs`` table tags them and names the rank's scratch (``remote_scratch[rank]``, else a new one);
    ``force_remote`` tags every other rank there, as on GPUs (``backends.table_reachability``).
    """
    tensors = [shared_empty(shape, dtype).zero_() for _ in range(world_size)]
    addresses = [t.data_ptr() for t in tensors]
    nbytes = tensors[0].numel() * dtype.itemsize
    if nbytes:
        _HEAP.append((tuple(addresses), nbytes))
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


#: Every symmetric allocation of this process: (each rank's address, bytes), for :func:`peer_address`.
_HEAP: list[tuple[tuple[int, ...], int]] = []


def peer_address(address: int, pe: int) -> int:
    """The address, in rank ``pe``'s copy, of the byte at ``address`` in any rank's copy of a simulated symmetric tensor.

    What NVSHMEM's symmetric heap gives get/put: a local address and a PE name a
    remote byte.  ValueError for an address outside every simulated allocation.
    """
    for bases, nbytes in reversed(_HEAP):  # the newest first: a freed region's addresses may be reused
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
        for s in symmetric_scratch(world_size, (2 * world_size * words,), torch.int64, local_world_size)
    ]


def run(fn, world_size: int, *, args=(), timeout: float = 60.0) -> list:
    """Run ``fn(rank, *args)`` in ``world_size`` forked processes at once; return their results.

    ``args`` follow the rank in every call; they reach the ranks through the fork, not
    pickled, so they may be anything (tensors, handles, functions)::

        outs = sim.run(lambda rank, scale: (rank * scale).item(), 2, args=(torch.tensor(3.0),))

    Results travel back pickled.  If a rank raises, :class:`RankError` carries its
    traceback (ranks still running a second later are killed).  If ranks are still
    running after ``timeout`` seconds, each is first asked where it is (for a rank spinning in
    a kernel's ``castpile.wait``: that line of the user's source, :mod:`castpile.gpu.hang_sites`),
    then they are killed and :class:`RankTimeout` names them and those places.  Without
    ``TRITON_INTERPRET=1`` nothing is forked: RuntimeError says to set it.  Forking while the
    parent has other Python threads (torch.compile's inductor backend starts one) warns with
    :class:`ForkWithThreadsWarning`: a rank that waits on such a thread hangs.
    """
    if not triton.knobs.runtime.interpret:
        raise RuntimeError(
            "castpile.gpu.sim runs every rank's kernels under the Triton interpreter: set TRITON_INTERPRET=1 "
            "in the environment, before Python imports the kernels (@triton.jit reads it when it decorates them)"
        )
    threads = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    if threads:
        warnings.warn(_forked_threads(threads), ForkWithThreadsWarning, stacklevel=2)
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
            _child(fn, rank, args, wfd)
        os.close(wfd)
        os.close(report_wfd)
        children[rank] = (pid, rfd)
        reports[rank] = report_rfd

    chunks: dict[int, list[bytes]] = {r: [] for r in children}
    running = dict(children)
    deadline = time.monotonic() + timeout
    failed_at = None
    sites: dict[int, str] = {}
    try:
        while running:
            now = time.monotonic()
            if failed_at is not None and now > failed_at + 1.0:
                break
            if now > deadline:
                sites = _whereabouts({r: pid for r, (pid, _) in running.items()}, reports)
                break
            fds = {fd: r for r, (_, fd) in running.items()}
            ready, _, _ = select.select(list(fds), [], [], min(0.1, deadline - now))
            for fd in ready:
                data = os.read(fd, 1 << 20)
                rank = fds[fd]
                if data:
                    chunks[rank].append(data)
                    continue
                os.close(fd)
                os.waitpid(running.pop(rank)[0], 0)
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
        raise RankTimeout(stopped, timeout, sites, threads)
    return results


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


def _child(fn, rank: int, args, wfd: int) -> None:
    """Body of a forked rank: run, send the pickled outcome, and leave without cleanup."""
    code = 0
    try:
        try:
            payload = pickle.dumps(("ok", fn(rank, *args)))
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
