"""MoE dispatch and combine (castpile.gpu.fused.moe) in the CPU simulator, against an independent torch reference.

The reference builds what an all-to-all would deliver from the same routing:
per source, the tokens each rank receives (deduplicated, in token order; the
send lists concatenated stand in for ``all_to_all_single``), then the (row,
slot) pairs of local experts grouped by a stable argsort.  Data are integers
and weights multiples of 1/8, so every fp32 sum is exact and the bf16 results
are exact too (the Triton interpreter's bf16 rounding plays no part).
"""

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from castpile.gpu.fused import moe
from compile_sm90 import Job, compile_for_sm90
from testkit import import_file
from testkit.moe import reference_dispatch

ROOT = Path(__file__).resolve().parents[1]


# -- inputs ----------------------------------------------------------------------------------------------------


def routing(gen, world, tokens, topk, experts, skip=None):
    """Distinct top-k experts per token; edge cases on every rank.

    Token 0 has all its experts on rank 0 (one row to one rank); the last token
    has none (ids -1: sent nowhere).  ``skip``: {source: rank} whose experts
    that source never picks (it sends that rank nothing).
    """
    local = experts // world
    rows = []
    for s in range(world):
        allowed = [e for e in range(experts) if skip is None or e // local != skip.get(s, -1)]
        idx = torch.tensor(
            [[allowed[i] for i in torch.randperm(len(allowed), generator=gen)[:topk]] for _ in range(tokens)],
            dtype=torch.int32,
        )
        idx[0] = torch.randperm(local, generator=gen)[:topk]
        idx[-1] = -1
        rows.append(idx)
    return rows


def inputs(seed, world, tokens, hidden, topk, experts, dtype, skip=None):
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randint(-3, 4, (tokens, hidden), generator=gen).to(dtype) for _ in range(world)]
    idx = routing(gen, world, tokens, topk, experts, skip)
    weights = [torch.randint(1, 9, (tokens, topk), generator=gen).float() / 8 for _ in range(world)]
    return xs, idx, weights


# -- the torch reference ---------------------------------------------------------------------------------------


def reference_combine(ref, expert_out, weights, world, tokens, dtype):
    """Per rank: fp32 partials in slot order rounded to dtype, summed per token over ranks in rank order."""
    partial = []  # partial[d][s]: {token: partial row} computed on rank d for source s
    for d in range(world):
        rows = {}
        for s, toks in enumerate(ref[d]["regions"]):
            for p, t in enumerate(toks.tolist()):
                acc = torch.zeros(expert_out[d].shape[1])
                for k, at in enumerate(ref[d]["slot_positions"][s, p].tolist()):
                    if at >= 0:
                        acc = acc + weights[s][t, k] * expert_out[d][at].float()
                rows[s, t] = acc.to(dtype)
        partial.append(rows)
    outs = []
    for s in range(world):
        acc = torch.zeros(tokens, expert_out[0].shape[1])
        for d in range(world):
            for t in ref[d]["regions"][s].tolist():
                acc[t] = acc[t] + partial[d][s, t].float()
        outs.append(acc.to(dtype))
    return outs


# -- the simulated runs ----------------------------------------------------------------------------------------

CASES = {
    # name: (world, tokens, hidden, topk, experts, dtype, topk dtype, skip)
    "w2-bf16": (2, 9, 40, 4, 8, torch.bfloat16, torch.int64, None),
    "w3-fp32": (3, 7, 20, 3, 9, torch.float32, torch.int32, {0: 2, 2: 1}),
    "w4-fp32": (4, 5, 24, 2, 8, torch.float32, torch.int32, {1: 3}),
}
CALLS = 2


