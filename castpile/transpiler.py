"""The pipeline: parse -> analyse -> lower -> emit.

    >>> transpile_source(b"import os\\n", "m.py")   # no castpile use: unchanged
    b'import os\\n'

Errors from any stage are collected with their locations and raised together as
one :class:`~castpile.errors.TranspileError`.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from . import STRATEGIES
from .analyse import analyse
from .emit import render
from .errors import Diagnostic, TranspileError, source_line


def _decode_for_display(source: bytes) -> str:
    return source.decode("utf-8", errors="replace")


def parse(source: bytes, path: str) -> cst.Module:
    """libcst module of ``source``; a syntax error becomes a located diagnostic."""
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        text = _decode_for_display(source)
        line, col = exc.raw_line, exc.raw_column + 1
        message = str(exc.message) if hasattr(exc, "message") else str(exc).splitlines()[0]
        raise TranspileError([Diagnostic(path, line, col, f"syntax error: {message}", source_line(text, line))]) from None


def transpile_source(source: bytes | str, path: str = "<string>", *, strategy: str = "loop") -> bytes:
    """Transpile one module; see :func:`castpile.transpile`."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if isinstance(source, str):
        source = source.encode("utf-8")
    if b"castpile" not in source:
        return source
    module = parse(source, path)
    plan = analyse(module)
    if plan.errors:
        raise TranspileError(_locate(module, source, path, plan.errors))
    if not plan.uses:
        return source
    return render(module, plan, strategy)


def _locate(module: cst.Module, source: bytes, path: str, errors) -> list[Diagnostic]:
    """Diagnostics with 1-based lines and columns (positions resolved only on this error path)."""
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    text = _decode_for_display(source)
    found = []
    for node, message in errors:
        start = positions[node].start
        found.append(Diagnostic(path, start.line, start.column + 1, message, source_line(text, start.line)))
    return found
