"""All-reduce fused with a residual add and RMSNorm: the host side of ``rmsnorm_kernels``.

The decoder-layer pattern of tensor-parallel inference (TensorRT-LLM's and
vLLM's fused all-reduce + RMSNorm), in one kernel and one launch::

    symm = runtime.symmetric_empty((M, D), torch.bfloat16)     # collective, once
    symm.tensor.copy_(partial)            # this rank's partial sums (a row-parallel GEMM's output)
    y = all_reduce_residual_rmsnorm(symm, residual, weight, eps=1e-6)
    # residual += sum over ranks of partial (in place); y = rms_norm(residual) * weight

Both functions are collective: every rank calls them with the same shapes,
with the same ``residual`` and ``weight`` contents (as tensor-parallel ranks
hold them).  Every rank writes bitwise the same ``y`` and ``residual``; the
arithmetic is spelled out in ``rmsnorm_kernels``.  ``symm.tensor`` holds the
input (2-D, rows x D, contiguous).  Tensors with the low-latency scratch
(at most 256 KB, rows a whole number of 4-byte words) take the kernel without
a barrier; larger ones the one-shot kernel.  Launches are prepared once
(:mod:`castpile.gpu.launch_cache`), so calls can be captured in CUDA graphs.
"""

import torch
import triton

from ..arguments import output
from ..launch import bind
from ..symmetric import LOW_LATENCY_BLOCK
from . import rmsnorm_kernels_triton as kernels

METHODS = ("low_latency", "one_shot")
#: The one-shot kernel's largest number of elements of a row handled at once (a longer row takes two passes).
MAX_BLOCK = 16384
#: Words per tile of the low-latency kernel (the low-latency all-reduce's tile).
LOW_LATENCY_TILE = LOW_LATENCY_BLOCK
#: Elements per step of the low-latency kernel's normalising pass.
LOW_LATENCY_NORM_BLOCK = 4096


def all_reduce_residual_rmsnorm(
    symm,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    out=None,
    *,
    method=None,
    block=None,
    num_warps=None,
    barrier=True,
) -> torch.Tensor:
    """``residual += sum over ranks of symm.tensor``; returns ``rms_norm(residual) * weight`` (in ``out``).

    ``method``: ``"low_latency"`` or ``"one_shot"``; None picks the first that
    the tensor supports.  ``block`` (a power of two): elements of a row per
    pass of the one-shot kernel (default: the row, up to :data:`MAX_BLOCK`), or
    per tile of the low-latency kernel (default: :data:`LOW_LATENCY_TILE` words);
    ``num_warps``: the launch's (default: 8 for the low-latency kernel, else
    :func:`default_warps`; the fastest in docs/data/bench-sweep-rmsnorm.json).  ``barrier=False`` drops the
    one-shot kernel's barriers (for tests that show they are needed).
    """
    _check("all_reduce_residual_rmsnorm", symm, weight, residual=residual)
    return _fused("all_reduce_residual_rmsnorm", symm, residual, weight, eps, out, method, block, num_warps, barrier)


def all_reduce_rmsnorm(
    symm, weight: torch.Tensor, eps: float = 1e-6, out=None, *, method=None, block=None, num_warps=None, barrier=True
) -> torch.Tensor:
    """``rms_norm(sum over ranks of symm.tensor) * weight`` (in ``out``); arguments as in the residual form."""
    _check("all_reduce_rmsnorm", symm, weight)
    return _fused("all_reduce_rmsnorm", symm, None, weight, eps, out, method, block, num_warps, barrier)


def _check(name, symm, weight, residual=None):
    """Raise ValueError unless the input, ``weight`` and ``residual`` fit together."""
    x = symm.tensor
    if x.dim() != 2 or not x.is_contiguous():
        raise ValueError(f"{name}: symm.tensor must be a contiguous 2-D (rows, D) tensor, got shape {tuple(x.shape)}")
    if weight.shape != x.shape[1:] or weight.dtype != x.dtype or not weight.is_contiguous():
        raise ValueError(
            f"{name}: weight must be a contiguous {x.dtype} tensor of shape ({x.shape[1]},), "
            f"got {weight.dtype} {tuple(weight.shape)}"
        )
    if residual is not None and (
        residual.shape != x.shape or residual.dtype != x.dtype or not residual.is_contiguous()
    ):
        raise ValueError(
            f"{name}: residual must be a contiguous {x.dtype} tensor of shape {tuple(x.shape)}, "
            f"got {residual.dtype} {tuple(residual.shape)}"
        )


