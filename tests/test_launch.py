"""castpile.launch: argument order as Triton's launcher takes it, and the interpreter fallback."""

import torch
import triton
import triton.language as tl

from castpile.launch import bind, bound_values


@triton.jit
def _axpy(x, y, n, a, BLOCK: tl.constexpr, SCALE: tl.constexpr = 2):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * a * SCALE, mask=offs < n)


def test_bound_values_apply_defaults_and_drop_launch_options():
    assert bound_values(_axpy, (1, 2, 3), dict(a=4, BLOCK=8, num_warps=4)) == [1, 2, 3, 4, 8, 2]


def test_bind_launches_like_a_grid_call():
    x = torch.arange(100, dtype=torch.float32)
    y = torch.zeros(100)
    launch = bind(_axpy, (4,), x, y, 100, 3.0, BLOCK=32)
    launch()
    assert torch.equal(y, x * 6)
