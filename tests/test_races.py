"""The race checker (docs/races.md) on simulated ranks: every seeded ordering bug of tests/kernels_races.py is
found at W = 2, 3, 4, 8 with both of its lines and the ordering that is missing; the fixed twins run clean and
exact against torch; the report does not depend on which rank ran first."""

from pathlib import Path

import pytest
import torch

import castpile
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import padded, transpiled_module

pytestmark = pytest.mark.sim

KERNELS = Path(__file__).with_name("kernels_races.py")
HERE = Path(__file__).name
N = 6
BLOCK = 8
WORLDS = [2, 3, 4, 8]


def line(marker: str, path: Path = KERNELS) -> int:
    """The line of ``path`` that carries ``# race: <marker>``."""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if f"# race: {marker}" in text:
            return number
    raise AssertionError(f"no line marked {marker!r} in {path.name}")


#: The seeded bugs run at every W, under the strategies in turn; the clean twins under both.
BUGGY = [
    pytest.param(w, castpile.STRATEGIES[i % 2], id=f"{w}-{castpile.STRATEGIES[i % 2]}") for i, w in enumerate(WORLDS)
]
CLEAN = [pytest.param(w, s, id=f"{w}-{s}") for w in (2, 3, 4) for s in castpile.STRATEGIES]


@pytest.fixture(scope="module")
def transpiled_kernels(tmp_path_factory):
    made = {}

    def kernels(strategy):
        if strategy not in made:
            made[strategy] = transpiled_module(KERNELS, strategy, tmp_path_factory.mktemp(f"races-{strategy}"))
        return made[strategy]

    return kernels


@pytest.fixture
def kernels(transpiled_kernels, strategy):
    return transpiled_kernels(strategy)


def site(kernels, marker: str) -> str:
    return f"{Path(kernels.__file__).name}:{line(marker)}"


def races_of(body, world: int, **options) -> list:
    """The races ``sim.run(body, world, races=True)`` reports (none: its results are checked by the caller)."""
    with pytest.raises(sim.RaceError) as caught:
        sim.run(body, world, races=True, timeout=120, **options)
    return caught.value.races


def pair(race) -> set[str]:
    """The two ``file:line`` a race names."""
    return {Path(race.first.site.split(" ")[0]).name, Path(race.second.site.split(" ")[0]).name}


def inputs(world: int, seed: int, shape=(N,)) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(-8, 9, shape, generator=g).float() for _ in range(world)]


# -- one-shot all-reduce called twice ---------------------------------------------------------------------------
def one_shot_body(kernels, world, closing):
    bufs = sim.symmetric_scratch(world, (N,), torch.float32, name="buffer")
    pads = sim.symmetric_scratch(world, (2 * world,), torch.int32, name="signal_pad")
    calls = [inputs(world, 1), inputs(world, 2)]

    def body(rank):
        outs = []
        for call in calls:
            bufs[rank].tensor.copy_(call[rank])  # race: host copy
            out = torch.empty(BLOCK)
            kernels.one_shot[(1,)](
                bufs[rank].tensor,
                bufs[rank].ptrs,
                pads[rank].tensor,
                pads[rank].ptrs,
                out,
                N,
                rank,
                world,
                padded(world),
                BLOCK,
                closing,
            )
            outs.append(out[:N].clone())
        return outs

    return body, [torch.stack(call).sum(0) for call in calls]


@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_a_one_shot_all_reduce_without_its_closing_barrier_races_with_the_next_call(kernels, world):
    body, _ = one_shot_body(kernels, world, closing=False)
    found = races_of(body, world)
    wanted = {site(kernels, "one-shot load"), f"{HERE}:{line('host copy', Path(__file__))}"}
    hits = [r for r in found if pair(r) == wanted]
    assert hits, "\n".join(map(str, found))
    race = hits[0]
    assert {race.first.kind, race.second.kind} == {"load", "host copy_"}, race
    assert "'s buffer[" in race.element and race.missing.startswith("nothing orders"), race


@pytest.mark.parametrize(("world", "strategy"), CLEAN)
def test_a_one_shot_all_reduce_with_its_closing_barrier_is_clean_and_exact(kernels, world):
    body, expected = one_shot_body(kernels, world, closing=True)
    for outs in sim.run(body, world, races=True, timeout=120):
        assert all(torch.equal(o, e) for o, e in zip(outs, expected))


