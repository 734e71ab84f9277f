"""Deprecated: moved to :mod:`castpile.gpu.collectives` in castpile 0.2."""

from ._moved import alias

alias(__name__, "castpile.gpu.collectives")
