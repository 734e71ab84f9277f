"""Deprecated: moved to :mod:`castpile.gpu.launch` in castpile 0.2."""

from ._moved import alias

alias(__name__, "castpile.gpu.launch")
