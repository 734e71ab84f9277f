"""The persistent GEMM that the tensor-parallel ops are built on: its tiles, and the GEMM alone (:func:`matmul`).

GEMM tiles: :func:`default_config` picks by M and op; ``config=`` overrides
(benchmarks/bench_tp_gemm.py --sweep times the candidates).  TMA
descriptors are made in the kernels (``tl.make_tensor_descriptor``), which needs
Triton's allocator: if none is set, :func:`matmul` and the ops set one that
allocates from torch (:func:`ensure_allocator`).  :class:`TensorParallelPlan` holds
what the two ops' plans share.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import triton

from ...arguments import check_tensor, output
from ...device_share import multiprocessors
from ...launch import bind
from ...launch_cache import LaunchCache
from . import gemm_kernels

#: Grid of the simulator's kernels (several blocks, so that tiles and chunks are spread over blocks).
SIM_BLOCKS = 4


@dataclass(frozen=True)
class GemmConfig:
    """A GEMM launch shape: tile ``block_m x block_n``, K in ``block_k`` steps, ``group_m`` row tiles per L2 group."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    tma: bool = True
    #: :func:`matmul` only: a flattened tile loop (epilogue under the next tile's loads); GPUs only.
    flatten: bool = False

    def options(self) -> dict:
        """The kernels' tile constexprs and launch options."""
        return dict(
            BM=self.block_m,
            BN=self.block_n,
            BK=self.block_k,
            GROUP_M=self.group_m,
            num_warps=self.num_warps,
            num_stages=self.num_stages,
        )


def default_config(m: int, op: str = "matmul") -> GemmConfig:
    """The tile for ``op`` ("matmul", "all_gather_matmul" or "matmul_reduce_scatter") over ``m`` rows.

    128 x 256 (3 stages, TMA) from 1024 rows, else 128 x 128 (4 stages): below
    1024 rows the wide tile leaves SMs idle (256 x 8192 makes 64 tiles of
    128 x 256 on 132 SMs, but 128 of 128 x 128).  There the GEMM alone and the
    reduce-scatter load operands through pointers, the all-gather through TMA
    (at 256 rows pointers made the GEMM alone and the reduce-scatter faster and TMA
    the one-wave all-gather: docs/data/bench-sweep-gemm-small.json, docs/data/bench-tp-gemm.json
    against docs/data/bench-tp-gemm-run-tma.json, docs/fused.md).
    """
    if m >= 1024:
        return GemmConfig()
    return GemmConfig(block_n=128, num_stages=4, tma=op == "all_gather_matmul")


def checked_config(config: GemmConfig, k: int, n: int, dtype: torch.dtype) -> GemmConfig:
    """``config`` with TMA off where it cannot apply: rows of A or B that are not whole 16 bytes."""
    size = torch.empty((), dtype=dtype).element_size()
    if config.tma and ((k * size) % 16 or (n * size) % 16):
        return replace(config, tma=False)
    return config


def default_blocks(device: torch.device) -> int:
    """A persistent kernel's grid on ``device``: one block per SM this rank may fill on a GPU
    (:func:`castpile.gpu.device_share.multiprocessors`), :data:`SIM_BLOCKS` in the simulator."""
    return multiprocessors(device) if device.type == "cuda" else SIM_BLOCKS


def tiles(rows: int, n: int, config: GemmConfig) -> int:
    """Tiles of ``config`` over ``rows`` x ``n``."""
    return triton.cdiv(rows, config.block_m) * triton.cdiv(n, config.block_n)


def ensure_allocator(device) -> None:
    """Give Triton an allocator (torch's) for the kernels' TMA descriptors, unless one is set already.

    Triton keeps the allocator per context (each thread has its own), so this looks every call.
    """
    if device.type != "cuda":
        return
    from triton.runtime import _allocation

    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):  # Triton 3.5 to 3.9 alike

        def allocate(size: int, alignment: int, stream):
            return torch.empty(size, dtype=torch.int8, device=device)

        triton.set_allocator(allocate)


@dataclass(eq=False)
class TensorParallelPlan:
    """What both tensor-parallel ops' plans hold: the sizes (the same on every rank) and the GEMM tile."""

    world_size: int
    m: int
    k: int
    n: int
    dtype: torch.dtype
    config: GemmConfig

    @property
    def shard_rows(self) -> int:
        return self.m // self.world_size


def check_sizes(name: str, world_size: int, m: int, k: int, n: int) -> None:
    """Raise ValueError unless the sizes of a tensor-parallel op fit (``name``: the op, for the message)."""
    if world_size < 2 or min(m, k, n) < 1 or m % world_size:
        raise ValueError(
            f"{name}: need at least 2 ranks, positive sizes and m ({m}) a multiple of world_size ({world_size})"
        )


_GEMM_LAUNCHES = LaunchCache()


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    config: GemmConfig | None = None,
    blocks: int | None = None,
) -> torch.Tensor:
    """``a @ b`` (a [M, K], b [K, N], contiguous, same dtype) by the persistent kernel; fp32 accumulation.

    ``blocks``: the grid (default: one block per SM, at most one per tile).
    """
    m, k = a.shape
    n = b.shape[1]
    check_tensor("a", a, (m, k), a.dtype)
    check_tensor("b", b, (k, n), a.dtype)
    config = checked_config(config or default_config(m), k, n, a.dtype)
    out = output(a, out, (m, n), "matmul")
    if blocks is None:
        blocks = default_blocks(a.device)
    grid = (max(1, min(blocks, tiles(m, n, config))),)
    ensure_allocator(a.device)

    def bind_for(tensors, **extra):
        return bind(
            gemm_kernels.matmul,
            grid,
            tensors["a"],
            tensors["b"],
            tensors["c"],
            m,
            n,
            K=k,
            TMA=config.tma,
            FLATTEN=config.flatten,
            **config.options(),
            **extra,
        )

    key = (m, n, k, a.dtype, a.device, config, grid)
    _GEMM_LAUNCHES.issue(key, bind_for, {"a": a, "b": b, "c": out}, False, out)
    return out