def run_case(name, calls=CALLS):
    world, tokens, hidden, topk, experts, dtype, idx_dtype, skip = CASES[name]
    states = moe.MoE.create_all(
        world,
        alloc=sim.symmetric_scratch,
        tokens=tokens,
        hidden=hidden,
        topk=topk,
        experts=experts,
        dtype=dtype,
        token_block=4,
        hidden_block=16,
        blocks=2,
    )
    for st in states:
        st.recv_x.tensor.fill_(float("nan"))
        st.combine_buf.tensor.fill_(float("nan"))
    data = [inputs(1000 * c + world, world, tokens, hidden, topk, experts, dtype, skip) for c in range(calls)]
    gen = torch.Generator().manual_seed(world)
    expert_outs = [
        [torch.randint(-3, 4, (st.capacity_pairs, hidden), generator=gen).to(dtype) for st in states]
        for _ in range(calls)
    ]

    def body(rank):
        rng = random.Random(rank * 7919 + world)
        results = []
        for c in range(calls):
            xs, idx, weights = data[c]
            time.sleep(rng.uniform(0, 0.05))
            got = moe.dispatch(states[rank], xs[rank], idx[rank].to(idx_dtype), weights[rank])
            copied = {f: getattr(got, f).clone() for f in moe.Dispatched.__dataclass_fields__}
            time.sleep(rng.uniform(0, 0.05))
            copied["out"] = moe.combine(states[rank], expert_outs[c][rank]).clone()
            results.append(copied)
        return results

    outs = sim.run(body, world, timeout=240)
    return states, data, expert_outs, outs


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return (request.param, *run_case(request.param))


def test_dispatch_matches_torch(case):
    name, states, data, _, outs = case
    world, tokens, _, _topk, experts, _, _, _ = CASES[name]
    for c, (xs, idx, weights) in enumerate(data):
        ref = reference_dispatch(idx, world, tokens, experts)
        for r in range(world):
            got, want = outs[r][c], ref[r]
            counts = [len(t) for t in want["regions"]]
            assert got["recv_counts"].tolist() == counts, (c, r)
            for s, toks in enumerate(want["regions"]):
                n = len(toks)
                assert torch.equal(got["recv_x"][s, :n], xs[s][toks]), (c, r, s)
                assert torch.equal(got["recv_src_token"][s, :n], toks.int()), (c, r, s)
                assert torch.equal(got["recv_topk_idx"][s, :n], idx[s][toks].int()), (c, r, s)
                assert torch.equal(got["recv_weights"][s, :n], weights[s][toks]), (c, r, s)
                assert torch.equal(got["slot_positions"][s, :n], want["slot_positions"][s, :n].int()), (c, r, s)
            total = int(want["expert_offsets"][-1])
            assert torch.equal(got["expert_counts"], want["expert_counts"].int()), (c, r)
            assert torch.equal(got["expert_offsets"], want["expert_offsets"].int()), (c, r)
            assert torch.equal(got["grouped_rows"][:total], want["grouped_rows"].int()), (c, r)
    assert all(int(st.pad.tensor.abs().sum()) == 0 for st in states), "signals left behind"


def test_combine_matches_torch(case):
    name, _, data, expert_outs, outs = case
    world, tokens, _, _, experts, dtype, _, _ = CASES[name]
    for c, (_, idx, weights) in enumerate(data):
        ref = reference_dispatch(idx, world, tokens, experts)
        want = reference_combine(ref, expert_outs[c], weights, world, tokens, dtype)
        for r in range(world):
            assert torch.equal(outs[r][c]["out"], want[r]), (c, r)
            assert not outs[r][c]["out"][-1].any(), "a token sent nowhere combines to zeros"


def test_the_edge_cases_happen(case):
    """The routing really has ranks that receive nothing from a source, tokens with every expert on one rank (one
    row, there only) and tokens sent nowhere."""
    name, _, data, _, outs = case
    world, tokens, _, topk, _, _, _, skip = CASES[name]
    for c in range(len(data)):
        for s, d in (skip or {}).items():
            assert outs[d][c]["recv_counts"][s] == 0
        for r in range(world):  # token 0 of source r: its topk experts all on rank 0
            assert outs[0][c]["recv_src_token"][r, 0] == 0
            assert (outs[0][c]["recv_topk_idx"][r, 0] >= 0).sum() == topk
            for d in range(world):
                received = outs[d][c]["recv_src_token"][r, : outs[d][c]["recv_counts"][r]].tolist()
                assert tokens - 1 not in received and (d == 0 or 0 not in received), (c, r, d)


