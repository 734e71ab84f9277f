"""Semantic fuzzing: generated multicast kernels, transpiled with both strategies and run in the
Triton interpreter (tests/fuzz_run.py), must do what the independent torch model in
tests/fuzz_model.py says; every third of them, every regression and every hand-chosen case
must also compile for sm_90 (one child process of tests/compile_sm90.py each).  Language v1.3's forms get
a run of their own (``test_generated_v13_forms_...``: ``V13_EXAMPLES`` per context, every second compiled).

CI runs ``CASTPILE_FUZZ_EXAMPLES`` examples (default 500), derandomized and shared equally
among the access contexts (so each gets its own run of the generator), with every spelling
of ``fuzz_model.FEATURES`` except those in ``OPEN_FEATURES`` (forms with an open bug).
The long run (docs/robustness.md) is::

    scripts/fuzz_long.sh 5000                                # the features CI runs
    CASTPILE_FUZZ_FEATURES=all scripts/fuzz_long.sh 2000     # the open ones too

``CASTPILE_FUZZ_FEATURES`` takes ``all`` or a comma-separated list of features.  Every
failure found is a regression test below (docs/history.md); while a bug is open, its name
goes in ``OPEN`` (the test becomes ``xfail(strict=True)`` and fails loudly once the bug is
fixed), and the feature that generates it in ``OPEN_FEATURES``: once the fix lands, delete
both entries.
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, find, given, settings

import castpile
from compile_sm90 import Job, Result, compile_for_sm90
from fuzz_model import CONTEXTS, FEATURES, Case, Index, cases, expected, layout, make_data
from fuzz_run import check, run, transpiled
from fuzz_source import constexprs, signature, source

EXAMPLES = int(os.environ.get("CASTPILE_FUZZ_EXAMPLES", "500"))
SAMPLED_EVERY = 3  # every third generated kernel of a context is compiled for sm_90 (strategies alternating)

OPEN_FEATURES: dict[str, str] = {}
"""Spellings the generator leaves out while a bug in them is open: feature -> issue item (each has a
regression test in ``OPEN``)."""

OPEN: dict[str, str] = {}
"""Open bugs: regression name -> reason."""


def enabled_features() -> frozenset[str]:
    """The features the generator uses: ``CASTPILE_FUZZ_FEATURES``, else every one without an open bug."""
    chosen = os.environ.get("CASTPILE_FUZZ_FEATURES")
    if chosen == "all":
        return frozenset(FEATURES)
    if chosen:
        names = frozenset(chosen.split(","))
        assert names <= FEATURES.keys(), f"unknown features: {sorted(names - FEATURES.keys())}"
        return names
    return frozenset(FEATURES) - OPEN_FEATURES.keys()


def explore(context: str, body) -> None:
    """Run ``body(case)`` on the generated cases of ``context`` (the same ones on every run)."""

    @settings(
        max_examples=max(EXAMPLES // len(CONTEXTS), 1),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=cases(contexts=[context], features=enabled_features()))
    def generated(case):
        body(case)

    generated()


GENERATED: dict[str, list[Case]] = {}
"""Each context's generated cases, in the order they ran, for the sm_90 sample."""


@pytest.mark.parametrize("context", CONTEXTS)
def test_generated_kernels_match_the_model(context, tmp_path_factory):
    directory = tmp_path_factory.getbasetemp()
    seen = []

    def matches(case):
        for strategy in castpile.STRATEGIES:
            check(case, strategy, directory)
        seen.append(case)

    explore(context, matches)
    GENERATED[context] = seen


def _sample(seen: list[Case]) -> list[Case]:
    return seen[SAMPLED_EVERY - 1 :: SAMPLED_EVERY]


def _compile(named: dict[str, tuple[Case, str]], directory) -> dict[str, Result]:
    """Compile each ``name -> (case, strategy)`` for sm_90 in one child process (a case that does
    not transpile is a failed result, so that one open bug fails only its own tests)."""
    jobs, failed = [], {}
    for name, (case, strategy) in named.items():
        path = directory / f"{name}.py"
        try:
            path.write_bytes(transpiled(case, strategy))
        except castpile.TranspileError as exc:
            failed[name] = Result(False, f"does not transpile: {exc.render()}")
            continue
        jobs.append(Job(path, "kernel", signature(case), constexprs(case), name=name))
    return compile_for_sm90(jobs, directory) | failed


