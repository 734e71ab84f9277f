"""A one-shot all-reduce written with remote="nvshmem" bindings (transpiled into ``generated/``), for gpu_nvshmem.py.

Peers in this GPU's NVLink domain are read with loads; the others with NVSHMEM gets
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
