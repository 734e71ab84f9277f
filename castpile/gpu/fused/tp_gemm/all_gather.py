"""All-gather + GEMM (``torch.ops.symm_mem.fused_all_gather_matmul``'s product): the host side of its kernels.

:meth:`AllGatherMatmul.plan` chooses how the shards travel: chunks of rows, chunks of
columns (``k_segment``) or one wave (the package docstring says why each).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import triton

from ...arguments import check_tensor, output
from ...launch import bind
from ...launch_cache import LaunchCache
from ...symmetric import Scratch
from ..state import FusedState
from . import all_gather_kernels_triton as kernels
from .gemm import (
    TensorParallelPlan,
    check_sizes,
    checked_config,
    default_blocks,
    default_config,
    ensure_allocator,
    tiles,
)

#: Elements copied per step by a communication block, per warp (the next step's load is in flight during the
#: store; 8 warps move 64 KB of bf16 a step, 64 registers a thread for each of the two steps).
COPY_PER_WARP = 4096
#: Columns per chunk of the all-gather's column chunking (``k_segment``), its default where a row tile holds the
#: whole shard but the tiles outnumber the blocks (else one wave; docs/fused.md has the sweep).
K_SEGMENT = 2048
#: The one-wave all-gather's readers multiply a peer's tile in this many segments, each after its senders' flags.
ONE_WAVE_SEGMENTS = 4


@dataclass(eq=False)
class AllGatherMatmulPlan(TensorParallelPlan):
    """The launch shape of :func:`all_gather_matmul` (the same on every rank): a grid of ``comm_blocks + consumers``."""

    comm_blocks: int
    consumers: int
    chunk_rows: int
    k_segment: int
    chunks: int
    copy_block: int
    one_wave: bool
    stripe: int
    segment: int


@dataclass(eq=False, repr=False)
class AllGatherMatmul(AllGatherMatmulPlan, FusedState):
    """One rank's state for :func:`all_gather_matmul`.

    Symmetric (peers write into them): ``gathered`` [m, k] (the shards, rank r's
    in rows ``r * m / W ...``), ``flags`` int32 [W * chunks * consumers] (one per
    source, chunk and GEMM block), ``pad`` int32 [comm_blocks * W] (the
    communication blocks' barrier).  ``peers`` / ``flag_peers``: the other ranks'
    buffer and flag addresses, rank + 1 first.

    ``create(rank, world_size, m=, k=, n=, dtype=bf16, **options)`` and ``create_all``
    (:class:`~castpile.gpu.fused.state.FusedState`): ``m`` rows of the gathered A (a
    multiple of ``world_size``), B is [k, n].  ``options``: ``config`` (a
    :class:`~castpile.gpu.fused.tp_gemm.gemm.GemmConfig`; default ``default_config``),
    ``blocks`` (the grid: default one per SM), ``comm_blocks`` (default 4),
    ``chunk_rows`` (rows per flag; default: at most a row tile, and at least two
    chunks per communication block where the shard allows), ``k_segment``
    (instead of chunks of rows, chunks of this many columns, a multiple of the
    tile's ``block_k``: each sender sends its part of the shard's rows segment by
    segment and GEMM blocks multiply a peer's tile segment by segment as they
    arrive; default :data:`K_SEGMENT` on GPUs where a row tile holds the whole
    shard, else 0: chunks of rows), ``copy_block`` (elements per copy step; default
    :data:`COPY_PER_WARP` per warp), ``one_wave`` (a block per tile, the blocks of
    the local shard's tiles sending a stripe of its columns each before they
    multiply, the others multiplying a peer's tile in :data:`ONE_WAVE_SEGMENTS`
    segments as the stripes arrive: needs a shard of at most a row tile and
    ``world_size * column tiles <= blocks``; the default where those hold on GPUs
    and no chunking option is given).
    """

    rank: int
    gathered: Scratch
    flags: Scratch
    pad: Scratch
    peers: torch.Tensor = field(init=False)
    flag_peers: torch.Tensor = field(init=False)
    launches: LaunchCache = field(default_factory=LaunchCache)

    def __post_init__(self):
        self.peers = _rotated(self.gathered.ptrs, self.rank, self.world_size)
        self.flag_peers = _rotated(self.flags.ptrs, self.rank, self.world_size)

    def __repr__(self):
        return (
            f"AllGatherMatmul(rank={self.rank}, world_size={self.world_size}, m={self.m}, k={self.k}, n={self.n}, "
            f"dtype={self.dtype}, config={self.config}, comm_blocks={self.comm_blocks}, "
            f"consumers={self.consumers}, chunk_rows={self.chunk_rows}, k_segment={self.k_segment}, "
            f"one_wave={self.one_wave})"
        )

    @property
    def a_shard(self) -> torch.Tensor:
        """This rank's rows of the gathered buffer: write the shard here and pass it (or None) to skip a copy."""
        return self.gathered.tensor[self.rank * self.shard_rows : (self.rank + 1) * self.shard_rows]

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
        comm_blocks=None,
        chunk_rows=None,
        copy_block=None,
        k_segment=None,
        one_wave=None,
    ) -> AllGatherMatmulPlan:
        """Check the sizes and choose the launch shape (the same on every rank); the options are the class's."""
        check_sizes("AllGatherMatmul", world_size, m, k, n)
        ms = m // world_size
        config = checked_config(config or default_config(m, "all_gather_matmul"), k, n, dtype)
        sizes = dict(world_size=world_size, m=m, k=k, n=n, dtype=dtype, config=config)
        if blocks is None:
            blocks = default_blocks(device)
        if copy_block is None:
            copy_block = COPY_PER_WARP * config.num_warps if device.type == "cuda" else 64
        tiles_n = triton.cdiv(n, config.block_n)
        fits = ms <= config.block_m and world_size * tiles_n <= blocks
        if one_wave is None:
            one_wave = (
                fits and device.type == "cuda" and comm_blocks is None and chunk_rows is None and k_segment is None
            )
        elif one_wave and not fits:
            raise ValueError(
                f"AllGatherMatmul: one_wave needs a shard of at most a row tile ({ms} rows, tiles of "
                f"{config.block_m}) and a block per tile ({world_size * tiles_n} tiles, {blocks} blocks)"
            )
        if one_wave:
            stripe = triton.cdiv(triton.cdiv(k, tiles_n), config.block_k) * config.block_k
            return AllGatherMatmulPlan(
                **sizes,
                comm_blocks=tiles_n,
                consumers=(world_size - 1) * tiles_n,
                chunk_rows=ms,
                k_segment=0,
                chunks=tiles_n,
                copy_block=copy_block,
                one_wave=True,
                stripe=stripe,
                segment=max(1, tiles_n // ONE_WAVE_SEGMENTS),
            )
        if comm_blocks is None:
            comm_blocks = 4 if device.type == "cuda" else 1
        comm_blocks = max(1, min(comm_blocks, ms))
        consumers = max(1, min(blocks - comm_blocks, world_size * tiles(ms, n, config)))
        if k_segment is None:
            whole_shard = ms <= config.block_m and chunk_rows is None and device.type == "cuda"
            k_segment = K_SEGMENT if whole_shard and k > K_SEGMENT else 0
        elif k_segment and chunk_rows is not None:
            raise ValueError(
                "AllGatherMatmul: give chunk_rows (chunks of rows) or k_segment (chunks of columns), not both"
            )
        elif k_segment < 0 or k_segment % config.block_k:
            raise ValueError(
                f"AllGatherMatmul: k_segment ({k_segment}) must be 0 (chunks of rows) or a positive "
                f"multiple of the tile's block_k ({config.block_k})"
            )
        if k_segment:
            chunk_rows, chunks = ms, triton.cdiv(k, k_segment) * comm_blocks
        else:
            if chunk_rows is None:
                chunk_rows = max(1, min(config.block_m, triton.cdiv(ms, 2 * comm_blocks)))
            chunks = triton.cdiv(ms, chunk_rows)
        return AllGatherMatmulPlan(
            **sizes,
            comm_blocks=comm_blocks,
            consumers=consumers,
            chunk_rows=chunk_rows,
            k_segment=k_segment,
            chunks=chunks,
            copy_block=copy_block,
            one_wave=False,
            stripe=0,
            segment=1,
        )

    @staticmethod
    def buffers(plan: AllGatherMatmulPlan) -> dict:
        """The symmetric buffers: name -> (shape, dtype)."""
        w = plan.world_size
        sources = 1 if plan.one_wave else w  # chunks: a flag per (source, chunk, consumer); one wave: (reader, sender)
        return {
            "gathered": ((plan.m, plan.k), plan.dtype),
            "flags": ((sources * plan.chunks * plan.consumers,), torch.int32),
            "pad": ((plan.comm_blocks * w,), torch.int32),
        }


def all_gather_matmul(
    state: AllGatherMatmul, a_shard: torch.Tensor | None, b: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``all_gather(a_shard over ranks) @ b`` into ``out`` [m, n] (new if None); collective.

    ``a_shard`` [m / W, k]: this rank's rows; None or ``state.a_shard`` itself
    means they are already there, any other tensor is copied there first.  ``b``
    [k, n]; all in the state's dtype, contiguous.  After the call
    ``state.gathered.tensor`` holds the whole A.
    """
    ms, k, n = state.shard_rows, state.k, state.n
    check_tensor("b", b, (k, n), state.dtype)
    if a_shard is not None and a_shard.data_ptr() != state.a_shard.data_ptr():
        check_tensor("a_shard", a_shard, (ms, k), state.dtype)
        state.a_shard.copy_(a_shard)
    out = output(b, out, (state.m, n), "all_gather_matmul")
    config = state.config
    ensure_allocator(out.device)

    def bind_for(tensors, **extra):
        return bind(
            kernels.all_gather_matmul,
            (state.comm_blocks + state.consumers,),
            state.gathered.tensor,
            state.peers,
            tensors["b"],
            tensors["out"],
            state.flags.tensor,
            state.flag_peers,
            state.pad.tensor,
            state.pad.ptrs,
            state.rank,
            ms,
            n,
            state.chunk_rows,
            K=k,
            WORLD=state.world_size,
            COMM_BLOCKS=state.comm_blocks,
            COPY_BLOCK=state.copy_block,
            CONSUMERS=triton.next_power_of_2(state.consumers),
            TMA=config.tma,
            TMA_STORE=config.tma and ms % config.block_m == 0,
            TMA_A=config.tma and ms % config.block_m == 0,
            PROXY_FENCE=config.tma and out.is_cuda,
            K_SEGMENT=state.k_segment,
            ONE_WAVE=state.one_wave,
            STRIPE=state.stripe,
            SEGMENT=state.segment,
            **config.options(),
            **extra,
        )

    state.launches.issue("all_gather_matmul", bind_for, {"b": b, "out": out}, False, out)
    return out


def _rotated(ptrs: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """The other ranks' addresses from ``ptrs``, rank + 1 first (the order the kernels send in)."""
    return ptrs[[(rank + 1 + i) % world_size for i in range(world_size - 1)]].contiguous()
