"""Tensor-parallel GEMMs with their communication overlapped: the host side of ``tp_gemm_kernels``.

Two collective ops of tensor parallelism (every rank calls them with the same sizes)
and the GEMM they are built on::

    ag = AllGatherMatmul.create(rank, world, m=M, k=K, n=N)         # collective, once
    c = all_gather_matmul(ag, a_shard, b)     # all_gather(A) @ b: [M, N]; a_shard [M / W, K]
    rs = MatmulReduceScatter.create(rank, world, m=M, k=K_local, n=N)   # collective, once
    y = matmul_reduce_scatter(rs, a, b)       # rows chunk `rank` of sum over ranks of a @ b: [M / W, N]
    c = matmul(a, b)                          # the persistent GEMM alone

``all_gather_matmul`` is ``torch.ops.symm_mem.fused_all_gather_matmul(a_shard, [b],
gather_dim=0, ...)``'s product, ``matmul_reduce_scatter`` is
``fused_matmul_reduce_scatter(a, b, "sum", scatter_dim=0, ...)``; inputs are
contiguous row-major bf16 (fp16 works too; fp32 multiplies in TF32 on GPUs, as
``tl.dot`` does by default), accumulation fp32.

Design (the kernels' docstrings have the protocol).  One kernel per op, one
launch per call, no second stream:

- all-gather + GEMM: the shards meet in a symmetric buffer [M, K] on every rank
  (``state.a_shard`` is this rank's rows of it: write the shard there to save
  the copy that passing another tensor costs).  A few communication blocks
  (``comm_blocks``, the lowest program ids) push the local shard into every peer's
  buffer, chunk by chunk, each chunk followed by a flag per GEMM block on that
  peer; the GEMM blocks start on the local shard, which needs no communication,
  and go on with the peers' shards in the order they are sent, waiting on a
  chunk's flag before reading it.  Pushing rather than pulling sends every byte
  once over NVLink as a write (faster than reads there, docs/perf-findings.md)
  and keeps the GEMM's loads local, so they can go through TMA.  Where a row
  tile holds a whole shard (few rows, as in decoding) and every tile has a
  block, one wave instead (``one_wave``): the blocks of the local shard's tiles
  send a stripe of it each before they multiply, so the shard moves over many SMs.
- GEMM + reduce-scatter: every rank computes the tiles of the rows other ranks own
  first, pushing each finished tile (rounded to the dtype) into the owner's
  scratch with a per-tile flag, and its own rows last, adding the peers' tiles
  as it finishes each of its own, in rank order, in fp32.  No separate reduction
  pass and no extra read of the partial results: by the time a rank reaches its
  own rows the peers have long sent them (they computed them first).

Why one kernel rather than a copy kernel (or the copy engines, as torch's and
kraken's fused ops use) on a second stream: the communication is castpile
multicast stores and flags, which need SMs; in one launch the communication
blocks are the lowest program ids of a grid of at most one block per SM, so they
run whatever the GEMM blocks wait for, and nothing outside the kernel (streams,
events, host waits) needs to be right for a call to finish or to be captured in a
CUDA graph.  The price is a few SMs for the all-gather's senders (4 of 132 by
default; the GEMM tiles at the benchmark's sizes divide evenly over the other 128).

State (flags, barrier slots, buffers) is allocated collectively and zeroed by
``alloc`` (:func:`castpile.gpu.runtime.symmetric_scratch` on GPUs,
:func:`castpile.gpu.sim.symmetric_scratch` in the simulator: use ``create_all``
there).  Flags go back to zero in every call and the kernels synchronise ranks
themselves, so calls repeat back to back and can be captured in CUDA graphs.
Launches are bound once per state (:mod:`castpile.gpu.launch_cache`), the per-call
tensors passed late.

GEMM tiles: :func:`default_config` picks by M and op; ``config=`` overrides
(benchmarks/bench_tp_gemm.py --sweep times the candidates on 2 x H200).  TMA
descriptors are made in the kernels (``tl.make_tensor_descriptor``), which needs
Triton's allocator: if none is set, :func:`matmul` and the ops set one that
allocates from torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
import triton

from .. import runtime
from ..arguments import check_tensor, output
from ..launch import bind
from ..launch_cache import LaunchCache
from ..symmetric import Scratch
from . import tp_gemm_kernels_triton as kernels

#: Grid of the simulator's kernels (several blocks, so that tiles and chunks are spread over blocks).
SIM_BLOCKS = 4
#: Elements copied per step by a communication block, per warp (the next step's load is in flight during the
#: store; 8 warps move 64 KB of bf16 a step, 64 registers a thread for each of the two steps).
COPY_PER_WARP = 4096
#: Columns per chunk of the all-gather's column chunking (``k_segment``), its default where a row tile holds the
#: whole shard but the tiles outnumber the blocks (else one wave; docs/fused.md has the sweep).
K_SEGMENT = 2048
#: The one-wave all-gather's readers multiply a peer's tile in this many segments, each after its senders' flags.
ONE_WAVE_SEGMENTS = 4


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
        return dict(BM=self.block_m, BN=self.block_n, BK=self.block_k, GROUP_M=self.group_m,
                    num_warps=self.num_warps, num_stages=self.num_stages)


def default_config(m: int, op: str = "matmul") -> GemmConfig:
    """The tile for ``op`` ("matmul", "all_gather_matmul" or "matmul_reduce_scatter") over ``m`` rows.

    128 x 256 (3 stages, TMA) from 1024 rows, else 128 x 128 (4 stages): below
    1024 rows the wide tile leaves SMs idle (256 x 8192 makes 64 tiles of
    128 x 256 on 132 SMs, but 128 of 128 x 128).  There the GEMM alone and the
    reduce-scatter load operands through pointers, the all-gather through TMA
    (2 x H200 / one H200, 256 rows, docs/fused.md: our GEMM alone 0.1-0.6% behind
    cuBLAS with pointers, 7-13% with TMA; the reduce-scatter 43.9 against 48.9 µs;
    the one-wave all-gather 84.8 with pointers against 75.2-81.1 with TMA).
    """
    if m >= 1024:
        return GemmConfig()
    return GemmConfig(block_n=128, num_stages=4, tma=op == "all_gather_matmul")


def _checked_config(config: GemmConfig, k: int, n: int, dtype: torch.dtype) -> GemmConfig:
    """``config`` with TMA off where it cannot apply: rows of A or B that are not whole 16 bytes."""
    size = torch.empty((), dtype=dtype).element_size()
    if config.tma and ((k * size) % 16 or (n * size) % 16):
        return replace(config, tma=False)
    return config


def _sms(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


_ALLOCATOR_SET = False


def _ensure_allocator(device) -> None:
    """Give Triton an allocator (torch's) for the kernels' TMA descriptors, unless one is set already."""
    global _ALLOCATOR_SET
    if _ALLOCATOR_SET or device.type != "cuda":
        return
    from triton.runtime import _allocation

    if _allocation._allocator.get() is _allocation._NULL_ALLOCATOR:
        def allocate(size: int, alignment: int, stream):
            return torch.empty(size, dtype=torch.int8, device=device)

        triton.set_allocator(allocate)
    _ALLOCATOR_SET = True


# -- the GEMM alone --------------------------------------------------------------------------------------------

_GEMM_LAUNCHES = LaunchCache()


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, config: GemmConfig | None = None,
           blocks: int | None = None) -> torch.Tensor:
    """``a @ b`` (a [M, K], b [K, N], contiguous, same dtype) by the persistent kernel; fp32 accumulation.

    ``blocks``: the grid (default: one block per SM, at most one per tile).
    """
    m, k = a.shape
    n = b.shape[1]
    check_tensor("a", a, (m, k), a.dtype)
    check_tensor("b", b, (k, n), a.dtype)
    config = _checked_config(config or default_config(m), k, n, a.dtype)
    out = output(a, out, (m, n), "matmul")
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    if blocks is None:
        blocks = _sms(a.device) if a.is_cuda else SIM_BLOCKS
    grid = (max(1, min(blocks, tiles)),)
    _ensure_allocator(a.device)

    def bind_for(tensors, **extra):
        return bind(kernels.matmul, grid, tensors["a"], tensors["b"], tensors["c"], m, n, K=k, TMA=config.tma,
                    FLATTEN=config.flatten, **config.options(), **extra)

    key = (m, n, k, a.dtype, a.device, config, grid)
    _GEMM_LAUNCHES.issue(key, bind_for, {"a": a, "b": b, "c": out}, False, out)
    return out


@dataclass(eq=False, repr=False)
class _CollectiveState:
    """``create`` / ``create_all`` of the ops' states: the launch shape (``_plan``), then the symmetric buffers."""

    rank: int
    world_size: int
    m: int
    k: int
    n: int
    dtype: torch.dtype
    config: GemmConfig

    @classmethod
    def create(cls, rank: int, world_size: int, *, m: int, k: int, n: int, dtype: torch.dtype = torch.bfloat16,
               alloc=None, **options):
        """This rank's state (collective: every rank calls it with the same arguments but ``rank``).

        ``alloc(shape, dtype)`` returns this rank's zeroed symmetric :class:`Scratch`
        (default :func:`castpile.gpu.runtime.symmetric_scratch`); ``options`` are the
        class's (its docstring).
        """
        alloc = runtime.symmetric_scratch if alloc is None else alloc
        plan = cls._plan(world_size, m, k, n, dtype, torch.device("cuda", torch.cuda.current_device()), **options)
        return cls(rank, **plan, **{name: alloc(shape, dt) for name, (shape, dt) in cls._buffers(plan).items()})

    @classmethod
    def create_all(cls, world_size: int, *, m: int, k: int, n: int, dtype: torch.dtype = torch.bfloat16, alloc=None,
                   **options) -> list:
        """Every rank's state at once, for the CPU simulator (call before ``sim.run``).

        ``alloc(world_size, shape, dtype)`` returns one :class:`Scratch` per rank (default
        :func:`castpile.gpu.sim.symmetric_scratch`); ``blocks`` defaults to :data:`SIM_BLOCKS`.
        """
        if alloc is None:
            from .. import sim

            alloc = sim.symmetric_scratch
        options.setdefault("blocks", SIM_BLOCKS)
        plan = cls._plan(world_size, m, k, n, dtype, torch.device("cpu"), **options)
        buffers = {name: alloc(world_size, shape, dt) for name, (shape, dt) in cls._buffers(plan).items()}
        return [cls(r, **plan, **{name: s[r] for name, s in buffers.items()}) for r in range(world_size)]


# -- all-gather + GEMM -----------------------------------------------------------------------------------------


def _ag_plan(world_size, m, k, n, dtype, device, config=None, blocks=None, comm_blocks=None, chunk_rows=None,
             copy_block=None, k_segment=None, one_wave=None) -> dict:
    """Check the sizes and choose the launch shape (the same on every rank)."""
    _check_sizes("AllGatherMatmul", world_size, m, k, n)
    ms = m // world_size
    config = _checked_config(config or default_config(m, "all_gather_matmul"), k, n, dtype)
    if blocks is None:
        blocks = _sms(device)
    if copy_block is None:
        copy_block = COPY_PER_WARP * config.num_warps if device.type == "cuda" else 64
    tiles_n = triton.cdiv(n, config.block_n)
    fits = ms <= config.block_m and world_size * tiles_n <= blocks
    if one_wave is None:
        one_wave = fits and device.type == "cuda" and comm_blocks is None and chunk_rows is None and k_segment is None
    elif one_wave and not fits:
        raise ValueError(f"AllGatherMatmul: one_wave needs a shard of at most a row tile ({ms} rows, tiles of "
                         f"{config.block_m}) and a block per tile ({world_size * tiles_n} tiles, {blocks} blocks)")
    if one_wave:
        stripe = triton.cdiv(triton.cdiv(k, tiles_n), config.block_k) * config.block_k
        return dict(world_size=world_size, m=m, k=k, n=n, dtype=dtype, config=config, comm_blocks=tiles_n,
                    consumers=(world_size - 1) * tiles_n, chunk_rows=ms, k_segment=0, chunks=tiles_n,
                    copy_block=copy_block, one_wave=True, stripe=stripe,
                    segment=max(1, tiles_n // ONE_WAVE_SEGMENTS))
    if comm_blocks is None:
        comm_blocks = 4 if device.type == "cuda" else 1
    comm_blocks = max(1, min(comm_blocks, ms))
    tiles = world_size * triton.cdiv(ms, config.block_m) * triton.cdiv(n, config.block_n)
    consumers = max(1, min(blocks - comm_blocks, tiles))
    if k_segment is None:
        whole_shard = ms <= config.block_m and chunk_rows is None and device.type == "cuda"
        k_segment = K_SEGMENT if whole_shard and k > K_SEGMENT else 0
    elif k_segment and chunk_rows is not None:
        raise ValueError("AllGatherMatmul: give chunk_rows (chunks of rows) or k_segment (chunks of columns), not both")
    elif k_segment < 0 or k_segment % config.block_k:
        raise ValueError(f"AllGatherMatmul: k_segment ({k_segment}) must be 0 (chunks of rows) or a positive multiple "
                         f"of the tile's block_k ({config.block_k})")
    if k_segment:
        chunk_rows, chunks = ms, triton.cdiv(k, k_segment) * comm_blocks
    else:
        if chunk_rows is None:
            chunk_rows = max(1, min(config.block_m, triton.cdiv(ms, 2 * comm_blocks)))
        chunks = triton.cdiv(ms, chunk_rows)
    return dict(world_size=world_size, m=m, k=k, n=n, dtype=dtype, config=config, comm_blocks=comm_blocks,
                consumers=consumers, chunk_rows=chunk_rows, k_segment=k_segment, chunks=chunks, copy_block=copy_block,
                one_wave=False, stripe=0, segment=1)


def _ag_buffers(plan: dict) -> dict:
    """The symmetric buffers of :class:`AllGatherMatmul`: name -> (shape, dtype)."""
    w, m = plan["world_size"], plan["m"]
    sources = 1 if plan["one_wave"] else w  # chunks: a flag per (source, chunk, consumer); one wave: (reader, sender)
    return {"gathered": ((m, plan["k"]), plan["dtype"]),
            "flags": ((sources * plan["chunks"] * plan["consumers"],), torch.int32),
            "pad": ((plan["comm_blocks"] * w,), torch.int32)}


@dataclass(eq=False, repr=False)
class AllGatherMatmul(_CollectiveState):
    """One rank's state for :func:`all_gather_matmul`.

    Symmetric (peers write into them): ``gathered`` [m, k] (the shards, rank r's
    in rows ``r * m / W ...``), ``flags`` int32 [W * chunks * consumers] (one per
    source, chunk and GEMM block), ``pad`` int32 [comm_blocks * W] (the
    communication blocks' barrier).  ``peers`` / ``flag_peers``: the other ranks'
    buffer and flag addresses, rank + 1 first.  The grid is ``comm_blocks +
    consumers`` blocks.

    ``create(rank, world_size, m=, k=, n=, dtype=bf16, alloc=None, **options)``:
    ``m`` rows of the gathered A (a multiple of ``world_size``), B is [k, n].
    ``options``: ``config`` (a :class:`GemmConfig`; default :func:`default_config`),
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

    _plan = staticmethod(_ag_plan)
    _buffers = staticmethod(_ag_buffers)

    comm_blocks: int
    consumers: int
    chunk_rows: int
    k_segment: int
    chunks: int
    copy_block: int
    one_wave: bool
    stripe: int
    segment: int
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
        return (f"AllGatherMatmul(rank={self.rank}, world_size={self.world_size}, m={self.m}, k={self.k}, n={self.n}, "
                f"dtype={self.dtype}, config={self.config}, comm_blocks={self.comm_blocks}, "
                f"consumers={self.consumers}, chunk_rows={self.chunk_rows}, k_segment={self.k_segment}, "
                f"one_wave={self.one_wave})")

    @property
    def shard_rows(self) -> int:
        return self.m // self.world_size

    @property
    def a_shard(self) -> torch.Tensor:
        """This rank's rows of the gathered buffer: write the shard here and pass it (or None) to skip a copy."""
        return self.gathered.tensor[self.rank * self.shard_rows:(self.rank + 1) * self.shard_rows]


def all_gather_matmul(state: AllGatherMatmul, a_shard: torch.Tensor | None, b: torch.Tensor,
                      out: torch.Tensor | None = None) -> torch.Tensor:
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
    _ensure_allocator(out.device)

    def bind_for(tensors, **extra):
        return bind(kernels.all_gather_matmul, (state.comm_blocks + state.consumers,), state.gathered.tensor, state.peers,
                    tensors["b"], tensors["out"], state.flags.tensor, state.flag_peers, state.pad.tensor,
                    state.pad.ptrs, state.rank, ms, n, state.chunk_rows, K=k, WORLD=state.world_size,
                    COMM_BLOCKS=state.comm_blocks, COPY_BLOCK=state.copy_block,
                    CONSUMERS=triton.next_power_of_2(state.consumers), TMA=config.tma,
                    TMA_STORE=config.tma and ms % config.block_m == 0, PROXY_FENCE=config.tma and out.is_cuda,
                    K_SEGMENT=state.k_segment, ONE_WAVE=state.one_wave, STRIPE=state.stripe, SEGMENT=state.segment,
                    **config.options(), **extra)

    state.launches.issue("all_gather_matmul", bind_for, {"b": b, "out": out}, False, out)
    return out


# -- GEMM + reduce-scatter -------------------------------------------------------------------------------------


def _rs_plan(world_size, m, k, n, dtype, device, config=None, blocks=None) -> dict:
    _check_sizes("MatmulReduceScatter", world_size, m, k, n)
    config = _checked_config(config or default_config(m, "matmul_reduce_scatter"), k, n, dtype)
    tiles = world_size * _tiles(m // world_size, n, config)
    blocks = max(1, min(_sms(device) if blocks is None else blocks, tiles))
    return dict(world_size=world_size, m=m, k=k, n=n, dtype=dtype, config=config, blocks=blocks)


def _rs_buffers(plan: dict) -> dict:
    """The symmetric buffers of :class:`MatmulReduceScatter`: name -> (shape, dtype)."""
    w, ms, n = plan["world_size"], plan["m"] // plan["world_size"], plan["n"]
    return {"scratch": ((w - 1, ms, n), plan["dtype"]),
            "flags": (((w - 1) * _tiles(ms, n, plan["config"]),), torch.int32),
            "pad": ((plan["blocks"] * w,), torch.int32)}


@dataclass(eq=False, repr=False)
class MatmulReduceScatter(_CollectiveState):
    """One rank's state for :func:`matmul_reduce_scatter`.

    Symmetric: ``scratch`` [W - 1, m / W, n] (slot ``(source - rank - 1) % W``
    receives that source's partial of this rank's rows), ``flags`` int32
    [(W - 1) * tiles] (one per slot and tile of this rank's rows), ``pad`` int32
    [blocks * W] (the barrier every block starts with).

    ``create(rank, world_size, m=, k=, n=, dtype=bf16, alloc=None, **options)``:
    ``k`` is this rank's share of the reduction (a is [m, k], b [k, n]);
    ``options``: ``config``, ``blocks`` (default one per SM, at most one per tile).
    """

    _plan = staticmethod(_rs_plan)
    _buffers = staticmethod(_rs_buffers)

    blocks: int
    scratch: Scratch
    flags: Scratch
    pad: Scratch
    launches: LaunchCache = field(default_factory=LaunchCache)

    def __repr__(self):
        return (f"MatmulReduceScatter(rank={self.rank}, world_size={self.world_size}, m={self.m}, k={self.k}, "
                f"n={self.n}, dtype={self.dtype}, config={self.config}, blocks={self.blocks})")

    @property
    def shard_rows(self) -> int:
        return self.m // self.world_size


def matmul_reduce_scatter(state: MatmulReduceScatter, a: torch.Tensor, b: torch.Tensor,
                          out: torch.Tensor | None = None) -> torch.Tensor:
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
    _ensure_allocator(out.device)

    def bind_for(tensors, **extra):
        return bind(kernels.matmul_reduce_scatter, (state.blocks,), tensors["a"], tensors["b"], tensors["out"],
                    state.scratch.tensor, state.scratch.ptrs, state.flags.tensor, state.flags.ptrs, state.pad.tensor,
                    state.pad.ptrs, state.rank, ms, n, K=k, WORLD=state.world_size, TMA=config.tma,
                    **config.options(), **extra)

    state.launches.issue("matmul_reduce_scatter", bind_for, {"a": a, "b": b, "out": out}, False, out)
    return out


# -- shared ----------------------------------------------------------------------------------------------------


def _tiles(rows: int, n: int, config: GemmConfig) -> int:
    return triton.cdiv(rows, config.block_m) * triton.cdiv(n, config.block_n)


def _check_sizes(name, world_size, m, k, n) -> None:
    if world_size < 2 or min(m, k, n) < 1 or m % world_size:
        raise ValueError(f"{name}: need at least 2 ranks, positive sizes and m ({m}) a multiple of world_size "
                         f"({world_size})")


def _rotated(ptrs: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """The other ranks' addresses from ``ptrs``, rank + 1 first (the order the kernels send in)."""
    return ptrs[[(rank + 1 + i) % world_size for i in range(world_size - 1)]].contiguous()


__all__ = ["AllGatherMatmul", "COPY_PER_WARP", "GemmConfig", "MatmulReduceScatter", "SIM_BLOCKS", "all_gather_matmul",
           "default_config", "matmul", "matmul_reduce_scatter"]
