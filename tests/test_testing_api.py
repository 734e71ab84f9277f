"""castpile.testing.assert_transpiles_to and its pytest plugin: compare with a checked-in expected file,
fail with a unified diff, write the file (atomically) under CASTPILE_UPDATE_SNAPSHOTS=1 or
--castpile-update-snapshots."""

import os
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import tomllib

from castpile import testing
from castpile.testing import assert_transpiles_to
from testkit.cli import STORE, STORE_BINDING, STORE_KERNEL as KERNEL

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]
PLAIN = "def add(a, b):\n    return a + b\n"  # no castpile: its output is itself
# The plugin is loaded by its entry point once castpile is installed with this pyproject; before, by name.
LOAD_PLUGIN = [] if entry_points(group="pytest11", name="castpile") else ["-p", "castpile.pytest_plugin"]


@pytest.fixture(autouse=True)
def comparing(monkeypatch):
    monkeypatch.delenv(testing.UPDATE_VAR, raising=False)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_an_equal_expected_file_passes(tmp_path):
    assert_transpiles_to(write(tmp_path / "plain.py", PLAIN), write(tmp_path / "plain.txt", PLAIN))


def test_a_different_expected_file_fails_with_a_unified_diff(tmp_path):
    source, expected = write(tmp_path / "plain.py", PLAIN), write(tmp_path / "plain.txt", PLAIN.replace("+", "-"))
    with pytest.raises(AssertionError) as caught:
        assert_transpiles_to(source, expected)
    message = str(caught.value)
    assert f"--- {expected}\n+++ castpile {source} --strategy loop\n@@ -1,2 +1,2 @@\n" in message
    assert " def add(a, b):\n-    return a - b\n+    return a + b\n" in message
    assert "CASTPILE_UPDATE_SNAPSHOTS=1" in message and "--castpile-update-snapshots" in message


def test_a_missing_expected_file_fails_saying_how_to_make_it(tmp_path):
    with pytest.raises(AssertionError, match=r"no such snapshot .* set CASTPILE_UPDATE_SNAPSHOTS=1"):
        assert_transpiles_to(write(tmp_path / "plain.py", PLAIN), tmp_path / "missing.txt")


def test_updating_creates_and_rewrites_the_expected_file_whole(tmp_path, monkeypatch):
    source = write(tmp_path / "kernel.py", KERNEL)
    expected = tmp_path / "snapshots" / "kernel.loop.txt"
    monkeypatch.setenv(testing.UPDATE_VAR, "1")
    assert_transpiles_to(source, expected)
    created = expected.read_text()
    assert created.splitlines(keepends=True)[7:10:2] == [STORE_BINDING + "\n", STORE.format("loop", source) + "\n"]
    assert "def _castpile_store_loop(" in created
    expected.write_text("stale\n")
    os.chmod(expected, 0o640)
    assert_transpiles_to(source, expected)
    assert expected.read_text() == created and (expected.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in expected.parent.iterdir()) == ["kernel.loop.txt"]  # no temporary file left
    monkeypatch.delenv(testing.UPDATE_VAR)
    assert_transpiles_to(source, expected)


def test_the_strategy_is_part_of_the_comparison(tmp_path, monkeypatch):
    source = write(tmp_path / "kernel.py", KERNEL)
    monkeypatch.setenv(testing.UPDATE_VAR, "1")
    assert_transpiles_to(source, tmp_path / "kernel.gather.txt", strategy="gather")
    monkeypatch.delenv(testing.UPDATE_VAR)
    assert (tmp_path / "kernel.gather.txt").read_text().splitlines(keepends=True)[9] == STORE.format(
        "gather", source
    ) + "\n"
    assert_transpiles_to(source, tmp_path / "kernel.gather.txt", strategy="gather")
    with pytest.raises(AssertionError, match="--strategy loop"):
        assert_transpiles_to(source, tmp_path / "kernel.gather.txt", strategy="loop")


SNAPSHOT_TEST = """
from castpile.testing import assert_transpiles_to

def test_kernel_snapshot():
    assert_transpiles_to("kernel.py", "snapshots/kernel.txt")
"""


