"""Host side of multi-GPU castpile kernels: symmetric memory, wrapped.

A collective kernel needs, on every rank, the addresses of every rank's buffer
and of every rank's signal pad.  torch's symmetric memory provides both::

    import torch, torch.distributed as dist
    from castpile.gpu import runtime
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    symm = runtime.symmetric_empty((n,), torch.bfloat16)   # collective: every rank calls it
    symm.tensor          # this rank's buffer (write your input here)
    symm.buffer_ptrs     # int64 (world_size,) on the GPU: every rank's buffer address
    symm.signal_pad_ptrs # int64 (world_size,) on the GPU: every rank's signal pad address
    symm.reachable       # (True, ...): which ranks' buffers this GPU can load from and store to

``backend="nvshmem"`` allocates on NVSHMEM's symmetric heap instead of torch's
default (P2P-mapped CUDA memory): peers on other nodes then have address 0 in
``buffer_ptrs`` and ``reachable[r]`` False (castpile.gpu.backends; docs/nvshmem.md).

``castpile.gpu.sim.symmetric_empty`` builds the same object from shared host memory,
so code written against :class:`SymmetricTensor` runs in the CPU simulator too.
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
#: 4-256 KB on 2 x H200 (docs/data/probe-launch-ll.json).
LOW_LATENCY_BLOCK = 512


class SymmetricMemoryError(ValueError):
    """A tensor or group cannot serve as symmetric memory for a collective."""


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
    handle: Any = None
    low_latency: LowLatencyScratch | None = None
    #: Symmetric scratch of the pushing two-shot all-reduce (``push_scratch=True`` at allocation), or None.
    push_scratch: Scratch | None = None
    #: Launches the collectives bound for this tensor (castpile.gpu.collectives), by kernel and options.
    launches: LaunchCache = field(default_factory=LaunchCache, compare=False, repr=False)
    #: The allocation backend: "cuda" (torch's default, P2P-mapped) or "nvshmem".
    backend: str = "cuda"
    #: Per rank of the group: True where that rank's buffer (and signal pad) is load/store addressable from this
    #: GPU, i.e. its address in ``buffer_ptrs`` is non-zero. None at construction means every rank.
    reachable: tuple[bool, ...] | None = None
    #: Per rank of the group: its NVSHMEM PE (its global rank). None at construction means ``range(world_size)``.
    pes: tuple[int, ...] | None = None
    #: The table a kernel's ``remote="nvshmem"`` binding takes (int64, on the device): ``buffer_ptrs`` where a rank is
    #: reachable, ``local address | (pe + 1) << 48`` where it is remote (every other rank with ``force_remote``),
    #: after a header naming this rank's scratch for NVSHMEM transfers (backends.remote_table,
    #: backends.table_reachability). Pass it whole; slice it in the kernel. None at construction: built from
    #: ``buffer_ptrs`` when every rank is reachable.
    remote_ptrs: torch.Tensor | None = None
    #: The same for the signal pads.
    signal_pad_remote_ptrs: torch.Tensor | None = None
    #: This rank's scratch for NVSHMEM transfers that the remote tables name (kept alive here), or None.
    remote_scratch: torch.Tensor | None = None

    def __post_init__(self):
        _fill(self, "reachable", (True,) * self.world_size, self.world_size)
        _fill(self, "pes", tuple(range(self.world_size)), self.world_size)
        if not self.reachable[self.rank]:
            raise SymmetricMemoryError(f"rank {self.rank}'s own buffer is marked unreachable")
        for name, ptrs in (("remote_ptrs", self.buffer_ptrs), ("signal_pad_remote_ptrs", self.signal_pad_ptrs)):
            if getattr(self, name) is None and self.all_reachable:
                object.__setattr__(self, name, reachable_table(ptrs))

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
            raise ValueError(f"{name}: rank {remote[0]} is not load/store reachable from rank {self.rank} "
                             f"(backend {self.backend!r}; remote ranks {remote}); the library's kernels need every "
                             "peer in one NVLink domain (docs/nvshmem.md)")


@dataclass(frozen=True)
class Scratch:
    """A symmetric tensor every rank holds and its address on every rank (int64, on the device)."""

    tensor: torch.Tensor
    ptrs: torch.Tensor
    #: Per rank: True where its copy is load/store addressable (non-zero in ``ptrs``); None means every rank.
    reachable: tuple[bool, ...] | None = None
    #: The table of a ``remote="nvshmem"`` binding (see ``SymmetricTensor.remote_ptrs``); None at construction:
    #: built from ``ptrs`` when every rank is reachable.
    remote_ptrs: torch.Tensor | None = None
    #: The scratch ``remote_ptrs`` names (kept alive here), or None.
    remote_scratch: torch.Tensor | None = None

    def __post_init__(self):
        _fill(self, "reachable", (True,) * self.ptrs.numel(), self.ptrs.numel())
        if self.remote_ptrs is None and all(self.reachable):
            object.__setattr__(self, "remote_ptrs", reachable_table(self.ptrs))


def remote_ptrs_tensor(words: list[int], device) -> torch.Tensor:
    """A ``remote_ptrs`` table from :func:`backends.remote_table`'s words: the entries, the header in memory before them."""
    return torch.tensor(words, dtype=torch.int64, device=device)[backends.REMOTE_HEADER:]


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


