"""GEMM + reduce-scatter with the communication overlapped, written with castpile multicast tensors.

:func:`matmul_reduce_scatter`: ``out = rows chunk `rank` of sum_r A_r @ B_r``.
Tile j of owner o's rows is computed by block ``(o * T + j) % grid`` on every
rank (T tiles per owner), which does the tiles of the other owners first
(owner ``rank + 1`` first) and pushes each, rounded to the dtype, into the
owner's scratch slot for this source, raising that tile's flag there; then it
does its own rows' tiles, and for each waits for the peers' partial tiles and
adds them in fp32 to its own rounded partial, from rank + 1 on (a loop over the
peers, not unrolled: unrolled, all their loads were live at once and the wide
tile spilled).

Why this shape (see also the ``tp_gemm`` package): one kernel, no second stream,
and a block only ever waits for the block with its own program id on each peer,
which pushes everything it owes before it waits for anything.  That keeps a grid
of at most one block per SM free of deadlock on a GPU and lets the Triton
interpreter, which runs a rank's blocks one after another, run the kernel in the
simulator.

Synchronisation: every block starts with the barrier of ``collectives/kernels.py``
(block b of the owner has consumed the previous call's tiles that block b of each
peer is about to overwrite).  Signals are releases and waits acquires at system
scope, each behind ``tl.debug_barrier()`` so the whole block's stores and loads are
ordered.

The GEMM core is ``gemm_kernels`` (its docstring has the rule for loop bounds).
Regenerate the plain-Triton module after editing: ``make generated``.
"""

from typing import TYPE_CHECKING

import triton
import triton.language as tl

from castpile.gpu.collectives.kernels_triton import barrier
from castpile.gpu.fused.tp_gemm.gemm_kernels import operand, store_tile, tile_position, tile_product

if TYPE_CHECKING:
    import castpile
    from castpile import multicast_like


@triton.jit
def matmul_reduce_scatter(a, b, out, scratch, scratch_ptrs, flags, flag_ptrs, pad, pad_ptrs, rank, Ms, N,
                          K: tl.constexpr, WORLD: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr, TMA: tl.constexpr):
    """``out`` [Ms, N] = rows ``rank * Ms ...`` of the sum over ranks of ``a @ b`` (a [WORLD * Ms, K], b [K, N]).

    ``scratch`` [WORLD - 1, Ms, N] (symmetric): slot ``(source - owner - 1) %
    WORLD`` holds that source's partial of the owner's rows; ``flags`` int32
    [WORLD - 1, T]: one per (slot, tile), raised by the source, reset by the
    owner.  Owners are visited ``rank + 1, rank + 2, ..., rank``: every tile
    another rank owns is pushed and flagged before this block waits for anything.
    A tile's flag rises after the next tile is computed, just before that one
    is stored: the release then finds the tile's stores long arrived instead of
    waiting for them.
    """
    barrier(pad, pad_ptrs, rank, WORLD, True)  # block pid of every owner is done with the previous call's slots
    a_src = operand(a, WORLD * Ms, K, BM, BK, TMA)
    b_src = operand(b, K, N, BK, BN, TMA)
    out_dst = operand(out, Ms, N, BM, BN, TMA)
    row_tiles = tl.cdiv(Ms, BM)
    tiles_n = tl.cdiv(N, BN)
    T = row_tiles * tiles_n
    for step in tl.static_range(1, WORLD):
        owner = (rank + step) % WORLD
        slot = WORLD - 1 - step  # this rank's slot on the owner
        pending = -1
        t = first_tile(owner, T)
        while t < owner * T + T:
            j = t - owner * T
            r0, c0, part = owner_tile(a_src, b_src, owner, j, row_tiles, tiles_n, Ms, N, K, BM, BN, BK, GROUP_M, TMA)
            if pending >= 0:
                raise_flag(flags, flag_ptrs, owner, slot * T + pending)
            dest = multicast_like(scratch, scratch_ptrs[owner], shape=(WORLD - 1, Ms, N), align=16)
            rows = r0 + tl.arange(0, BM)
            cols = c0 + tl.arange(0, BN)
            dest[slot, rows[:, None], cols[None, :]] = part.to(out.dtype.element_ty)
            pending = j
            t += tl.num_programs(0)
        if pending >= 0:
            raise_flag(flags, flag_ptrs, owner, slot * T + pending)
    slots = tl.arange(0, triton.next_power_of_2(WORLD - 1))
    t = first_tile(rank, T)
    while t < rank * T + T:
        j = t - rank * T
        r0, c0, part = owner_tile(a_src, b_src, rank, j, row_tiles, tiles_n, Ms, N, K, BM, BN, BK, GROUP_M, TMA)
        mine = part.to(out.dtype.element_ty)  # (rounded now: the fp32 tile need not stay in registers)
        castpile.wait(flags + slots * T + j, mask=slots < WORLD - 1)
        tl.debug_barrier()  # every thread may read what the waiting threads acquired
        rows = r0 + tl.arange(0, BM)
        cols = c0 + tl.arange(0, BN)
        ok = (rows < Ms)[:, None] & (cols < N)[None, :]
        total = mine.to(tl.float32)
        for held in range(WORLD - 1):  # slot `held` holds the partial of source (rank + 1 + held) % WORLD
            at = (held * Ms + rows[:, None]).to(tl.int64) * N + cols[None, :]
            total += tl.load(scratch + at, mask=ok, other=0, cache_modifier=".cg").to(tl.float32)
        store_tile(out_dst, total, r0, c0, Ms, N, BM, BN, TMA)
        t += tl.num_programs(0)


@triton.jit
def first_tile(owner, T):
    """This block's first tile of owner's rows: tile j of owner o is tile ``o * T + j`` dealt round-robin to blocks."""
    G = tl.num_programs(0)
    return owner * T + (tl.program_id(0) - owner * T % G + G) % G


@triton.jit
def owner_tile(a_src, b_src, owner, j, row_tiles, tiles_n, Ms, N, K: tl.constexpr, BM: tl.constexpr,
               BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, TMA: tl.constexpr):
    """Tile j of the owner's rows of this rank's ``a @ b``: (first row within the owner's rows, first column, fp32)."""
    pm, pn = tile_position(j, row_tiles, tiles_n, GROUP_M)
    acc = tile_product(a_src, b_src, owner * Ms + pm * BM, pn * BN, owner * Ms + Ms, N, K, BM, BN, BK, TMA, TMA)
    return pm * BM, pn * BN, acc


@triton.jit
def raise_flag(flags, flag_ptrs, owner, index):
    """Set flag ``index`` on rank ``owner`` (release, system scope), after every store of the block so far."""
    tl.debug_barrier()
    flag = multicast_like(flags, flag_ptrs[owner])
    castpile.signal(flag[index], value=1)
