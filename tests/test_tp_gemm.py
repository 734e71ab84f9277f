"""Tensor-parallel GEMMs (castpile.gpu.fused.tp_gemm) in the CPU simulator, against torch references.

Data are small integers, so every product and sum is exact in fp32: results must
equal torch's bit for bit.  Tiles of 16 on
shapes that are not whole tiles (shards of 24 rows, K = 40, N = 48 with 32-wide
column tiles) exercise the edges; both operand paths (TMA descriptors, pointer
loads) run.  The simulator runs fp32 only: the Triton 3.6 interpreter's ``tl.dot``
multiplies bf16 operands as their raw 16-bit patterns.
"""

import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest
import torch

from castpile.gpu import sim
from castpile.gpu.fused import tp_gemm
from compile_sm90 import Job, compile_for_sm90, ptxas_for_sm90
from testkit import import_file

SHARD, K, N = 24, 40, 48
TILES = {
    "tma": tp_gemm.GemmConfig(16, 32, 16, 2, 4, 2, tma=True),
    "pointers": tp_gemm.GemmConfig(16, 32, 16, 2, 4, 2, tma=False),
}


def ints(gen, *shape):
    return torch.randint(-3, 4, shape, generator=gen).float()


# -- the GEMM alone --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(TILES))
@pytest.mark.parametrize("m,k,n,blocks", [(40, 40, 48, 3), (16, 16, 32, 1), (72, 24, 40, 5)])
def test_matmul_matches_torch(path, m, k, n, blocks):
    """Ragged M, K and N, more tiles than blocks (the persistent loop) or exactly one; fp32 exact."""
    gen = torch.Generator().manual_seed(m * 1000 + k + n)
    a, b = ints(gen, m, k), ints(gen, k, n)
    out = torch.full((m, n), float("nan"))
    assert tp_gemm.matmul(a, b, out, config=TILES[path], blocks=blocks) is out
    assert torch.equal(out, a @ b)


def test_default_config():
    assert tp_gemm.default_config(4096).block_n == 256 and tp_gemm.default_config(4096).tma
    assert tp_gemm.default_config(256).block_n == 128 and not tp_gemm.default_config(256).tma
    assert not tp_gemm.default_config(256, "matmul_reduce_scatter").tma
    assert tp_gemm.default_config(256, "all_gather_matmul").tma


# -- all-gather + GEMM -----------------------------------------------------------------------------------------


def _ag_states(world, path, **options):
    options = {"blocks": 4, "comm_blocks": 2, "chunk_rows": 8, "copy_block": 64, "config": TILES[path], **options}
    states = tp_gemm.AllGatherMatmul.create_all(
        world, alloc=sim.symmetric_scratch, m=world * SHARD, k=K, n=N, dtype=torch.float32, **options
    )
    for s in states:
        s.gathered.tensor.fill_(float("nan"))  # whatever a GEMM block reads before its chunk arrived shows
    return states


def _ag_run(states, world, calls, seed):
    """``calls`` back-to-back calls on every rank, new data each, ranks out of step; (outputs, inputs) per call."""
    gen = torch.Generator().manual_seed(seed)
    data = [
        ([ints(gen, SHARD, K) for _ in range(world)], [ints(gen, K, N) for _ in range(world)]) for _ in range(calls)
    ]

    def body(rank):
        rng = random.Random(seed * 31 + rank)
        state, outs = states[rank], []
        for call, (shards, bs) in enumerate(data):
            time.sleep(rng.uniform(0, 0.2))
            out = torch.full((world * SHARD, N), float("nan"))
            if call % 2:  # the shard written where it is gathered, no copy
                state.a_shard.copy_(shards[rank])
                tp_gemm.all_gather_matmul(state, None, bs[rank], out)
            else:
                tp_gemm.all_gather_matmul(state, shards[rank], bs[rank], out)
            outs.append((out, state.gathered.tensor.clone()))
        return outs

    return sim.run(body, world, timeout=600), data


@pytest.mark.parametrize("path", sorted(TILES))
@pytest.mark.parametrize("world", [2, 3, 4])
def test_all_gather_matmul_matches_torch(world, path):
    """Three calls in a row with fresh data, random skew; flags and barrier slots zero afterwards."""
    states = _ag_states(world, path)
    outs, data = _ag_run(states, world, 3, seed=world)
    for call, (shards, bs) in enumerate(data):
        a = torch.cat(shards)
        for rank in range(world):
            out, gathered = outs[rank][call]
            assert torch.equal(gathered, a), f"call {call}: rank {rank}'s gathered A"
            assert torch.equal(out, a @ bs[rank]), f"call {call}: rank {rank}"
    for s in states:
        assert int(s.flags.tensor.abs().sum()) == 0 and int(s.pad.tensor.abs().sum()) == 0