def test_a_sample_of_the_generated_kernels_compiles_for_sm90(tmp_path):
    """The interpreter treats scalars as arrays and accepts what the GPU compiler rejects: every
    ``SAMPLED_EVERY``-th kernel of each context's run compiles for sm_90 too (the run's own cases
    when it ran in this session, else the same cases generated again)."""
    named = {}
    for context in CONTEXTS:
        if context not in GENERATED:
            seen = []
            explore(context, seen.append)
            GENERATED[context] = seen
        for n, case in enumerate(_sample(GENERATED[context])):
            strategy = castpile.STRATEGIES[n % len(castpile.STRATEGIES)]
            named[f"{context}{n}_{strategy}"] = (case, strategy)
    results = _compile(named, tmp_path)
    failures = [f"{name}:\n{source(named[name][0])}{r.error}" for name, r in results.items() if not r.ok]
    assert not failures, "\n\n".join(failures)


V13_CONTEXTS = ("wait", "signal", "tl_load", "tl_store", "atomic", "cas")
V13_FEATURES = frozenset(
    {"keyword_spellings", "heads", "counting_waits", "wait_values", "plain_signals"}
    | {"keyword_orders", "flag_ops", "scalar_flags", "mask_forms", "castpile_names", "signal_wait_for"}
)
V13_EXAMPLES = int(os.environ.get("CASTPILE_FUZZ_V13_EXAMPLES", "8"))  # per context
V13_COMPILED_EVERY = 2  # every second of them is compiled for sm_90 too


