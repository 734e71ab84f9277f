"""Kernels of tests/test_language_v12_params.py with remote="nvshmem" bindings passed to helpers through
castpile.Multicast parameters (run with castpile.gpu.sim_nvshmem standing in for NVSHMEM)."""

import triton
import triton.language as tl

import castpile as cp


@triton.jit
def meet_remote(pads: cp.Multicast, pad, rank, WORLD: tl.constexpr):
    """Every rank's block 0 meets here: slot ``rank`` of every rank's pad set (remote peers: NVSHMEM), then this
    rank's own slots awaited."""
    peers = tl.arange(0, triton.next_power_of_2(WORLD))
    tl.debug_barrier()
    cp.signal(pads[rank], value=1, wait_for=0, sem="release", scope="sys")
    cp.wait(pad + peers, value=1, reset=0, sem="acquire", scope="sys", mask=peers < WORLD)


@triton.jit
def remote_total(bufs: cp.Multicast, offs):
    """The sum over the buffers of ``bufs[offs]``, in fp32."""
    return tl.sum(bufs[offs].to(tl.float32), axis=0)


@triton.jit
def put_row(rows: cp.Multicast, rank, row, BLOCK: tl.constexpr):
    """``row`` stored as row ``rank`` of every buffer."""
    rows[rank, tl.arange(0, BLOCK)] = row[None, :]


@triton.jit
def all_reduce_gather_remote(x, buf, buf_ptrs, pad, pad_ptrs, sums, gathered, gathered_ptrs, rank, n,
                             WORLD: tl.constexpr, BLOCK: tl.constexpr):
    """``x`` written to this rank's ``buf``; once every rank has: ``sums`` = the sum of every rank's ``buf``, and
    ``x`` as row ``rank`` of every rank's ``gathered`` (WORLD, n); the tables are ``remote_ptrs`` tables."""
    cols = tl.arange(0, BLOCK)
    row = tl.load(x + cols, mask=cols < n)
    tl.store(buf + cols, row, mask=cols < n)
    pads = cp.multicast_like(pad, pad_ptrs[:WORLD], remote="nvshmem")
    meet_remote(pads, pad, rank, WORLD)
    bufs = cp.multicast_like(buf, buf_ptrs[:WORLD], shape=(n,), remote="nvshmem")
    tl.store(sums + cols, remote_total(bufs, cols), mask=cols < n)
    outs = cp.multicast_like(gathered, gathered_ptrs[:WORLD], shape=(WORLD, n), remote="nvshmem")
    put_row(outs, rank, row, BLOCK)
