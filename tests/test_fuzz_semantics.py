"""Semantic fuzzing: generated multicast kernels, transpiled with both strategies and run in
the Triton interpreter, must do what the independent torch model in tests/fuzz_model.py says.

CI runs ``CASTPILE_FUZZ_EXAMPLES`` examples (default 300), derandomized; the long run is
``scripts/fuzz_long.sh`` (see docs/robustness.md).  Every failure found is a regression
test below (docs/bugs-from-fuzzing.md); while a bug is open, its name goes in ``OPEN``
(the test becomes ``xfail(strict=True)`` and fails loudly once the bug is fixed).
"""

import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings

import castpile
from fuzz_model import Case, Index, cases, check, expected, run

EXAMPLES = int(os.environ.get("CASTPILE_FUZZ_EXAMPLES", "300"))


OPEN: dict[str, str] = {}
"""Open bugs: regression name -> reason (none at the moment)."""


@settings(
    max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_generated_kernels_match_the_model(case, tmp_path_factory):
    directory = tmp_path_factory.getbasetemp()
    for strategy in castpile.STRATEGIES:
        check(case, strategy, directory)


def _case(**changes) -> Case:
    base = dict(
        tile="slice", ptile=(2,), entries=[0, 1], lo=0, dtype="int32", shape=(8,), strides=(1,),
        explicit_strides=False, indices=[Index(0, 8, 0)], irank=1, context="load", op="", value="scalar",
        use_mask=False, importer="alias", seed=1,
    )
    base.update(changes)
    return Case(**base)


REGRESSIONS = {
    # All fixed (docs/bugs-from-fuzzing.md, B1-B5).
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


def test_model_is_not_vacuous(tmp_path):
    """A masked load of 3 buffers matches the model; a model with another ``other`` does not."""
    case = _case(ptile=(4,), entries=[0, 1, 2, None], shape=(5,), indices=[Index(-1, 8, 0)], context="tl_load", use_mask=True, other=2)
    check(case, "loop", tmp_path)
    ran, _ = run(case, "loop", tmp_path)
    _, res, defined = expected(Case(**{**case.__dict__, "other": -3}), ran["before"])
    assert not torch.equal(ran["after"]["res"][defined], res[defined])
