"""``_passed`` helpers: accesses through a Multicast parameter, whose caller passes a table or a tile."""

import triton
import triton.language as tl

from .gather import _castpile_reduce_gather
from .loop import _castpile_reduce_loop


@triton.jit
def _castpile_reduce_passed(src, count: tl.constexpr, smask, example, offs, bounds, OP: tl.constexpr, mask=None,
                            other=None, steps: tl.constexpr = tl.constexpr(""), operands=None,
                            dtype: tl.constexpr = None, keep_dims: tl.constexpr = False,
                            return_indices: tl.constexpr = False, return_indices_tie_break_left: tl.constexpr = True,
                            cache_modifier: tl.constexpr = tl.constexpr(""),
                            eviction_policy: tl.constexpr = tl.constexpr(""), volatile: tl.constexpr = False,
                            align: tl.constexpr = None, combine_fn: tl.constexpr = None, base=None):
    """A stack reduction as the binding passed reduces: a table's buffer by buffer, a tile's through its P + I tensor."""
    if src.dtype.is_ptr():
        return _castpile_reduce_loop(src, count, smask, example, offs, bounds, OP, mask, other, steps, operands, dtype,
                                     keep_dims, return_indices, return_indices_tie_break_left, cache_modifier,
                                     eviction_policy, volatile, align, combine_fn, base)
    else:
        return _castpile_reduce_gather(src, count, smask, example, offs, bounds, OP, mask, other, steps, operands,
                                       dtype, keep_dims, return_indices, return_indices_tie_break_left,
                                       cache_modifier, eviction_policy, volatile, align, combine_fn, base)
