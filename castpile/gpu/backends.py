"""Which symmetric-memory backend allocates a tensor, and which peers this GPU can load from and store to.

torch's symmetric memory has one allocation backend per device type and process
(``torch.distributed._symmetric_memory.set_backend``), fixed by the first
allocation ("Backend can not be changed after use"). castpile names two:

- ``"cuda"``: torch's default (``"CUDA"``): buffers mapped into every peer's
  address space over P2P (NVLink). Rendezvous needs every peer to be P2P
  reachable, so every peer is load/store reachable.
- ``"nvshmem"``: ``"NVSHMEM"``: buffers on NVSHMEM's symmetric heap. torch fills
  ``buffer_ptrs[r]`` (and ``signal_pad_ptrs[r]``) with ``nvshmem_ptr(buffer, pe)``,
  which is 0 where the peer's memory cannot be reached by loads and stores (another
  node, or P2P disabled with ``NVSHMEM_DISABLE_P2P=1``); torch's own
  ``get_remote_tensor`` refuses such peers ("Cannot get buffer across nodes").

The rule this module applies, the same for both backends: **a peer is reachable
exactly where its address is non-zero** (:func:`reachable_from_ptrs`).
:func:`node_reachability` is the expectation from the job's layout (ranks on the
same node of ``local_world_size`` GPUs share an NVLink domain), used to check the
rule and in the CPU simulator. NVSHMEM numbers processes (PEs) by global rank: torch
initialises NVSHMEM over the default group, so group rank ``r``'s PE is
``dist.get_global_rank(group, r)``.
"""

from __future__ import annotations

import os

#: castpile's backend names and torch's.
TORCH_NAMES = {"cuda": "CUDA", "nvshmem": "NVSHMEM"}


def check_backend(backend: str) -> str:
    """The backend's canonical name, or ValueError naming the choices.

    >>> check_backend("NVSHMEM")
    'nvshmem'
    """
    if not isinstance(backend, str) or backend.lower() not in TORCH_NAMES:
        raise ValueError(f"backend={backend!r}: choose one of {', '.join(map(repr, TORCH_NAMES))}")
    return backend.lower()


def castpile_name(torch_name: str | None) -> str:
    """castpile's name of torch's backend name (``None``, torch's "not chosen yet", is ``"cuda"``, its default)."""
    if torch_name is None:
        return "cuda"
    for name, theirs in TORCH_NAMES.items():
        if theirs == torch_name:
            return name
    return torch_name.lower()


def nvshmem_problem(symm_mem, cuda_available: bool) -> str | None:
    """Why NVSHMEM symmetric memory cannot be used in this process, or None when it can.

    ``symm_mem`` is ``torch.distributed._symmetric_memory`` (a stand-in in tests).
    """
    import torch

    if not hasattr(symm_mem, "set_backend") or not hasattr(symm_mem, "is_nvshmem_available"):
        return (
            f"torch {torch.__version__} has no symmetric-memory backend selection "
            "(torch.distributed._symmetric_memory.set_backend): use torch 2.8 or newer, built with CUDA"
        )
    if not symm_mem.is_nvshmem_available():
        build = "with CUDA" if torch.version.cuda else "without CUDA"
        return (
            f"NVSHMEM is not available: torch.distributed._symmetric_memory.is_nvshmem_available() is False "
            f"(torch {torch.__version__}, built {build}). It needs a CUDA build of torch compiled with NVSHMEM "
            f"and the NVSHMEM host library at run time: the nvidia-nvshmem-cu{(torch.version.cuda or '13').split('.')[0]} "
            "wheel, or NVSHMEM_HOME / LD_LIBRARY_PATH naming libnvshmem_host.so"
        )
    if not cuda_available:
        return "NVSHMEM is available to torch but no CUDA device is: NVSHMEM symmetric memory lives on GPUs"
    return None


def select(backend: str, device, symm_mem) -> str:
    """Make ``backend`` torch's allocation backend for ``device`` (before allocating); return its canonical name.

    Raises ValueError for an unknown name, RuntimeError with what is missing when
    NVSHMEM cannot be used, and RuntimeError when this process already allocated
    symmetric memory on the other backend (torch allows one per process).
    """
    import torch

    backend = check_backend(backend)
    if backend == "nvshmem":
        problem = nvshmem_problem(symm_mem, torch.cuda.is_available())
        if problem:
            raise RuntimeError(problem)
    get = getattr(symm_mem, "get_backend", None)
    current = get("cuda" if device is None else device) if get is not None else None
    if castpile_name(current) == backend:
        return backend
    if backend == "cuda" and current != "NVSHMEM":
        return backend  # torch's default, whatever it calls it: left as it is
    try:
        symm_mem.set_backend(TORCH_NAMES[backend])
    except RuntimeError as exc:
        raise RuntimeError(
            f"cannot allocate on the {backend!r} backend: this process already allocates symmetric memory on "
            f"{castpile_name(current)!r}, and torch fixes the backend at the first allocation; pass the same "
            f"backend= to every allocation of the process (torch: {exc})"
        ) from exc
    return backend


