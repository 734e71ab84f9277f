"""Per-thread local memory (CUDA's stack limit): reserved before a kernel that spills starts, never grown at its launch.

CUDA gives every thread of a context the same local memory, the stack limit, and grows it at a
launch that needs more (``CU_LIMIT_STACK_SIZE``: "the driver automatically increases the per-thread
stack size for each kernel launch as needed"); growing it waits for the device's work in flight.
With ranks on one GPU (:mod:`castpile.gpu.one_gpu`) that work can be a peer's kernel waiting for
the very kernel being launched, so the launch never returns.  Reserving what the kernel needs
while no rank has started it yet (:func:`reserve`, from the ranks' binding barrier) leaves nothing
to grow::

    reserve(local_bytes(launch))      # the most any rank's copy of a bound launch needs

The driver API is reached through ``ctypes`` (``libcuda``): torch and Triton expose no call for it.
"""

from __future__ import annotations

import ctypes
import functools

#: ``CUlimit`` of the per-thread stack (cuda.h).
CU_LIMIT_STACK_SIZE = 0x00


@functools.cache
def _driver() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _check(result: int, call: str) -> None:
    if result != 0:
        raise RuntimeError(f"castpile.gpu.local_memory: {call} failed with CUDA error {result}")


def stack_limit() -> int:
    """The current context's per-thread stack limit in bytes (``cuCtxGetLimit``)."""
    value = ctypes.c_size_t()
    _check(_driver().cuCtxGetLimit(ctypes.byref(value), CU_LIMIT_STACK_SIZE), "cuCtxGetLimit")
    return value.value


def set_stack_limit(nbytes: int) -> None:
    """Set the current context's per-thread stack limit (``cuCtxSetLimit``); waits for the device's work in flight."""
    _check(_driver().cuCtxSetLimit(CU_LIMIT_STACK_SIZE, ctypes.c_size_t(nbytes)), "cuCtxSetLimit")


def local_bytes(launch) -> int:
    """The local memory per thread that a bound launch's kernel needs (``castpile.gpu.launch.bind``; 0 if none).

    Triton records it as ``n_spills``, CUDA's ``CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`` in 4-byte words.
    """
    kernel = getattr(launch, "kernel", None)
    return 4 * int(getattr(kernel, "n_spills", 0) or 0)


#: ``CUfunction_attribute`` of a kernel's local memory per thread (cuda.h).
CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3


def function_local_bytes(function: int) -> int:
    """The local memory per thread of a loaded kernel, by its ``CUfunction`` handle (``cuFuncGetAttribute``)."""
    value = ctypes.c_int()
    _check(
        _driver().cuFuncGetAttribute(
            ctypes.byref(value), CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, ctypes.c_void_p(function)
        ),
        "cuFuncGetAttribute",
    )
    return value.value


def reserve(nbytes: int) -> None:
    """Raise the stack limit to ``nbytes`` if it is lower: call it while no kernel that waits on others runs.
    A kernel that needs no local memory asks nothing of the driver."""
    if nbytes > 0 and nbytes > stack_limit():
        set_stack_limit(nbytes)
