"""The diagnostic catalogue (castpile/compiler/diagnostics.py) is the one place messages are defined: every
located error comes from it, every id is tested, and docs/language.md's table is the catalogue's."""

import ast
import re
import tokenize
from pathlib import Path

import pytest

from castpile.compiler import diagnostics
from castpile.compiler.diagnostics import CATALOGUE, Message
from testkit import import_file

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
COMPILER = ROOT / "castpile" / "compiler"
ID = re.compile(r"\bE\d{3}\b")

HOSTILE_ONLY: dict[str, str] = {}
"""Ids no test input reaches, each with the reason (none today: fault injection stands in for the inputs
that no one knows, tests/test_bytes_and_bounds.py)."""


def named_ids(path: Path) -> set[str]:
    """The ids in the string literals of ``path`` (a linter's code in a ``# noqa`` comment is no id)."""
    with path.open("rb") as file:
        strings = [token.string for token in tokenize.tokenize(file.readline) if token.type == tokenize.STRING]
    return set(ID.findall("\n".join(strings)))


def test_every_id_is_named_by_a_test_or_listed_as_reached_only_by_hostile_input():
    """The checkable rule: a string in a test file other than this one names the id (tests assert on ids)."""
    named = set().union(*(named_ids(p) for p in TESTS.rglob("*.py") if p != Path(__file__).resolve()))
    untested = [id for id in CATALOGUE if id not in named and id not in HOSTILE_ONLY]
    assert untested == [], f"no test names these ids: {untested}"
    assert not (named & set(HOSTILE_ONLY)), "a test reaches these now: take them off HOSTILE_ONLY"


def test_every_id_a_test_names_is_in_the_catalogue():
    for path in TESTS.rglob("*.py"):
        assert named_ids(path) <= set(CATALOGUE), (path.name, sorted(named_ids(path) - set(CATALOGUE)))


def _compiler_modules():
    return sorted(p for p in COMPILER.rglob("*.py") if p.name != "diagnostics.py")


def test_every_message_the_compiler_reports_is_an_entry_of_the_catalogue():
    """Each ``diagnostics.NAME`` and each name imported from the catalogue is one of its messages, and no module
    but the catalogue makes a Diagnostic (so no message is written anywhere else)."""
    for path in _compiler_modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "diagnostics":
                assert isinstance(getattr(diagnostics, node.attr, None), Message), (path.name, node.attr)
            elif isinstance(node, ast.ImportFrom) and node.module == "diagnostics":
                for alias in node.names:
                    assert alias.name == "Message" or isinstance(getattr(diagnostics, alias.name), Message), alias.name
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Diagnostic":
                assert path.name == "errors.py", f"{path.name}:{node.lineno} makes a Diagnostic: use Message.at"


def test_each_entry_is_one_module_name_with_a_grouped_id_and_parameters_it_fills():
    names = {value.id: name for name, value in vars(diagnostics).items() if isinstance(value, Message)}
    assert sorted(names) == list(CATALOGUE), "ids in the order of their groups, each bound to one name"
    for message in CATALOGUE.values():
        assert re.fullmatch(r"E[0-7]\d\d", message.id) and message.problem == message.problem.strip()
        filled = message.text(**{field: f"<{field}>" for field in message.fields})
        assert all(f"<{field}>" in filled for field in message.fields) and "{" not in filled, message.id


def test_a_message_takes_exactly_its_parameters():
    assert (
        diagnostics.SUBSCRIPT_ONLY.text(name="x")
        == "'x' is a multicast tensor and may only be subscripted, as in x[idx]"
    )
    with pytest.raises(TypeError, match="E201 takes the parameters"):
        diagnostics.SUBSCRIPT_ONLY.text()
    with pytest.raises(TypeError):
        diagnostics.SUBSCRIPT_ONLY.text(name="x", extra=1)
    with pytest.raises(ValueError, match="defined twice"):
        Message("E201", "again")


def test_the_docs_table_is_the_catalogue():
    script = import_file(ROOT / "scripts" / "errors_table.py", "errors_table")
    doc = (ROOT / "docs" / "language.md").read_text()
    assert script.replaced(doc) == doc, "run python scripts/errors_table.py"
    assert all(f"| `{id}` |" in doc for id in CATALOGUE)
