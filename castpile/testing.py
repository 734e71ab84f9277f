"""Snapshot tests of what castpile writes: :func:`assert_transpiles_to` compares a kernel's output with a checked-in file.

::

    from castpile.testing import assert_transpiles_to

    def test_allreduce_kernel_output():  # in tests/test_kernels.py
        assert_transpiles_to("../kernels/allreduce.py", "snapshots/allreduce.loop.txt")

Relative paths are the calling test file's (as ``Path(__file__).parent / PATH`` would be), whatever the
working directory.  The path castpile is given for the kernel, which its output records (each store's
``site='PATH:LINE'``), is the kernel's path relative to pytest's rootdir (``/``-separated), so a snapshot
is the same on every machine and from every directory; outside pytest (or with ``-p no:castpile``), relative
to the working directory; a kernel outside that directory, by its absolute path.

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
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .options import Strategy

UPDATE_VAR = "CASTPILE_UPDATE_SNAPSHOTS"
_updating = False
_rootdir: Path | None = None


def set_rootdir(rootdir: str | os.PathLike | None) -> Path | None:
    """Record kernels' paths relative to ``rootdir`` (pytest's: the plugin sets it for its run); None: the working
    directory.  Returns the setting it replaces."""
    global _rootdir
    previous, _rootdir = _rootdir, (None if rootdir is None else Path(rootdir).resolve())
    return previous


def set_updating(enabled: bool) -> bool:
    """Write expected files instead of comparing, as ``CASTPILE_UPDATE_SNAPSHOTS=1`` does (the pytest option);
    returns the setting it replaces."""
    global _updating
    previous, _updating = _updating, enabled
    return previous


def updating() -> bool:
    """Whether :func:`assert_transpiles_to` writes the expected files: the pytest option, or ``CASTPILE_UPDATE_SNAPSHOTS=1``."""
    return _updating or os.environ.get(UPDATE_VAR) == "1"


def assert_transpiles_to(
    source_path: str | os.PathLike[str], expected_path: str | os.PathLike[str], strategy: Strategy = "loop"
) -> None:
    """Pass when castpile's output for the file ``source_path`` is the file ``expected_path``, byte for byte.

    Relative paths are the calling file's (see the module docstring, also for the path the output records).
    Otherwise raise ``AssertionError`` with a unified diff (or, the expected file missing, say how to create
    it; the source missing, say where it was looked for); while :func:`updating`, write ``expected_path`` (its
    directory too) and pass.  A source with errors raises :class:`castpile.TranspileError`.
    """
    __tracebackhide__ = True  # pytest shows the caller's line and this message, not this function's body
    from .compiler import transpile_source as transpile
    from .files import write_atomically

    base = _caller_directory()
    source, expected = _resolved(source_path, base), _resolved(expected_path, base)
    shown_source, shown_expected = _recorded(source), _recorded(expected)
    try:
        text = source.read_bytes()
    except OSError as exc:
        raise AssertionError(_unreadable(source_path, source, base, exc)) from None
    got = transpile(text, shown_source, strategy=strategy)
    if updating():
        try:
            if not expected.is_file() or expected.read_bytes() != got:
                expected.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(expected, got)
        except OSError as exc:
            raise AssertionError(
                f"{shown_expected}: cannot write the snapshot {expected}: {exc.strerror or exc}"
            ) from None
        return
    how = f"set {UPDATE_VAR}=1 or run pytest --castpile-update-snapshots to accept castpile's output"
    if not expected.is_file():
        raise AssertionError(f"{shown_expected}: no such snapshot of {shown_source} (--strategy {strategy}); {how}")
    wanted = expected.read_bytes()
    if got != wanted:
        diff = difflib.unified_diff(
            wanted.decode("utf-8", "replace").splitlines(keepends=True),
            got.decode("utf-8", "replace").splitlines(keepends=True),
            shown_expected,
            f"castpile {shown_source} --strategy {strategy}",
        )
        raise AssertionError(
            f"castpile's output for {shown_source} differs from {shown_expected} ({how}):\n{''.join(diff)}"
        )


def _caller_directory() -> Path:
    """The directory of the file whose code called :func:`assert_transpiles_to`; the working directory where that
    code names no file (``exec`` of a string, an interactive session)."""
    caller = sys._getframe(2).f_code.co_filename
    return Path(caller).resolve().parent if os.path.isfile(caller) else Path.cwd()


def _resolved(path, base: Path) -> Path:
    path = Path(path).expanduser()
    return path if path.is_absolute() else base / path


def _recorded(path: Path) -> str:
    """``path`` as castpile is given it: relative to the rootdir (or, without one, the working directory) and
    ``/``-separated when it lies inside, else absolute."""
    root = _rootdir if _rootdir is not None else Path.cwd().resolve()
    absolute = Path(os.path.abspath(path))
    for candidate in (absolute, absolute.resolve()):  # a rootdir reached through a symlink, or not
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(absolute)


def _unreadable(given, source: Path, base: Path, exc: OSError) -> str:
    """Why the kernel ``given`` (at ``source``) cannot be read, and where relative paths are looked for."""
    why = exc.strerror or str(exc)
    message = f"{given}: cannot read the kernel file {source}: {why}"
    if not Path(given).is_absolute():
        message += f" (relative paths are the calling test file's: {base})"
        if (Path.cwd() / given).is_file():
            message += f"; {Path.cwd() / given} exists: pass {os.path.relpath(Path.cwd() / given, base)!r}"
    return message
