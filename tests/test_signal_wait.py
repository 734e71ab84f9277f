"""castpile.signal and castpile.wait between forked ranks (castpile.gpu.sim): flags rise, order data, end lowered.

The kernels and the checks are in tests/testkit/signal_wait.py (tests/test_remote.py runs the
checks on remote flags too).  Each check is also run on the transpiled module with a helper
broken (a signal or wait that does nothing, a wait that does not wait, a signal that
ignores ``wait_for``): the check must then fail, by an assertion or by the simulator's
timeout, never pass or hang.
"""

import re

import pytest

import castpile
from castpile.gpu import sim
from compile_sm90 import Job, compile_for_sm90, signature
from testkit.signal_wait import (
    BLOCK,
    KERNELS,
    check_flags_rise_then_fall,
    check_two_signals_in_a_row_both_arrive,
    check_waiting_ranks_read_what_was_written,
    kernels,
)

HANG = 4.0  # seconds after which a run that must hang is called hung


# -- the checks pass ----------------------------------------------------------------------


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("wait_for", [False, True], ids=["exchange", "wait_for"])
@pytest.mark.parametrize("access", [False, True], ids=["plain_pointers", "multicast_access"])
def test_flags_rise_on_signal_and_fall_on_wait(strategy, wait_for, access, tmp_path):
    """3 ranks: the stack of pads is padded to 4 (2 ranks run in the tests below that break the helpers)."""
    check_flags_rise_then_fall(kernels(strategy, tmp_path), 3, wait_for=wait_for, access=access)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("wait_for,access", [(False, False), (True, True)], ids=["exchange-plain", "wait_for-access"])
def test_a_waiting_rank_reads_what_its_peers_wrote_before_signalling(strategy, wait_for, access, tmp_path):
    check_waiting_ranks_read_what_was_written(kernels(strategy, tmp_path), 3, wait_for=wait_for, access=access)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("scalar", [False, True], ids=["one_element_tensors", "scalar_flags"])
def test_two_signals_in_a_row_with_wait_for_are_both_received(strategy, scalar, tmp_path):
    check_two_signals_in_a_row_both_arrive(kernels(strategy, tmp_path), scalar=scalar)


# -- the checks fail when signal or wait is broken -----------------------------------------

SIGNAL_DOES_NOTHING = ("_castpile_signal_lanes", '    """Set every', '    return\n    """Set every')
SIGNAL_IGNORES_WAIT_FOR = ("_castpile_signal_lanes", "elif wait_for is None:", "elif True:")
WAIT_DOES_NOTHING = ("_castpile_wait_flags", '    """Spin until', '    return\n    """Spin until')
WAIT_DOES_NOT_WAIT = (
    "_castpile_arrive",
    "arrived = pending & _castpile_holds(seen, cmp, value)",
    "arrived = pending",
)
# No give-up below: with a broken wait rank 0 finishes first, so the late ranks need none, and
# the order the check relies on is certain.
FOREVER = float("inf")


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_signal_that_does_nothing_fails_the_checks(strategy, tmp_path):
    k = kernels(strategy, tmp_path, SIGNAL_DOES_NOTHING)
    with pytest.raises(AssertionError, match="after every signal, rank 0's flags are \\[0, 0, 0"):
        check_flags_rise_then_fall(k, 2, wait_for=True, access=True)
    with pytest.raises(sim.RankTimeout) as hung:
        check_waiting_ranks_read_what_was_written(k, 2, wait_for=False, access=False, give_up_s=0, timeout=HANG)
    assert hung.value.hung == [0, 1]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_wait_that_does_nothing_fails_the_checks(strategy, tmp_path):
    k = kernels(strategy, tmp_path, WAIT_DOES_NOTHING)
    with pytest.raises(AssertionError, match="after the waits, rank 0's flags are \\[1, 1, 0"):
        check_flags_rise_then_fall(k, 2, wait_for=False, access=True, races=False)
    with pytest.raises(AssertionError, match=r"rank 0 read .*nan.*, not every rank's row"):
        check_waiting_ranks_read_what_was_written(k, 3, wait_for=True, access=False, give_up_s=FOREVER, races=False)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_a_wait_that_does_not_wait_fails_the_ordering_check(strategy, tmp_path):
    """It lowers the flags at once: flags alone cannot tell, the data read too early does."""
    k = kernels(strategy, tmp_path, WAIT_DOES_NOT_WAIT)
    with pytest.raises(AssertionError, match=r"rank 0 read .*nan.*, not every rank's row"):
        check_waiting_ranks_read_what_was_written(k, 3, wait_for=False, access=True, give_up_s=FOREVER, races=False)


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("scalar", [False, True], ids=["one_element_tensors", "scalar_flags"])
def test_a_signal_that_ignores_wait_for_loses_the_second_signal(strategy, scalar, tmp_path):
    k = kernels(strategy, tmp_path, SIGNAL_IGNORES_WAIT_FOR)
    with pytest.raises(sim.RankTimeout) as hung:
        check_two_signals_in_a_row_both_arrive(k, give_up_s=FOREVER, timeout=HANG, scalar=scalar, races=False)
    assert hung.value.hung == [0]


# -- what these tests run compiles for sm_90 ----------------------------------------------------------

TYPES = {"data": "*fp32", "src": "*fp32", "out": "*fp32", "buf_ptrs": "*i64", "pad": "*i32", "pad_ptrs": "*i64"}
COMPILES = {
    "publish": [{"W": 3, "BLOCK": BLOCK, "WAIT_FOR": wait_for} for wait_for in (False, True)],
    "collect": [{"W": 3, "WP": 4, "BLOCK": BLOCK, "ACCESS": access} for access in (False, True)],
    "signal_rounds": [{"W": 2, "ROUNDS": 2}],
    "wait_rounds": [{"ROUNDS": 2}],
    "signal_rounds_one_peer": [{"W": 2, "ROUNDS": 2}],
    "wait_rounds_scalar": [{"ROUNDS": 2}],
}


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_the_kernels_compile_for_sm90(strategy, tmp_path):
    assert sorted(COMPILES) == sorted(re.findall(r"^def (\w+)\(", KERNELS, re.M))
    path = tmp_path / f"signal_wait_kernels_{strategy}.py"
    path.write_bytes(castpile.transpile(KERNELS.encode(), str(path), strategy=strategy))
    jobs = [
        Job(path, kernel, signature(KERNELS, kernel, TYPES), constexprs, name=f"{kernel} {constexprs}")
        for kernel, variants in COMPILES.items()
        for constexprs in variants
    ]
    results = compile_for_sm90(jobs, tmp_path)
    failures = {name: r.error for name, r in results.items() if not r.ok}
    assert not failures, "\n\n".join(f"{name}:\n{error}" for name, error in failures.items())
