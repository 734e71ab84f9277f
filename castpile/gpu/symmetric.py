"""One rank's handle on symmetric memory, as castpile.gpu.runtime builds it on GPUs and castpile.gpu.sim on the host.

A :class:`SymmetricTensor` is a buffer that every rank of a group holds, with every
rank's address of it and of its signal pad; the rest it holds by concern, in small
dataclasses: :class:`Allocation` (the backend, torch's handle), :class:`Reachability`
(which peers this GPU can load from and store to, their NVSHMEM PEs),
:class:`RemoteTables` (what ``remote="nvshmem"`` kernels take), the collectives'
scratch (:class:`LowLatencyScratch`, the pushing two-shot's :class:`Scratch`) and the
wrappers' :class:`~castpile.gpu.launch_cache.LaunchCache`.  The sizes of that scratch
are here too, so that the runtime and the simulator allocate the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from . import backends
from .launch_cache import LaunchCache

#: Tensors of at most this many bytes also get the low-latency all-reduce's scratch.
LOW_LATENCY_MAX_BYTES = 256 << 10
#: int32 words per tile of the low-latency all-reduce (4 warps); the fastest of 512/1024/2048 words at
#: 4-256 KB (docs/data/probe-launch-ll.json).
LOW_LATENCY_BLOCK = 512
#: The pushing two-shot's chunks are whole tiles of at most this many elements.
PUSH_TILE = 4096


class SymmetricMemoryError(ValueError):
    """A tensor or group cannot serve as symmetric memory for a collective."""


@dataclass(frozen=True)
class Allocation:
    """Where a symmetric tensor's memory comes from."""

    #: "cuda" (torch's default, P2P-mapped) or "nvshmem".
    backend: str = "cuda"
    #: torch's rendezvous handle, kept alive with the tensor; None in the simulator.
    handle: Any = None


@dataclass(frozen=True)
class Reachability:
    """Per rank of the group: whether this GPU can load from and store to its buffer and signal pad, and its PE.

    A rank is reachable where its address in ``buffer_ptrs`` is non-zero
    (:func:`castpile.gpu.backends.reachable_from_ptrs`); its NVSHMEM PE is its
    global rank (None at construction means ``range(len(reachable))``).
    """

    reachable: tuple[bool, ...]
    pes: tuple[int, ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "reachable", tuple(self.reachable))
        _fill(self, "pes", tuple(range(len(self.reachable))), len(self.reachable))


@dataclass(frozen=True)
class RemoteTables:
    """The tables a kernel's ``remote="nvshmem"`` binding takes (int64, on the device): pass one whole, slice it there.

    ``buffer``: ``buffer_ptrs`` where a rank is reachable, ``local address | (pe + 1) << 48``
    where it is remote (every other rank with ``force_remote``), after a header naming this
    rank's ``scratch`` for NVSHMEM transfers (backends.remote_table, backends.table_reachability);
    ``signal_pad``: the same for the signal pads.  A table left None is built from the
    addresses when every rank is reachable.
    """

    buffer: torch.Tensor | None = None
    signal_pad: torch.Tensor | None = None
    #: This rank's scratch for NVSHMEM transfers that the tables name (kept alive here), or None.
    scratch: torch.Tensor | None = None


