"""GEMM + reduce-scatter (``torch.ops.symm_mem.fused_matmul_reduce_scatter``'s): the host side of its kernels."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ...arguments import check_tensor, output
from ...launch import bind
from ...launch_cache import LaunchCache
from ...symmetric import Scratch
from ..state import FusedState
from . import reduce_scatter_kernels_triton as kernels
from .gemm import (
    TensorParallelPlan,
    check_sizes,
    checked_config,
    default_blocks,
    default_config,
    ensure_allocator,
    tiles,
)


@dataclass(eq=False)
class MatmulReduceScatterPlan(TensorParallelPlan):
    """The launch shape of :func:`matmul_reduce_scatter` (the same on every rank): ``blocks``, the grid."""

    blocks: int


@dataclass(eq=False, repr=False)
class MatmulReduceScatter(MatmulReduceScatterPlan, FusedState):
    """One rank's state for :func:`matmul_reduce_scatter`.

    Symmetric: ``scratch`` [W - 1, m / W, n] (slot ``(source - rank - 1) % W``
    receives that source's partial of this rank's rows), ``flags`` int32
    [(W - 1) * tiles] (one per slot and tile of this rank's rows), ``pad`` int32
    [blocks * W] (the barrier every block starts with).

    ``create(rank, world_size, m=, k=, n=, dtype=bf16, **options)`` and ``create_all``
    (:class:`~castpile.gpu.fused.state.FusedState`): ``k`` is this rank's share of the
    reduction (a is [m, k], b [k, n]); ``options``: ``config``, ``blocks`` (default
    one per SM, at most one per tile).
    """

    rank: int
    scratch: Scratch
    flags: Scratch
    pad: Scratch
    launches: LaunchCache = field(default_factory=LaunchCache)

    def __repr__(self):
        return (
            f"MatmulReduceScatter(rank={self.rank}, world_size={self.world_size}, m={self.m}, k={self.k}, "
            f"n={self.n}, dtype={self.dtype}, config={self.config}, blocks={self.blocks})"
        )

    @classmethod
    def plan(
        cls,
        world_size: int,
        device: torch.device,
        *,
        m: int,
        k: int,
        n: int,
        dtype: torch.dtype = torch.bfloat16,
        config=None,
        blocks=None,
    ) -> MatmulReduceScatterPlan:
        """Check the sizes and choose the grid (the same on every rank)."""
        check_sizes("MatmulReduceScatter", world_size, m, k, n)
        config = checked_config(config or default_config(m, "matmul_reduce_scatter"), k, n, dtype)
        every_tile = world_size * tiles(m // world_size, n, config)
        blocks = max(1, min(default_blocks(device) if blocks is None else blocks, every_tile))
        return MatmulReduceScatterPlan(world_size=world_size, m=m, k=k, n=n, dtype=dtype, config=config, blocks=blocks)

    @staticmethod
    def buffers(plan: MatmulReduceScatterPlan) -> dict:
        """The symmetric buffers: name -> (shape, dtype)."""
        w, ms, n = plan.world_size, plan.shard_rows, plan.n
        return {
            "scratch": ((w - 1, ms, n), plan.dtype),
            "flags": (((w - 1) * tiles(ms, n, plan.config),), torch.int32),
            "pad": ((plan.blocks * w,), torch.int32),
        }


def matmul_reduce_scatter(
    state: MatmulReduceScatter, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Rows ``rank * m / W ...`` of the sum over ranks of ``a @ b`` into ``out`` [m / W, n]; collective.

    ``a`` [m, k], ``b`` [k, n], contiguous, in the state's dtype.  Each rank's
    product is rounded to the dtype before the sum (as a GEMM followed by a
    reduce-scatter would), and the sum runs in fp32 over ranks in order.
    """
    ms, k, n = state.shard_rows, state.k, state.n
    check_tensor("a", a, (state.m, k), state.dtype)
    check_tensor("b", b, (k, n), state.dtype)
    out = output(b, out, (ms, n), "matmul_reduce_scatter")
    config = state.config
    ensure_allocator(out.device)

    def bind_for(tensors, **extra):
        return bind(
            kernels.matmul_reduce_scatter,
            (state.blocks,),
            tensors["a"],
            tensors["b"],
            tensors["out"],
            state.scratch.tensor,
            state.scratch.ptrs,
            state.flags.tensor,
            state.flags.ptrs,
            state.pad.tensor,
            state.pad.ptrs,
            state.rank,
            ms,
            n,
            K=k,
            WORLD=state.world_size,
            TMA=config.tma,
            **config.options(),
            **extra,
        )

    state.launches.issue("matmul_reduce_scatter", bind_for, {"a": a, "b": b, "out": out}, False, out)
    return out
