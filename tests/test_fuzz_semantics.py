"""Semantic fuzzing: generated multicast kernels, transpiled with both strategies and run in
the Triton interpreter, must do what the independent torch model in tests/fuzz_model.py says.

CI runs ``CASTPILE_FUZZ_EXAMPLES`` examples (default 300), derandomized and shared equally
among the access contexts (so each gets its own run of the generator); the long run is
``scripts/fuzz_long.sh`` (see docs/robustness.md).  Every failure found is a regression
test below (docs/history.md); while a bug is open, its name goes in ``OPEN``
(the test becomes ``xfail(strict=True)`` and fails loudly once the bug is fixed).
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import castpile
from fuzz_model import CONTEXTS, Case, Index, cases, check, expected, run

EXAMPLES = int(os.environ.get("CASTPILE_FUZZ_EXAMPLES", "300"))


OPEN: dict[str, str] = {}
"""Open bugs: regression name -> reason (none at the moment)."""


@pytest.mark.parametrize("context", CONTEXTS)
def test_generated_kernels_match_the_model(context, tmp_path_factory):
    directory = tmp_path_factory.getbasetemp()

    @settings(
        max_examples=max(EXAMPLES // len(CONTEXTS), 1), derandomize=True, database=None, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(case=cases(contexts=[context]))
    def generated(case):
        for strategy in castpile.STRATEGIES:
            check(case, strategy, directory)

    generated()


def _case(**changes) -> Case:
    base = dict(
        tile="slice", ptile=(2,), entries=[0, 1], lo=0, dtype="int32", shape=(8,), strides=(1,),
        explicit_strides=False, indices=[Index(0, 8, 0)], irank=1, context="load", op="", value="scalar",
        use_mask=False, importer="alias", seed=1,
    )
    base.update(changes)
    return Case(**base)


REGRESSIONS = {
    # All fixed (docs/history.md, B1-B5).
    "B1-slice-with-lo": (_case(tile="slice_lo", lo=1), "loop"),
    "B2-signal-vector": (_case(tile="slice", ptile=(1,), entries=[0], shape=None, indices=[Index(1, 8, 0)], context="signal"), "loop"),
    "B3-atomic-gather": (_case(context="atomic", op="add", use_mask=True), "gather"),
    "B4-cas-loop": (_case(ptile=(8,), entries=list(range(8)), shape=(8, 4), strides=(4, 1), indices=[Index(0, 8, 0), Index(1, runtime=True)], context="cas", cmp=0), "loop"),
    "B5-atomic-scalar-index": (_case(ptile=(1,), entries=[0], shape=None, indices=[Index(0)], irank=0, context="atomic", op="add", value="row"), "loop"),
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=[pytest.mark.xfail(strict=True, reason=OPEN[n])] if n in OPEN else []) for n in REGRESSIONS],
)
def test_regression(name, tmp_path):
    case, strategy = REGRESSIONS[name]
    check(case, strategy, tmp_path)


CONTEXTS_BY_HAND = {
    # Stack reductions (v1.1): only valid entries take part; a lane with none gives 0.
    "sum-table-lanes-out-of-bounds": _case(context="reduce", op="sum", shape=(5,), indices=[Index(-2, 8, 0)]),
    "max-tile-ptr-mask": _case(tile="tile1", ptile=(4,), entries=[0, None, 1, None], dtype="float32", context="reduce",
                               op="max", shift=-10),
    "min-tile2-a-column-without-entries": _case(tile="tile2", ptile=(2, 2), entries=[None, 0, None, None], context="reduce",
                                                op="min", axis_keyword=False, shift=10),
    "sum-tl-load-mask-other": _case(ptile=(4,), entries=[0, 1, 2, None], shape=(5,), indices=[Index(-2, 8, 0)],
                                    context="reduce", op="sum", reduced="tl_load", use_mask=True, other=-2),
    "max-bf16-to-float32": _case(tile="slice_lo", lo=2, ptile=(4,), entries=[0, 1, 2, None], dtype="bfloat16",
                                 context="reduce", op="max", reduced="to_float32"),
    # wait on flags already set: it returns, and only the waited-on flags become ``reset``.
    "wait-defaults": _case(context="wait"),
    "wait-value-reset-mask-tile": _case(tile="tile1", ptile=(4,), entries=[0, None, 1, 2], shape=(6,), indices=[Index(-1, 8, 0)],
                                        context="wait", flag=-3, reset=2, use_mask=True),
}


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("name", CONTEXTS_BY_HAND)
def test_reductions_and_waits_chosen_by_hand(name, strategy, tmp_path):
    """The generator draws these contexts too; these cases are sure to run, on every kind of invalid entry."""
    check(CONTEXTS_BY_HAND[name], strategy, tmp_path)


def test_model_is_not_vacuous(tmp_path):
    """A masked load of 3 buffers matches the model; a model with another ``other`` does not."""
    case = _case(ptile=(4,), entries=[0, 1, 2, None], shape=(5,), indices=[Index(-1, 8, 0)], context="tl_load", use_mask=True, other=2)
    check(case, "loop", tmp_path)
    ran, _ = run(case, "loop", tmp_path)
    _, res, defined = expected(Case(**{**case.__dict__, "other": -3}), ran["before"])
    assert not torch.equal(ran["after"]["res"][defined], res[defined])
