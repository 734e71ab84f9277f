"""The happens-before checker: which accesses of a simulated run race, by the model of docs/races.md.

The ranks' logs (:mod:`.race_record`) are merged by their shared numbers and replayed once, in that
order, over vector clocks: one component per program instance (a rank's host, or a program of a
rank's launches: launches of one rank reuse a program's component, as stream order chains them).  Per
byte of symmetric memory the checker keeps the last write and each rank's last read (their clock,
whether atomic, where they were made) and, for flags, what a wait that reads them acquires::

    races = check(logs, regions, world_size)     # [] for a clean run
    raise RaceError(races)                         # "1 race in symmetric memory: ..."

A second set of clocks orders every atomic write before every atomic read of its value, whatever their
semantics and scopes; where only those order two racing accesses, the message names the signal/wait
pair whose semantics or scope fell short.
"""

from __future__ import annotations

import heapq
import pickle
from dataclasses import dataclass, field

import numpy as np

#: Snapshots kept before the unreferenced ones are dropped.
_COMPACT_EVERY = 4096
#: Weak signal/wait pairs remembered per program instance, for messages.
_WEAK_KEPT = 4
#: The flags' arrays: what a wait acquires, by the writer's scope (full clock, or the launch's start).
_SYNC = ("sys_full", "sys_base", "gpu_full", "gpu_base", "any")
_RELEASING = ("release", "acq_rel")
_ACQUIRING = ("acquire", "acq_rel")


@dataclass(frozen=True)
class Region:
    """One rank's copy of a symmetric allocation: ``name`` (``"buffer"``), its shape and element size."""

    start: int
    nbytes: int
    rank: int
    name: str
    shape: tuple[int, ...]
    itemsize: int

    def element(self, offset: int) -> str:
        """``"rank R's NAME[i, j]"`` for the element holding byte ``offset``."""
        flat, index = offset // self.itemsize, []
        for extent in reversed(self.shape or (1,)):
            flat, at = divmod(flat, max(extent, 1))
            index.append(str(at))
        return f"rank {self.rank}'s {self.name}[{', '.join(reversed(index))}]"


@dataclass(frozen=True)
class Access:
    """One side of a race: what it was, who made it, and the user's line."""

    kind: str
    rank: int
    program: tuple[int, int, int] | None  # None: the rank's host code
    site: str

    def __str__(self) -> str:
        who = "host" if self.program is None else f"program {self.program}"
        return f"{self.kind} by rank {self.rank} ({who}) at {self.site}"


@dataclass(frozen=True)
class Race:
    """Two accesses to ``element`` (and ``more`` elements besides) that no ordering joins."""

    element: str
    more: int
    first: Access
    second: Access
    missing: str

    def __str__(self) -> str:
        more = f" (and {self.more} more elements)" if self.more else ""
        return f"  {self.element}{more}: {self.first}\n    and {self.second}\n    race: {self.missing}"


class RaceError(RuntimeError):
    """Accesses of a :func:`castpile.gpu.sim.run` with ``races=True`` race (docs/races.md); ``races`` lists them."""

    def __init__(self, races: list[Race]):
        self.races = races
        count = f"{len(races)} race{'s' if len(races) != 1 else ''}"
        super().__init__("\n".join([f"{count} in symmetric memory:", *map(str, races)]))


@dataclass
class _Shadow:
    """Per byte of one region: its last write and each rank's last read; flags' snapshots when atomics touch it."""

    nbytes: int
    world_size: int
    w_thread: np.ndarray = field(init=False)
    w_clock: np.ndarray = field(init=False)
    w_access: np.ndarray = field(init=False)
    w_atomic: np.ndarray = field(init=False)
    r_thread: np.ndarray = field(init=False)
    r_clock: np.ndarray = field(init=False)
    r_access: np.ndarray = field(init=False)
    sync: dict[str, np.ndarray] | None = None

    def __post_init__(self):
        n, w = self.nbytes, self.world_size
        self.w_thread = np.full(n, -1, np.int32)
        self.w_clock = np.zeros(n, np.int32)
        self.w_access = np.zeros(n, np.int32)
        self.w_atomic = np.zeros(n, bool)
        self.r_thread = np.full((w, n), -1, np.int32)
        self.r_clock = np.zeros((w, n), np.int32)
        self.r_access = np.zeros((w, n), np.int32)

    def flags(self) -> dict[str, np.ndarray]:
        if self.sync is None:
            self.sync = {name: np.full(self.nbytes, -1, np.int32) for name in _SYNC}
        return self.sync


