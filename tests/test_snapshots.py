"""Snapshots: the transpiled output of every sample, with each strategy, byte for byte.

``samples/snapshots/<name>.<strategy>.py`` is what castpile writes for
``samples/<name>.py``.  On a mismatch the test prints a unified diff;
``CASTPILE_UPDATE_SNAPSHOTS=1`` (``make snapshots``) rewrites the files instead.
"""

import difflib
import os
from pathlib import Path

import pytest

import castpile

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
SNAPSHOTS = SAMPLES / "snapshots"
NAMES = sorted(p.stem for p in SAMPLES.glob("*.py"))
UPDATE = os.environ.get("CASTPILE_UPDATE_SNAPSHOTS") == "1"


def test_samples_exist():
    assert len(NAMES) >= 9


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("name", NAMES)
def test_snapshot(name, strategy):
    source = SAMPLES / f"{name}.py"
    got = castpile.transpile(source.read_bytes(), f"samples/{name}.py", strategy=strategy)
    snapshot = SNAPSHOTS / f"{name}.{strategy}.py"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        snapshot.write_bytes(got)
        return
    assert snapshot.exists(), f"no snapshot {snapshot}: run `make snapshots`"
    expected = snapshot.read_bytes()
    if got != expected:
        diff = difflib.unified_diff(
            expected.decode().splitlines(keepends=True), got.decode().splitlines(keepends=True),
            f"snapshots/{snapshot.name}", f"transpiled samples/{name}.py --strategy {strategy}",
        )
        pytest.fail(f"snapshot mismatch (`make snapshots` accepts the new output):\n{''.join(diff)}", pytrace=False)


def test_no_stale_snapshots():
    expected = {f"{name}.{strategy}.py" for name in NAMES for strategy in castpile.STRATEGIES}
    stale = sorted(p.name for p in SNAPSHOTS.glob("*.py") if p.name not in expected)
    if UPDATE:
        for name in stale:
            (SNAPSHOTS / name).unlink()
    else:
        assert not stale, f"snapshots without a sample: {stale}"