def test_generated_v13_forms_match_the_model_and_every_second_compiles_for_sm90(tmp_path):
    """Language v1.3's forms drawn often (the main run draws them among every other feature): compile-time
    keywords in every spelling, heads through parentheses and ``global``, counting waits, waits whose values
    are checked against the model, signals on plain pointers; each run under both strategies, and every
    ``V13_COMPILED_EVERY``-th compiled for sm_90 (strategies alternating), so that no form passes only in the
    interpreter."""
    named = {}
    for context in V13_CONTEXTS:
        seen = []

        @settings(
            max_examples=V13_EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(case=cases(contexts=[context], features=V13_FEATURES & enabled_features()))
        def generated(case):
            for strategy in castpile.STRATEGIES:
                check(case, strategy, tmp_path)
            seen.append(case)

        generated()
        for n, case in enumerate(seen[V13_COMPILED_EVERY - 1 :: V13_COMPILED_EVERY]):
            strategy = castpile.STRATEGIES[n % len(castpile.STRATEGIES)]
            named[f"v13-{context}{n}_{strategy}"] = (case, strategy)
    results = _compile(named, tmp_path)
    failures = [f"{name}:\n{source(named[name][0])}{r.error}" for name, r in results.items() if not r.ok]
    assert not failures, "\n\n".join(failures)


def _case(**changes) -> Case:
    base = dict(
        tile="slice",
        ptile=(2,),
        entries=[0, 1],
        lo=0,
        dtype="int32",
        shape=(8,),
        strides=(1,),
        explicit_strides=False,
        indices=[Index(0, 8, 0)],
        irank=1,
        context="load",
        op="",
        value="scalar",
        use_mask=False,
        importer="alias",
        seed=1,
    )
    base.update(changes)
    return Case(**base)


REGRESSIONS = {
    # All fixed (docs/history.md, B1-B5).
    "B1-slice-with-lo": (_case(tile="slice_lo", lo=1), "loop"),
    "B2-signal-vector": (
        _case(tile="slice", ptile=(1,), entries=[0], shape=None, indices=[Index(1, 8, 0)], context="signal"),
        "loop",
    ),
    "B3-atomic-gather": (_case(context="atomic", op="add", use_mask=True), "gather"),
    "B4-cas-loop": (
        _case(
            ptile=(8,),
            entries=list(range(8)),
            shape=(8, 4),
            strides=(4, 1),
            indices=[Index(0, 8, 0), Index(1, runtime=True)],
            context="cas",
            cmp=0,
        ),
        "loop",
    ),
    "B5-atomic-scalar-index": (
        _case(
            ptile=(1,), entries=[0], shape=None, indices=[Index(0)], irank=0, context="atomic", op="add", value="row"
        ),
        "loop",
    ),
    # The generator's v1.2 forms (the outside testing's spellings), one smallest case each.
    "I22-rebound-shape": (_case(shape=(4,), rebound=("n",)), "loop"),
    "I22-rebound-strides": (
        _case(shape=(4,), strides=(2,), explicit_strides=True, strides_names=True, rebound=("t",)),
        "gather",
    ),
    "I22-rebound-example": (_case(dtype="float32", context="store", value="row", rebound=("example",)), "loop"),
    "I22-bound-name-is-the-example": (_case(self_bound=True), "loop"),
    "I22-zero-stride": (_case(strides=(0,), explicit_strides=True), "loop"),
    "I22-broadcast-view": (
        _case(shape=(4, 8), strides=(0, 1), explicit_strides=True, indices=[Index(0, 4, 0), Index(0, 8, 1)], irank=2),
        "gather",
    ),
    "I22-cancelling-indices": (
        _case(
            shape=(4, 4),
            strides=(1, 1),
            explicit_strides=True,
            inline_indices=True,
            context="store",
            value="row",
            indices=[Index(3, 4, 0, sign=-1), Index(0, 4, 0)],
        ),
        "loop",
    ),
    "I22-max-return-indices": (
        _case(
            ptile=(4,),
            entries=[0, 1, 2, None],
            context="reduce",
            op="max",
            return_indices=True,
            reduce_order=("axis", "return_indices"),
            shift=-10,
        ),
        "loop",
    ),
    "I22-min-return-indices-tie-break-right": (
        _case(
            tile="tile1",
            ptile=(4,),
            entries=[0, None, 1, 2],
            context="reduce",
            op="min",
            return_indices=True,
            tie_break_left=False,
            reduce_order=("return_indices_tie_break_left", "axis", "return_indices"),
            shift=10,
        ),
        "gather",
    ),
    "I22-tl-is-triton-language": (_case(context="tl_load", use_mask=True, triton_names="assign"), "loop"),
    "I22-signal-mask-before-value": (
        _case(context="signal", use_mask=True, call_args=("mask", "value"), effects=("mask", "value")),
        "loop",
    ),
    "I22-wait-scalar-flag": (
        _case(tile="plain", ptile=(), entries=[0], shape=None, indices=[Index(2, pid=True)], irank=0, context="wait"),
        "loop",
    ),
    "I22-rank0-tile": (_case(tile="peer0d", ptile=(), entries=[0], rank=2), "loop"),
    "I22-rank0-tile-scalar-cas": (
        _case(tile="peer0d", ptile=(), entries=[0], rank=1, indices=[Index(3)], irank=0, context="cas"),
        "loop",
    ),
    "I22-table-rank": (_case(tile="peer", ptile=(), entries=[0], rank=2), "loop"),
    "I22-table-constexpr-rank": (
        _case(tile="peer", ptile=(), entries=[0], rank=1, rank_constexpr=True, context="store"),
        "gather",
    ),
    # Language v1.2's peer forms.
    "slice-ptr-mask-padding-true": (
        _case(
            ptile=(4,),
            entries=[0, None, 1, None],
            count=3,
            slice_mask=True,
            pm_padding=True,
            context="reduce",
            op="max",
            shift=-10,
        ),
        "loop",
    ),
    "named-slice-ptr-mask-store": (
        _case(
            tile="slice_named",
            ptile=(4,),
            entries=[None, 0, 1, None],
            count=3,
            slice_mask=True,
            context="store",
            value="row",
        ),
        "gather",
    ),
    "dtype-example-cas-padded-slice": (
        _case(ptile=(4,), entries=[0, 1, 2, None], context="cas", dtype_example=True),
        "loop",
    ),
    "dtype-example-peer-signal": (
        _case(tile="peer", ptile=(), entries=[0], rank=2, context="signal", dtype_example=True, wait_for=0),
        "gather",
    ),
    "I22-constexpr-mask-reduce": (
        _case(
            ptile=(4,),
            entries=[0, 1, 2, None],
            context="reduce",
            op="max",
            reduced="tl_load",
            use_mask=True,
            mask_form="constexpr",
            shift=-10,
        ),
        "gather",
    ),
    "I22-backslash-aug": (_case(context="aug", op="+", shape=None, breaks=(3,), backslashes=True), "loop"),
    "I22-enclosing-kernel-continued": (_case(enclosing=True, breaks=(1,)), "loop"),
    # Language v1.3's forms (issue 32, part 4), one smallest case each.
    "v13-counting-wait": (
        _case(context="wait", flag=2, decrement=True, surplus=3, call_args=("value", "decrement"), positional=1),
        "loop",
    ),
    "v13-counting-wait-values-plain": (
        _case(
            tile="plain",
            ptile=(),
            entries=[0],
            shape=None,
            context="wait",
            flag=5,
            decrement=True,
            surplus=1,
            wait_value=True,
            importer="from_as",
        ),
        "gather",
    ),
    "v13-wait-values-masked-tile": (
        _case(
            tile="tile1",
            ptile=(4,),
            entries=[0, None, 1, 2],
            shape=(6,),
            indices=[Index(-1, 8, 0)],
            context="wait",
            wait_value=True,
            use_mask=True,
            wait_cmp="ge",
            reset_none=True,
        ),
        "gather",
    ),
    "v13-wait-value-scalar-flag": (
        _case(
            tile="plain",
            ptile=(),
            entries=[0],
            shape=None,
            indices=[Index(2, pid=True)],
            irank=0,
            context="wait",
            wait_value=True,
        ),
        "loop",
    ),
    "v13-signal-plain-vector": (
        _case(tile="plain", ptile=(), entries=[0], shape=None, context="signal", signal_op="add"),
        "gather",
    ),
    "v13-signal-plain-scalar-wait-for": (
        _case(
            tile="plain", ptile=(), entries=[0], shape=None, indices=[Index(1)], irank=0, context="signal", wait_for=0
        ),
        "loop",
    ),
    **{
        f"v13-keyword-{spelling}": (
            _case(
                context="wait",
                wait_cmp="ge",
                reset_none=True,
                sem="relaxed",
                call_args=("value", "cmp", "sem", "reset"),
                flag=5,
                spellings={"cmp": spelling, "sem": spelling},
            ),
            strategy,
        )
        for spelling, strategy in [
            ("parameter", "loop"),
            ("conditional", "gather"),
            ("global", "loop"),
            ("attribute", "gather"),
            ("local", "loop"),
        ]
    },
    "v13-keyword-parameter-atomic-and-load": (
        _case(
            context="atomic",
            op="add",
            sem="acq_rel",
            scope="gpu",
            call_args=("val", "sem", "scope"),
            positional=1,
            spellings={"sem": "parameter", "scope": "attribute"},
        ),
        "gather",
    ),
    "v13-keyword-signal-op": (
        _case(context="signal", signal_op="add", call_args=("value", "op"), spellings={"op": "conditional"}),
        "loop",
    ),
    "v13-head-paren": (_case(context="signal", head="paren", importer="alias"), "gather"),
    "v13-head-global": (_case(context="wait", head="global", importer="from_as"), "loop"),
    "v13-head-global-store": (_case(context="store", head="global", importer="from"), "gather"),
    "v13-head-global-module": (_case(context="signal", head="global", importer="module"), "loop"),
    "v13-head-global-alias": (_case(context="wait", head="global", importer="alias"), "gather"),
}

OVERLAPPING = dict(
    shape=(4, 4), strides=(1, 1), explicit_strides=True, indices=[Index(0, 4, 0), Index(0, 4, 1)], irank=2
)
CONTEXTS_BY_HAND = {
    # Stack reductions (v1.1): only valid entries take part; a lane with none gives 0.
    "sum-table-lanes-out-of-bounds": _case(context="reduce", op="sum", shape=(5,), indices=[Index(-2, 8, 0)]),
    "max-tile-ptr-mask": _case(
        tile="tile1", ptile=(4,), entries=[0, None, 1, None], dtype="float32", context="reduce", op="max", shift=-10
    ),
    "min-tile2-a-column-without-entries": _case(
        tile="tile2",
        ptile=(2, 2),
        entries=[None, 0, None, None],
        context="reduce",
        op="min",
        axis_keyword=False,
        shift=10,
    ),
    "sum-tl-load-mask-other": _case(
        ptile=(4,),
        entries=[0, 1, 2, None],
        shape=(5,),
        indices=[Index(-2, 8, 0)],
        context="reduce",
        op="sum",
        reduced="tl_load",
        use_mask=True,
        other=-2,
    ),
    "max-bf16-to-float32": _case(
        tile="slice_lo",
        lo=2,
        ptile=(4,),
        entries=[0, 1, 2, None],
        dtype="bfloat16",
        context="reduce",
        op="max",
        reduced="to_float32",
    ),
    # wait on flags already set: it returns, and only the waited-on flags become ``reset``.
    "wait-defaults": _case(context="wait"),
    "wait-value-reset-mask-tile": _case(
        tile="tile1",
        ptile=(4,),
        entries=[0, None, 1, 2],
        shape=(6,),
        indices=[Index(-1, 8, 0)],
        context="wait",
        flag=-3,
        reset=2,
        use_mask=True,
    ),
    # Overlapping and negative strides (v1.2; the generator's strides_any is open): racing stores leave
    # one lane's value, racing atomics all apply.
    "store-overlapping-strides": _case(context="store", value="full", **OVERLAPPING),
    "atomic-add-overlapping-strides": _case(context="atomic", op="add", value="full", **OVERLAPPING),
    "cas-overlapping-strides": _case(context="cas", value="full", cmp=0, **OVERLAPPING),
    "store-negative-stride": _case(context="store", value="full", **{**OVERLAPPING, "strides": (-1, 3)}),
}


@pytest.fixture(scope="module")
def fixed_compiles(tmp_path_factory):
    """Every regression and hand-chosen case compiled for sm_90, in one child process."""
    named = {f"regression-{n}": case_strategy for n, case_strategy in REGRESSIONS.items()}
    named |= {f"by-hand-{n}-{s}": (case, s) for n, case in CONTEXTS_BY_HAND.items() for s in castpile.STRATEGIES}
    return _compile(named, tmp_path_factory.mktemp("sm90"))


def _compiled(results: dict, name: str, case: Case) -> None:
    result = results[name]
    assert result.ok, f"passes in the interpreter but does not compile for sm_90:\n{source(case)}{result.error}"


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=OPEN[n])] if n in OPEN else []) for n in REGRESSIONS],
)
def test_regression(name, tmp_path, fixed_compiles):
    case, strategy = REGRESSIONS[name]
    check(case, strategy, tmp_path)
    _compiled(fixed_compiles, f"regression-{name}", case)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("name", CONTEXTS_BY_HAND)