#: The pushing two-shot's chunks are whole tiles of at most this many elements.
PUSH_TILE = 4096


def push_scratch_elements(numel: int, world_size: int) -> int:
    """Elements of the pushing two-shot's scratch: one row per rank of one chunk, chunks whole :data:`PUSH_TILE`s.

    Enough for any power-of-two tile up to :data:`PUSH_TILE`:

    >>> push_scratch_elements(10_000, 2)
    16384
    """
    return world_size * (-(-numel // (world_size * PUSH_TILE)) * PUSH_TILE)


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


def symmetric_empty(shape, dtype: torch.dtype, device=None, group=None, push_scratch=False,
                    backend="cuda", force_remote=False) -> SymmetricTensor:
    """Allocate a symmetric buffer on every rank of ``group`` and rendezvous (collective).

    ``push_scratch=True`` also allocates the pushing two-shot all-reduce's
    scratch (about the tensor's size again), which makes ``all_reduce_two_shot``
    about 8% faster above 4 MB on 2 x H200.  ``backend`` is ``"cuda"`` (torch's
    default symmetric memory: every peer P2P reachable) or ``"nvshmem"`` (NVSHMEM's
    symmetric heap: peers may be remote, see ``reachable``); one per process.
    ``force_remote=True`` (NVSHMEM only) tags every other rank remote in the
    ``remote_ptrs`` tables, reachable or not (``backends.table_reachability``).
    """
    from torch.distributed import _symmetric_memory as symm_mem

    backends.check_force_remote(backend, force_remote)
    device = _select(backend, device, symm_mem)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return rendezvous(symm_mem.empty(shape, dtype=dtype, device=device), group, push_scratch=push_scratch,
                      force_remote=force_remote)


def rendezvous(tensor: torch.Tensor, group=None, push_scratch=False, force_remote=False) -> SymmetricTensor:
    """Exchange addresses of ``tensor`` (from symmetric memory) across ``group`` (collective).

    Raises :class:`SymmetricMemoryError` when ``tensor`` is not in symmetric memory,
    when ranks disagree on its shape, strides, dtype or offset, or when the group
    does not match the one the memory was set up with.
    """
    import torch.distributed as dist
    from torch.distributed import _symmetric_memory as symm_mem

    _require_initialized()
    group = dist.group.WORLD if group is None else group
    if dist.get_rank(group) < 0:
        raise SymmetricMemoryError(
            f"rank {dist.get_rank()} is not a member of the process group it passed to rendezvous"
        )
    problem = None
    if tensor.device.type != "cuda":
        problem = f"its tensor is on {tensor.device}; {_NOT_SYMMETRIC}"
    elif getattr(symm_mem, "is_symm_mem_tensor", None) is not None and not symm_mem.is_symm_mem_tensor(tensor):
        problem = _NOT_SYMMETRIC
    metas: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(metas, (problem, _meta(tensor)), group=group)
    for r, (bad, _) in enumerate(metas):
        if bad is not None:
            raise SymmetricMemoryError(f"rank {r}: {bad}")
    check_agreement([m for _, m in metas])
    try:
        hdl = symm_mem.rendezvous(tensor, group.group_name)
    except RuntimeError as exc:
        raise SymmetricMemoryError(f"{_NOT_SYMMETRIC} (torch: {exc})") from exc
    if hdl.world_size != dist.get_world_size(group) or hdl.rank != dist.get_rank(group):
        raise SymmetricMemoryError(
            f"group mismatch: the symmetric memory spans {hdl.world_size} ranks with this one as "
            f"rank {hdl.rank}, but the group has {dist.get_world_size(group)} with this one as "
            f"rank {dist.get_rank(group)}; rendezvous a buffer with the group it was set up for"
        )
    ptrs = list(hdl.buffer_ptrs)
    reachable = backends.reachable_from_ptrs(ptrs, hdl.rank)
    offset = tensor.data_ptr() - ptrs[hdl.rank]
    offsets: list = [None] * hdl.world_size
    dist.all_gather_object(offsets, offset, group=group)
    if len(set(offsets)) != 1:
        raise SymmetricMemoryError(
            f"the tensor sits at different byte offsets in each rank's symmetric memory {offsets}: "
            "allocate the same sequence of symmetric tensors on every rank"
        )
    pad = hdl.get_signal_pad(hdl.rank, dtype=torch.int32)
    slots = pad.numel()
    pes = tuple(dist.get_global_rank(group, r) for r in range(hdl.world_size))
    backend = _backend_of(tensor, symm_mem)
    backends.check_force_remote(backend, force_remote)
    buffer_ptrs = [p + offset if p else 0 for p in ptrs]
    remote = _remote_tables(backend, tensor.device, backends.table_reachability(reachable, hdl.rank, force_remote),
                            pes, (buffer_ptrs, tensor.data_ptr()), (list(hdl.signal_pad_ptrs), pad.data_ptr()))
    sms = torch.cuda.get_device_properties(tensor.device).multi_processor_count
    words = low_latency_words(tensor)
    return SymmetricTensor(
        tensor=tensor,
        # an unreachable peer keeps address 0 (never 0 + offset): a kernel that loads from it faults at once
        buffer_ptrs=torch.tensor(buffer_ptrs, dtype=torch.int64, device=tensor.device),
        signal_pad=pad,
        signal_pad_ptrs=torch.tensor(list(hdl.signal_pad_ptrs), dtype=torch.int64, device=tensor.device),
        rank=hdl.rank,
        world_size=hdl.world_size,
        max_blocks=min(2 * sms, slots // hdl.world_size),
        handle=hdl,
        low_latency=None if words is None else _low_latency_scratch(words, hdl.world_size, sms, tensor.device, group),
        push_scratch=_push_scratch(tensor, hdl.world_size, group) if push_scratch else None,
        backend=backend,
        reachable=reachable,
        pes=pes,
        remote_ptrs=remote[0],
        signal_pad_remote_ptrs=remote[1],
        remote_scratch=remote[2],
    )


#: Bytes of each NVSHMEM tensor's scratch for remote="nvshmem" transfers, split evenly among a kernel's programs.
REMOTE_SCRATCH_BYTES = 1 << 20


def _remote_tables(backend: str, device, reachable, pes, *tables) -> tuple:
    """The ``remote_ptrs`` table of each ``(ptrs, local address)`` in ``tables``, then the scratch they name.

    On the NVSHMEM backend the scratch comes from the symmetric heap (NVSHMEM's remote
    transports need the local side of a get or put registered; the heap is), allocated on
    every rank (collective) whether or not this rank has remote peers.
    """
    if backend != "nvshmem":
        return (*[None] * len(tables), None)
    from torch.distributed import _symmetric_memory as symm_mem

    scratch = symm_mem.empty(REMOTE_SCRATCH_BYTES, dtype=torch.uint8, device=device)
    made = [remote_ptrs_tensor(backends.remote_table(ptrs, reachable, local, pes, scratch.data_ptr(), scratch.numel()),
                               device) for ptrs, local in tables]
    return (*made, scratch)


def symmetric_scratch(shape, dtype: torch.dtype, device=None, group=None, zero=True, backend="cuda",
                      force_remote=False) -> Scratch:
    """A symmetric tensor on every rank of ``group`` with every rank's address of it (collective).

    For kernels' own state (flags, receive buffers): zeroed by default, and no
    rank returns before every rank has zeroed its copy, so peers may write into
    it at once.  ``backend`` as for :func:`symmetric_empty`; unreachable peers have
    address 0; ``force_remote`` as for :func:`symmetric_empty`.  ``castpile.gpu.sim.symmetric_scratch`` is the
    simulator's twin.
    """
    import torch.distributed as dist
    from torch.distributed import _symmetric_memory as symm_mem

    backends.check_force_remote(backend, force_remote)
    device = _select(backend, device, symm_mem)
    group = dist.group.WORLD if group is None else group
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    scratch = _exchanged(symm_mem.empty(shape, dtype=dtype, device=device), group, remote=True,
                         force_remote=force_remote)
    if zero:
        scratch.tensor.zero_()
        torch.cuda.synchronize(device)
        dist.barrier(group)
    return scratch


def _exchanged(tensor: torch.Tensor, group, remote: bool = False, force_remote: bool = False) -> Scratch:
    """``tensor`` (fresh from symmetric memory) with every rank's address of it (collective); ``remote``: with its
    ``remote_ptrs`` table on the NVSHMEM backend (``force_remote``: every other rank tagged remote there)."""
    import torch.distributed as dist
    from torch.distributed import _symmetric_memory as symm_mem

    hdl = symm_mem.rendezvous(tensor, group.group_name)
    ptrs = list(hdl.buffer_ptrs)
    reachable = backends.reachable_from_ptrs(ptrs, hdl.rank)
    table = scratch = None
    if remote:
        backend = _backend_of(tensor, symm_mem)
        pes = tuple(dist.get_global_rank(group, r) for r in range(hdl.world_size))
        table, scratch = _remote_tables(backend, tensor.device,
                                        backends.table_reachability(reachable, hdl.rank, force_remote), pes,
                                        (ptrs, tensor.data_ptr()))
    return Scratch(tensor, torch.tensor(ptrs, dtype=torch.int64, device=tensor.device), reachable,
                   remote_ptrs=table, remote_scratch=scratch)


def _backend_of(tensor: torch.Tensor, symm_mem) -> str:
    """castpile's name of the backend that allocated ``tensor``'s symmetric memory."""
    return backends.castpile_name(symm_mem.get_backend(tensor.device) if hasattr(symm_mem, "get_backend") else None)


def _select(backend, device, symm_mem) -> torch.device:
    """Check ``backend`` and make it torch's (before the first allocation); then the process group; the device."""
    try:
        backends.select(backend, device, symm_mem)
    except (ValueError, RuntimeError) as exc:
        raise SymmetricMemoryError(str(exc)) from exc
    _require_initialized()
    return torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)


def _push_scratch(tensor: torch.Tensor, world_size: int, group) -> Scratch:
    """Allocate and exchange the pushing two-shot's scratch (collective)."""
    from torch.distributed import _symmetric_memory as symm_mem

    elements = push_scratch_elements(tensor.numel(), world_size)
    return _exchanged(symm_mem.empty(elements, dtype=tensor.dtype, device=tensor.device), group)


def _low_latency_scratch(words: int, world_size: int, sms: int, device, group) -> LowLatencyScratch:
    """Allocate, zero and exchange the low-latency scratch (collective; ranks leave in step)."""
    import torch.distributed as dist
    from torch.distributed import _symmetric_memory as symm_mem

    slots = _exchanged(symm_mem.empty(2 * world_size * words, dtype=torch.int64, device=device).zero_(), group)
    epochs = torch.zeros(low_latency_blocks(words, sms), dtype=torch.int32, device=device)
    torch.cuda.synchronize(device)
    dist.barrier(group)  # no peer may write into slots before every rank has zeroed its own
    return LowLatencyScratch(slots=slots, epochs=epochs, words=words,
                             tile_sums=torch.zeros(words, dtype=torch.float32, device=device),
                             row_arrivals=torch.zeros(words, dtype=torch.int32, device=device))


def check_agreement(metas: list) -> None:
    """Raise unless every rank's (shape, strides, dtype, storage offset) is the same."""
    if all(m == metas[0] for m in metas):
        return
    rows = "\n".join(
        f"  rank {r}: shape {m[0]}, strides {m[1]}, dtype {m[2]}, storage offset {m[3]}"
        for r, m in enumerate(metas)
    )
    raise SymmetricMemoryError(f"ranks disagree on the symmetric tensor's layout:\n{rows}")


_NOT_SYMMETRIC = (
    "the tensor is not in symmetric memory: allocate it with castpile.gpu.runtime.symmetric_empty(shape, dtype) "
    "(or torch.distributed._symmetric_memory.empty) on every rank"
)


def _meta(tensor: torch.Tensor) -> tuple:
    return (tuple(tensor.shape), tuple(tensor.stride()), str(tensor.dtype), tensor.storage_offset())


def _require_initialized() -> None:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        raise SymmetricMemoryError(
            "torch.distributed is not initialised: start one process per GPU with "
            "`torchrun --nproc_per_node N script.py` and call "
            "dist.init_process_group('nccl', device_id=torch.device('cuda', local_rank)) first"
        )
