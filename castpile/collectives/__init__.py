"""Collectives over symmetric memory: thin launchers for the kernels in ``kernels.py``.

Each function takes a :class:`castpile.runtime.SymmetricTensor` (or the CPU
simulator's stand-in) and is collective: every rank of the group calls it with
the same sizes.  Inputs live in ``symm.tensor``; the kernels synchronise ranks
themselves (no host barrier) and leave the signal pads zero, so calls repeat
back to back and can be captured in CUDA graphs.  bf16 sums accumulate in fp32.

``barrier=False`` drops the in-kernel barriers; it exists to show (in tests)
that they are needed, and gives wrong results whenever ranks are not in step.
"""

import torch
import triton

from . import kernels_triton as _k

#: Elements per tile for messages up to SMALL_BYTES (4 warps, at most one block per SM); the
#: fastest of 256-4096 with 1, 2 or 4 warps at 4-256 KB in docs/bench-sweep-small.json.
BLOCK = 2048
#: Elements per tile above SMALL_BYTES (8 warps, up to ``symm.max_blocks``: two blocks per SM).
LARGE_BLOCK = 4096
SMALL_BYTES = 256 << 10


def _launch(symm, elements, block):
    """Grid and launch options: small messages use few 2048-element tiles, large ones wide tiles on every SM.

    Measured on 2 x H200 (docs/benchmarks.md): at 64 MB, 4096-element tiles with
    8 warps and two blocks per SM take the one-shot from 287 to 218 us.
    """
    if symm.tensor.data_ptr() % 16:
        raise ValueError("castpile collectives need 16-byte aligned buffers (the kernels declare align=16); "
                         f"this rank's tensor starts at {symm.tensor.data_ptr():#x}")
    large = block is None and symm.tensor.numel() * symm.tensor.element_size() > SMALL_BYTES
    cap = symm.max_blocks if large else max(1, symm.max_blocks // 2)
    block = (LARGE_BLOCK if large else BLOCK) if block is None else block
    grid = (max(1, min(triton.cdiv(elements, block), cap)),)
    return grid, block, {"num_warps": 8 if large else 4}


def all_reduce_one_shot(symm, out=None, *, block=None, barrier=True):
    """Sum of every rank's ``symm.tensor``, written to ``out`` (new if None); every rank reads all inputs."""
    n = symm.tensor.numel()
    out = torch.empty_like(symm.tensor) if out is None else out
    grid, block, options = _launch(symm, n, block)
    _k.one_shot_all_reduce[grid](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, n,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier, **options)
    return out


def all_reduce_two_shot(symm, *, block=None, barrier=True):
    """Sum of every rank's ``symm.tensor``, in place: reduce-scatter, then all-gather by writes to peers."""
    n = symm.tensor.numel()
    grid, block, options = _launch(symm, n, block)
    grid = (min(grid[0], triton.cdiv(n, symm.world_size * block)),)  # tiles of one rank's chunk
    _k.two_shot_all_reduce[grid](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, symm.rank, n,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier, **options)
    return symm.tensor


def all_gather(symm, out=None, *, block=None, barrier=True):
    """Every rank's ``symm.tensor`` stacked: ``out`` has shape (world_size, *symm.tensor.shape)."""
    m = symm.tensor.numel()
    out = symm.tensor.new_empty((symm.world_size, *symm.tensor.shape)) if out is None else out
    grid, block, options = _launch(symm, m, block)
    _k.all_gather[grid](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, m,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier, **options)
    return out


def reduce_scatter(symm, out=None, *, block=None, barrier=True):
    """Chunk ``rank`` of the sum of every rank's ``symm.tensor`` (split into world_size equal chunks along dim 0)."""
    if symm.tensor.shape[0] % symm.world_size:
        raise ValueError(f"reduce_scatter: dim 0 ({symm.tensor.shape[0]}) is not a multiple of {symm.world_size} ranks")
    m = symm.tensor.numel() // symm.world_size
    out = symm.tensor.new_empty((symm.tensor.shape[0] // symm.world_size, *symm.tensor.shape[1:])) if out is None else out
    grid, block, options = _launch(symm, m, block)
    _k.reduce_scatter[grid](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, m,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier, **options)
    return out


__all__ = ["BLOCK", "LARGE_BLOCK", "SMALL_BYTES", "all_gather", "all_reduce_one_shot", "all_reduce_two_shot", "reduce_scatter"]
