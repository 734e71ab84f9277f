"""The collectives as torch ops (castpile.gpu.ops), and a user's castpile kernel made one (samples/torch_op).

On the CPU: the simulator's handles stand in for symmetric memory, and at world
size 1 the kernels run in this process under the interpreter, which is what
``torch.library.opcheck`` and ``torch.compile`` need; world size 2 runs in
forked ranks (``sim.run``), each calling the ops through ``torch.ops``.  Every
result is compared with a torch reference computed here from the inputs
(sums, stacks, chunks), never with castpile's own output.  The GPU check under
CUDA graphs is benchmarks/check_torch_ops.py.
"""

import os
import re
import sys
from pathlib import Path

import pytest
import torch

from castpile.gpu import ops, sim

ROOT = Path(__file__).resolve().parents[1]
N = 40  # a multiple of 2 ranks; several interpreter tiles for the sample's kernel
castpile_ops = torch.ops.castpile


def ints(seed, shape=(N,), dtype=torch.float32):
    """Integer-valued data: sums are exact in any order."""
    return torch.randint(-8, 9, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def registered(world, shape=(N,), dtype=torch.float32):
    """Simulated handles, one per rank, each registered; their names."""
    handles = sim.symmetric_empty(world, shape, dtype, push_scratch=True)
    return handles, [ops.register(h) for h in handles]


def calls(x, name):
    """Every op on ``x`` through torch.ops, as the compiled function below calls them: result name -> tensor.

    The in-place op comes last: staged through the buffer, it leaves the sum
    there, which the others would read were ``x`` the buffer.
    """
    world = ops.lookup(name).world_size
    out = torch.empty_like(x)
    castpile_ops.all_reduce_out(x, name, out)
    gathered = x.new_empty((world, *x.shape))
    castpile_ops.all_gather_out(x, name, gathered)
    scattered = x.new_empty((x.shape[0] // world, *x.shape[1:]))
    castpile_ops.reduce_scatter_out(x, name, scattered)
    results = {
        "all_reduce": castpile_ops.all_reduce(x, name),
        "one_shot": castpile_ops.all_reduce(x, name, "one_shot"),
        "low_latency": castpile_ops.all_reduce(x, name, "low_latency"),
        "all_reduce_out": out,
        "all_gather": castpile_ops.all_gather(x, name),
        "all_gather_out": gathered,
        "reduce_scatter": castpile_ops.reduce_scatter(x, name),
        "reduce_scatter_out": scattered,
    }
    results["all_reduce_"] = x.clone()
    castpile_ops.all_reduce_(results["all_reduce_"], name)
    return results


def staged(x, name):
    """The compiled case: the ops' input is computed in the graph."""
    return calls(x * 2 + 1, name)


def references(xs, rank):
    """What :func:`calls` must give on ``rank`` when rank r's input is ``xs[r]``, from torch."""
    total = torch.stack(xs).sum(0)
    summed = dict.fromkeys(("all_reduce", "one_shot", "low_latency", "all_reduce_out", "all_reduce_"), total)
    scattered = total.chunk(len(xs))[rank]
    return {
        **summed,
        "all_gather": torch.stack(xs),
        "all_gather_out": torch.stack(xs),
        "reduce_scatter": scattered,
        "reduce_scatter_out": scattered,
    }


def assert_matches(got, expected):
    assert got.keys() == expected.keys()
    for key in got:
        torch.testing.assert_close(got[key], expected[key], rtol=0, atol=0, msg=key)


def opcheck_cases(x, name):
    """(op, args) for every op, with ``x`` as the input."""
    world = ops.lookup(name).world_size
    return [
        (castpile_ops.all_reduce.default, (x, name, "auto")),
        (castpile_ops.all_reduce.default, (x, name, "one_shot")),
        (castpile_ops.all_reduce.default, (x, name, "low_latency")),
        (castpile_ops.all_reduce_out.default, (x, name, torch.empty_like(x), "auto")),
        (castpile_ops.all_reduce_.default, (x.clone(), name)),
        (castpile_ops.all_gather.default, (x, name)),
        (castpile_ops.all_gather_out.default, (x, name, x.new_empty((world, *x.shape)))),
        (castpile_ops.reduce_scatter.default, (x, name)),
        (castpile_ops.reduce_scatter_out.default, (x, name, x.new_empty((x.shape[0] // world,)))),
    ]


@pytest.fixture(scope="module")
def world1():
    handles, names = registered(1)
    return handles[0], names[0]


@pytest.mark.parametrize("in_buffer", [False, True], ids=["staged", "in_buffer"])
def test_opcheck_world1(world1, in_buffer):
    """Schemas (declared mutations), fake implementations, and AOT dispatch (functionalized, dynamic shapes)."""
    symm, name = world1
    x = ints(1)
    if in_buffer:
        symm.tensor.copy_(x)
        x = symm.tensor
    for op, args in opcheck_cases(x, name):
        torch.library.opcheck(op, args)
        if in_buffer:
            torch.testing.assert_close(symm.tensor, ints(1), rtol=0, atol=0)  # world 1: sums leave it as it was


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_world1(world1, backend):
    """fullgraph=True (a graph break raises), on changing inputs; world 1: an all-reduce of x is x."""
    _, name = world1
    compiled = torch.compile(staged, backend=backend, fullgraph=True)
    for seed in (2, 3):
        x = ints(seed)
        expected = references([x * 2 + 1], 0)
        assert_matches(compiled(x, name), expected)
        assert_matches(staged(x, name), expected)


def test_in_place_on_the_buffer_under_inductor(world1, monkeypatch):
    """Inductor re-inplaces the in-place op: it gets the registered buffer itself (no staging copy); results as eager."""
    symm, name = world1
    given = []
    original = ops.staged
    monkeypatch.setattr(
        ops, "staged", lambda n, t: given.append(t.data_ptr() == symm.tensor.data_ptr()) or original(n, t)
    )

    def reduce_in_place(buffer):
        castpile_ops.all_reduce_(buffer, name)
        return buffer + 1

    x = ints(4)
    symm.tensor.copy_(x)
    got = torch.compile(reduce_in_place, backend="inductor", fullgraph=True)(symm.tensor)
    torch.testing.assert_close(got, x + 1, rtol=0, atol=0)
    assert given == [True]


def test_world2_eager_compiled_and_opcheck():
    """Two forked ranks call every op through torch.ops, eagerly and compiled (aot_eager, fullgraph), and opcheck them."""
    handles, names = registered(2)
    inputs = {seed: [ints(10 * seed + r) for r in range(2)] for seed in (1, 2)}

    def body(rank):
        name = names[rank]
        compiled = torch.compile(staged, backend="aot_eager", fullgraph=True)
        results = {"eager": calls(inputs[1][rank], name)}
        handles[rank].tensor.copy_(inputs[1][rank])
        results["eager_in_buffer"] = calls(handles[rank].tensor, name)
        for seed in (1, 2):
            results[f"compiled{seed}"] = compiled(inputs[seed][rank], name)
        for op, args in opcheck_cases(inputs[1][rank], name):
            torch.library.opcheck(op, args)
        return results

    for rank, results in enumerate(sim.run(body, 2, timeout=120)):
        assert_matches(results["eager"], references(inputs[1], rank))
        assert_matches(results["eager_in_buffer"], references(inputs[1], rank))
        for seed in (1, 2):
            assert_matches(results[f"compiled{seed}"], references([x * 2 + 1 for x in inputs[seed]], rank))


ROWS, D, EPS = 3, 16, 1e-5


def rmsnormed(x, residual, weight, name):
    """Both fused ops through torch.ops, on the input computed in the graph: (y, y with residual, new residual)."""
    h = x * 2 + 1
    residual = residual.clone()
    y = castpile_ops.all_reduce_rmsnorm(h, name, weight, EPS)
    return y, castpile_ops.all_reduce_residual_rmsnorm(h, name, residual, weight, EPS), residual


def rmsnorm_reference(xs, residual, weight):
    """What :func:`rmsnormed` must give, in float64 from torch (integer data: the sums are exact)."""
    total = torch.stack([x * 2 + 1 for x in xs]).double().sum(0)
    with_residual = total + residual.double()

    def norm(t):
        return (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * weight.double()).float()

    return norm(total), norm(with_residual), with_residual.float()


def test_fused_rmsnorm_ops():
    """all_reduce_rmsnorm and all_reduce_residual_rmsnorm: opcheck at world 1; two ranks, eager and compiled."""
    weight = ints(30, (D,)) / 4 + 3
    residual = ints(31, (ROWS, D))
    (_one,), (one_name,) = registered(1, (ROWS, D))
    x = ints(32, (ROWS, D))
    torch.library.opcheck(castpile_ops.all_reduce_rmsnorm.default, (x, one_name, weight, EPS, "one_shot"))
    torch.library.opcheck(castpile_ops.all_reduce_residual_rmsnorm.default, (x, one_name, residual.clone(), weight))
    _handles, names = registered(2, (ROWS, D))
    xs = [ints(33 + r, (ROWS, D)) for r in range(2)]

    def body(rank):
        compiled = torch.compile(rmsnormed, backend="aot_eager", fullgraph=True)
        return rmsnormed(xs[rank], residual, weight, names[rank]), compiled(xs[rank], residual, weight, names[rank])

    expected = rmsnorm_reference(xs, residual, weight)
    for results in sim.run(body, 2, timeout=120):
        for got in results:
            for value, want in zip(got, expected):
                torch.testing.assert_close(value, want, rtol=2e-6, atol=1e-6)


def test_fake_shapes_follow_the_world_size():
    """Under FakeTensorMode (what torch.compile traces with) all-gather and reduce-scatter take the registry's world size."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    _, names = registered(4)
    with FakeTensorMode() as mode:
        x = mode.from_tensor(ints(0))
        assert castpile_ops.all_gather(x, names[0]).shape == (4, N)
        assert castpile_ops.reduce_scatter(x, names[0]).shape == (N // 4,)
        assert castpile_ops.all_reduce(x, names[0]).shape == (N,)


def test_errors(world1):
    _symm, name = world1
    with pytest.raises(KeyError, match=re.escape("castpile.gpu.ops.register")):
        castpile_ops.all_reduce(ints(0), "nobody")
    with pytest.raises(ValueError, match=r"shape \(40,\).*given torch.float32 \(39,\)"):
        castpile_ops.all_reduce(ints(0, (N - 1,)), name)
    with pytest.raises(ValueError, match=re.escape("given torch.float16")):
        castpile_ops.all_gather(ints(0, dtype=torch.float16), name)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        castpile_ops.all_reduce(ints(0), name, "three_shot")
    with pytest.raises(Exception, match=r"given torch.float32 \(39,\)"):  # at compile time, from the fake
        torch.compile(lambda x: castpile_ops.all_reduce(x, name), backend="aot_eager", fullgraph=True)(ints(0, (39,)))
    _, (three, *_) = registered(3, shape=(4,))
    with pytest.raises(ValueError, match="not a multiple of 3 ranks"):
        castpile_ops.reduce_scatter(torch.zeros(4), three)


def test_register():
    handles, (name,) = registered(1)
    assert ops.register(handles[0]) == name  # again: the same name
    assert name.endswith("_w1") and ops.lookup(name) is handles[0]
    other = sim.symmetric_empty(1, (N,), torch.float32)[0]
    with pytest.raises(ValueError, match="is taken"):
        ops.register(other, name)
    assert ops.register(other, "mine") == "mine"
    ops.unregister("mine")
    with pytest.raises(KeyError):
        ops.lookup("mine")


def test_kernel_op_needs_a_fake_for_a_result():
    with pytest.raises(TypeError, match="give like="):

        @ops.kernel_op("castpile_test::nothing_known")
        def f(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

    with pytest.raises(TypeError, match="like='y' is not a parameter"):
        ops.kernel_op("castpile_test::wrong_like", lambda x: x, like="y")


# A user's kernel as a torch op: samples/torch_op/sumscale, imported through the hook -----------------------------


@pytest.fixture(scope="module")
def sumscale(tmp_path_factory):
    """The sample package imported through the import hook its __init__ installs (a fresh cache)."""
    os.environ["CASTPILE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    sys.path.insert(0, str(ROOT / "samples" / "torch_op"))
    try:
        import sumscale.kernels
    finally:
        sys.path.remove(str(ROOT / "samples" / "torch_op"))
        del os.environ["CASTPILE_CACHE_DIR"]
    return sumscale.kernels


def test_sample_is_transpiled_through_the_hook(sumscale):
    from castpile.hook import ImportHook

    assert any(isinstance(f, ImportHook) and "sumscale" in f.packages for f in sys.meta_path)
    assert type(sumscale.__loader__).__module__ == "castpile.hook"
    assert "multicast_like(" not in sumscale.__loader__.get_source("sumscale.kernels").split("@triton.jit", 1)[1]


def test_sample_op_world1(sumscale, world1):
    """opcheck, and torch.compile(fullgraph=True) against torch: world 1, the scaled sum of x is scale * x."""
    _, name = world1
    x = ints(5)
    torch.library.opcheck(torch.ops.sumscale.scaled_sum.default, (x, name, 0.5))

    def f(x):
        return torch.ops.sumscale.scaled_sum(x + 1, name, 0.5) * 4

    for seed in (5, 6):
        x = ints(seed)
        torch.testing.assert_close(
            torch.compile(f, backend="aot_eager", fullgraph=True)(x), (x + 1) * 2, rtol=0, atol=0
        )


def test_sample_op_world2(sumscale):
    """Two ranks: the mean over ranks, eagerly and compiled, against torch."""
    _handles, names = registered(2)
    xs = [ints(20 + r) for r in range(2)]

    def body(rank):
        def mean(x):
            return torch.ops.sumscale.scaled_sum(x, names[rank], 0.5)

        return mean(xs[rank]), torch.compile(mean, backend="aot_eager", fullgraph=True)(xs[rank] * 3)

    for eager, compiled in sim.run(body, 2, timeout=120):
        torch.testing.assert_close(eager, (xs[0] + xs[1]) / 2, rtol=0, atol=0)
        torch.testing.assert_close(compiled, (xs[0] + xs[1]) * 1.5, rtol=0, atol=0)