@dataclass
class _Snapshot:
    """What a wait reading a flag acquires: a clock, where it came from (``origin``: one rank's launch, or
    None for several) and, for the any-semantics clocks, the write that made it and the weak pairs behind it."""

    clock: np.ndarray
    origin: tuple[int, int] | None
    writer: tuple[str, str, str, int, str] | None = None  # kind, sem, scope, rank, site
    weak: tuple[str, ...] = ()


def _records(path: str):
    """The records of one rank's log, in order."""
    with open(path, "rb") as log:
        while True:
            try:
                batch = pickle.load(log)
            except EOFError:
                return
            yield from batch


def _numbered(rank: int, path: str):
    """``(number, rank, record)`` for each record of rank ``rank``'s log."""
    for record in _records(path):
        yield record[1], rank, record


def _scope_spans(writer_scope: str, reader_scope: str, same_launch: bool) -> bool:
    if "cta" in (writer_scope, reader_scope):
        return False
    return same_launch or (writer_scope == "sys" and reader_scope == "sys")


class _Checker:
    """The replay's state (see the module's docstring)."""

    def __init__(self, regions: list[Region], world_size: int):
        self.regions = sorted(regions, key=lambda r: r.start)
        self.starts = np.array([r.start for r in self.regions], dtype=np.uint64)
        self.world_size = world_size
        self.shadows: dict[int, _Shadow] = {}
        self.threads: dict[tuple[int, tuple[int, int, int] | None], int] = {}
        self.clocks = np.zeros((16, 16), np.int32)
        self.hyp = np.zeros((16, 16), np.int32)
        self.weak: dict[int, tuple[str, ...]] = {}
        self.launch = [0] * world_size
        self.base: list[tuple[np.ndarray, np.ndarray]] = [(self.clocks[0] * 0, self.clocks[0] * 0)] * world_size
        self.programs: list[set[int]] = [set() for _ in range(world_size)]
        self.snapshots: list[_Snapshot] = []
        self.made_since_compact = 0
        self.accesses: dict[Access, int] = {}
        self.access_list: list[Access] = []
        self.access_written: dict[int, bool] = {}
        self.races: dict[tuple[int, int], list] = {}

    # -- clocks --------------------------------------------------------------------------------------
    def _pad(self, vector: np.ndarray) -> np.ndarray:
        size = self.clocks.shape[1]
        return vector if vector.size == size else np.concatenate([vector, np.zeros(size - vector.size, np.int32)])

    def _thread(self, rank: int, program) -> int:
        key = (rank, program)
        index = self.threads.get(key)
        if index is None:
            index = self.threads[key] = len(self.threads)
            if index >= self.clocks.shape[0]:
                size = 2 * self.clocks.shape[0]
                for name in ("clocks", "hyp"):
                    grown = np.zeros((size, size), np.int32)
                    old = getattr(self, name)
                    grown[: old.shape[0], : old.shape[1]] = old
                    setattr(self, name, grown)
            self.clocks[index, index] = self.hyp[index, index] = 1
        return index

    def _program_thread(self, rank: int, program) -> int:
        thread = self._thread(rank, program)
        if thread not in self.programs[rank]:  # its first access in this launch: the launch's start precedes it
            base, hyp_base = self.base[rank]
            np.maximum(self.clocks[thread], self._pad(base), out=self.clocks[thread])
            np.maximum(self.hyp[thread], self._pad(hyp_base), out=self.hyp[thread])
            self.clocks[thread, thread] += 1
            self.hyp[thread, thread] += 1
            self.programs[rank].add(thread)
        return thread

    def start(self, rank: int) -> None:
        host = self._thread(rank, None)
        self.base[rank] = (self.clocks[host].copy(), self.hyp[host].copy())
        self.clocks[host, host] += 1
        self.hyp[host, host] += 1
        self.launch[rank] += 1
        self.programs[rank] = set()

    def end(self, rank: int) -> None:
        host = self._thread(rank, None)
        for thread in self.programs[rank]:
            np.maximum(self.clocks[host], self.clocks[thread], out=self.clocks[host])
            np.maximum(self.hyp[host], self.hyp[thread], out=self.hyp[host])
            self.weak[host] = _merged(self.weak.get(host, ()), self.weak.get(thread, ()))

    # -- accesses ------------------------------------------------------------------------------------
    def access(self, rank, program, kind, site, sem, scope, atomic, reads, writes, addresses, itemsize) -> None:
        thread = self._program_thread(rank, program) if program is not None else self._thread(rank, None)
        me = self._intern(Access(kind, rank, program, site))
        self.access_written[me] = self.access_written.get(me, False) or bool(np.any(writes))
        spread = np.arange(itemsize, dtype=np.uint64)
        data = (np.asarray(addresses, np.uint64)[:, None] + spread).ravel()
        written = np.repeat(np.broadcast_to(np.asarray(writes, bool), (len(addresses),)), itemsize)
        which = np.searchsorted(self.starts, data, side="right") - 1
        clock = int(self.clocks[thread, thread])
        acquired: list[tuple[int, np.ndarray, np.ndarray]] = []
        for region_index in np.unique(which):
            chosen = which == region_index
            region = self.regions[region_index]
            offsets = (data[chosen] - np.uint64(region.start)).astype(np.int64)
            shadow = self.shadows.get(region_index)
            if shadow is None:
                shadow = self.shadows[region_index] = _Shadow(region.nbytes, self.world_size)
            lanes_written = written[chosen]
            self._check(region_index, shadow, offsets, lanes_written, thread, me, atomic, reads)
            if reads:
                shadow.r_thread[rank, offsets] = thread
                shadow.r_clock[rank, offsets] = clock
                shadow.r_access[rank, offsets] = me
            at = offsets[lanes_written]
            shadow.w_thread[at], shadow.w_clock[at], shadow.w_access[at] = thread, clock, me
            shadow.w_atomic[at] = atomic
            if atomic:
                acquired.append((region_index, offsets, at))
        if atomic:
            for region_index, offsets, _ in acquired:
                self._acquire(self.shadows[region_index].flags(), offsets, thread, rank, sem, scope, kind, site)
            releases = [(self.shadows[i].flags(), at) for i, _, at in acquired if at.size]
            if releases:
                self._release(releases, thread, rank, sem, scope, kind, site)

    def _intern(self, access: Access) -> int:
        index = self.accesses.get(access)
        if index is None:
            index = self.accesses[access] = len(self.access_list)
            self.access_list.append(access)
        return index

    def _check(self, region_index, shadow, offsets, written, thread, me, atomic, reads) -> None:
        """Report every earlier access of these bytes that races with this one (docs/races.md)."""
        plain_write = written & (not atomic)
        writers = shadow.w_thread[offsets]
        # The last write races with a plain write, or with any access if it was itself plain.
        suspects = (
            (writers >= 0) & (writers != thread) & (plain_write | (~shadow.w_atomic[offsets] & (written | reads)))
        )
        self._report(region_index, offsets, suspects, writers, shadow.w_clock, shadow.w_access, thread, me, False)
        if plain_write.any():  # each rank's last read races with a plain write
            for rank in range(self.world_size):
                readers = shadow.r_thread[rank, offsets]
                suspects = plain_write & (readers >= 0) & (readers != thread)
                self._report(
                    region_index,
                    offsets,
                    suspects,
                    readers,
                    shadow.r_clock[rank],
                    shadow.r_access[rank],
                    thread,
                    me,
                    True,
                )

    def _report(self, region_index, offsets, suspects, threads, clocks, accesses, thread, me, read_first) -> None:
        if not suspects.any():
            return
        at = offsets[suspects]
        others = threads[suspects]
        stamps = clocks[at]
        racing = self.clocks[thread][others] < stamps
        if not racing.any():
            return
        at, others, stamps = at[racing], others[racing], stamps[racing]
        kinds = accesses[at]
        region = self.regions[region_index]
        for other in np.unique(kinds):
            chosen = kinds == other
            key = (int(other), me)
            elements = {(region_index, e) for e in (at[chosen] // region.itemsize).tolist()}
            entry = self.races.get(key)
            if entry is None:
                first = int(np.argmax(chosen))
                missing = self._missing(int(others[first]), int(stamps[first]), thread, int(other), me, read_first)
                self.races[key] = [region.element(int(at[first])), elements, missing]
            else:
                entry[1].update(elements)

    def _missing(self, other_thread: int, stamp: int, thread: int, other: int, me: int, read_first: bool) -> str:
        """Why nothing orders the earlier access (``other``, by ``other_thread`` at ``stamp``) before this one."""
        first, second = self.access_list[other], self.access_list[me]
        if self.hyp[thread, other_thread] >= stamp and self.weak.get(thread):
            return "the accesses are joined only by a signal and a wait that order nothing: " + "; ".join(
                self.weak[thread]
            )
        if first.rank == second.rank:
            return (
                'two programs of one launch: nothing orders them (a castpile.signal with sem="release" read by a '
                'castpile.wait with sem="acquire", both with scope "gpu" or "sys", would)'
            )
        head = (
            f"nothing orders rank {first.rank}'s {first.kind} before rank {second.rank}'s {second.kind}: no signal "
            f"with release semantics that rank {first.rank} made after it was read by an acquiring wait of rank "
            f"{second.rank} before its {second.kind}"
        )
        if read_first:
            return head + " (a barrier after the reads and before the next write, as a call's closing barrier, would)"
        if self.access_written.get(me, False):
            return (
                head + " (two ranks write the same element: give each its own, or order them with a signal and a wait)"
            )
        return head + ' (a castpile.signal with sem="release" after the write, waited for before the read, would)'

    # -- flags ---------------------------------------------------------------------------------------
    def _acquire(self, sync, offsets, thread, rank, sem, scope, kind, site) -> None:
        here = (rank, self.launch[rank])
        names = ["sys_base", "gpu_base"] + (["sys_full", "gpu_full"] if sem in _ACQUIRING else [])
        for name in names:
            for snapshot_id in np.unique(sync[name][offsets]):
                if snapshot_id < 0:
                    continue
                snapshot = self.snapshots[snapshot_id]
                writer_scope = "gpu" if name.startswith("gpu") else "sys"
                if _scope_spans(writer_scope, scope, snapshot.origin == here):
                    np.maximum(self.clocks[thread], self._pad(snapshot.clock), out=self.clocks[thread])
        np.maximum(self.hyp[thread], self.clocks[thread], out=self.hyp[thread])
        for snapshot_id in np.unique(sync["any"][offsets]):
            if snapshot_id < 0:
                continue
            snapshot = self.snapshots[snapshot_id]
            clock = self._pad(snapshot.clock)
            if (clock > self.clocks[thread]).any():
                words = _weak_pair(snapshot.writer, (kind, sem, scope, rank, site), snapshot.origin == here)
                self.weak[thread] = _merged(self.weak.get(thread, ()), snapshot.weak, (words,) if words else ())
            np.maximum(self.hyp[thread], clock, out=self.hyp[thread])

    def _release(self, releases, thread, rank, sem, scope, kind, site) -> None:
        here = (rank, self.launch[rank])
        full = self.clocks[thread].copy()
        base = self._pad(self.base[rank][0])
        writer = (kind, sem, scope, rank, site)
        for sync, at in releases:
            if scope in ("sys", "gpu"):
                if sem in _RELEASING:
                    self._cumulate(sync[f"{scope}_full"], at, full, here, scope == "gpu")
                self._cumulate(sync[f"{scope}_base"], at, base, here, scope == "gpu")
            self._cumulate(sync["any"], at, self.hyp[thread].copy(), here, False, writer, self.weak.get(thread, ()))
        self.clocks[thread, thread] += 1
        self.hyp[thread, thread] += 1

    def _cumulate(self, ids, at, clock, origin, per_launch, writer=None, weak=()) -> None:
        """Join ``clock`` into the snapshots of the bytes ``at`` (``per_launch``: a snapshot of another launch is
        replaced, as only its own launch can acquire it)."""
        old = ids[at]
        for previous in np.unique(old):
            made = _Snapshot(clock, origin, writer, weak)
            if previous >= 0:
                known = self.snapshots[previous]
                if not (per_launch and known.origin != origin):
                    made = _Snapshot(
                        np.maximum(self._pad(known.clock), self._pad(clock)),
                        origin if known.origin == origin else None,
                        writer,
                        _merged(known.weak, weak),
                    )
            self.snapshots.append(made)
            ids[at[old == previous]] = len(self.snapshots) - 1
        self.made_since_compact += 1
        if self.made_since_compact >= _COMPACT_EVERY:
            self._compact()

    def _compact(self) -> None:
        """Drop the snapshots no byte refers to any more (memory follows the flags, not the run's length)."""
        arrays = [a for s in self.shadows.values() if s.sync is not None for a in s.sync.values()]
        used = np.unique(np.concatenate([a[a >= 0] for a in arrays])) if arrays else np.zeros(0, np.int32)
        self.snapshots = [self.snapshots[i] for i in used.tolist()]
        for a in arrays:
            live = a >= 0
            a[live] = np.searchsorted(used, a[live])
        self.made_since_compact = 0

    def result(self) -> list[Race]:
        out = []
        for (other, me), (element, elements, missing) in self.races.items():
            out.append(Race(element, len(elements) - 1, self.access_list[other], self.access_list[me], missing))
        return out


def _merged(*groups: tuple[str, ...]) -> tuple[str, ...]:
    seen: list[str] = []
    for group in groups:
        for words in group:
            if words not in seen:
                seen.append(words)
    return tuple(seen[-_WEAK_KEPT:])


def _weak_pair(writer, reader, same_launch: bool) -> str:
    """Why the write ``writer`` read by ``reader`` orders nothing (each: kind, sem, scope, rank, site)."""
    if writer is None:
        return ""
    w_kind, w_sem, w_scope, w_rank, w_site = writer
    r_kind, r_sem, r_scope, r_rank, r_site = reader
    across = "across ranks" if w_rank != r_rank else "between the programs of a launch"
    for who, kind, scope, where in (
        (f"rank {w_rank}'s", w_kind, w_scope, w_site),
        (f"rank {r_rank}'s", r_kind, r_scope, r_site),
    ):
        if not _scope_spans(scope, scope, same_launch):
            wanted = "sys" if w_rank != r_rank else "gpu"
            return f'{who} {kind} at {where} has scope="{scope}", which orders nothing {across} (scope="{wanted}")'
    if w_sem not in _RELEASING:
        return (
            f"rank {w_rank}'s {w_kind} at {w_site} is {w_sem}: it orders nothing its own launch wrote "
            f'(sem="release"), read by rank {r_rank}\'s {r_kind} at {r_site}'
        )
    if r_sem not in _ACQUIRING:
        return (
            f"rank {r_rank}'s {r_kind} at {r_site} is {r_sem}: of what rank {w_rank}'s {w_kind} at {w_site} "
            f'released it acquires only what preceded that launch (sem="acquire")'
        )
    return ""


def check(logs: list[str], regions: list[Region], world_size: int) -> list[Race]:
    """The races of one run, from each rank's log (``logs[rank]``) over the symmetric ``regions``."""
    checker = _Checker(regions, world_size)
    streams = [_numbered(rank, path) for rank, path in enumerate(logs)]
    for _, rank, record in heapq.merge(*streams, key=lambda item: item[0]):
        tag = record[0]
        if tag == "launch":
            checker.start(rank)
        elif tag == "end":
            checker.end(rank)
        elif tag == "access":
            _, _, program, kind, site, sem, scope, atomic, reads, writes, addresses, itemsize = record
            checker.access(rank, program, kind, site, sem, scope, atomic, reads, writes, addresses, itemsize)
        else:
            _, _, kind, site, reads, writes, addresses, itemsize = record
            checker.access(rank, None, kind, site, "", "", False, reads, writes, addresses, itemsize)
    return checker.result()