def _method(symm, method, name):
    """The kernel for this tensor: the requested one, checked, or the low-latency one where it applies."""
    d = symm.tensor.shape[1]
    low_latency = symm.low_latency is not None and d * symm.tensor.element_size() % 4 == 0
    if method is None:
        return "low_latency" if low_latency else "one_shot"
    if method not in METHODS:
        raise ValueError(f"{name}: method must be one of {', '.join(METHODS)}, got {method!r}")
    if method == "low_latency" and not low_latency:
        raise ValueError(
            f"{name}: this tensor has no low-latency scratch or its rows are not whole 4-byte words "
            "(the scratch comes with tensors of at most 256 KB); use method='one_shot'"
        )
    return method


def default_warps(block: int) -> int:
    """Warps of a launch whose rows are handled ``block`` elements at a time."""
    return 4 if block < 2048 else 8 if block < 8192 else 16


def _fused(name, symm, residual, weight, eps, out, method, block, num_warps, barrier):
    symm.require_all_reachable(name)
    x = symm.tensor
    rows, d = x.shape
    method = _method(symm, method, name)
    if block is None:
        block = (
            LOW_LATENCY_TILE * 4 // x.element_size()
            if method == "low_latency"
            else min(triton.next_power_of_2(d), MAX_BLOCK)
        )
    smallest = 4 // x.element_size() if method == "low_latency" else 1  # the low-latency tiles are whole words
    if block < smallest or block & (block - 1):
        raise ValueError(
            f"{name}: block must be a power of two of at least {smallest} element(s) for the {method} "
            f"kernel, got {block}"
        )
    owned = out is not None
    out = output(x, out, x.shape, name)
    tensors = (
        {"weight": weight, "out": out} if residual is None else {"residual": residual, "weight": weight, "out": out}
    )
    placeholder = weight if residual is None else residual  # bound where the kernel reads no residual
    options = {
        "num_warps": (8 if method == "low_latency" else default_warps(block)) if num_warps is None else num_warps
    }

    def bind_for(given, **extra):
        common = dict(
            rank=symm.rank,
            rows=rows,
            D=d,
            eps=eps,
            WORLD=symm.world_size,
            BLOCK=block,
            HAS_RESIDUAL=residual is not None,
            **options,
            **extra,
        )
        held = {"residual": placeholder, **given}
        if method == "one_shot":
            grid = (max(1, min(rows, symm.max_blocks)),)
            return bind(
                kernels.one_shot_rmsnorm,
                grid,
                x,
                symm.buffer_ptrs,
                symm.signal_pad,
                symm.signal_pad_ptrs,
                **held,
                ONE_PASS=block >= d,
                BARRIER=barrier,
                **common,
            )
        scratch = symm.low_latency
        per_row = triton.cdiv(d, block)
        return bind(
            kernels.low_latency_rmsnorm,
            (scratch.epochs.numel(),),
            x,
            scratch.slots.tensor,
            scratch.slots.ptrs,
            scratch.epochs,
            scratch.tile_sums,
            scratch.row_arrivals,
            **held,
            SEGMENTS=triton.next_power_of_2(per_row),
            NORM_BLOCK=min(triton.next_power_of_2(d), LOW_LATENCY_NORM_BLOCK),
            WHOLE_ROWS=block >= d,
            **common,
        )

    symm.launches.issue((name, method, block, options["num_warps"], eps, barrier), bind_for, tensors, owned, x)
    return out


__all__ = ["MAX_BLOCK", "METHODS", "all_reduce_residual_rmsnorm", "all_reduce_rmsnorm", "default_warps"]
