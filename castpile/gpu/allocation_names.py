"""Names for addresses in the ranks' allocations (``"rank 1's signal_pad[3]"``), for messages about flags.

:mod:`castpile.gpu.one_gpu` names each rank's tensors here as it makes them; :func:`name_of` finds the
tensor an address falls in, among those still alive (a tensor freed is forgotten: its memory may be reused).
"""

from __future__ import annotations

import threading
import weakref

_named: list[tuple[weakref.ref, int, str]] = []
_lock = threading.Lock()


def name(tensor, rank: int, what: str) -> None:
    """Name ``tensor`` ``rank``'s ``what`` (``"signal_pad"``) for as long as it lives."""
    with _lock:
        _named[:] = [entry for entry in _named if entry[0]() is not None]
        _named.append((weakref.ref(tensor), rank, what))


def name_of(address: int) -> str | None:
    """``"rank R's WHAT[i]"`` (``[i, j]`` for more dims) for the element at ``address``, or None where no named
    tensor holds it."""
    with _lock:
        named = [(entry[0](), entry[1], entry[2]) for entry in _named]
    for tensor, rank, what in named:
        if tensor is None:
            continue
        start, size = tensor.data_ptr(), tensor.element_size()
        if start <= address < start + tensor.numel() * size and (address - start) % size == 0:
            flat, index = (address - start) // size, []
            for extent in reversed(tensor.shape):
                flat, at = divmod(flat, extent)
                index.append(str(at))
            return f"rank {rank}'s {what}[{', '.join(reversed(index))}]"
    return None
