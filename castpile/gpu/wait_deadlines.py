"""The record of waits that gave up in debug mode, and :class:`HangError`, which names them.

A module transpiled with ``CASTPILE_DEBUG_WAITS=<seconds>`` (docs/one-gpu.md, "Hangs that name
their line") waits with deadlines: a ``castpile.wait`` (or the compare-and-swap spin of
``castpile.signal(..., wait_for=)``) still pending that many seconds after it started stops
waiting and writes one entry here.  Those modules import this one; nothing else does, and it
never imports the compiler.

The record is one pinned (page-locked) host tensor of int64 words, made when the first debug-mode
module is imported.  Under unified virtual addressing a kernel writes it at its host address,
and the host reads it without synchronising the device (which :mod:`castpile.gpu.one_gpu`
forbids while ranks run).
Word 0 counts the entries claimed (an atomic add, atomic among the blocks of one GPU: atomics on
mapped host memory are not atomic across devices); entry ``k`` is the :data:`ENTRY_WORDS` words
from ``1 + k * ENTRY_WORDS``; past :data:`CAPACITY` entries are counted, not written.  An
entry's words, in order, are :data:`FIELDS`, then the site (``"path:line"``, UTF-8, NUL-padded,
``"..."`` and its tail when longer).  The debug helpers (castpile/compiler/helpers/deadlines.py)
write them in that order.

The record's address reaches the kernels as a ``tl.constexpr`` global of the module.  Triton
3.6 puts the values of the constexpr globals a kernel uses in its cache key
(``JITFunction.cache_key`` in triton/runtime/jit.py), so a kernel compiled for one address is
never loaded for another: a process whose record sits elsewhere compiles its own.

:func:`check` raises :class:`HangError` for the entries recorded so far and clears them, so the
process can go on: the waits that gave up have returned, and the GPU is free.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

CAPACITY = 64
"""Entries the record holds; later ones are only counted."""
ENTRY_WORDS = 32
FIELDS = ("flag", "seen", "expected", "comparison", "deadline_ns", "block_x", "block_y", "block_z", "pe", "kind")
"""An entry's words before its site: the address of one pending flag, the value the wait last saw
there and the value it waited for, the comparison (an index in :data:`COMPARISONS`), the deadline,
the program ids, the NVSHMEM PE of a remote flag (-1 for a load/store reachable one) and what
spun (an index in :data:`KINDS`)."""
SITE_WORDS = ENTRY_WORDS - len(FIELDS)
RECORD_WORDS = 1 + CAPACITY * ENTRY_WORDS
COMPARISONS = {"eq": "==", "ne": "!=", "ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
KINDS = ("waiting", "signalling (wait_for=)")

_record = None  # the pinned tensor, once made


def timed() -> bool:
    """Whether waits read the GPU's clock: not under ``TRITON_INTERPRET=1``, which has none (waits there never give
    up; the simulator's ``sim.run(timeout=)`` names their lines instead)."""
    return os.environ.get("TRITON_INTERPRET", "0") in ("", "0")


def record_address() -> int:
    """The address kernels write entries at, the record made (zeroed) on first call: pinned host memory where waits
    are timed and there is a CUDA device, else ordinary host memory (what the interpreter's kernels reach)."""
    global _record
    if _record is None:
        import torch

        pinned = timed() and torch.cuda.is_available()
        _record = torch.zeros(RECORD_WORDS, dtype=torch.int64, pin_memory=pinned)
    return _record.data_ptr()


@dataclass(frozen=True)
class Entry:
    """One wait that gave up: where (``site``, ``block``), on what (``flag``, on NVSHMEM PE ``pe`` where not -1),
    after how long, and the values (``seen``, ``comparison``, ``expected``)."""

    site: str
    block: tuple[int, int, int]
    flag: int
    seen: int
    expected: int
    comparison: str
    deadline_s: float
    pe: int
    kind: str

    def describe(self, name_flag: Callable[[int], str | None] | None = None) -> str:
        """One line: ``block (0, 0, 0) gave up waiting at k.py:42 after 2 s: flag <which> == 1 expected, saw 0``."""
        named = name_flag(self.flag) if name_flag is not None and self.pe < 0 else None
        flag = named or f"at {self.flag:#x}" + (f" on PE {self.pe}" if self.pe >= 0 else "")
        return (
            f"block {self.block} gave up {self.kind} at {self.site} after {self.deadline_s:g} s: "
            f"flag {flag} {COMPARISONS[self.comparison]} {self.expected} expected, saw {self.seen}"
        )


def _site(words: Sequence[int]) -> str:
    data = b"".join(int(w).to_bytes(8, "little", signed=True) for w in words)
    return data.split(b"\0", 1)[0].decode(errors="replace")


def entries_in(words: Sequence[int]) -> tuple[list[Entry], int]:
    """The entries a record's ``words`` hold, in the order the waits claimed them, and how many more gave up
    than it could hold."""
    claimed = int(words[0])
    entries = []
    for k in range(min(claimed, CAPACITY)):
        entry = [int(w) for w in words[1 + k * ENTRY_WORDS : 1 + (k + 1) * ENTRY_WORDS]]
        field = dict(zip(FIELDS, entry))
        entries.append(
            Entry(
                site=_site(entry[len(FIELDS) :]),
                block=(field["block_x"], field["block_y"], field["block_z"]),
                flag=field["flag"],
                seen=field["seen"],
                expected=field["expected"],
                comparison=list(COMPARISONS)[field["comparison"]],
                deadline_s=field["deadline_ns"] / 1e9,
                pe=field["pe"],
                kind=KINDS[field["kind"]],
            )
        )
    return entries, max(claimed - CAPACITY, 0)


class HangError(RuntimeError):
    """Waits gave up in debug mode: ``entries`` (:class:`Entry`), the first to claim a slot first, and ``unrecorded``,
    how many more gave up than the record holds.  ``str()`` has one line per entry."""

    def __init__(self, entries: list[Entry], unrecorded: int = 0, name_flag: Callable[[int], str | None] | None = None):
        self.entries = entries
        self.unrecorded = unrecorded
        lines = [entry.describe(name_flag) for entry in entries]
        if unrecorded:
            lines.append(f"and {unrecorded} more gave up (the record holds {CAPACITY})")
        head = "a castpile wait gave up" if len(entries) + unrecorded == 1 else "castpile waits gave up"
        super().__init__(
            f"{head} (CASTPILE_DEBUG_WAITS): a peer that never signals, or a mismatched barrier; "
            "a later entry may only follow from an earlier one:\n" + "\n".join(lines)
        )


def check(name_flag: Callable[[int], str | None] | None = None) -> None:
    """Raise :class:`HangError` for the waits recorded since the last check, and clear them; nothing when none gave up.

    Call it once the kernels are done (after ``torch.cuda.synchronize()``, say): it reads the record
    without waiting for the device.  ``name_flag(address)`` may name a flag (``"rank 1's signal_pad[3]"``);
    :func:`castpile.gpu.one_gpu.run` names the allocations of its ranks.
    """
    if _record is None:
        return
    entries, unrecorded = entries_in(_record.tolist())
    if entries or unrecorded:
        _record.zero_()
        raise HangError(entries, unrecorded, name_flag)
