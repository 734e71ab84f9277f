"""Snapshot tests of what castpile writes: :func:`assert_transpiles_to` compares a kernel's output with a checked-in file.

::

    from castpile.testing import assert_transpiles_to

    def test_allreduce_kernel_output():
        assert_transpiles_to("kernels/allreduce.py", "tests/snapshots/allreduce.loop.txt")

A mismatch fails with a unified diff, expected -> castpile's output.  With
``CASTPILE_UPDATE_SNAPSHOTS=1`` in the environment, or ``pytest
--castpile-update-snapshots`` (the plugin :mod:`castpile.pytest_plugin`, which pytest
loads by itself once castpile is installed), the expected file is written instead,
created or replaced whole (a temporary file renamed into place), and the check passes:
a new castpile version then shows its effect on every kernel as a diff in review.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

UPDATE_VAR = "CASTPILE_UPDATE_SNAPSHOTS"
_updating = False


def set_updating(enabled: bool) -> bool:
    """Write expected files instead of comparing, as ``CASTPILE_UPDATE_SNAPSHOTS=1`` does (the pytest option);
    returns the setting it replaces."""
    global _updating
    previous, _updating = _updating, enabled
    return previous


def updating() -> bool:
    """Whether :func:`assert_transpiles_to` writes the expected files: the pytest option, or ``CASTPILE_UPDATE_SNAPSHOTS=1``."""
    return _updating or os.environ.get(UPDATE_VAR) == "1"


def assert_transpiles_to(source_path, expected_path, strategy: str = "loop") -> None:
    """Pass when castpile's output for the file ``source_path`` is the file ``expected_path``, byte for byte.

    Otherwise raise ``AssertionError`` with a unified diff (or, the expected file missing,
    say how to create it); while :func:`updating`, write ``expected_path`` (its directory
    too) and pass.  A source with errors raises :class:`castpile.TranspileError`.
    """
    __tracebackhide__ = True  # pytest shows the caller's line and this message, not this function's body
    from .compiler import transpile_source as transpile
    from .files import write_atomically

    source_path, expected_path = Path(source_path), Path(expected_path)
    got = transpile(source_path.read_bytes(), str(source_path), strategy=strategy)
    if updating():
        if not expected_path.is_file() or expected_path.read_bytes() != got:
            expected_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(expected_path, got)
        return
    how = f"set {UPDATE_VAR}=1 or run pytest --castpile-update-snapshots to accept castpile's output"
    if not expected_path.is_file():
        raise AssertionError(f"{expected_path}: no such snapshot of {source_path} (--strategy {strategy}); {how}")
    expected = expected_path.read_bytes()
    if got != expected:
        diff = difflib.unified_diff(
            expected.decode("utf-8", "replace").splitlines(keepends=True),
            got.decode("utf-8", "replace").splitlines(keepends=True),
            str(expected_path),
            f"castpile {source_path} --strategy {strategy}",
        )
        raise AssertionError(
            f"castpile's output for {source_path} differs from {expected_path} ({how}):\n{''.join(diff)}"
        )