def test_grouped_rows_group_by_expert(case):
    """Without the reference: every place of expert l's span holds a row that chose expert l, pointing back to it."""
    name, _, _, _, outs = case
    world, tokens, _, topk, experts, _, _, _ = CASES[name]
    local = experts // world
    for r, results in enumerate(outs):
        for got in results:
            offsets, rows = got["expert_offsets"].tolist(), got["grouped_rows"]
            seen = 0
            for e in range(local):
                span = rows[offsets[e] : offsets[e + 1]].long()
                seen += len(span)
                assert len(span) == got["expert_counts"][e]
                chosen = got["recv_topk_idx"].view(-1, topk)[span]
                assert ((chosen == r * local + e).sum(1) == 1).all()
                back = got["slot_positions"].view(-1, topk)[span]
                assert (back == torch.arange(offsets[e], offsets[e + 1])[:, None]).any(1).all()
                assert torch.equal(span, span.sort().values), "within an expert, rows keep (source, token) order"
            received = torch.arange(tokens)[None, :] < got["recv_counts"][:, None]  # rows past the counts are stale
            assert seen == int((got["slot_positions"] >= 0)[received].sum())


def test_wrong_inputs_are_refused_before_launching():
    st = moe.MoE.create_all(2, alloc=sim.symmetric_scratch, tokens=4, hidden=8, topk=2, experts=4, dtype=torch.float32)[
        0
    ]
    x, idx, w = torch.zeros(4, 8), torch.zeros(4, 2, dtype=torch.int32), torch.zeros(4, 2)
    with pytest.raises(ValueError, match="x must be"):
        moe.dispatch(st, x.bfloat16(), idx, w)
    with pytest.raises(ValueError, match="topk_idx must be"):
        moe.dispatch(st, x, idx.float(), w)
    with pytest.raises(ValueError, match="not contiguous"):
        moe.dispatch(st, x, idx, torch.zeros(2, 4).t())
    with pytest.raises(ValueError, match=r"expert_out must be .* shape \(16, 8\)"):
        moe.combine(st, torch.zeros(7, 8))
    with pytest.raises(ValueError, match="multiple of world_size"):
        moe.MoE.create_all(3, alloc=sim.symmetric_scratch, tokens=4, hidden=8, topk=2, experts=4)


def test_moe_imports_without_the_transpiler_dependencies():
    code = "import sys, castpile.gpu.fused.moe; print(sorted(m for m in ('libcst', 'sympy') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def _transpiled_sample(tmp_path, name, strategy):
    """samples/NAME.py transpiled with ``strategy`` and imported from a file (Triton reads the source)."""
    src = ROOT / "samples" / f"{name}.py"
    path = tmp_path / f"{name}_{strategy}.py"
    path.write_bytes(castpile.transpile(src.read_bytes(), str(src), strategy=strategy))
    return import_file(path, f"{name}_{strategy}")


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_sample_scatters_rows_by_index(tmp_path, strategy):
    """samples/moe_dispatch.py: each token row lands at its own row on every rank it goes to, nothing else is written."""
    sample = _transpiled_sample(tmp_path, "moe_dispatch", strategy)
    world, n, hidden = 3, 7, 20
    gen = torch.Generator().manual_seed(3)
    x = torch.randint(-9, 10, (n, hidden), generator=gen).float()
    dests = torch.randint(0, 2, (n, world), generator=gen).int()
    rows = (dests.cumsum(0) - dests).int()  # packed in token order on each rank
    bufs = [torch.full((n + 1, hidden), 99.0) for _ in range(world)]
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    sample.dispatch_rows[(2,)](x, dests, rows, ptrs, bufs[0], n, H=hidden, WORLD=world, TB=4, HB=16)
    for d, buf in enumerate(bufs):
        toks = dests[:, d].nonzero().flatten()
        assert torch.equal(buf[: len(toks)], x[toks]) and (buf[len(toks) :] == 99).all(), d


