"""The compiler: castpile-language source to plain Triton, in four passes.

parse (:mod:`.parse`) -> analyse (:mod:`.analyse`, a typed :mod:`.plan`) ->
lower (:mod:`.lower`) -> emit (:mod:`.emit`), run by :mod:`.pipeline`; the
Triton helpers the output carries are :mod:`.helpers`.  Nothing here imports the
GPU runtime (:mod:`castpile.gpu`) or the front ends.
"""

from .pipeline import transpile_source

__all__ = ["transpile_source"]