def test_reductions_and_waits_chosen_by_hand(name, strategy, tmp_path, fixed_compiles):
    """The generator draws these contexts too; these cases are sure to run, on every kind of invalid entry."""
    check(CONTEXTS_BY_HAND[name], strategy, tmp_path)
    _compiled(fixed_compiles, f"by-hand-{name}-{strategy}", CONTEXTS_BY_HAND[name])


def test_open_features_are_features():
    assert OPEN_FEATURES.keys() <= FEATURES.keys()
    assert OPEN.keys() <= REGRESSIONS.keys()


@pytest.mark.parametrize(
    ("importer", "declared"),
    [
        ("module", "global castpile"),
        ("alias", "global cp"),
        ("from", "global multicast_like"),
        ("from_as", "global mcl"),
    ],
)
def test_the_heads_feature_binds_every_import_of_castpile_by_global(importer, declared):
    """The ``heads`` feature draws a set-up function that declares castpile's names global and imports them, for
    every import form: ``global castpile`` + ``import castpile`` and ``global cp`` + ``import castpile as cp`` as
    well as the names of a ``from`` import."""
    drawn = find(
        cases(contexts=["signal"], features=frozenset({"heads", "castpile_names"})),
        lambda case: case.head == "global" and case.importer == importer,
        settings=settings(database=None, derandomize=True, max_examples=5000),
    )
    text = source(drawn)
    assert f"def setup():\n    {declared}" in text, text


