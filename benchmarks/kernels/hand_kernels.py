"""The single-GPU benchmark kernels written by hand in Triton with explicit pointers.

The same algorithms as ``stack_kernels.py`` (scatter-add and the row norm included): a static loop over the W
addresses of the table, each turned into a typed pointer (``tl.multiple_of``
16 when ``ALIGN``), one masked access per buffer.  Also :func:`_copy`, the
plain copy kernel that the Nsight Compute drivers (diag_ncu_single_gpu.py,
diag_ncu_nvlink.py) measure against.
"""

import triton
import triton.language as tl


@triton.jit
def _peer(table, p: tl.constexpr, ex, ALIGN: tl.constexpr):
    ptr = tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty))
    if ALIGN:
        ptr = tl.multiple_of(ptr, 16)
    return ptr


@triton.jit
def hand_sum(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr, ALIGN: tl.constexpr):
    """``out = sum of the W buffers`` (fp32 accumulation)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), tl.float32)
    for p in tl.static_range(W):
        acc += tl.load(_peer(table, p, ex, ALIGN) + offs, mask=mask, other=0).to(tl.float32)
    tl.store(out + offs, acc.to(out.dtype.element_ty), mask=mask)


@triton.jit
def hand_store(ex, table, src, n, W: tl.constexpr, BLOCK: tl.constexpr, ALIGN: tl.constexpr,
               CACHE: tl.constexpr = ""):
    """Every buffer ``= src`` (``CACHE``: the stores' cache modifier, e.g. ".cs" to stream)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(src + offs, mask=mask)
    for p in tl.static_range(W):
        tl.store(_peer(table, p, ex, ALIGN) + offs, x, mask=mask, cache_modifier=CACHE)


@triton.jit
def hand_gather(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr, ALIGN: tl.constexpr):
    """``out[w, :] = buffer w``."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    for p in tl.static_range(W):
        tl.store(out + p * n + offs, tl.load(_peer(table, p, ex, ALIGN) + offs, mask=mask), mask=mask)


@triton.jit
def hand_gather_tile(ex, table, out, n, W: tl.constexpr, BLOCK: tl.constexpr, ALIGN: tl.constexpr):
    """``hand_gather`` stated as castpile's source states it: the (W, BLOCK) tile, then one 2-D store."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    rows = tl.arange(0, W)[:, None]
    tile = tl.zeros([W, BLOCK], ex.dtype.element_ty)
    for p in tl.static_range(W):
        tile = tl.where(rows == p, tl.load(_peer(table, p, ex, ALIGN) + offs, mask=mask)[None, :], tile)
    tl.store(out + rows * n + offs[None, :], tile, mask=mask[None, :])


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    """``dst = src``, tiles strided over the grid (the Nsight Compute commands select it by the name ``_copy``)."""
    tile = tl.program_id(0)
    while tile < tl.cdiv(n, BLOCK):
        offs = tile * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)
        tile += tl.num_programs(0)


@triton.jit
def hand_scatter_add(ex, table, vals, n, W: tl.constexpr, BLOCK: tl.constexpr, ALIGN: tl.constexpr):
    """Every buffer ``+= vals`` with relaxed atomics, a loop over the W addresses."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(vals + offs, mask=mask)
    for p in tl.static_range(W):
        tl.atomic_add(_peer(table, p, ex, ALIGN) + offs, v, mask=mask, sem="relaxed")


@triton.jit
def hand_row_norm(ex, table, out, M, D, eps, W: tl.constexpr, BLOCK_D: tl.constexpr, ALIGN: tl.constexpr):
    """Each row of ``out`` = the row summed over the W buffers in fp32, over its root mean square."""
    cols = tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.program_id(0)
    while row < M:
        h = tl.zeros((BLOCK_D,), tl.float32)
        for p in tl.static_range(W):
            h += tl.load(_peer(table, p, ex, ALIGN) + row * D + cols, mask=mask, other=0).to(tl.float32)
        scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)
        tl.store(out + row * D + cols, (h * scale).to(out.dtype.element_ty), mask=mask)
        row += tl.num_programs(0)