def reachable_from_ptrs(ptrs, rank: int) -> tuple[bool, ...]:
    """Which peers' buffers this rank can load from and store to: those whose address is non-zero.

    >>> reachable_from_ptrs([0x7f0000000000, 0, 0x7f0000200000, 0], 2)
    (True, False, True, False)
    """
    reachable = tuple(int(p) != 0 for p in ptrs)
    if not 0 <= rank < len(reachable) or not reachable[rank]:
        raise ValueError(f"rank {rank}'s own buffer has no address in {list(map(int, ptrs))}")
    return reachable


def node_reachability(pes, me: int, local_world_size: int, p2p: bool = True) -> tuple[bool, ...]:
    """The reachability expected from the job's layout: peers on this rank's node, where ``p2p``.

    ``pes`` are the group's ranks as global ranks (NVSHMEM PEs), ``me`` this rank's
    index in the group; global ranks ``k * local_world_size`` to
    ``(k + 1) * local_world_size - 1`` share node ``k``, as torchrun numbers them
    (``--nnodes N --nproc_per_node local_world_size``). With ``p2p=False``
    (``NVSHMEM_DISABLE_P2P=1``) only this rank's own buffer is reachable. A node is
    taken to be one NVLink domain (not so on multi-node NVLink systems such as GB200 NVL72).

    >>> node_reachability(range(16), 3, 8)[:10]
    (True, True, True, True, True, True, True, True, False, False)
    >>> node_reachability([1, 9], 0, 8, p2p=False)
    (True, False)
    """
    pes = [int(p) for p in pes]
    if local_world_size < 1:
        raise ValueError(f"local_world_size must be at least 1, not {local_world_size}")
    if not 0 <= me < len(pes):
        raise ValueError(f"rank {me} is not in a group of {len(pes)}")
    if any(p < 0 for p in pes) or len(set(pes)) != len(pes):
        raise ValueError(f"the group's global ranks {pes} must be distinct and non-negative")
    node = pes[me] // local_world_size
    return tuple(r == me or (p2p and p // local_world_size == node) for r, p in enumerate(pes))


def local_world_size(default: int | None = None) -> int:
    """GPUs per node, from torchrun's ``LOCAL_WORLD_SIZE`` (or ``default``)."""
    value = os.environ.get("LOCAL_WORLD_SIZE")
    if value is None:
        if default is None:
            raise RuntimeError("LOCAL_WORLD_SIZE is not set: start the job with torchrun, or pass the GPUs per node")
        return default
    return int(value)


def table_reachability(reachable, rank: int, force_remote: bool = False) -> tuple[bool, ...]:
    """Which entries of a ``remote_ptrs`` table stay addresses: the reachable peers, or with ``force_remote`` this
    rank's own alone (every other peer then goes through NVSHMEM get/put even where loads would reach it: the
    network path's lowering, tried inside one NVLink domain).

    >>> table_reachability((True, True, True), 1, force_remote=True)
    (False, True, False)
    """
    return tuple(ok and (not force_remote or r == rank) for r, ok in enumerate(reachable))


def check_force_remote(backend: str, force_remote: bool) -> None:
    """ValueError unless ``force_remote`` comes with the NVSHMEM backend (whose heap get/put can reach), in any case.

    >>> check_force_remote("NVSHMEM", True)
    """
    if force_remote and not (isinstance(backend, str) and backend.lower() == "nvshmem"):
        raise ValueError(
            f"force_remote=True needs backend='nvshmem' (NVSHMEM get/put reach only its symmetric heap); "
            f"this tensor is on {backend!r}"
        )


#: A remote entry of a ``remote_ptrs`` table carries ``pe + 1`` from this bit up.
REMOTE_TAG_SHIFT = 48
#: Words before the entries of a ``remote_ptrs`` table: the scratch's address and size in bytes.
REMOTE_HEADER = 2


def remote_table(
    ptrs, reachable, local_address: int, pes, scratch_address: int = 0, scratch_bytes: int = 0
) -> list[int]:
    """The words of a ``remote_ptrs`` table: the header (scratch address, bytes), then one entry per rank.

    A reachable rank's entry is its address (as in ``buffer_ptrs``); a remote rank's is
    ``local_address | (pe + 1) << 48``: this rank's symmetric address of the same buffer,
    which NVSHMEM translates for PE ``pe``. Kernels with ``remote="nvshmem"`` bindings decode
    it (castpile/compiler/helpers/remote.py) and reach a remote buffer through NVSHMEM get/put into
    this rank's scratch (docs/nvshmem.md).

    >>> remote_table([0x1000, 0], (True, False), 0x1000, (0, 1), 0x9000, 4096)
    [36864, 4096, 4096, 562949953425408]
    >>> hex(562949953425408)
    '0x2000000001000'
    """
    limit = 1 << REMOTE_TAG_SHIFT
    if not 0 < int(local_address) < limit:
        raise ValueError(
            f"address {int(local_address):#x} does not fit the {REMOTE_TAG_SHIFT}-bit address of a remote entry"
        )
    entries = []
    for ptr, ok, pe in zip(ptrs, reachable, pes):
        if ok:
            entries.append(int(ptr))
        elif not 0 <= int(pe) < (1 << (63 - REMOTE_TAG_SHIFT)) - 1:
            raise ValueError(f"PE {int(pe)} does not fit a remote entry's tag")
        else:
            entries.append(int(local_address) | (int(pe) + 1) << REMOTE_TAG_SHIFT)
    return [int(scratch_address), int(scratch_bytes), *entries]
