"""MoE dispatch and combine as torch ops (``torch.ops.castpile.moe_dispatch``, ``moe_combine``), against torch.

World size 1 runs in this process (the interpreter runs the kernels; each
in-kernel barrier meets only itself): opcheck, fresh outputs,
``torch.compile(fullgraph=True)`` with aot_eager and inductor.  World size 2
runs in forked simulator ranks, eagerly and compiled.  Two references, both
from the inputs alone: the all-to-all reference (tests/testkit/moe.py) for what
dispatch delivers, and the MoE formula ``out[t] = sum_k w[t, k] *
expert_{idx[t, k]}(x[t])`` for the end to end result, with a stand-in expert
layer in torch (expert e scales its rows by e + 1).  Data are small integers
and weights multiples of 1/8: every sum is exact.
"""

import re

import pytest
import torch

from castpile.gpu import ops, sim
from castpile.gpu.fused import moe
from testkit.moe import reference_dispatch

castpile_ops = torch.ops.castpile
# world 1: bf16, rows padded (12 elements in rows of 16); world 2: fp32, rows padded (10 in 12)
ONE = dict(tokens=5, hidden=12, topk=2, experts=4, dtype=torch.bfloat16)
TWO = dict(tokens=6, hidden=10, topk=3, experts=6, dtype=torch.float32)
LAUNCH = dict(token_block=4, hidden_block=16, blocks=2)


def states(world, config):
    """Simulated MoE states, one per rank, each registered; their names."""
    created = moe.MoE.create_all(world, alloc=sim.symmetric_scratch, **config, **LAUNCH)
    return created, [ops.register(st) for st in created]


def routed(seed, world, config, idx_dtype=torch.int32):
    """Per rank: x, topk_idx (distinct experts; the last token sent nowhere), topk_weights."""
    gen = torch.Generator().manual_seed(seed)
    T, H, K, E = config["tokens"], config["hidden"], config["topk"], config["experts"]
    xs = [torch.randint(-3, 4, (T, H), generator=gen).to(config["dtype"]) for _ in range(world)]
    idx = [torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(T)]).to(idx_dtype) for _ in range(world)]
    for i in idx:
        i[-1] = -1
    weights = [torch.randint(1, 9, (T, K), generator=gen).float() / 8 for _ in range(world)]
    return xs, idx, weights


def experts(d: moe.Dispatched, rank: int):
    """A stand-in expert layer: each grouped row, gathered from recv_x, scaled by its global expert id + 1.

    Returns ``expert_out`` in ``grouped_rows`` order (rows past ``expert_offsets[-1]`` are junk combine skips).
    """
    local = d.expert_counts.numel()
    places = torch.arange(d.grouped_rows.numel(), dtype=torch.int32, device=d.grouped_rows.device)
    expert = torch.searchsorted(d.expert_offsets[1:], places, right=True)  # local expert of each place
    rows = d.recv_x.flatten(0, 1)[d.grouped_rows.long()]
    return rows * (rank * local + expert + 1)[:, None].to(rows.dtype)


def moe_layer(x, topk_idx, topk_weights, name, rank):
    """Dispatch, the experts, combine: all through torch.ops; (dispatched, out)."""
    d = moe.Dispatched(*castpile_ops.moe_dispatch(x, topk_idx, topk_weights, name))
    return d, castpile_ops.moe_combine(experts(d, rank), d.slot_positions, name)


def formula(x, topk_idx, topk_weights):
    """``sum_k w[t, k] * (idx[t, k] + 1) * x[t]`` over the slots with an expert, in float64, rounded to x's dtype."""
    valid = topk_idx >= 0
    scale = (topk_weights.double() * (topk_idx + 1).double() * valid).sum(1)
    return (scale[:, None] * x.double()).to(x.dtype)


def assert_dispatched(d: moe.Dispatched, xs, idx, weights, want):
    """``d`` on one rank against the reference's ``want`` for that rank (rows past the counts are unspecified)."""
    for s, toks in enumerate(want["regions"]):
        n = len(toks)
        assert int(d.recv_counts[s]) == n, s
        for field, expected in (
            ("recv_x", xs[s][toks]),
            ("recv_src_token", toks),
            ("recv_topk_idx", idx[s][toks]),
            ("recv_weights", weights[s][toks]),
            ("slot_positions", want["slot_positions"][s, :n]),
        ):
            got = getattr(d, field)[s, :n]
            assert torch.equal(got, expected.to(got.dtype)), (field, s)
    total = int(want["expert_offsets"][-1])
    assert torch.equal(d.expert_counts, want["expert_counts"].int())
    assert torch.equal(d.expert_offsets, want["expert_offsets"].int())
    assert torch.equal(d.grouped_rows[:total], want["grouped_rows"].int())


