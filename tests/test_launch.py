"""castpile.gpu.launch: argument order as Triton's launcher takes it, and the interpreter fallback."""

import torch
import triton
import triton.language as tl

from castpile.gpu.launch import bind, bound_values


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


def test_late_tensor_replaces_the_bound_one_per_call():
    x = torch.arange(64, dtype=torch.float32)
    first, second = torch.zeros(64), torch.zeros(64)
    launch = bind(_axpy, (2,), x, first, 64, 1.0, BLOCK=32, late=("y",))
    launch(y=second)
    assert torch.equal(second, x * 2) and not first.any()
    launch()
    assert torch.equal(first, x * 2)


def test_late_tensor_must_match_what_was_compiled_for():
    import pytest

    x = torch.arange(64, dtype=torch.float32)
    launch = bind(_axpy, (2,), x, torch.zeros(64), 64, 1.0, BLOCK=32, late=("y",))
    with pytest.raises(ValueError, match="float32"):
        launch(y=torch.zeros(64, dtype=torch.float64))
    with pytest.raises(ValueError, match="aligned"):
        launch(y=torch.zeros(65)[1:])
    with pytest.raises(TypeError, match="'x' is not a late parameter"):
        launch(x=x)
    with pytest.raises(ValueError, match="graph"):
        bind(_axpy, (2,), x, torch.zeros(64), 64, 1.0, BLOCK=32, late=("y",), graph=True)


def test_an_empty_hook_chain_is_no_hook(monkeypatch):
    from triton import knobs

    from castpile.gpu.launch import launch_hooked

    chain = type(knobs.runtime.launch_enter_hook)()
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", chain)
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", type(chain)(reversed=True))
    assert not launch_hooked()
    chain.add(print)
    assert launch_hooked()