def test_racing_lanes_may_leave_any_of_their_values():
    """With strides (1, 1), lanes (i, j) with i + j = e all store to element e: the model admits
    exactly their values there, and sums every operand of an atomic add."""
    case = CONTEXTS_BY_HAND["store-overlapping-strides"]
    data = make_data(case)
    want = expected(case, data)
    values = data["vals"].reshape(2, 4, 4)
    base, _ = layout(case)
    for e in range(7):
        lanes = {values[0, i, e - i].item() for i in range(4) if 0 <= e - i < 4}
        assert want.choices[0].get(base + e, {want.bufs[0][base + e].item()}) == lanes
    atomic = CONTEXTS_BY_HAND["atomic-add-overlapping-strides"]
    data = make_data(atomic)
    want = expected(atomic, data)
    values = data["vals"].reshape(2, 4, 4)
    for e in range(7):
        total = sum(values[1, i, e - i].item() for i in range(4) if 0 <= e - i < 4)
        assert want.bufs[1][base + e].item() == data["bufs"][1][base + e].item() + total
    assert not want.choices[1] and not want.defined.reshape(2, 4, 4)[:, 0, 1].any()


def test_model_is_not_vacuous(tmp_path):
    """A masked load of 3 buffers matches the model; a model with another ``other`` does not."""
    case = _case(
        ptile=(4,),
        entries=[0, 1, 2, None],
        shape=(5,),
        indices=[Index(-1, 8, 0)],
        context="tl_load",
        use_mask=True,
        other=2,
    )
    check(case, "loop", tmp_path)
    ran, _ = run(case, "loop", tmp_path)
    want = expected(Case(**{**case.__dict__, "other": -3}), ran["before"])
    assert not torch.equal(ran["after"]["res"][want.defined], want.res[want.defined])
