"""Kernels written with remote="nvshmem" bindings (transpiled into ``generated/``), for check_nvshmem.py.

A one-shot all-reduce, a push all-gather and a fused all-reduce + residual + RMSNorm.
Peers whose table entries are addresses are read and written with loads and stores; the
others (remote, or tagged remote with ``force_remote``) with NVSHMEM gets and puts
(docs/nvshmem.md). Pass the tensor's ``remote_ptrs`` and ``signal_pad_remote_ptrs``
tables. Each block meets every rank's same block before reading (its peers' inputs are
written) and after (nobody overwrites an input a peer still reads).
"""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def remote_barrier(pad, pad_ptrs, rank, WORLD: tl.constexpr):
    """Block ``program_id`` of every rank meets here (the library's barrier, with its pads bound remote="nvshmem")."""
    slot = tl.program_id(0) * WORLD
    pads = multicast_like(pad, pad_ptrs[:WORLD], remote="nvshmem")
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    castpile.signal(pads[slot + rank], value=1, wait_for=0, sem="release", scope="sys")
    castpile.wait(pad + slot + peers, value=1, reset=0, sem="acquire", scope="sys", mask=peers < WORLD)
    tl.debug_barrier()


@triton.jit
def all_reduce_remote(buf, buf_ptrs, pad, pad_ptrs, out, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``out = sum over ranks of buf`` (fp32 accumulation), tiles strided over the grid."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), remote="nvshmem")
    remote_barrier(pad, pad_ptrs, rank, WORLD)
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        total = tl.sum(bufs[offs].to(tl.float32), axis=0)
        tl.store(out + offs, total.to(out.dtype.element_ty), mask=offs < n)
        tile += tl.num_programs(0)
    remote_barrier(pad, pad_ptrs, rank, WORLD)


@triton.jit
def all_reduce_residual_rmsnorm_remote(buf, buf_ptrs, pad, pad_ptrs, residual, weight, out, rank, m, d, eps,
                                       WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``residual += sum over ranks of buf`` (rows of ``d`` <= BLOCK, in bf16 as stored); ``out = rms_norm(residual)
    * weight`` in fp32, rows strided over the grid: the library's fused RMSNorm spelled with remote= bindings, with
    ``tl.rsqrt`` where the library divides and takes square roots IEEE-rounded (y agrees within one rounding)."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(m, d), remote="nvshmem")
    remote_barrier(pad, pad_ptrs, rank, WORLD)
    cols = tl.arange(0, BLOCK)
    inside = cols < d
    w = tl.load(weight + cols, mask=inside, other=0.0).to(tl.float32)
    row = tl.program_id(0)
    while row < m:
        total = tl.sum(bufs[row, cols].to(tl.float32), axis=0)
        h = (total + tl.load(residual + row * d + cols, mask=inside, other=0.0).to(tl.float32))
        h = h.to(residual.dtype.element_ty)
        tl.store(residual + row * d + cols, h, mask=inside)
        hf = h.to(tl.float32)
        scale = tl.rsqrt(tl.sum(hf * hf, axis=0) / d + eps)
        tl.store(out + row * d + cols, (hf * scale * w).to(out.dtype.element_ty), mask=inside)
        row += tl.num_programs(0)
    remote_barrier(pad, pad_ptrs, rank, WORLD)


@triton.jit
def all_gather_remote(buf, buf_ptrs, pad, pad_ptrs, rank, n, WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``buf`` [WORLD, n]: this rank's row ``rank`` stored into row ``rank`` of every rank's ``buf`` (a push
    all-gather: stores through the multicast tensor, puts for remote peers), tiles strided over the grid."""
    bufs = multicast_like(buf, buf_ptrs[:WORLD], shape=(WORLD, n), remote="nvshmem")
    remote_barrier(pad, pad_ptrs, rank, WORLD)  # no peer still reads the previous call's rows
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        cols = tile * BLOCK + tl.arange(0, BLOCK)
        bufs[rank, cols] = tl.load(buf + rank * n + cols, mask=cols < n)[None, :]
        tile += tl.num_programs(0)
    remote_barrier(pad, pad_ptrs, rank, WORLD)  # every row has arrived: a remote signal follows a quiet