@pytest.fixture(scope="module")
def world1():
    (state,), (name,) = states(1, ONE)
    return state, name


def test_opcheck_world1(world1):
    """Schemas, fake implementations (shapes and dtypes from the registry), AOT dispatch with dynamic shapes."""
    state, name = world1
    (x,), (idx,), (w,) = routed(1, 1, ONE, torch.int64)
    torch.library.opcheck(castpile_ops.moe_dispatch.default, (x, idx, w, name))
    d = moe.Dispatched(*castpile_ops.moe_dispatch(x, idx, w, name))
    expert_out = torch.randint(-3, 4, (state.capacity_pairs, ONE["hidden"])).to(ONE["dtype"])
    torch.library.opcheck(castpile_ops.moe_combine.default, (expert_out, d.slot_positions, name))


def test_outputs_are_fresh_and_right_world1(world1):
    """New contiguous tensors, apart from the state's buffers: a later dispatch leaves them as they were."""
    state, name = world1
    (x,), (idx,), (w,) = routed(2, 1, ONE)
    d, out = moe_layer(x.t().contiguous().t(), idx, w.t().contiguous().t(), name, 0)  # non-contiguous inputs
    kept = [t.clone() for t in (*vars(d).values(), out)]
    buffers = {b.untyped_storage().data_ptr() for b in (*vars(state.dispatched).values(), state.combine_buf.tensor)}
    for t in (*vars(d).values(), out):
        assert t.is_contiguous() and t.untyped_storage().data_ptr() not in buffers
    assert_dispatched(d, [x], [idx], [w], reference_dispatch([idx], 1, ONE["tokens"], ONE["experts"])[0])
    torch.testing.assert_close(out, formula(x, idx, w), rtol=0, atol=0)
    (x2,), (idx2,), (w2,) = routed(3, 1, ONE)
    moe_layer(x2, idx2, w2, name, 0)
    for before, now in zip(kept, (*vars(d).values(), out)):
        assert torch.equal(before, now)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_world1(world1, backend):
    """fullgraph=True (a graph break raises): the layer compiled, on changing routings, against the formula."""
    _, name = world1

    def layer(x, idx, w):
        return moe_layer(x * 2 - 1, idx, w, name, 0)[1]

    compiled = torch.compile(layer, backend=backend, fullgraph=True)
    for seed in (4, 5):
        (x,), (idx,), (w,) = routed(seed, 1, ONE)
        torch.testing.assert_close(compiled(x, idx, w), formula(x * 2 - 1, idx, w), rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_combine_keeps_its_dispatch_in_the_graph(world1, backend):
    """The dispatch's outputs feed nothing but the combine's ``slot_positions``: it still runs, before the combine.

    Eagerly dispatching another routing first leaves that routing in the state: only a dispatch inside the graph
    gives the result of this one.
    """
    _state, name = world1

    def routed_sum(x, idx, w, expert_out):
        slot_positions = castpile_ops.moe_dispatch(x, idx, w, name)[5]
        return castpile_ops.moe_combine(expert_out, slot_positions, name)

    (x,), (idx,), (w,) = routed(6, 1, ONE)
    (x0,), (idx0,), (w0,) = routed(7, 1, ONE)
    castpile_ops.moe_dispatch(x0, idx0, w0, name)
    d = moe.Dispatched(*castpile_ops.moe_dispatch(x, idx, w, name))
    expert_out = experts(d, 0)  # the experts' rows of this routing, in its grouped order
    castpile_ops.moe_dispatch(x0, idx0, w0, name)
    got = torch.compile(routed_sum, backend=backend, fullgraph=True)(x, idx, w, expert_out)
    torch.testing.assert_close(got, formula(x, idx, w), rtol=0, atol=0)


def test_world2_eager_and_compiled():
    """Two forked ranks run the layer through torch.ops, eagerly and compiled (aot_eager, fullgraph), twice each."""
    _, names = states(2, TWO)
    data = {seed: routed(seed, 2, TWO, dtype) for seed, dtype in ((10, torch.int64), (11, torch.int32))}

    def body(rank):
        compiled = torch.compile(moe_layer, backend="aot_eager", fullgraph=True)
        results = []
        for layer in (moe_layer, compiled):
            for xs, idx, w in data.values():
                d, out = layer(xs[rank], idx[rank], w[rank], names[rank], rank)
                results.append((d, out))
        return results

    for rank, results in enumerate(sim.run(body, 2, timeout=180)):
        for (d, out), (xs, idx, w) in zip(results, [*data.values()] * 2):
            assert_dispatched(d, xs, idx, w, reference_dispatch(idx, 2, TWO["tokens"], TWO["experts"])[rank])
            torch.testing.assert_close(out, formula(xs[rank], idx[rank], w[rank]), rtol=0, atol=0)


def test_fake_shapes_follow_the_state():
    """Under FakeTensorMode (what torch.compile traces with), shapes and dtypes come from the registered state."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    config = dict(tokens=4, hidden=6, topk=3, experts=8, dtype=torch.float16)
    created, names = states(4, config)
    W, T, H, K, EL = 4, 4, 6, 3, 2
    with FakeTensorMode() as mode:
        x, idx, w = (
            mode.from_tensor(t)
            for t in (torch.zeros(T, H, dtype=torch.float16), torch.zeros(T, K, dtype=torch.int64), torch.zeros(T, K))
        )
        d = moe.Dispatched(*castpile_ops.moe_dispatch(x, idx, w, names[1]))
        assert {f: (tuple(t.shape), t.dtype) for f, t in vars(d).items()} == {
            "recv_x": ((W, T, H), torch.float16),
            "recv_counts": ((W,), torch.int32),
            "expert_counts": ((EL,), torch.int32),
            "expert_offsets": ((EL + 1,), torch.int32),
            "grouped_rows": ((W * T * EL,), torch.int32),
            "slot_positions": ((W, T, K), torch.int32),
            "recv_weights": ((W, T, K), torch.float32),
            "recv_src_token": ((W, T), torch.int32),
            "recv_topk_idx": ((W, T, K), torch.int32),
        }
        expert_out = mode.from_tensor(torch.zeros(created[1].capacity_pairs, H, dtype=torch.float16))
        out = castpile_ops.moe_combine(expert_out, d.slot_positions, names[1])
        assert (tuple(out.shape), out.dtype) == ((T, H), torch.float16)


def test_register_and_errors(world1):
    state, name = world1
    assert name.startswith("moe") and name.endswith("_w1") and ops.lookup(name) is state
    assert ops.register(state) == name
    symm = sim.symmetric_empty(1, (4,), torch.float32)[0]
    symm_name = ops.register(symm)
    assert symm_name.startswith("symm") and symm_name.endswith("_w1")
    (x,), (idx,), (w,) = routed(8, 1, ONE)
    with pytest.raises(TypeError, match="is a MoE state, not a symmetric tensor"):
        castpile_ops.all_reduce(torch.zeros(4), name)
    with pytest.raises(TypeError, match="is a symmetric tensor, not a MoE state"):
        castpile_ops.moe_dispatch(x, idx, w, symm_name)
    with pytest.raises(ValueError, match=r"x must be a torch.bfloat16 tensor of shape \(5, 12\)"):
        castpile_ops.moe_dispatch(x.float(), idx, w, name)
    with pytest.raises(ValueError, match=re.escape("topk_weights must be a torch.float32")):
        castpile_ops.moe_dispatch(x, idx, w.double(), name)
    with pytest.raises(ValueError, match=r"slot_positions must be a torch.int32 tensor of shape \(1, 5, 2\)"):
        castpile_ops.moe_combine(torch.zeros(state.capacity_pairs, 12, dtype=torch.bfloat16), torch.zeros(5, 2), name)
    with pytest.raises(Exception, match=r"expert_out must be .* shape \(10, 12\)"):  # at trace time, from the fake
        torch.compile(lambda e, s: castpile_ops.moe_combine(e, s, name), backend="aot_eager", fullgraph=True)(
            torch.zeros(9, 12, dtype=torch.bfloat16), torch.zeros(1, 5, 2, dtype=torch.int32)
        )
    ops.unregister(symm_name)
