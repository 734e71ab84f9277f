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

The handle is a :class:`castpile.gpu.symmetric.SymmetricTensor`;
``castpile.gpu.sim.symmetric_empty`` builds the same object from shared host memory,
so code written against it runs in the CPU simulator too.
"""

from __future__ import annotations

import torch

from . import backends
from .symmetric import (
    Allocation,
    LowLatencyScratch,
    Reachability,
    RemoteTables,
    Scratch,
    SymmetricMemoryError,
    SymmetricTensor,
    low_latency_blocks,
    low_latency_words,
    push_scratch_elements,
    remote_ptrs_tensor,
)


def symmetric_empty(
    shape, dtype: torch.dtype, device=None, group=None, push_scratch=False, backend="cuda", force_remote=False
) -> SymmetricTensor:
    """Allocate a symmetric buffer on every rank of ``group`` and rendezvous (collective).

    ``push_scratch=True`` also allocates the pushing two-shot all-reduce's
    scratch (about the tensor's size again), with which ``all_reduce_two_shot``
    pushes above 4 MB, where pushing is faster (docs/data/bench-sweep-push.json).
    ``backend`` is ``"cuda"`` (torch's default symmetric memory: every peer P2P
    reachable) or ``"nvshmem"`` (NVSHMEM's symmetric heap: peers may be remote,
    see ``reachable``); one per process.
    ``force_remote=True`` (NVSHMEM only) tags every other rank remote in the
    ``remote_ptrs`` tables, reachable or not (``backends.table_reachability``).
    """
    from torch.distributed import _symmetric_memory as symm_mem

    backends.check_force_remote(backend, force_remote)
    device = _select(backend, device, symm_mem)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return rendezvous(
        symm_mem.empty(shape, dtype=dtype, device=device), group, push_scratch=push_scratch, force_remote=force_remote
    )


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
        handle = symm_mem.rendezvous(tensor, group.group_name)
    except RuntimeError as exc:
        raise SymmetricMemoryError(f"{_NOT_SYMMETRIC} (torch: {exc})") from exc
    if handle.world_size != dist.get_world_size(group) or handle.rank != dist.get_rank(group):
        raise SymmetricMemoryError(
            f"group mismatch: the symmetric memory spans {handle.world_size} ranks with this one as "
            f"rank {handle.rank}, but the group has {dist.get_world_size(group)} with this one as "
            f"rank {dist.get_rank(group)}; rendezvous a buffer with the group it was set up for"
        )
    ptrs = list(handle.buffer_ptrs)
    reachable = backends.reachable_from_ptrs(ptrs, handle.rank)
    offset = tensor.data_ptr() - ptrs[handle.rank]
    offsets: list = [None] * handle.world_size
    dist.all_gather_object(offsets, offset, group=group)
    if len(set(offsets)) != 1:
        raise SymmetricMemoryError(
            f"the tensor sits at different byte offsets in each rank's symmetric memory {offsets}: "
            "allocate the same sequence of symmetric tensors on every rank"
        )
    pad = handle.get_signal_pad(handle.rank, dtype=torch.int32)
    slots = pad.numel()
    pes = tuple(dist.get_global_rank(group, r) for r in range(handle.world_size))
    backend = _backend_of(tensor, symm_mem)
    backends.check_force_remote(backend, force_remote)
    buffer_ptrs = [p + offset if p else 0 for p in ptrs]
    remote = _remote_tables(
        backend,
        tensor.device,
        backends.table_reachability(reachable, handle.rank, force_remote),
        pes,
        (buffer_ptrs, tensor.data_ptr()),
        (list(handle.signal_pad_ptrs), pad.data_ptr()),
    )
    sms = torch.cuda.get_device_properties(tensor.device).multi_processor_count
    words = low_latency_words(tensor)
    return SymmetricTensor(
        tensor=tensor,
        # an unreachable peer keeps address 0 (never 0 + offset): a kernel that loads from it faults at once
        buffer_ptrs=torch.tensor(buffer_ptrs, dtype=torch.int64, device=tensor.device),
        signal_pad=pad,
        signal_pad_ptrs=torch.tensor(list(handle.signal_pad_ptrs), dtype=torch.int64, device=tensor.device),
        rank=handle.rank,
        world_size=handle.world_size,
        max_blocks=min(2 * sms, slots // handle.world_size),
        allocation=Allocation(backend, handle),
        reachability=Reachability(reachable, pes),
        remote=RemoteTables(*remote),
        low_latency=None
        if words is None
        else _low_latency_scratch(words, handle.world_size, sms, tensor.device, group),
        push_scratch=_push_scratch(tensor, handle.world_size, group) if push_scratch else None,
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
    made = [
        remote_ptrs_tensor(
            backends.remote_table(ptrs, reachable, local, pes, scratch.data_ptr(), scratch.numel()), device
        )
        for ptrs, local in tables
    ]
    return (*made, scratch)


def symmetric_scratch(
    shape, dtype: torch.dtype, device=None, group=None, zero=True, backend="cuda", force_remote=False
) -> Scratch:
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
    scratch = _exchanged(
        symm_mem.empty(shape, dtype=dtype, device=device), group, remote=True, force_remote=force_remote
    )
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

    handle = symm_mem.rendezvous(tensor, group.group_name)
    ptrs = list(handle.buffer_ptrs)
    reachable = backends.reachable_from_ptrs(ptrs, handle.rank)
    table = scratch = None
    if remote:
        backend = _backend_of(tensor, symm_mem)
        pes = tuple(dist.get_global_rank(group, r) for r in range(handle.world_size))
        table, scratch = _remote_tables(
            backend,
            tensor.device,
            backends.table_reachability(reachable, handle.rank, force_remote),
            pes,
            (ptrs, tensor.data_ptr()),
        )
    return Scratch(
        tensor,
        torch.tensor(ptrs, dtype=torch.int64, device=tensor.device),
        reachable,
        remote_ptrs=table,
        remote_scratch=scratch,
    )


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
    return LowLatencyScratch(
        slots=slots,
        epochs=epochs,
        words=words,
        tile_sums=torch.zeros(words, dtype=torch.float32, device=device),
        row_arrivals=torch.zeros(words, dtype=torch.int32, device=device),
    )


def check_agreement(metas: list) -> None:
    """Raise unless every rank's (shape, strides, dtype, storage offset) is the same."""
    if all(m == metas[0] for m in metas):
        return
    rows = "\n".join(
        f"  rank {r}: shape {m[0]}, strides {m[1]}, dtype {m[2]}, storage offset {m[3]}" for r, m in enumerate(metas)
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
