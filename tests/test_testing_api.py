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