# -- publish: a row into every rank, a signal, a wait, reads ----------------------------------------------------
def publish_body(kernels, world, signal_sem="release", scope="sys", early=False):
    bufs = sim.symmetric_scratch(world, (world, N), torch.float32, name="buffer")
    pads = sim.symmetric_scratch(world, (2 * world,), torch.int32, name="signal_pad")
    rows = inputs(world, 3)

    def body(rank):
        out = torch.full((world, N), float("nan"))
        kernels.publish[(1,)](
            bufs[rank].tensor,
            bufs[rank].ptrs,
            pads[rank].tensor,
            pads[rank].ptrs,
            rows[rank],
            out,
            N,
            rank,
            world,
            padded(world),
            BLOCK,
            signal_sem,
            scope,
            early,
        )
        return out

    return body, torch.stack(rows)


@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_a_relaxed_signal_orders_nothing_its_launch_wrote(kernels, world):
    body, _ = publish_body(kernels, world, signal_sem="relaxed")
    found = races_of(body, world)
    wanted = {site(kernels, "publish store"), site(kernels, "publish load")}
    hits = [r for r in found if pair(r) == wanted]
    assert hits, "\n".join(map(str, found))
    assert "relaxed" in hits[0].missing and site(kernels, "publish signal") in hits[0].missing, hits[0]


@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_a_signal_before_the_store_it_announces_races(kernels, world):
    body, _ = publish_body(kernels, world, early=True)
    found = races_of(body, world)
    wanted = {site(kernels, "late store"), site(kernels, "publish load")}
    hits = [r for r in found if pair(r) == wanted]
    assert hits, "\n".join(map(str, found))
    assert {hits[0].first.kind, hits[0].second.kind} == {"store", "load"}, hits[0]


@pytest.mark.parametrize("scope", ["gpu", "cta"])
@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_a_scope_narrower_than_sys_orders_nothing_across_ranks(kernels, world, scope):
    body, _ = publish_body(kernels, world, scope=scope)
    found = races_of(body, world)
    wanted = {site(kernels, "publish store"), site(kernels, "publish load")}
    hits = [r for r in found if pair(r) == wanted]
    assert hits, "\n".join(map(str, found))
    assert f'scope="{scope}"' in hits[0].missing and "across ranks" in hits[0].missing, hits[0]


@pytest.mark.parametrize(("world", "strategy"), CLEAN)
def test_a_release_signal_before_an_acquire_wait_is_clean_and_exact(kernels, world):
    body, expected = publish_body(kernels, world)
    assert all(torch.equal(out, expected) for out in sim.run(body, world, races=True, timeout=120))


# -- two-shot by pushes --------------------------------------------------------------------------------------------
def push_body(kernels, world, middle):
    bufs = sim.symmetric_scratch(world, (world, N), torch.float32, name="buffer")
    scratch = sim.symmetric_scratch(world, (world, N), torch.float32, name="scratch")
    pads = sim.symmetric_scratch(world, (2 * world,), torch.int32, name="signal_pad")
    xs = inputs(world, 4, (world, N))

    def body(rank):
        kernels.push_sum[(1,)](
            bufs[rank].tensor,
            bufs[rank].ptrs,
            scratch[rank].tensor,
            scratch[rank].ptrs,
            pads[rank].tensor,
            pads[rank].ptrs,
            xs[rank],
            N,
            rank,
            world,
            padded(world),
            BLOCK,
            middle,
        )
        return bufs[rank].tensor.clone()

    return body, torch.stack(xs).sum(0)


@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_a_two_shot_without_the_barrier_between_its_phases_races(kernels, world):
    body, _ = push_body(kernels, world, middle=False)
    found = races_of(body, world)
    wanted = {site(kernels, "push store"), site(kernels, "push load")}
    hits = [r for r in found if pair(r) == wanted]
    assert hits, "\n".join(map(str, found))
    assert "'s scratch[" in hits[0].element, hits[0]


@pytest.mark.parametrize(("world", "strategy"), CLEAN)
def test_a_two_shot_with_its_middle_barrier_is_clean_and_exact(kernels, world):
    body, expected = push_body(kernels, world, middle=True)
    assert all(torch.equal(out, expected) for out in sim.run(body, world, races=True, timeout=120))


