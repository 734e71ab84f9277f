"""The checks of the tensors a library wrapper is given, and the ``out`` tensor it writes."""

from __future__ import annotations

import torch


def check_tensor(name: str, tensor: torch.Tensor, shape, *dtypes: torch.dtype) -> None:
    """Raise ValueError unless ``tensor`` is contiguous, of ``shape`` and of one of ``dtypes``."""
    shape = tuple(shape)
    if tuple(tensor.shape) != shape or tensor.dtype not in dtypes or not tensor.is_contiguous():
        raise ValueError(
            f"{name} must be a contiguous {' or '.join(map(str, dtypes))} tensor of shape {shape}, "
            f"got {_described(tensor)}"
        )


def output(like: torch.Tensor, out, shape, name: str) -> torch.Tensor:
    """``out``, or a new tensor like ``like``; checked to be contiguous with ``shape`` and ``like``'s dtype."""
    if out is None:
        return like.new_empty(shape)
    if out.shape != shape or out.dtype != like.dtype or not out.is_contiguous():
        raise ValueError(
            f"{name}: out must be a contiguous {like.dtype} tensor of shape {tuple(shape)}, got {_described(out)}"
        )
    return out


def _described(tensor: torch.Tensor) -> str:
    return f"{tensor.dtype} {tuple(tensor.shape)}{'' if tensor.is_contiguous() else ' (not contiguous)'}"
