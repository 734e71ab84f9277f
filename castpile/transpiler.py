"""The pipeline: parse -> analyse -> lower -> emit.

    >>> transpile_source(b"import os\\n", "m.py")   # no castpile use: unchanged
    b'import os\\n'

Errors from any stage are collected with their locations and raised together as
one :class:`~castpile.errors.TranspileError`.
"""

from __future__ import annotations

import gc
import sys

from . import STRATEGIES
from .errors import Diagnostic, TranspileError, source_line

# ast, libcst, sympy and the passes are imported when a file mentions castpile:
# a module that does not is copied through without loading them.


# libcst's visitors recurse a few frames per nesting level; Python's default of
# 1000 is too little for some real code (CPython's parser caps nesting itself).
_RECURSION_LIMIT = 8000


def _decode_for_display(source: bytes) -> str:
    return source.decode("utf-8", errors="replace")


def parse(source: bytes, path: str):
    """libcst module of ``source``; what Python itself rejects becomes a located diagnostic.

    The bytes are decoded and ``ast.parse`` runs first: both are fast and bounded,
    so undecodable bytes (comments included), NUL bytes and nesting beyond
    Python's own limits are reported before libcst (slow on such input) sees them.
    """
    import ast
    import io
    import tokenize

    text = _decode_for_display(source)
    if b"\0" in source:
        line, col = _byte_position(source, source.find(b"\0"))
        raise TranspileError([Diagnostic(path, line, col, "syntax error: source contains a NUL byte", source_line(text, line))])
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        source.decode(encoding)
    except UnicodeDecodeError as exc:
        line, col = _byte_position(source, exc.start)
        message = f"syntax error: byte {source[exc.start]:#04x} is not valid {exc.encoding}; declare the file's encoding or convert it"
        raise TranspileError([Diagnostic(path, line, col, message, source_line(text, line))]) from None
    except SyntaxError as exc:  # an unknown or inconsistent coding cookie
        line = exc.lineno or 1
        raise TranspileError([Diagnostic(path, line, 1, f"syntax error: {exc.msg}", source_line(text, line))]) from None
    try:
        ast.parse(source, path)
    except SyntaxError as exc:
        line, col = exc.lineno or 1, max(exc.offset or 1, 1)
        raise TranspileError([Diagnostic(path, line, col, f"syntax error: {exc.msg}", source_line(text, line))]) from None
    except (RecursionError, MemoryError):
        raise TranspileError([Diagnostic(path, 1, 1, "file is nested too deeply for Python's parser")]) from None
    return _parse_cst(source, path, text)


def _parse_cst(source: bytes, path: str, text: str):
    """libcst's parse (of source that Python accepts)."""
    import libcst as cst

    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        line, col = exc.raw_line, exc.raw_column + 1
        message = str(exc.message) if hasattr(exc, "message") else str(exc).splitlines()[0]
        raise TranspileError([Diagnostic(path, line, col, f"syntax error: {message}", source_line(text, line))]) from None


def _byte_position(source: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column of byte ``offset``."""
    start = source.rfind(b"\n", 0, offset) + 1
    return source.count(b"\n", 0, offset) + 1, offset - start + 1


def _deepest_line(source: bytes) -> int:
    """The line of the most deeply nested node of ``source`` (1 when unknown)."""
    import ast

    stack, best, line = [(ast.parse(source), 0)], -1, 1
    while stack:
        node, depth = stack.pop()
        if depth > best and hasattr(node, "lineno"):
            best, line = depth, node.lineno
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return line


def transpile_source(source: bytes | str, path: str = "<string>", *, strategy: str = "loop") -> bytes:
    """Transpile one module; see :func:`castpile.transpile`."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if isinstance(source, str):
        source = source.encode("utf-8")
    if b"castpile" not in source:
        return source
    collecting = gc.isenabled()
    gc.disable()  # libcst trees are large and acyclic: the cyclic GC only makes big files superlinear
    try:
        return _transpile(source, path, strategy)
    finally:
        if collecting:
            gc.enable()


def _transpile(source: bytes, path: str, strategy: str) -> bytes:
    from .analyse import analyse
    from .emit import emit
    from .lower import lower

    module = parse(source, path)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        plan = analyse(module, source)
        if plan.errors:
            raise TranspileError(_locate(module, source, path, plan.errors))
        if not plan.uses:
            return source
        return emit(module, plan, lower(module, plan, strategy))
    except RecursionError:
        line = _deepest_line(source)
        text = _decode_for_display(source)
        message = "expression nested too deeply for castpile; split it into smaller statements"
        raise TranspileError([Diagnostic(path, line, 1, message, source_line(text, line))]) from None
    finally:
        sys.setrecursionlimit(limit)


def _locate(module, source: bytes, path: str, errors) -> list[Diagnostic]:
    """Diagnostics with 1-based lines and columns (positions resolved only on this error path)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    text = _decode_for_display(source)
    found = []
    for node, message in errors:
        start = positions[node].start
        found.append(Diagnostic(path, start.line, start.column + 1, message, source_line(text, start.line)))
    return found
