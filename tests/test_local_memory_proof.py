"""benchmarks/local_memory_proof.py's verdicts, on the CPU: which scenario must hang, from what the ranks bound."""

from pathlib import Path

import pytest

from testkit import import_file

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def proof(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return import_file(BENCHMARKS / "local_memory_proof.py", "local_memory_proof_under_test")


def row(scenario, need, world=8, limit=1024, **extra):
    return dict(
        world=world, scenario=scenario, stack_limit_before=limit, bound=dict(local_bytes_per_rank=need), **extra
    )


W8 = [208, 1272, 208, 208, 208, 208, 208, 208]  # what the H200 reported at W = 8 before the epilogue loop


@pytest.mark.parametrize(
    "scenario, need, limit, hangs",
    [
        ("rank 1 last, nothing reserved", W8, 1024, True),
        ("rank 1 last, nothing reserved", W8, 2048, False),  # the limit already holds rank 1's need
        ("rank 1 last, nothing reserved", [1300, 1272, 208, 208, 208, 208, 208, 208], 1024, False),  # rank 0 grew it
        ("rank 1 last, nothing reserved", [0] * 8, 1024, False),  # nothing spills: nothing grows
        ("rank 1 first, nothing reserved", W8, 1024, False),  # rank 1 grows it while the device is idle
        ("rank 1 first, nothing reserved", [2000, 1272, 208, 208, 208, 208, 208, 208], 1024, True),  # rank 0 later
        ("rank 1 last, reserved", W8, 1024, False),
    ],
)
def test_a_scenario_must_hang_exactly_when_a_held_back_rank_would_grow_the_limit(proof, scenario, need, limit, hangs):
    assert proof.expected_hang(row(scenario, need, limit=limit)) is hangs


def test_a_child_that_hung_before_binding_is_not_expected_to_hang(proof):
    """No ``bound`` line (a hang while compiling, say) is a failure, never the hang the scenario predicts."""
    assert (
        proof.expected_hang(dict(world=8, scenario="rank 1 last, nothing reserved", stack_limit_before=1024)) is False
    )


def test_a_passing_row_has_no_error_no_wrong_element_and_zero_pads(proof):
    ok = row("rank 1 last, reserved", W8, hung=False, wrong_elements={"out": 0}, pads_nonzero_after=0)
    assert proof.passed(ok)
    assert not proof.passed(dict(ok, hung=True))
    assert not proof.passed(dict(ok, wrong_elements={"out": 3}))
    assert not proof.passed(dict(ok, pads_nonzero_after=1))
    assert not proof.passed(dict(ok, error="RankTimeout: ..."))