@dataclass(frozen=True)
class SymmetricTensor:
    """One rank's handle on a buffer that every rank of a group holds.

    ``max_blocks`` is the largest grid a barriered kernel may launch: every block
    must be resident at once (blocks wait on each other; the collectives' tiles
    keep two blocks per SM resident) and owns one int32 signal-pad slot per peer.
    """

    tensor: torch.Tensor
    buffer_ptrs: torch.Tensor
    signal_pad: torch.Tensor
    signal_pad_ptrs: torch.Tensor
    rank: int
    world_size: int
    max_blocks: int
    allocation: Allocation = field(default_factory=Allocation)
    #: None at construction means every rank reachable, PE = rank.
    reachability: Reachability | None = None
    remote: RemoteTables = field(default_factory=RemoteTables)
    low_latency: LowLatencyScratch | None = None
    #: Symmetric scratch of the pushing two-shot all-reduce (``push_scratch=True`` at allocation), or None.
    push_scratch: Scratch | None = None
    #: Launches the collectives and fused ops bound for this tensor, by kernel and options.
    launches: LaunchCache = field(default_factory=LaunchCache, compare=False, repr=False)

    def __post_init__(self):
        if self.reachability is None:
            object.__setattr__(self, "reachability", Reachability((True,) * self.world_size))
        if len(self.reachable) != self.world_size:
            raise SymmetricMemoryError(f"reachable has {len(self.reachable)} entries for {self.world_size} ranks")
        if not self.reachable[self.rank]:
            raise SymmetricMemoryError(f"rank {self.rank}'s own buffer is marked unreachable")
        if self.all_reachable:
            tables = self.remote
            object.__setattr__(
                self,
                "remote",
                RemoteTables(
                    reachable_table(self.buffer_ptrs) if tables.buffer is None else tables.buffer,
                    reachable_table(self.signal_pad_ptrs) if tables.signal_pad is None else tables.signal_pad,
                    tables.scratch,
                ),
            )

    @property
    def backend(self) -> str:
        """The allocation backend: "cuda" or "nvshmem"."""
        return self.allocation.backend

    @property
    def handle(self):
        """torch's rendezvous handle (None in the simulator)."""
        return self.allocation.handle

    @property
    def reachable(self) -> tuple[bool, ...]:
        """Per rank: whether its buffer (and signal pad) is load/store addressable from this GPU."""
        return self._reachability.reachable

    @property
    def pes(self) -> tuple[int, ...]:
        """Per rank: its NVSHMEM PE (its global rank)."""
        pes = self._reachability.pes
        assert pes is not None  # Reachability.__post_init__ fills it
        return pes

    @property
    def _reachability(self) -> Reachability:
        assert self.reachability is not None  # __post_init__ fills it
        return self.reachability

    @property
    def remote_ptrs(self) -> torch.Tensor | None:
        """The buffer's ``remote="nvshmem"`` table (:class:`RemoteTables`)."""
        return self.remote.buffer

    @property
    def signal_pad_remote_ptrs(self) -> torch.Tensor | None:
        """The signal pads' ``remote="nvshmem"`` table."""
        return self.remote.signal_pad

    @property
    def remote_scratch(self) -> torch.Tensor | None:
        """This rank's scratch for NVSHMEM transfers that the tables name, or None."""
        return self.remote.scratch

    @property
    def all_reachable(self) -> bool:
        """Whether every rank's buffer is load/store addressable (what the collectives' kernels need)."""
        return all(self.reachable)

    def require_all_reachable(self, name: str) -> None:
        """Raise ValueError unless every rank's buffer is load/store addressable (``name``: the caller, for the message).

        The library's kernels load from and store to every peer's buffer; a remote
        peer's address is 0 and would fault.
        """
        if not self.all_reachable:
            remote = [r for r, ok in enumerate(self.reachable) if not ok]
            raise ValueError(
                f"{name}: rank {remote[0]} is not load/store reachable from rank {self.rank} "
                f"(backend {self.backend!r}; remote ranks {remote}); the library's kernels need every "
                "peer in one NVLink domain (docs/nvshmem.md)"
            )


