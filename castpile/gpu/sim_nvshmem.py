"""NVSHMEM's Triton device functions under the Triton interpreter, moving bytes through the simulator's memory.

Transpiled modules with ``remote="nvshmem"`` bindings call ``get``, ``put`` and ``quiet``
through one name (``_castpile_nvshmem``) that is torch's
``torch.distributed._symmetric_memory._nvshmem_triton`` on GPUs and this module under
``TRITON_INTERPRET=1``.  The interpreter runs jit helpers as Python, so a helper's call
of ``_castpile_nvshmem.get(...)`` lands here with interpreter tensors; addresses are
host addresses in :mod:`castpile.gpu.sim`'s shared memory, and a symmetric address on
this rank becomes PE ``pe``'s through :func:`castpile.gpu.sim.peer_address`, as
NVSHMEM's symmetric heap translates it.  Same signatures and semantics as torch's:
``get(dest, source, nelems, pe)`` copies ``nelems`` elements of PE ``pe``'s ``source``
into local ``dest`` and returns when they have arrived; ``put(dest, source, nelems, pe)``
the other way; ``quiet()`` and ``fence()`` have nothing to wait for (every copy here
is complete when it returns).
"""

from __future__ import annotations

import ctypes

from . import sim


def _int(x) -> int:
    """A Python int from an interpreter scalar (a 0-d or 1-element tensor) or a number."""
    handle = getattr(x, "handle", None)
    if handle is not None:
        return int(handle.data.reshape(-1)[0])
    return int(getattr(x, "value", x))


def _bytes(pointer, nelems) -> int:
    bits = pointer.dtype.element_ty.primitive_bitwidth
    return _int(nelems) * bits // 8


def _remote(address: int, nbytes: int, pe: int) -> int:
    """PE ``pe``'s address of ``nbytes`` at symmetric ``address``; the whole span must lie in one allocation."""
    translated = sim.peer_address(address, pe)
    if nbytes > 1 and sim.peer_address(address + nbytes - 1, pe) != translated + nbytes - 1:
        raise ValueError(f"a transfer of {nbytes} bytes at {address:#x} leaves its symmetric allocation")
    return translated


def get(dest, source, nelems, pe):
    """Copy ``nelems`` elements from PE ``pe``'s copy of symmetric ``source`` to local ``dest`` (blocking)."""
    nbytes = _bytes(dest, nelems)
    if nbytes > 0:
        ctypes.memmove(_int(dest), _remote(_int(source), nbytes, _int(pe)), nbytes)
    return 0


def put(dest, source, nelems, pe):
    """Copy ``nelems`` elements from local ``source`` to PE ``pe``'s copy of symmetric ``dest`` (complete on return)."""
    nbytes = _bytes(dest, nelems)
    if nbytes > 0:
        ctypes.memmove(_remote(_int(dest), nbytes, _int(pe)), _int(source), nbytes)
    return 0


def quiet():
    """Every put here is complete when it returns: nothing to wait for."""
    return 0


def fence():
    """Puts here are ordered as issued: nothing to do."""
    return 0
