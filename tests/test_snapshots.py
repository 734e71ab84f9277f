"""Snapshots: what castpile writes for every sample, with each strategy, checked through castpile.testing.

``samples/snapshots/<name>.<strategy>.txt`` is castpile's whole output for ``samples/<name>.py``
(every line at its number, the helpers appended), compared byte for byte by
:func:`castpile.testing.assert_transpiles_to`: a mismatch fails with a unified diff, and
``CASTPILE_UPDATE_SNAPSHOTS=1`` or ``pytest --castpile-update-snapshots`` (``make snapshots``)
rewrites the files instead, so a compiler change shows in review as a diff of its output.
"""

from pathlib import Path

import pytest

import castpile
from castpile.testing import assert_transpiles_to, updating

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
SNAPSHOTS = SAMPLES / "snapshots"
NAMES = sorted(p.stem for p in SAMPLES.glob("*.py"))


def test_samples_exist():
    assert len(NAMES) >= 9


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("name", NAMES)
def test_snapshot(name, strategy):
    # A store's site names the sample by its path from pytest's rootdir (the repository), samples/NAME.py: a
    # snapshot does not depend on where the checkout lies, nor on the directory pytest runs from.
    assert_transpiles_to(f"../samples/{name}.py", f"../samples/snapshots/{name}.{strategy}.txt", strategy=strategy)


def test_no_stale_snapshots():
    expected = {f"{name}.{strategy}.txt" for name in NAMES for strategy in castpile.STRATEGIES}
    stale = sorted(p.name for p in SNAPSHOTS.iterdir() if p.name not in expected)
    if updating():
        for name in stale:
            (SNAPSHOTS / name).unlink()
    else:
        assert not stale, f"snapshots without a sample: {stale}"
