"""The modules that moved into castpile.gpu in 0.2 still import under their old names, with a warning."""

import importlib
import sys

import pytest


@pytest.mark.parametrize("name", ["runtime", "sim", "launch", "collectives"])
def test_old_module_names_warn_and_give_the_new_modules(name):
    sys.modules.pop(f"castpile.{name}", None)
    with pytest.warns(DeprecationWarning, match=f"castpile.{name} moved to castpile.gpu.{name}"):
        old = importlib.import_module(f"castpile.{name}")
    assert old is importlib.import_module(f"castpile.gpu.{name}")


def test_from_castpile_import_collectives_kernels_still_works():
    sys.modules.pop("castpile.collectives", None)
    with pytest.warns(DeprecationWarning):
        from castpile.collectives import kernels_triton
    assert callable(kernels_triton.all_gather.fn)
