"""Bound launches of the library's all-reduce kernels at a chosen launch shape, for the two-GPU benchmarks.

:func:`one_shot` and :func:`two_shot` return a zero-argument callable bound once
with :func:`castpile.gpu.launch.bind` (``graph=True``: a replayed one-kernel CUDA
graph) over ``castpile.gpu.collectives.kernels_triton``; by default the grid is
capped at ``symm.max_blocks`` with 4 warps (bench_collectives' ``*_bound``),
:func:`tuned_config` gives the library wrappers' shape.  Used by
bench_collectives.py, sweep_small.py, sweep_large.py and probe_launch_ll.py.
"""

import sys
from pathlib import Path

import triton

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from castpile.gpu import collectives  # noqa: E402
from castpile.gpu.collectives import kernels_triton as lib  # noqa: E402
from castpile.gpu.launch import bind  # noqa: E402


def pad_blocks(symm) -> int:
    """Blocks a barriered kernel may launch: one signal-pad slot per peer per block."""
    return symm.signal_pad.numel() // symm.world_size


def one_shot(symm, out, block=collectives.BLOCK, blocks=None, warps=4, graph=False):
    """Bound one-shot all-reduce of ``symm.tensor`` into ``out``; grid capped at ``blocks`` or ``symm.max_blocks``."""
    n = symm.tensor.numel()
    cap = symm.max_blocks if blocks is None else min(blocks, pad_blocks(symm))
    grid = (max(1, min(triton.cdiv(n, block), cap)),)
    return bind(lib.one_shot_all_reduce, grid, symm.tensor, symm.buffer_ptrs, symm.signal_pad,
                symm.signal_pad_ptrs, out, symm.rank, n, WORLD=symm.world_size, BLOCK=block, BARRIER=True,
                num_warps=warps, graph=graph)


def two_shot(symm, block=collectives.BLOCK, blocks=None, warps=4, graph=False):
    """Bound in-place two-shot all-reduce of ``symm.tensor`` (pulling); grid as :func:`one_shot`'s over one chunk."""
    n = symm.tensor.numel()
    cap = symm.max_blocks if blocks is None else min(blocks, pad_blocks(symm))
    grid = (max(1, min(triton.cdiv(triton.cdiv(n, symm.world_size), block), cap)),)
    return bind(lib.two_shot_all_reduce, grid, symm.tensor, symm.buffer_ptrs, symm.signal_pad,
                symm.signal_pad_ptrs, symm.rank, n, WORLD=symm.world_size, BLOCK=block, BARRIER=True,
                num_warps=warps, graph=graph)


def tuned_config(nbytes: int, sms: int) -> dict:
    """The library wrappers' tile, warps and grid cap for an ``nbytes`` message (castpile.gpu.collectives)."""
    if nbytes <= collectives.SMALL_BYTES:
        return {"block": collectives.BLOCK, "warps": 4, "blocks": sms}
    return {"block": collectives.LARGE_BLOCK, "warps": 8, "blocks": 2 * sms}