def test_the_plugin_option_updates_for_its_run_only(pytester):
    pytester.makepyfile(test_snapshot=SNAPSHOT_TEST)
    (pytester.path / "kernel.py").write_text(KERNEL)
    (pytester.path / "snapshots").mkdir()
    (pytester.path / "snapshots" / "kernel.txt").write_text(KERNEL)  # as if castpile had changed nothing
    failed = pytester.runpytest(*LOAD_PLUGIN)
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(
        [
            "*--- snapshots/kernel.txt",
            "*+++ castpile kernel.py --strategy loop",
            "*-    bufs = multicast_like(out, table*",
            "*+    bufs = table",
        ]
    )
    updated = pytester.runpytest(*LOAD_PLUGIN, "--castpile-update-snapshots")
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(["castpile: updating snapshots*"])
    assert (pytester.path / "snapshots" / "kernel.txt").read_text().splitlines(keepends=True)[7] == STORE_BINDING + "\n"
    assert not testing.updating()  # the inner run gave this one its setting back
    pytester.runpytest(*LOAD_PLUGIN).assert_outcomes(passed=1)


def test_the_plugin_lists_its_option(pytester):
    pytester.runpytest(*LOAD_PLUGIN, "--help").stdout.fnmatch_lines(["*--castpile-update-snapshots*"])


def test_the_plugin_is_registered_as_an_entry_point():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"castpile": "castpile.pytest_plugin"}


PROJECT_TEST = """
from castpile.testing import assert_transpiles_to

def test_kernel_snapshot():
    assert_transpiles_to("../kernels/spread.py", "snapshots/spread.loop.txt")
"""


def project(root: Path) -> Path:
    """A user's project: ``kernels/spread.py``, and ``tests/test_spread.py`` that checks its snapshot by relative
    paths, from the test file."""
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "spread.py").write_text(KERNEL)
    (root / "tests").mkdir()
    (root / "tests" / "test_spread.py").write_text(PROJECT_TEST)
    (root / "pytest.ini").write_text("[pytest]\n")  # the rootdir
    return root


@pytest.mark.parametrize("run_from", [".", "tests", "kernels"])
def test_relative_paths_are_the_test_files_and_the_snapshot_names_the_kernel_from_the_rootdir(
    pytester, monkeypatch, run_from
):
    root = project(pytester.path)
    monkeypatch.chdir(root / run_from)
    updated = pytester.runpytest(*LOAD_PLUGIN, "--castpile-update-snapshots", str(root / "tests"))
    updated.assert_outcomes(passed=1)
    snapshot = root / "tests" / "snapshots" / "spread.loop.txt"
    assert "site='kernels/spread.py:10'" in snapshot.read_text().splitlines()[9]  # the store's line, from the rootdir
    pytester.runpytest(*LOAD_PLUGIN, str(root / "tests")).assert_outcomes(passed=1)


def test_a_snapshot_is_the_same_on_another_machine(pytester, monkeypatch, tmp_path_factory):
    first = project(pytester.path / "here")
    monkeypatch.chdir(first)
    pytester.runpytest(*LOAD_PLUGIN, "--castpile-update-snapshots", "tests").assert_outcomes(passed=1)
    snapshot = (first / "tests" / "snapshots" / "spread.loop.txt").read_bytes()
    second = project(tmp_path_factory.mktemp("elsewhere") / "checkout")  # another checkout, another place
    (second / "tests" / "snapshots").mkdir()
    (second / "tests" / "snapshots" / "spread.loop.txt").write_bytes(snapshot)
    monkeypatch.chdir(second / "tests")
    pytester.runpytest(*LOAD_PLUGIN, ".").assert_outcomes(passed=1)
    assert str(first) not in snapshot.decode() and b"site='kernels/spread.py:10'" in snapshot


def test_a_missing_kernel_fails_naming_it_and_where_it_was_looked_for(pytester):
    root = project(pytester.path)
    (root / "tests" / "test_spread.py").write_text(PROJECT_TEST.replace("../kernels/spread.py", "kernels/spread.py"))
    failed = pytester.runpytest(*LOAD_PLUGIN, "tests")  # from the rootdir, where kernels/spread.py does exist
    failed.assert_outcomes(failed=1)
    message = (
        f"E *AssertionError: kernels/spread.py: cannot read the kernel file {root / 'tests' / 'kernels' / 'spread.py'}:"
        f" No such file or directory (relative paths are the calling test file's: {root / 'tests'});"
        f" {root / 'kernels' / 'spread.py'} exists: pass '../kernels/spread.py'"
    )
    failed.stdout.fnmatch_lines([message])
    assert "castpile/testing.py" not in failed.stdout.str()


def test_a_snapshot_that_cannot_be_written_fails_naming_it(tmp_path, monkeypatch):
    source = write(tmp_path / "kernel.py", KERNEL)
    (tmp_path / "taken").mkdir()
    monkeypatch.setenv(testing.UPDATE_VAR, "1")
    with pytest.raises(AssertionError, match=r"taken: cannot write the snapshot .*taken: Is a directory$"):
        assert_transpiles_to(source, tmp_path / "taken")
