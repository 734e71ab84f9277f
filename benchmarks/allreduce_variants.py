"""Launchers for the collectives the 2-GPU benchmark times (shared with its CPU simulator check).

Each ``make_*`` returns a zero-argument callable bound once with
:func:`castpile.launch.bind`; ``wrapper_*`` calls go through the library's
``castpile.collectives`` functions (``kernel[grid](...)`` on every call).
"""

import sys
from pathlib import Path

import torch
import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile import collectives  # noqa: E402
from castpile.collectives import kernels_triton as lib  # noqa: E402
from castpile.launch import bind  # noqa: E402


def pad_blocks(symm) -> int:
    """Blocks a barriered kernel may launch: one signal-pad slot per peer per block."""
    return symm.signal_pad.numel() // symm.world_size


def one_shot(symm, out, module=lib, block=collectives.BLOCK, blocks=None, warps=4, graph=False):
    """Bound one-shot all-reduce of ``symm.tensor`` into ``out``; grid as the wrapper's unless ``blocks``."""
    n = symm.tensor.numel()
    cap = symm.max_blocks if blocks is None else min(blocks, pad_blocks(symm))
    grid = (max(1, min(triton.cdiv(n, block), cap)),)
    return bind(module.one_shot_all_reduce, grid, symm.tensor, symm.buffer_ptrs, symm.signal_pad,
                symm.signal_pad_ptrs, out, symm.rank, n, WORLD=symm.world_size, BLOCK=block, BARRIER=True,
                num_warps=warps, graph=graph)


def two_shot(symm, module=lib, block=collectives.BLOCK, blocks=None, warps=4, graph=False):
    """Bound in-place two-shot all-reduce of ``symm.tensor``."""
    n = symm.tensor.numel()
    cap = symm.max_blocks if blocks is None else min(blocks, pad_blocks(symm))
    grid = (max(1, min(triton.cdiv(triton.cdiv(n, symm.world_size), block), cap)),)
    return bind(module.two_shot_all_reduce, grid, symm.tensor, symm.buffer_ptrs, symm.signal_pad,
                symm.signal_pad_ptrs, symm.rank, n, WORLD=symm.world_size, BLOCK=block, BARRIER=True,
                num_warps=warps, graph=graph)


def tuned_config(nbytes: int, sms: int) -> dict:
    """The library wrappers' tile, warps and grid cap for an ``nbytes`` message (castpile.collectives)."""
    if nbytes <= collectives.SMALL_BYTES:
        return {"block": collectives.BLOCK, "warps": 4, "blocks": sms}
    return {"block": collectives.LARGE_BLOCK, "warps": 8, "blocks": 2 * sms}


def check(symm, fn, expect: torch.Tensor, result) -> float:
    """Max abs difference of one call's result from ``expect``; ``symm.tensor`` is restored first."""
    fn()
    got = result()
    return float((got.float() - expect.float()).abs().max())


__all__ = ["bind", "collectives", "lib", "one_shot", "pad_blocks", "tuned_config", "two_shot"]
