"""The pipeline: parse -> analyse -> lower -> emit, one module per pass.

    >>> transpile_source(b"import os\\n", "m.py")   # no castpile use: unchanged
    b'import os\\n'

Errors from any stage are collected with their locations and raised together as
one :class:`~castpile.compiler.errors.TranspileError`.  libcst and the passes run
on a stack deep enough for the source (:mod:`castpile.compiler.thread_stack`).  ast,
libcst, sympy and the passes load only when a file mentions castpile.
"""

from __future__ import annotations

import gc

from ..options import check_strategy, debug_waits_problem, mentions_castpile
from . import parse
from .thread_stack import on_deep_stack

MAX_TRANSPILE_BYTES = 4 * 1024 * 1024
"""Larger sources that use castpile are diagnosed: transpiling takes about 1 KiB of
memory per source byte.  Larger files without castpile pass through."""


def transpile_source(
    source: bytes | str, path: str = "<string>", *, strategy: str = "loop", debug_waits: float | None = None
) -> bytes:
    """Transpile one module; see :func:`castpile.transpile`."""
    check_strategy(strategy)
    problem = None if debug_waits is None else debug_waits_problem(debug_waits)
    if problem is not None:
        raise ValueError(
            f"debug_waits={debug_waits!r} {problem}: give the seconds a castpile.wait may spin, more than 0, "
            "as in debug_waits=5"
        )
    if isinstance(source, str):
        source = source.encode("utf-8")
    if not mentions_castpile(source):
        return source
    if len(source) > MAX_TRANSPILE_BYTES:
        from .diagnostics import TOO_LARGE
        from .errors import TranspileError

        size, limit = f"{len(source) / 2**20:.1f}", MAX_TRANSPILE_BYTES // (1024 * 1024)
        raise TranspileError([TOO_LARGE.at(path, 1, 1, size=size, limit=limit)])
    collecting = gc.isenabled()
    gc.disable()  # libcst trees are large and acyclic: the cyclic GC only makes big files superlinear
    try:
        return _transpile(source, path, strategy, debug_waits)
    finally:
        if collecting:
            gc.enable()


def _transpile(source: bytes, path: str, strategy: str, debug_waits: float | None) -> bytes:
    from .analyse import analyse
    from .emit import emit
    from .errors import TranspileError
    from .lower import lower

    checked = parse.check(source, path)

    def passes() -> bytes:
        module = parse.parse_module(checked, path)
        plan = analyse(module, checked.plain)
        if plan.errors:
            raise TranspileError(parse.locate(module, path, checked, plan.errors))
        if not plan.uses:
            return source
        lowering = lower(module, plan, strategy, debug_waits)
        return checked.form_feeds.put_back(emit(module, plan, lowering, path))

    try:
        return on_deep_stack(passes, checked.levels)
    except RecursionError:
        from .diagnostics import TOO_DEEP_FOR_THE_STACK

        raise parse.refusal(path, checked.text, *checked.deepest, TOO_DEEP_FOR_THE_STACK) from None
