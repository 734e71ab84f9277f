"""The GEMM core of the tensor-parallel GEMMs, in plain Triton: no multicast tensors, so imported as it is.

:func:`tile_product`: a BM x BN tile of ``A @ B`` accumulated in fp32, K in BK
steps, operands through TMA descriptors when ``TMA``, else masked pointer loads;
:func:`tile_position`: the grouped tile order that keeps GROUP_M row tiles on the
same columns for L2 reuse.  :func:`matmul` is ``C = A @ B`` alone, persistent (the
GEMM the fused kernels of ``all_gather_kernels`` and ``reduce_scatter_kernels`` are
held against).  Every kernel's grid is at most one block per SM and each block
walks tiles ``pid, pid + grid, ...``.

Loop bounds are constexprs (``K``) or ``while`` loops, here and in the fused kernels:
the Triton 3.6 interpreter's ``range`` takes no runtime bound (its scalars are
1-element arrays, which numpy 2 will not turn into ints), and a ``for`` over a
constexpr is what Triton's software pipeliner overlaps (``num_stages``).
"""

import triton
import triton.language as tl


@triton.jit
def tile_position(t, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Row and column tile of linear tile ``t``: groups of GROUP_M row tiles sweep the columns together."""
    per_group = GROUP_M * tiles_n
    first = t // per_group * GROUP_M
    size = tl.minimum(tiles_m - first, GROUP_M)
    return first + t % per_group % size, t % per_group // size


@triton.jit
def operand(ptr, rows, cols: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, TMA: tl.constexpr):
    """A row-major [rows, cols] matrix to read BR x BC tiles of: a TMA descriptor, or the pointer itself."""
    if TMA:
        return tl.make_tensor_descriptor(ptr, shape=[rows, cols], strides=[cols, 1], block_shape=[BR, BC])
    else:
        return ptr


@triton.jit
def load_tile(src, r0, c0, rows, cols: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, TMA: tl.constexpr):
    """Tile ``[r0:r0+BR, c0:c0+BC]`` of a row-major [rows, cols] matrix, zero outside (``src`` from :func:`operand`)."""
    if TMA:
        return src.load([r0, c0])
    else:
        r = r0 + tl.arange(0, BR)
        c = c0 + tl.arange(0, BC)
        ok = (r < rows)[:, None] & (c < cols)[None, :]
        return tl.load(src + r[:, None].to(tl.int64) * cols + c[None, :], mask=ok, other=0)


@triton.jit
def tile_product(a_src, b_src, r0, c0, a_rows, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 BK: tl.constexpr, TMA: tl.constexpr, TMA_A: tl.constexpr):
    """fp32 ``A[r0:r0+BM, :] @ B[:, c0:c0+BN]`` for A [?, K] and B [K, N]; B through TMA if ``TMA``, A if ``TMA_A``.

    Rows at or past ``a_rows`` read as 0 through pointers, and are not read; a TMA
    descriptor has its own bounds (the matrix's), so there they read whatever is
    there: a caller whose rows past ``a_rows`` may not be read yet passes A as pointers.
    """
    return span_product(tl.zeros((BM, BN), tl.float32), a_src, b_src, r0, c0, 0, a_rows, N, K, (K + BK - 1) // BK,
                        BM, BN, BK, TMA, TMA_A)


@triton.jit
def span_product(acc, a_src, b_src, r0, c0, k0, a_rows, N, K: tl.constexpr, STEPS: tl.constexpr, BM: tl.constexpr,
                 BN: tl.constexpr, BK: tl.constexpr, TMA: tl.constexpr, TMA_A: tl.constexpr):
    """``acc + A[r0:r0+BM, k0:k0+STEPS*BK] @ B[k0:k0+STEPS*BK, c0:c0+BN]``; columns of A / rows of B past K read 0."""
    for k in range(STEPS):
        a = load_tile(a_src, r0, k0 + k * BK, a_rows, K, BM, BK, TMA_A)
        b = load_tile(b_src, k0 + k * BK, c0, K, N, BK, BN, TMA)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def store_tile(dst, tile, r0, c0, rows, N, BM: tl.constexpr, BN: tl.constexpr, TMA: tl.constexpr):
    """``dst[r0:r0+BM, c0:c0+BN] = tile`` (rounded to dst's dtype) within [rows, N]; ``dst`` from :func:`operand`."""
    if TMA:
        dst.store([r0, c0], tile.to(dst.dtype))
    else:
        r = r0 + tl.arange(0, BM)
        c = c0 + tl.arange(0, BN)
        tl.store(dst + r[:, None].to(tl.int64) * N + c[None, :], tile.to(dst.dtype.element_ty),
                 mask=(r < rows)[:, None] & (c < N)[None, :])



@triton.jit
def matmul(a, b, c, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           GROUP_M: tl.constexpr, TMA: tl.constexpr, FLATTEN: tl.constexpr = False):
    """``c = a @ b`` (a [M, K], b [K, N], c [M, N], row-major), persistent: block p computes tiles p, p + grid, ...

    ``FLATTEN``: the tile loop is a ``tl.range(..., flatten=True)``, which lets the
    pipeliner run one tile's epilogue under the next tile's loads (GPUs only:
    the interpreter's ``range`` takes no runtime bounds).
    """
    a_src = operand(a, M, K, BM, BK, TMA)
    b_src = operand(b, K, N, BK, BN, TMA)
    c_dst = operand(c, M, N, BM, BN, TMA)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    if FLATTEN:
        for t in tl.range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0), flatten=True):
            matmul_tile(a_src, b_src, c_dst, t, tiles_m, tiles_n, M, N, K, BM, BN, BK, GROUP_M, TMA)
    else:
        t = tl.program_id(0)
        while t < tiles_m * tiles_n:
            matmul_tile(a_src, b_src, c_dst, t, tiles_m, tiles_n, M, N, K, BM, BN, BK, GROUP_M, TMA)
            t += tl.num_programs(0)


@triton.jit
def matmul_tile(a_src, b_src, c_dst, t, tiles_m, tiles_n, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, GROUP_M: tl.constexpr, TMA: tl.constexpr):
    """Tile ``t`` of :func:`matmul`."""
    pm, pn = tile_position(t, tiles_m, tiles_n, GROUP_M)
    acc = tile_product(a_src, b_src, pm * BM, pn * BN, M, N, K, BM, BN, BK, TMA, TMA)
    store_tile(c_dst, acc, pm * BM, pn * BN, M, N, BM, BN, TMA)