@dataclass(frozen=True)
class Scratch:
    """A symmetric tensor every rank holds and its address on every rank (int64, on the device)."""

    tensor: torch.Tensor
    ptrs: torch.Tensor
    #: Per rank: True where its copy is load/store addressable (non-zero in ``ptrs``); None means every rank.
    reachable: tuple[bool, ...] | None = None
    #: The table of a ``remote="nvshmem"`` binding (see :class:`RemoteTables`); None at construction:
    #: built from ``ptrs`` when every rank is reachable.
    remote_ptrs: torch.Tensor | None = None
    #: The scratch ``remote_ptrs`` names (kept alive here), or None.
    remote_scratch: torch.Tensor | None = None

    def __post_init__(self):
        _fill(self, "reachable", (True,) * self.ptrs.numel(), self.ptrs.numel())
        if self.remote_ptrs is None and all(self.reachable):
            object.__setattr__(self, "remote_ptrs", reachable_table(self.ptrs))

    @property
    def reachability(self) -> Reachability:
        """``reachable``, each rank's PE its rank."""
        assert self.reachable is not None  # __post_init__ fills it
        return Reachability(self.reachable)


@dataclass(frozen=True)
class LowLatencyScratch:
    """One rank's state for ``castpile.gpu.collectives.all_reduce_low_latency``.

    ``slots`` (int64, symmetric: peers write into it) holds two epoch-parity
    slots of one row per sending rank, ``words`` entries each; ``epochs`` counts
    this rank's calls per block (the kernel's grid is ``epochs.numel()``, the same
    on every call).  Everything starts zero.
    """

    slots: Scratch
    epochs: torch.Tensor
    words: int
    #: The fused RMSNorm's per-tile sums of squares and per-row arrival counts (this rank's own; ``words``
    #: entries each, enough for any tiling; the counts start and end every call at zero).  Allocated with
    #: the scratch, never on a call, so that calls can be captured in CUDA graphs (cudagraph trees too).
    tile_sums: torch.Tensor
    row_arrivals: torch.Tensor


def remote_ptrs_tensor(words: list[int], device) -> torch.Tensor:
    """A ``remote_ptrs`` table from :func:`backends.remote_table`'s words: the entries, the header in memory before them."""
    return torch.tensor(words, dtype=torch.int64, device=device)[backends.REMOTE_HEADER :]


def reachable_table(ptrs: torch.Tensor) -> torch.Tensor:
    """The ``remote_ptrs`` table of peers that are all reachable: ``ptrs`` after a header naming no scratch."""
    return remote_ptrs_tensor([0, 0, *map(int, ptrs.tolist())], ptrs.device)


def _fill(obj, name: str, default: tuple, length: int) -> None:
    """Set a frozen dataclass's per-rank tuple field to ``default`` when None; check its length."""
    value = getattr(obj, name)
    value = default if value is None else tuple(value)
    if len(value) != length:
        raise SymmetricMemoryError(f"{name} has {len(value)} entries for {length} ranks")
    object.__setattr__(obj, name, value)


def push_scratch_elements(numel: int, world_size: int) -> int:
    """Elements of the pushing two-shot's scratch: one row per rank of one chunk, chunks whole :data:`PUSH_TILE`s.

    Enough for any power-of-two tile up to :data:`PUSH_TILE`:

    >>> push_scratch_elements(10_000, 2)
    16384
    """
    return world_size * (-(-numel // (world_size * PUSH_TILE)) * PUSH_TILE)


def low_latency_words(tensor: torch.Tensor) -> int | None:
    """The int32 words of ``tensor`` the low-latency all-reduce sends, or None where it does not apply.

    It applies to contiguous bf16, fp16 and fp32 tensors of at most
    :data:`LOW_LATENCY_MAX_BYTES` whose size is a whole number of words.
    """
    nbytes = tensor.numel() * tensor.element_size()
    supported = tensor.dtype in (torch.bfloat16, torch.float16, torch.float32) and tensor.is_contiguous()
    if not supported or nbytes == 0 or nbytes % 4 or nbytes > LOW_LATENCY_MAX_BYTES:
        return None
    return nbytes // 4


def low_latency_blocks(words: int, cap: int) -> int:
    """Grid of the low-latency all-reduce: one block per tile, at most ``cap``."""
    return max(1, min(cap, -(-words // LOW_LATENCY_BLOCK)))
