"""Deprecated aliases: the modules that moved into :mod:`castpile.gpu` in 0.2 (removed in 0.3)."""

import importlib
import sys
import warnings


def alias(old: str, new: str) -> None:
    """Make module ``old`` (being imported) be module ``new``, with a ``DeprecationWarning``."""
    warnings.warn(f"{old} moved to {new} in castpile 0.2; the old name goes away in 0.3", DeprecationWarning,
                  stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
