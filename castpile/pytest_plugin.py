"""The pytest plugin (entry point ``pytest11``): ``--castpile-update-snapshots`` makes
:func:`castpile.testing.assert_transpiles_to` write the expected files, for that run only; and the paths its
snapshots record are relative to the run's rootdir."""

from pathlib import Path

import pytest

from . import testing

_PREVIOUS = pytest.StashKey[bool]()
_PREVIOUS_ROOTDIR = pytest.StashKey[Path | None]()


def pytest_addoption(parser):
    parser.getgroup("castpile").addoption(
        "--castpile-update-snapshots",
        action="store_true",
        help=f"write castpile.testing.assert_transpiles_to's expected files instead of comparing "
        f"(as {testing.UPDATE_VAR}=1 does)",
    )


def pytest_configure(config):
    config.stash[_PREVIOUS] = testing.set_updating(config.getoption("castpile_update_snapshots"))
    config.stash[_PREVIOUS_ROOTDIR] = testing.set_rootdir(config.rootpath)  # snapshots record paths from here


def pytest_unconfigure(config):  # a pytest run inside another (pytester) gives the outer one its settings back
    testing.set_updating(config.stash.get(_PREVIOUS, False))
    testing.set_rootdir(config.stash.get(_PREVIOUS_ROOTDIR, None))


def pytest_report_header(config):
    if testing.updating():
        return "castpile: updating snapshots (assert_transpiles_to writes its expected files)"
    return None
