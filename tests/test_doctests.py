"""The examples in castpile's docstrings run and hold (none is skipped)."""

import doctest
import importlib
import pkgutil

import pytest

import castpile

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(castpile.__path__, "castpile.")
    if not m.name.startswith(("castpile.gpu", "castpile.__main__"))
)


def test_every_module_is_found():
    assert {"castpile.compiler.algebra", "castpile.compiler.analyse", "castpile.options"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    for test in finder.find(module):
        assert not any(e.options.get(doctest.SKIP) for e in test.examples), f"skipped example in {test.name}"
    failures, _ = doctest.testmod(module, verbose=False)
    assert failures == 0
