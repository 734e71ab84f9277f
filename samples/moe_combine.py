"""The way back of an MoE all-to-all: weigh expert outputs and push each token's partial to its source row.

Received row r came from rank ``src_rank[r]``, token ``src_token[r]``, and its K
top-k slots point at rows ``slots[r, k]`` of the experts' output (-1: that
expert lives on another rank).  The partial of row r is the weighted sum over
its slots, in fp32; it goes back to row ``(me, src_token[r])`` of its source's
combine buffer.  The pointer tile holds one address per received row, each on
a different rank: a (rows,) tile with an (H,) element index addresses a
(rows, H) tensor, and one store writes every row to its own rank.
``castpile/gpu/fused/moe_kernels.py`` does this, and the sum at the source, for real.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def combine_rows(expert_out, slots, weights, src_rank, src_token, buf_ptrs, example, me, n, T, H: tl.constexpr,
                 K: tl.constexpr, RB: tl.constexpr, HB: tl.constexpr):
    """Partials of received rows ``r`` (n of them) to row ``me * T + src_token[r]`` of rank ``src_rank[r]``'s buffer."""
    r = tl.program_id(0) * RB + tl.arange(0, RB)
    live = r < n
    ROW_BYTES: tl.constexpr = H * example.dtype.element_ty.primitive_bitwidth // 8
    source = tl.load(buf_ptrs + tl.load(src_rank + r, mask=live, other=0), mask=live, other=0)
    back = multicast_like(example, source + (me * T + tl.load(src_token + r, mask=live, other=0)).to(tl.int64)
                          * ROW_BYTES, shape=(H,), ptr_mask=live)
    for h0 in range(0, H, HB):
        cols = h0 + tl.arange(0, HB)
        acc = tl.zeros([RB, HB], tl.float32)
        for k in tl.static_range(K):
            at = tl.load(slots + r * K + k, mask=live, other=-1)
            w = tl.load(weights + r * K + k, mask=live, other=0)
            v = tl.load(expert_out + at.to(tl.int64)[:, None] * H + cols[None, :],
                        mask=(at >= 0)[:, None] & (cols < H)[None, :], other=0)
            acc += tl.where(at >= 0, w, 0)[:, None] * v.to(tl.float32)
        back[cols] = acc  # (rows, HB): each row to its own source rank
