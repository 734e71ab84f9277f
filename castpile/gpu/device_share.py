"""How many of a GPU's multiprocessors one rank's launches may fill: all, or a share where several ranks run on one GPU.

The library's wrappers size persistent and barriered grids by the multiprocessors they may
use (:func:`multiprocessors`), so that every block of every rank is resident at once.  One
rank per GPU (``castpile.gpu.runtime``) gets them all; :mod:`castpile.gpu.one_gpu` runs W
ranks on one GPU and gives each ``1 / W`` of them (:func:`share_device`), so that the grids of
all W ranks fit on the device together.
"""

from __future__ import annotations

import torch

#: Device index -> ranks sharing that GPU (absent: one).
_RANKS_ON: dict[int, int] = {}


def _index(device) -> int:
    device = torch.device(device)
    return torch.cuda.current_device() if device.index is None else device.index


def share_device(device, ranks: int) -> None:
    """From now on in this process, ``ranks`` ranks share ``device``: each may fill ``1 / ranks`` of its multiprocessors."""
    if ranks < 1:
        raise ValueError(f"share_device: ranks must be at least 1, not {ranks}")
    _RANKS_ON[_index(device)] = ranks


def multiprocessors(device) -> int:
    """The multiprocessors one rank's launches on ``device`` (a CUDA device) may fill: at least one."""
    count = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, count // _RANKS_ON.get(_index(device), 1))