# -- two programs of one launch ----------------------------------------------------------------------------------
def neighbour_body(kernels, world, split):
    bufs = sim.symmetric_scratch(world, (2 * BLOCK,), torch.float32, name="buffer")
    pads = sim.symmetric_scratch(world, (2 * world,), torch.int32, name="signal_pad")

    def body(rank):
        kernels.neighbour_put[(2,)](
            bufs[rank].tensor,
            bufs[rank].ptrs,
            pads[rank].tensor,
            pads[rank].ptrs,
            2 * BLOCK,
            rank,
            world,
            padded(world),
            BLOCK,
            split,
        )
        return bufs[rank].tensor.clone()

    return body


@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_two_programs_of_one_launch_storing_one_peer_element_race(kernels, world):
    found = races_of(neighbour_body(kernels, world, split=False), world)
    hits = [r for r in found if pair(r) == {site(kernels, "neighbour store")}]
    assert hits, "\n".join(map(str, found))
    race = hits[0]
    assert race.first.rank == race.second.rank and race.first.program != race.second.program, race
    assert "two programs of one launch" in race.missing, race


@pytest.mark.parametrize(("world", "strategy"), CLEAN)
def test_two_programs_storing_halves_are_clean_and_exact(kernels, world):
    outs = sim.run(neighbour_body(kernels, world, split=True), world, races=True, timeout=120)
    for rank, out in enumerate(outs):
        assert torch.equal(out, torch.full((2 * BLOCK,), float((rank - 1) % world + 1)))


# -- a wait satisfied by the last call's flag --------------------------------------------------------------------
def ring_body(kernels, world, epochs):
    bufs = sim.symmetric_scratch(world, (N,), torch.float32, name="buffer")
    pads = sim.symmetric_scratch(world, (world + 1,), torch.int32, name="signal_pad")
    calls = [inputs(world, 5 + i) for i in range(len(epochs))]

    def body(rank):
        outs = []
        for epoch, xs in zip(epochs, calls):
            out = torch.full((N,), float("nan"))
            kernels.epoch_ring[(1,)](
                bufs[rank].tensor,
                bufs[rank].ptrs,
                pads[rank].tensor,
                pads[rank].ptrs,
                xs[rank],
                out,
                epoch,
                N,
                rank,
                world,
                padded(world),
                BLOCK,
            )
            outs.append(out)
        return outs

    return body, calls


@pytest.mark.parametrize(("world", "strategy"), BUGGY)
def test_a_wait_passed_by_the_last_call_s_flag_races(kernels, world):
    body, _ = ring_body(kernels, world, epochs=[1, 1])
    found = races_of(body, world)
    wanted = {site(kernels, "ring store"), site(kernels, "ring load")}
    hits = [r for r in found if pair(r) == wanted]
    assert hits, "\n".join(map(str, found))
    assert {hits[0].first.kind, hits[0].second.kind} == {"store", "load"}, hits[0]


@pytest.mark.parametrize(("world", "strategy"), CLEAN)
def test_an_advancing_epoch_is_clean_and_exact(kernels, world):
    body, calls = ring_body(kernels, world, epochs=[1, 2])
    for rank, outs in enumerate(sim.run(body, world, races=True, timeout=120)):
        for out, xs in zip(outs, calls):
            assert torch.equal(out, xs[(rank - 1) % world])


# -- the report does not depend on who ran first -----------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["loop"])
@pytest.mark.parametrize("late", [0, 1, 2])
def test_the_report_is_the_same_whichever_rank_starts_last(kernels, late):
    world = 3
    reports = []
    for delays in ({}, {late: 0.5}):
        body, _ = one_shot_body(kernels, world, closing=False)
        first = races_of(body, world, start_delays=delays)
        body, _ = ring_body(kernels, world, epochs=[1, 1])
        second = races_of(body, world, start_delays=delays)
        reports.append({pair_key(r) for r in first + second})
    assert reports[0] == reports[1]


def pair_key(race) -> frozenset:
    """A race by the two accesses it names (line and kind), whichever of them a run met first."""
    return frozenset({(race.first.site, race.first.kind), (race.second.site, race.second.kind)})


