"""Tensor-parallel GEMMs with their communication overlapped.

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
  as it finishes each of its own, in fp32, from rank + 1 on.  No separate reduction
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
``alloc`` (:func:`castpile.gpu.runtime.symmetric_scratch` on GPUs; in the simulator
``create_all(world, ..., alloc=castpile.gpu.sim.symmetric_scratch)``, see
:mod:`castpile.gpu.fused.state`).  Flags go back to zero in every call and the
kernels synchronise ranks themselves, so calls repeat back to back and can be
captured in CUDA graphs.  Launches are bound once per state
(:mod:`castpile.gpu.launch_cache`), the per-call tensors passed late.

The modules, by concern: ``gemm`` (the tiles and the GEMM alone; its kernels in
``gemm_kernels``, plain Triton), ``all_gather`` and ``reduce_scatter`` (each op's
plan, state and call; their kernels in ``all_gather_kernels`` and
``reduce_scatter_kernels``, in the castpile language, imported transpiled from the
``*_triton.py`` modules that ``make generated`` writes).
"""

from .all_gather import (
    COPY_PER_WARP,
    K_SEGMENT,
    ONE_WAVE_SEGMENTS,
    AllGatherMatmul,
    AllGatherMatmulPlan,
    all_gather_matmul,
)
from .gemm import SIM_BLOCKS, GemmConfig, default_config, matmul
from .reduce_scatter import MatmulReduceScatter, MatmulReduceScatterPlan, matmul_reduce_scatter

__all__ = [
    "COPY_PER_WARP",
    "K_SEGMENT",
    "ONE_WAVE_SEGMENTS",
    "SIM_BLOCKS",
    "AllGatherMatmul",
    "AllGatherMatmulPlan",
    "GemmConfig",
    "MatmulReduceScatter",
    "MatmulReduceScatterPlan",
    "all_gather_matmul",
    "default_config",
    "matmul",
    "matmul_reduce_scatter",
]
