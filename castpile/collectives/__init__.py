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

#: Elements per tile.
BLOCK = 1024


def _grid(symm, elements, block):
    return (max(1, min(triton.cdiv(elements, block), symm.max_blocks)),)


def all_reduce_one_shot(symm, out=None, *, block=BLOCK, barrier=True):
    """Sum of every rank's ``symm.tensor``, written to ``out`` (new if None); every rank reads all inputs."""
    n = symm.tensor.numel()
    out = torch.empty_like(symm.tensor) if out is None else out
    _k.one_shot_all_reduce[_grid(symm, n, block)](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, n,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier)
    return out


def all_reduce_two_shot(symm, *, block=BLOCK, barrier=True):
    """Sum of every rank's ``symm.tensor``, in place: reduce-scatter, then all-gather by writes to peers."""
    n = symm.tensor.numel()
    _k.two_shot_all_reduce[_grid(symm, triton.cdiv(n, symm.world_size), block)](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, symm.rank, n,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier)
    return symm.tensor


def all_gather(symm, out=None, *, block=BLOCK, barrier=True):
    """Every rank's ``symm.tensor`` stacked: ``out`` has shape (world_size, *symm.tensor.shape)."""
    m = symm.tensor.numel()
    out = symm.tensor.new_empty((symm.world_size, *symm.tensor.shape)) if out is None else out
    _k.all_gather[_grid(symm, m, block)](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, m,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier)
    return out


def reduce_scatter(symm, out=None, *, block=BLOCK, barrier=True):
    """Chunk ``rank`` of the sum of every rank's ``symm.tensor`` (split into world_size equal chunks along dim 0)."""
    if symm.tensor.shape[0] % symm.world_size:
        raise ValueError(f"reduce_scatter: dim 0 ({symm.tensor.shape[0]}) is not a multiple of {symm.world_size} ranks")
    m = symm.tensor.numel() // symm.world_size
    out = symm.tensor.new_empty((symm.tensor.shape[0] // symm.world_size, *symm.tensor.shape[1:])) if out is None else out
    _k.reduce_scatter[_grid(symm, m, block)](
        symm.tensor, symm.buffer_ptrs, symm.signal_pad, symm.signal_pad_ptrs, out, symm.rank, m,
        WORLD=symm.world_size, BLOCK=block, BARRIER=barrier)
    return out


__all__ = ["BLOCK", "all_gather", "all_reduce_one_shot", "all_reduce_two_shot", "reduce_scatter"]
