"""Index-driven scatter through a pointer tile: an MoE token dispatch in one store.

Token t goes to rank d where ``dests[t, d]`` is set, into row ``rows[t, d]`` of
that rank's buffer (rows differ from rank to rank: each rank packs what it
receives).  The pointer tile holds one address per (rank, token): rank d's
buffer plus the byte offset of the row, masked where the token does not go.
A (H,) element index then addresses a (ranks, tokens, H) tensor, and one store
of the token rows, broadcast over the ranks, writes each row to every rank it
goes to.  ``castpile/gpu/fused/moe_kernels.py`` does this, and the receiving
side, for real.
"""

import triton
import triton.language as tl

from castpile import multicast_like


@triton.jit
def dispatch_rows(x, dests, rows, buf_ptrs, example, n, H: tl.constexpr, WORLD: tl.constexpr, TB: tl.constexpr,
                  HB: tl.constexpr):
    """Row t of ``x`` (n x H) to row ``rows[t, d]`` of rank d's buffer, for every d with ``dests[t, d]`` (n x WORLD)."""
    t = tl.program_id(0) * TB + tl.arange(0, TB)
    d = tl.arange(0, triton.next_power_of_2(WORLD))
    at = t[None, :] * WORLD + d[:, None]  # (ranks, tokens)
    go = tl.load(dests + at, mask=(t[None, :] < n) & (d[:, None] < WORLD), other=0) != 0
    row = tl.load(rows + at, mask=go, other=0).to(tl.int64)
    base = tl.load(buf_ptrs + d, mask=d < WORLD, other=0)
    ROW_BYTES: tl.constexpr = H * example.dtype.element_ty.primitive_bitwidth // 8
    out = multicast_like(example, base[:, None] + row * ROW_BYTES, shape=(H,), ptr_mask=go)
    for h0 in range(0, H, HB):
        cols = h0 + tl.arange(0, HB)
        tokens = tl.load(x + t[:, None] * H + cols[None, :], mask=(t[:, None] < n) & (cols[None, :] < H))
        out[cols] = tokens[None, :, :]  # (ranks, tokens, HB): each row to every rank it goes to
