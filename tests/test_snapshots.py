"""Snapshots: what castpile writes for every sample, with each strategy.

``samples/snapshots/<name>.<strategy>.txt`` lists the lines of ``samples/<name>.py``
that the transpiler rewrites, as they come out (with their numbers), and the
helpers appended after the last line; every other line must come out byte for
byte as it went in.  On a mismatch the test prints a unified diff;
``CASTPILE_UPDATE_SNAPSHOTS=1`` (``make snapshots``) rewrites the files instead.
"""

import difflib
import os
import re
from pathlib import Path

import pytest

import castpile

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
SNAPSHOTS = SAMPLES / "snapshots"
NAMES = sorted(p.stem for p in SAMPLES.glob("*.py"))
UPDATE = os.environ.get("CASTPILE_UPDATE_SNAPSHOTS") == "1"


def summary(name: str, source: bytes, out: bytes, strategy: str) -> str:
    """The rewritten lines and the names of the appended helpers; asserts every other line is unchanged."""
    before = source.decode().splitlines(keepends=True)
    after = out.decode().splitlines(keepends=True)
    rewritten = [f"{n + 1}: {a.rstrip()}" for n, (b, a) in enumerate(zip(before, after)) if a != b]
    assert len(after) >= len(before)
    helpers = re.findall(r"^def (\w+)\(", "".join(after[len(before) :]), re.M)
    return (
        f"# castpile samples/{name}.py --strategy {strategy}: the rewritten lines\n"
        + "".join(line + "\n" for line in rewritten)
        + f"# helpers appended after line {len(before)}:\n"
        + "".join(f"#   {h}\n" for h in helpers)
    )


def test_samples_exist():
    assert len(NAMES) >= 9


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("name", NAMES)
def test_snapshot(name, strategy):
    source = (SAMPLES / f"{name}.py").read_bytes()
    got = summary(name, source, castpile.transpile(source, f"samples/{name}.py", strategy=strategy), strategy)
    snapshot = SNAPSHOTS / f"{name}.{strategy}.txt"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        snapshot.write_text(got)
        return
    assert snapshot.exists(), f"no snapshot {snapshot}: run `make snapshots`"
    expected = snapshot.read_text()
    if got != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True), got.splitlines(keepends=True),
            f"snapshots/{snapshot.name}", f"transpiled samples/{name}.py --strategy {strategy}",
        )
        pytest.fail(f"snapshot mismatch (`make snapshots` accepts the new output):\n{''.join(diff)}", pytrace=False)


def test_no_stale_snapshots():
    expected = {f"{name}.{strategy}.txt" for name in NAMES for strategy in castpile.STRATEGIES}
    stale = sorted(p.name for p in SNAPSHOTS.iterdir() if p.name not in expected)
    if UPDATE:
        for name in stale:
            (SNAPSHOTS / name).unlink()
    else:
        assert not stale, f"snapshots without a sample: {stale}"
