"""benchmarks/local_memory_proof.py's parent side, on the CPU: which scenario must hang, and how a child's end reads."""

import sys
import textwrap
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
LAST, FIRST, RESERVED = "rank 1 last, nothing reserved", "rank 1 first, nothing reserved", "rank 1 last, reserved"


@pytest.mark.parametrize(
    "scenario, need, limit, verdict",
    [
        (LAST, W8, 1024, "hang"),
        (LAST, W8, 2048, "pass"),  # the limit already holds rank 1's need
        (LAST, [0] * 8, 1024, "pass"),  # nothing spills: nothing grows
        (LAST, [1300, 1272, 208, 208, 208, 208, 208, 208], 1024, "either"),  # rank 0 grows it, maybe after a peer
        (LAST, [1300, 2000, 208, 208, 208, 208, 208, 208], 1024, "hang"),  # rank 1 needs more still
        (FIRST, W8, 1024, "pass"),  # rank 1 grows it while the device is idle
        (FIRST, [2000, 1272, 208, 208, 208, 208, 208, 208], 1024, "hang"),  # rank 0, held back, needs more
        (RESERVED, W8, 1024, "pass"),
    ],
)
def test_what_a_scenario_must_do_follows_from_what_the_ranks_bound(proof, scenario, need, limit, verdict):
    assert proof.expected(row(scenario, need, limit=limit)) == verdict


def test_a_child_that_reported_no_binding_must_pass_and_so_fails(proof):
    """No ``bound`` line (it died or hung while compiling, say): never the hang a scenario predicts."""
    died = dict(world=8, scenario=LAST, stack_limit_before=1024, hung=False, error="the child gave no result (exit 1)")
    died["expected"] = proof.expected(died)
    assert died["expected"] == "pass" and not proof.as_expected(died)


def test_a_row_passes_only_with_a_result_that_is_exact_and_pads_zero(proof):
    ok = row(RESERVED, W8, hung=False, wrong_elements={"out": 0}, pads_nonzero_after=0)
    assert proof.passed(ok)
    assert not proof.passed(dict(ok, hung=True))
    assert not proof.passed(dict(ok, wrong_elements={"out": 3}))
    assert not proof.passed(dict(ok, pads_nonzero_after=1))
    assert not proof.passed(dict(ok, error="RankTimeout: ..."))
    assert not proof.passed({k: v for k, v in ok.items() if k != "wrong_elements"})


@pytest.mark.parametrize("verdict, hung, exact, holds", [("hang", True, False, True), ("hang", False, True, False),
                                                         ("pass", False, True, True), ("pass", True, False, False),
                                                         ("either", True, False, True), ("either", False, True, True),
                                                         ("either", False, False, False)])  # fmt: skip
def test_as_expected(proof, verdict, hung, exact, holds):
    got = dict(expected=verdict, hung=hung, wrong_elements={"out": 0 if exact else 1}, pads_nonzero_after=0)
    assert proof.as_expected(got) is holds


def child(script: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(script)]


BOUND = '{"bound": {"local_bytes_per_rank": [0, 9]}, "stack_limit_after_barrier": 1024}'


def test_a_child_killed_at_the_limit_hung_and_keeps_what_it_printed(proof):
    command = child(
        f"import time; print('{{\"stack_limit_before\": 1024}}'); print('{BOUND}', flush=True); time.sleep(30)"
    )
    got = proof.scenario_row(2, LAST, command, limit=3)
    assert got["hung"] and got["exit"] is None and got["error"] == "hung"
    assert got["bound"]["local_bytes_per_rank"] == [0, 9] and got["stack_limit_before"] == 1024


def test_a_child_that_exits_without_a_result_failed(proof):
    command = child(f"import sys; print('{BOUND}'); sys.stderr.write('boom'); sys.exit(3)")
    got = proof.scenario_row(2, LAST, command, limit=30)
    assert not got["hung"] and got["exit"] == 3
    assert got["error"] == "the child gave no result (exit 3)" and "boom" in got["stderr"]
    assert not proof.passed(got)


def test_ranks_that_timed_out_in_the_child_count_as_hung(proof):
    command = child("""print('{"error": "RankTimeout: ranks [0, 1] did not finish within 105 s"}')""")
    assert proof.scenario_row(2, LAST, command, limit=30)["hung"]


def test_a_child_with_its_result_passes(proof):
    command = child(f"""print('{BOUND}'); print('{{"wrong_elements": {{"out": 0}}, "pads_nonzero_after": 0}}')""")
    got = proof.scenario_row(2, RESERVED, command, limit=30)
    assert proof.passed(got) and got["exit"] == 0 and "stderr" not in got