def test_kernels_compile_for_sm90(tmp_path):
    """Realistic sizes (bf16, H=7168, K=8, E=64, W=2): the kernels and the sample (both strategies) compile."""
    module = "castpile.gpu.fused.moe_kernels_triton"
    base = {"H": 7168, "ROW": 7168, "K": 8, "WORLD": 2, "TB": moe.TOKEN_BLOCK, "HB": moe.HIDDEN_BLOCK}
    ptr = {
        "x": "*bf16",
        "recv_x": "*bf16",
        "comb": "*bf16",
        "expert_out": "*bf16",
        "out": "*bf16",
        "topk_weights": "*fp32",
        "topk_idx": "*i64",
        "rank": "i32",
        "T": "i32",
    }
    jobs = [
        Job(
            module,
            "moe_route",
            {
                "topk_idx": "*i64",
                "hist": "*i32",
                "T": "i32",
                "K": "constexpr",
                "E": "constexpr",
                "EL": "constexpr",
                "WORLD": "constexpr",
                "TB": "constexpr",
            },
            {"K": 8, "E": 64, "EL": 32, "WORLD": 2, "TB": moe.TOKEN_BLOCK},
        ),
    ]
    from castpile.gpu.fused import moe_kernels_triton as k

    for fn, extra in ((k.moe_dispatch, {"E": 64}), (k.moe_combine, {})):
        constexprs = {**{n: base[n] for n in base if n in fn.arg_names}, **extra}
        sig = {
            a: "constexpr" if a in constexprs else ptr.get(a, "*i64" if a.endswith("_ptrs") else "*i32")
            for a in fn.arg_names
        }
        jobs.append(Job(module, fn.__name__, sig, constexprs))
    sample = ROOT / "samples" / "moe_dispatch.py"
    for strategy in castpile.STRATEGIES:
        path = tmp_path / f"moe_dispatch_{strategy}.py"
        path.write_bytes(castpile.transpile(sample.read_bytes(), str(sample), strategy=strategy))
        sig = {
            "x": "*bf16",
            "dests": "*i32",
            "rows": "*i32",
            "buf_ptrs": "*i64",
            "example": "*bf16",
            "n": "i32",
            "H": "constexpr",
            "WORLD": "constexpr",
            "TB": "constexpr",
            "HB": "constexpr",
        }
        jobs.append(
            Job(path, "dispatch_rows", sig, {"H": 7168, "WORLD": 2, "TB": 8, "HB": 1024}, name=f"sample-{strategy}")
        )
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {n: r.error for n, r in results.items() if not r.ok}
    for name in ("moe_dispatch", "moe_combine"):
        ptx = results[name].ptx.read_text()
        assert "atom.global.release.sys.cas" in ptx and "atom.global.sys.acquire" in ptx, name
        assert "st.global.v4" in ptx, f"{name}: rows are stored 16 bytes at a time (align=16)"


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_combine_sample_pushes_weighted_partials_to_their_sources(tmp_path, strategy):
    """samples/moe_combine.py: every received row's partial lands at (me, token) of its source's buffer, nothing else."""
    sample = _transpiled_sample(tmp_path, "moe_combine", strategy)
    world, me, tokens, n, hidden, topk, pairs = 3, 1, 6, 7, 20, 3, 9
    gen = torch.Generator().manual_seed(5)
    expert_out = torch.randint(-9, 10, (pairs, hidden), generator=gen).float()
    slots = torch.randint(-1, pairs, (n, topk), generator=gen).int()
    weights = torch.randint(1, 9, (n, topk), generator=gen).float() / 8
    sources = torch.randperm(world * tokens, generator=gen)[:n]  # distinct (rank, token) pairs
    src_rank, src_token = (sources // tokens).int(), (sources % tokens).int()
    bufs = [torch.full((world * tokens, hidden), 99.0) for _ in range(world)]
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    sample.combine_rows[(3,)](
        expert_out, slots, weights, src_rank, src_token, ptrs, bufs[0], me, n, tokens, H=hidden, K=topk, RB=4, HB=16
    )
    expected = [torch.full((world * tokens, hidden), 99.0) for _ in range(world)]
    for r in range(n):
        partial = torch.zeros(hidden)
        for k in range(topk):
            if slots[r, k] >= 0:
                partial += weights[r, k] * expert_out[slots[r, k]]
        expected[src_rank[r]][me * tokens + src_token[r]] = partial
    for got, want in zip(bufs, expected):
        assert torch.equal(got, want)