@pytest.mark.parametrize(
    "options",
    [
        {"chunk_rows": 5, "comm_blocks": 3, "blocks": 5},  # chunks cut across row tiles, several per block
        {"chunk_rows": 24, "comm_blocks": 2, "blocks": 3},  # one chunk per shard (one sender idles), one GEMM block
        {"chunk_rows": 16, "comm_blocks": 2, "blocks": 9},  # more GEMM blocks than tiles: the grid shrinks
        {
            "chunk_rows": 8,
            "comm_blocks": 2,
            "blocks": 5,  # groups of row tiles that straddle shards
            "config": tp_gemm.GemmConfig(16, 32, 16, 8, 4, 2),
        },
    ],
    ids=["small-chunks", "one-chunk", "spare-blocks", "straddling-groups"],
)
def test_all_gather_chunking(options):
    world = 3
    states = _ag_states(world, "tma", **options)
    assert states[0].consumers == min(options["blocks"] - options["comm_blocks"], world * 2 * 2)
    outs, data = _ag_run(states, world, 2, seed=17)
    for call, (shards, bs) in enumerate(data):
        for rank in range(world):
            assert torch.equal(outs[rank][call][0], torch.cat(shards) @ bs[rank]), (call, rank)
    assert all(int(s.flags.tensor.abs().sum()) == 0 for s in states)