# -- every kernel the tests run, compiled for sm_90 ---------------------------------------------------------------
#: Each kernel of tests/kernels_races.py with the constexprs the tests above give it (W = 3 and 4 alike: WP = 4).
COMPILES = {
    "meet": [
        {"WORLD": 3, "WP": 4, "SIGNAL_SEM": s, "WAIT_SEM": w, "SCOPE": "sys"}
        for s, w in (("relaxed", "relaxed"), ("release", "acquire"))
    ],
    "one_shot": [{"WORLD": 3, "WP": 4, "BLOCK": BLOCK, "CLOSING": c} for c in (False, True)],
    "publish": [
        {"WORLD": 4, "WP": 4, "BLOCK": BLOCK, "SIGNAL_SEM": sem, "SCOPE": scope, "EARLY": early}
        for sem, scope, early in (
            ("release", "sys", False),
            ("relaxed", "sys", False),
            ("release", "sys", True),
            ("release", "gpu", False),
            ("release", "cta", False),
        )
    ],
    "push_sum": [{"WORLD": 3, "WP": 4, "BLOCK": BLOCK, "MIDDLE": m} for m in (False, True)],
    "neighbour_put": [{"WORLD": 3, "WP": 4, "BLOCK": BLOCK, "SPLIT": s} for s in (False, True)],
    "epoch_ring": [{"WORLD": 3, "WP": 4, "BLOCK": BLOCK}],
}
TYPES = {
    "buf": "*fp32",
    "buf_ptrs": "*i64",
    "scratch": "*fp32",
    "scratch_ptrs": "*i64",
    "pad": "*i32",
    "pad_ptrs": "*i64",
    "x": "*fp32",
    "out": "*fp32",
}


@pytest.mark.sm90
@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_every_race_kernel_compiles_for_sm90(strategy, tmp_path):
    module = tmp_path / f"kernels_races_{strategy}.py"
    module.write_bytes(castpile.transpile(KERNELS.read_bytes(), str(KERNELS), strategy=strategy))
    source = KERNELS.read_text()
    jobs = [
        Job(module, kernel, signature(source, kernel, TYPES), constexprs, name=f"{kernel} {constexprs}")
        for kernel, variants in COMPILES.items()
        for constexprs in variants
    ]
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())


# -- what the checker found in the library ----------------------------------------------------------------------
#: TMA all-gather GEMMs whose shards are not whole row tiles (BM = 16): rows in chunks, columns in segments, one wave.
RAGGED_SHARDS = {
    "rows": dict(shard=24, blocks=4, comm_blocks=2, chunk_rows=8),
    "k_segment": dict(shard=12, blocks=4, comm_blocks=2, k_segment=16),
    "one_wave": dict(shard=12, blocks=8, one_wave=True),
}


@pytest.mark.parametrize("shape", sorted(RAGGED_SHARDS))
@pytest.mark.parametrize("world", [2, 3])
def test_the_tma_all_gather_gemm_reads_only_the_shards_it_waited_for(shape, world):
    """Found by the checker (docs/races.md, "What it found"): the last row tile of a shard whose rows are not whole
    tiles loaded a TMA box reaching into the next shard's rows before that shard was waited for.  Such shards are now
    read through a descriptor of their own, whose boxes stop at the shard's last row: clean, and exact."""
    from castpile.gpu.fused import tp_gemm

    options = dict(RAGGED_SHARDS[shape])
    shard, k, n = options.pop("shard"), 48, 48
    states = tp_gemm.AllGatherMatmul.create_all(
        world,
        alloc=sim.symmetric_scratch,
        m=world * shard,
        k=k,
        n=n,
        dtype=torch.float32,
        copy_block=64,
        config=tp_gemm.GemmConfig(16, 32, 16, 2, 4, 2, tma=True),
        **options,
    )
    assert states[0].one_wave == (shape == "one_wave") and bool(states[0].k_segment) == (shape == "k_segment")
    gen = torch.Generator().manual_seed(world)
    shards = [torch.randint(-4, 5, (shard, k), generator=gen).float() for _ in range(world)]
    b = torch.randint(-4, 5, (k, n), generator=gen).float()

    def body(rank):
        return [tp_gemm.all_gather_matmul(states[rank], shards[rank], b) for _ in range(2)]

    expected = torch.cat(shards) @ b
    for outs in sim.run(body, world, races=True, timeout=300):
        for out in outs:
            assert torch.equal(out, expected)


def test_the_worked_example_of_the_docs_names_the_lines_these_tests_hit():
    text = (Path(__file__).resolve().parents[1] / "docs" / "races.md").read_text()
    assert f"kernels_races_loop.py:{line('one-shot load')} (one_shot)" in text
    assert f"tests/test_races.py:{line('host copy', Path(__file__))} (body)" in text
