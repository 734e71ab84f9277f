"""benchmarks/check_one_gpu.py's parent side, on the CPU: how it follows a child's cases and tells a hung one."""

import sys
import textwrap
from pathlib import Path

import pytest

from testkit import import_file

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def check(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return import_file(BENCHMARKS / "check_one_gpu.py", "check_one_gpu_under_test")


def child(script: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(script)]


def test_a_case_that_starts_in_the_same_write_as_the_last_row_is_the_one_that_hangs(check, monkeypatch):
    """Lines that arrive together are all read: the case named last is the running one, with its own time limit."""
    monkeypatch.setattr(check, "CASE_LIMIT_S", 1.0)
    command = child(
        """
        import sys, time
        sys.stdout.write('{"starting": "a"}\\n{"case": "a", "seconds": 0}\\n{"starting": "b"}\\n')
        sys.stdout.flush()
        time.sleep(3)
        """
    )
    rows, hung, _ = check.follow(command, world=2, iters=1)
    assert [row["case"] for row in rows] == ["a"]
    assert hung is not None and hung["case"] == "b"


def test_each_case_has_its_own_time_limit(check, monkeypatch):
    """A case that starts late in the child gets the whole limit, counted from its own start."""
    monkeypatch.setattr(check, "CASE_LIMIT_S", 1.5)
    command = child(
        """
        import sys, time
        for name in "abc":
            print('{"starting": "%s"}' % name, flush=True)
            time.sleep(0.8)
            print('{"case": "%s", "seconds": 0.8}' % name, flush=True)
        """
    )
    rows, hung, _ = check.follow(command, world=2, iters=1)
    assert [row["case"] for row in rows] == ["a", "b", "c"] and hung is None