@pytest.mark.parametrize("path", sorted(TILES))
@pytest.mark.parametrize(
    "world,options",
    [
        (2, {"k_segment": 16, "comm_blocks": 2, "blocks": 5}),  # K = 40: segments of 16, 16, 8 columns
        (3, {"k_segment": 32, "comm_blocks": 3, "blocks": 4}),  # a last segment of 8; parts of 8 rows
        (4, {"k_segment": 48, "comm_blocks": 5, "blocks": 7}),  # one segment past K; parts of 5 rows, the last of 4
    ],
    ids=["w2", "w3", "w4"],
)
def test_all_gather_column_chunks(world, options, path):
    """Chunks of columns (``k_segment``): peer tiles multiplied segment by segment as they arrive; exact."""
    states = _ag_states(world, path, chunk_rows=None, **options)
    assert states[0].k_segment == options["k_segment"] and states[0].chunk_rows == SHARD
    assert states[0].chunks == -(-K // options["k_segment"]) * options["comm_blocks"]
    outs, data = _ag_run(states, world, 2, seed=world + 40)
    for call, (shards, bs) in enumerate(data):
        for rank in range(world):
            out, gathered = outs[rank][call]
            assert torch.equal(gathered, torch.cat(shards)), (call, rank)
            assert torch.equal(out, torch.cat(shards) @ bs[rank]), (call, rank)
    assert all(int(s.flags.tensor.abs().sum()) == 0 and int(s.pad.tensor.abs().sum()) == 0 for s in states)


@pytest.mark.parametrize("path", sorted(TILES))
@pytest.mark.parametrize("world", [2, 3, 4])
def test_all_gather_one_wave(world, path):
    """A block per tile, local-tile blocks sending slices (shards of 16 rows: one row tile; N = 48: 2 column tiles)."""
    shard = 16
    states = tp_gemm.AllGatherMatmul.create_all(
        world,
        alloc=sim.symmetric_scratch,
        m=world * shard,
        k=K,
        n=N,
        dtype=torch.float32,
        config=TILES[path],
        blocks=2 * world,
        copy_block=64,
        one_wave=True,
    )
    assert states[0].one_wave and states[0].comm_blocks == 2 and states[0].consumers == 2 * (world - 1)
    assert states[0].stripe == 32 and states[0].segment == 1  # K = 40 in stripes of 32 (the second one short)
    for s in states:
        s.gathered.tensor.fill_(float("nan"))
    gen = torch.Generator().manual_seed(world + 60)
    data = [([ints(gen, shard, K) for _ in range(world)], [ints(gen, K, N) for _ in range(world)]) for _ in range(3)]

    def body(rank):
        rng = random.Random(rank)
        outs = []
        for shards, bs in data:
            time.sleep(rng.uniform(0, 0.2))
            outs.append(tp_gemm.all_gather_matmul(states[rank], shards[rank], bs[rank]).clone())
        return outs

    for rank, outs in enumerate(sim.run(body, world, timeout=600)):
        for call, (shards, bs) in enumerate(data):
            assert torch.equal(outs[call], torch.cat(shards) @ bs[rank]), (call, rank)
    assert all(int(s.flags.tensor.abs().sum()) == 0 and int(s.pad.tensor.abs().sum()) == 0 for s in states)


def test_the_all_gather_mode_is_chosen_by_shape():
    """On GPUs by default, where a row tile holds a shard: one wave if every tile has a block, else column chunks."""

    def on_gpu(m, n, **options):
        return tp_gemm.AllGatherMatmul.plan(
            2, torch.device("cuda"), m=m, k=8192, n=n, dtype=torch.bfloat16, blocks=132, **options
        )

    def on_cpu(**options):
        return tp_gemm.AllGatherMatmul.plan(
            2, torch.device("cpu"), m=256, k=64, n=64, dtype=torch.float32, blocks=4, **options
        )

    one_wave = on_gpu(256, 8192)
    assert one_wave.one_wave and one_wave.comm_blocks == 64 and one_wave.consumers == 64
    assert one_wave.stripe == 128 and one_wave.segment == 64 // tp_gemm.ONE_WAVE_SEGMENTS
    small = on_gpu(256, 8192 * 3)  # 384 tiles
    large = on_gpu(4096, 8192)
    assert not small.one_wave and not large.one_wave
    assert small.k_segment == tp_gemm.K_SEGMENT and small.chunks == 8192 // tp_gemm.K_SEGMENT * 4
    assert large.k_segment == 0 and large.chunk_rows == 128
    rows = on_gpu(256, 8192, k_segment=0)
    assert rows.k_segment == 0 and rows.chunks == 8  # asked for: chunks of 16 rows
    with pytest.raises(ValueError, match=r"one_wave needs .* \(384 tiles, 132 blocks\)"):
        on_gpu(256, 8192 * 3, one_wave=True)
    with pytest.raises(ValueError, match=r"chunk_rows .* or k_segment .*, not both"):
        on_cpu(chunk_rows=8, k_segment=16)
    with pytest.raises(ValueError, match=r"k_segment \(24\) must be 0 .* multiple of the tile's block_k \(16\)"):
        on_cpu(config=TILES["tma"], k_segment=24)


def test_all_gather_waits_for_a_late_rank():
    """Rank 1 calls a second late: rank 0 must wait for its shard (its buffer starts NaN), not read ahead."""
    world = 2
    states = _ag_states(world, "tma")
    gen = torch.Generator().manual_seed(3)
    shards, b = [ints(gen, SHARD, K) for _ in range(world)], ints(gen, K, N)

    def body(rank):
        if rank == 1:
            time.sleep(1.0)
        return tp_gemm.all_gather_matmul(states[rank], shards[rank], b)

    for out in sim.run(body, world, timeout=300):
        assert torch.equal(out, torch.cat(shards) @ b)


# -- GEMM + reduce-scatter -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(TILES))
@pytest.mark.parametrize("world,blocks", [(2, 4), (2, 3), (3, 5), (4, 3)])
def test_matmul_reduce_scatter_matches_torch(world, blocks, path):
    """Three calls with fresh data and random skew; grids that divide the tiles and grids that do not.

    Reference: each rank's product rounded to the dtype (exact here), summed
    over ranks, rows chunk ``rank``.  Scratch starts NaN: a tile read before it
    arrived shows.
    """
    m = world * SHARD
    states = tp_gemm.MatmulReduceScatter.create_all(
        world, alloc=sim.symmetric_scratch, m=m, k=K, n=N, dtype=torch.float32, config=TILES[path], blocks=blocks
    )
    assert states[0].blocks == blocks
    for s in states:
        s.scratch.tensor.fill_(float("nan"))
    gen = torch.Generator().manual_seed(100 + world * 10 + blocks)
    data = [([ints(gen, m, K) for _ in range(world)], [ints(gen, K, N) for _ in range(world)]) for _ in range(3)]

    def body(rank):
        rng = random.Random(rank + 7 * world)
        outs = []
        for a_s, b_s in data:
            time.sleep(rng.uniform(0, 0.2))
            out = torch.full((SHARD, N), float("nan"))
            tp_gemm.matmul_reduce_scatter(states[rank], a_s[rank], b_s[rank], out)
            outs.append(out)
        return outs

    outs = sim.run(body, world, timeout=600)
    for call, (a_s, b_s) in enumerate(data):
        total = sum(a_s[r] @ b_s[r] for r in range(world))
        for rank in range(world):
            assert torch.equal(outs[rank][call], total[rank * SHARD : (rank + 1) * SHARD]), (call, rank)
    for s in states:
        assert int(s.flags.tensor.abs().sum()) == 0 and int(s.pad.tensor.abs().sum()) == 0


# -- arguments -------------------------------------------------------------------------------------------------


def test_bad_arguments_are_reported():
    with pytest.raises(ValueError, match="m \\(10\\) a multiple of world_size \\(4\\)"):
        tp_gemm.AllGatherMatmul.create_all(4, alloc=sim.symmetric_scratch, m=10, k=8, n=8)
    with pytest.raises(ValueError, match="at least 2 ranks"):
        tp_gemm.MatmulReduceScatter.create_all(1, alloc=sim.symmetric_scratch, m=8, k=8, n=8)
    ag = tp_gemm.AllGatherMatmul.create_all(2, alloc=sim.symmetric_scratch, m=32, k=16, n=16, dtype=torch.float32)[0]
    with pytest.raises(ValueError, match=r"b must be a contiguous torch.float32 tensor of shape \(16, 16\)"):
        tp_gemm.all_gather_matmul(ag, None, torch.ones(16, 8))
    with pytest.raises(ValueError, match="a_shard must be"):
        tp_gemm.all_gather_matmul(ag, torch.ones(8, 16), torch.ones(16, 16))
    rs = tp_gemm.MatmulReduceScatter.create_all(2, alloc=sim.symmetric_scratch, m=32, k=16, n=16, dtype=torch.float32)[
        0
    ]
    with pytest.raises(ValueError, match="a must be"):
        tp_gemm.matmul_reduce_scatter(rs, torch.ones(32, 16).t(), torch.ones(16, 16))
    with pytest.raises(ValueError, match="out must be"):
        tp_gemm.matmul_reduce_scatter(rs, torch.ones(32, 16), torch.ones(16, 16), torch.ones(32, 16))
    # Rows that are not whole 16 bytes cannot be TMA descriptors: the pointer path is taken.
    narrow = tp_gemm.AllGatherMatmul.create_all(2, alloc=sim.symmetric_scratch, m=32, k=6, n=16, dtype=torch.float32)
    assert not narrow[0].config.tma


# -- sm_90 ------------------------------------------------------------------------------------------------------

#: Where each kernel is: the GEMM alone in plain Triton, the fused ones transpiled.
MODULES = {
    "matmul": "castpile.gpu.fused.tp_gemm.gemm_kernels",
    "all_gather_matmul": "castpile.gpu.fused.tp_gemm.all_gather_kernels_triton",
    "matmul_reduce_scatter": "castpile.gpu.fused.tp_gemm.reduce_scatter_kernels_triton",
}
TILE = {"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}
#: The reduce-scatter kernel's parameters (bf16 operands).
RS_SIGNATURE = {
    "a": "*bf16",
    "b": "*bf16",
    "out": "*bf16",
    "scratch": "*bf16",
    "scratch_ptrs": "*i64",
    "flags": "*i32",
    "flag_ptrs": "*i64",
    "pad": "*i32",
    "pad_ptrs": "*i64",
    "rank": "i32",
    "Ms": "i32",
    "N": "i32",
}


def _job(kernel, signature, constexprs, name):
    """A compile job specialised as the JIT does 16-byte aligned pointers and sizes that are multiples of 16."""
    aligned = {
        i: [["tt.divisibility", 16]]
        for i, (p, t) in enumerate(signature.items())
        if t.startswith("*") or p in ("M", "N", "Ms", "chunk_rows")
    }
    return Job(MODULES[kernel], kernel, signature, constexprs, attrs=aligned, name=name)


def test_kernels_compile_for_sm90(tmp_path):
    """bf16 at the benchmark's sizes, TMA and pointer operands, rank 1 (which the JIT makes a constexpr)."""
    jobs = []
    mm = {
        "a": "*bf16",
        "b": "*bf16",
        "c": "*bf16",
        "M": "i32",
        "N": "i32",
        **dict.fromkeys(("K", "BM", "BN", "BK", "GROUP_M", "TMA", "FLATTEN"), "constexpr"),
    }
    for tma in (True, False):
        for flatten in (False, True):
            jobs.append(
                _job(
                    "matmul",
                    mm,
                    {"K": 8192, **TILE, "TMA": tma, "FLATTEN": flatten},
                    f"matmul-{'tma' if tma else 'pointers'}{'-flat' if flatten else ''}",
                )
            )
    ag = {
        "a": "*bf16",
        "a_peers": "*i64",
        "b": "*bf16",
        "out": "*bf16",
        "flags": "*i32",
        "flag_peers": "*i64",
        "pad": "*i32",
        "pad_ptrs": "*i64",
        "rank": "i32",
        "Ms": "i32",
        "N": "i32",
        "chunk_rows": "i32",
    }
    ag_const = {
        "K": 8192,
        "WORLD": 2,
        **TILE,
        "COMM_BLOCKS": 4,
        "COPY_BLOCK": tp_gemm.COPY_PER_WARP * 4,
        "CONSUMERS": 128,
        "K_SEGMENT": 0,
        "ONE_WAVE": False,
        "STRIPE": 0,
        "SEGMENT": 1,
    }
    rs = RS_SIGNATURE
    for rank in (0, 1):
        sig = dict(ag, rank="constexpr") if rank else ag
        flags = {"TMA": True, "TMA_STORE": True, "PROXY_FENCE": True, "TMA_A": True}
        extra = {"rank": 1} if rank else {}
        jobs.append(
            _job(
                "all_gather_matmul",
                {**sig, **dict.fromkeys([*ag_const, *flags], "constexpr")},
                {**ag_const, **flags, **extra},
                f"ag-tma-rank{rank}",
            )
        )
        jobs.append(
            _job(
                "all_gather_matmul",
                {**sig, **dict.fromkeys([*ag_const, *flags], "constexpr")},
                {**ag_const, **flags, **extra, "K_SEGMENT": tp_gemm.K_SEGMENT},
                f"ag-tma-kseg-rank{rank}",
            )
        )
        jobs.append(
            _job(
                "all_gather_matmul",
                {**sig, **dict.fromkeys([*ag_const, *flags], "constexpr")},
                {**ag_const, **flags, **extra, "COMM_BLOCKS": 64, "ONE_WAVE": True, "STRIPE": 128, "SEGMENT": 16},
                f"ag-tma-onewave-rank{rank}",
            )
        )
        ragged = {"TMA": True, "TMA_STORE": False, "PROXY_FENCE": True, "TMA_A": False}
        for shape, options in {
            "rows": {},
            "kseg": {"K_SEGMENT": tp_gemm.K_SEGMENT},
            "onewave": {"COMM_BLOCKS": 64, "ONE_WAVE": True, "STRIPE": 128, "SEGMENT": 16},
        }.items():  # shards that are not whole row tiles: B through TMA, A through pointers
            jobs.append(
                _job(
                    "all_gather_matmul",
                    {**sig, **dict.fromkeys([*ag_const, *ragged], "constexpr")},
                    {**ag_const, **ragged, **extra, **options},
                    f"ag-tma-ragged-{shape}-rank{rank}",
                )
            )
        sig = dict(rs, rank="constexpr") if rank else rs
        jobs.append(
            _job(
                "matmul_reduce_scatter",
                {**sig, **dict.fromkeys(("K", "WORLD", *TILE, "TMA"), "constexpr")},
                {"K": 4096, "WORLD": 2, **TILE, "TMA": True, **extra},
                f"rs-tma-rank{rank}",
            )
        )
    flags = {"TMA": False, "TMA_STORE": False, "PROXY_FENCE": False, "TMA_A": False}
    jobs.append(
        _job(
            "all_gather_matmul",
            {**ag, **dict.fromkeys([*ag_const, *flags], "constexpr")},
            {**ag_const, "WORLD": 4, **flags},
            "ag-pointers-w4",
        )
    )
    jobs.append(
        _job(
            "all_gather_matmul",
            {**ag, **dict.fromkeys([*ag_const, *flags], "constexpr")},
            {**ag_const, **flags, "COMM_BLOCKS": 64, "ONE_WAVE": True, "STRIPE": 128, "SEGMENT": 16},
            "ag-pointers-onewave",
        )
    )  # M = 256's default
    jobs.append(
        _job(
            "matmul_reduce_scatter",
            {**rs, **dict.fromkeys(("K", "WORLD", *TILE, "TMA"), "constexpr")},
            {"K": 4096, "WORLD": 4, **TILE, "TMA": False},
            "rs-pointers-w4",
        )
    )
    results = compile_for_sm90(jobs, tmp_path)
    assert all(r.ok for r in results.values()), {n: r.error for n, r in results.items() if not r.ok}
    ptx = {name: r.ptx.read_text() for name, r in results.items()}
    for name, text in ptx.items():
        assert "wgmma.mma_async" in text, f"{name}: tensor-core MMA"
        tma = "pointers" not in name
        assert ("cp.async.bulk.tensor.2d" in text) == tma, f"{name}: operands through TMA"
        if not tma:
            assert "cp.async.cg.shared.global" in text, f"{name}: pipelined pointer loads"
        if not name.startswith("matmul"):
            assert "atom.global.release.sys.cas" in text, f"{name}: the barrier"
            assert "atom.global.sys.release.exch" in text and "atom.global.sys.acquire" in text, f"{name}: flags"
            assert "st.global.v4" in text, f"{name}: 16-byte stores to peers"
    for name in ("ag-tma-rank0", "ag-tma-rank1", "ag-tma-kseg-rank0", "ag-tma-kseg-rank1", "ag-tma-onewave-rank0"):
        assert "fence.proxy.async.global" in ptx[name]
    ptxas = ptxas_for_sm90()
    spills = {}
    for name, r in results.items():  # a spilling copy loop or epilogue would cost the GEMM its registers
        report = subprocess.run(
            [ptxas, "-arch=sm_90a", "-v", str(r.ptx), "-o", os.devnull], capture_output=True, text=True, check=True
        )
        spills[name] = "0 bytes spill stores" not in report.stdout + report.stderr
    # The pointer fallback's reduce-scatter for 4 ranks spills a little at these jobs' 4 warps (a 128 x 128 fp32
    # tile in 128 threads); the TMA kernels, the default, must not.
    assert [name for name, spilled in spills.items() if spilled and "pointers" not in name] == []


@pytest.mark.parametrize("script", ["diag_ag_onewave", "diag_rs_stores"])
def test_the_diagnostics_still_find_the_lines_they_replace(script, monkeypatch):
    """benchmarks/diag_*.py make variants by replacing lines of the generated kernel module: each line is still there
    (else the script would stop on the GPU), and each variant differs from the library's text."""
    bench = Path(__file__).parents[1] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    module = import_file(bench / f"{script}.py", script)
    source = Path(module.lib.__file__).read_text()  # the generated module the script varies
    made = module.variants(source)
    assert made and all(text != source for text in made.values())
    for text in made.values():
        compile(text, script, "exec")


def test_reduce_scatter_at_the_default_wide_tile_does_not_spill_at_any_world_size(tmp_path, monkeypatch):
    """From 1024 rows the reduce-scatter runs 128 x 256 tiles in 8 warps; its epilogue sums W - 1 peers' partials.

    Unrolled over the peers, the loads of all of them were live at once: at W = 8, 208 bytes of local memory per
    thread, 1272 in rank 1's copy (the JIT makes ``rank == 1`` a constant), as the H200 reported
    (docs/data/local-memory-proof.json); at W = 4, 112 and 544 (docs/data/rs-epilogue-ptxas.txt). A kernel that spills costs its epilogue, and with
    ranks on one GPU a launch that grows the local memory waits for the device (castpile.gpu.local_memory).
    """
    bench = Path(__file__).parents[1] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    diag = import_file(bench / "diag_rs_registers.py", "diag_rs_registers")  # W = 2, 4, 8, ranks 0 and 1
    results = compile_for_sm90(diag.jobs(MODULES["matmul_reduce_scatter"]), tmp_path, processes=2)
    assert all(r.ok for r in results.values()), {n: r.error for n, r in results.items() if not r.ok}
    reports = {name: int(re.search(r"(\d+) bytes stack frame", diag.ptxas_v(r.ptx))[1]) for name, r in results.items()}
    assert reports == dict.fromkeys(results, 0), "local memory per thread, bytes"
