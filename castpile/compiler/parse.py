"""Parse: source bytes to a libcst module, or located diagnostics for what cannot be read.

Python's own parser runs first (fast and bounded): undecodable bytes, NUL bytes,
syntax errors and nesting beyond Python's limits are reported before libcst sees
them.  What Python accepts but libcst cannot take (see :mod:`castpile.compiler.libcst_gaps`)
is found on Python's tree: nesting deeper than :data:`MAX_DEPTH` levels as libcst
counts them, and libcst's caps on repetitions, are refused with a diagnostic; the
depth found tells :mod:`castpile.compiler.thread_stack` how deep a stack libcst needs.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from .errors import Diagnostic, TranspileError, source_line

# Deeper nesting, counted as libcst nests (an `and` of n operands is n - 1 levels),
# is refused with a diagnostic rather than transpiled.
MAX_DEPTH = 20_000
TOO_DEEP = "expression nested too deeply for castpile; split it into smaller statements"

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class Checked(NamedTuple):
    """A source that Python accepts and libcst can take: its text for display, the bytes
    libcst parses (form feeds in indentation taken out), the form feeds to put back,
    and the deepest nesting libcst will meet (levels, line, byte column)."""

    text: str
    plain: bytes
    form_feeds: object
    levels: int
    deepest: tuple[int, int]


def check(source: bytes, path: str) -> Checked:
    """What libcst needs to parse ``source``, or a :class:`TranspileError` for what it cannot."""
    from .libcst_gaps import LIBCST_REPEATS, FormFeeds, measure

    text = _decode_for_display(source)
    nesting = measure(_python_tree(source, path, text))
    if nesting.crowded is not None:
        clause = nesting.crowded
        raise refusal(path, text, clause.target.lineno, clause.target.col_offset,
                      f"comprehension with more than {LIBCST_REPEATS} 'for' clauses: castpile's parser takes no more; split it")
    if nesting.depth > MAX_DEPTH:
        raise refusal(path, text, nesting.line, nesting.col,
                      f"{TOO_DEEP} (it nests {nesting.depth} levels; castpile takes {MAX_DEPTH})")
    plain, form_feeds = FormFeeds.take_out(source)
    # a concatenation of strings nests in libcst, unseen in Python's tree
    return Checked(text, plain, form_feeds, nesting.depth + LIBCST_REPEATS, (nesting.line, nesting.col))


def refusal(path: str, text: str, line: int, byte_col: int, message: str) -> TranspileError:
    """A located error at ``line`` and the byte column ``byte_col`` (0-based) of that line."""
    shown = source_line(text, line)
    col = len(shown.encode("utf-8")[:byte_col].decode("utf-8", errors="replace")) + 1
    return TranspileError([Diagnostic(path, line, col, message, shown)])


def _decode_for_display(source: bytes) -> str:
    return source.decode("utf-8", errors="replace")


def _python_tree(source: bytes, path: str, text: str):
    """Python's ast of ``source``; what Python itself rejects becomes a located diagnostic.

    The bytes are decoded and ``ast.parse`` runs: both are fast and bounded, so
    undecodable bytes (comments included), NUL bytes and nesting beyond Python's
    own limits are reported before libcst (slow on such input) sees them.
    """
    import ast
    import io
    import tokenize

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
        return ast.parse(source, path)
    except SyntaxError as exc:
        line, col = exc.lineno or 1, max(exc.offset or 1, 1)
        raise TranspileError([Diagnostic(path, line, col, f"syntax error: {exc.msg}", source_line(text, line))]) from None
    except (RecursionError, MemoryError):
        raise TranspileError([Diagnostic(path, 1, 1, "file is nested too deeply for Python's parser")]) from None


def _byte_position(source: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of byte ``offset``, lines broken as Python breaks them."""
    head = source[:offset]
    breaks = list(_LINE_BREAK.finditer(head))
    start = breaks[-1].end() if breaks else 0
    return len(breaks) + 1, offset - start + 1


def parse_module(checked: Checked, path: str):
    """libcst's module of ``checked.plain`` (which Python accepts: a refusal is a gap of libcst's)."""
    import libcst as cst

    from .libcst_gaps import LIBCST_REPEATS, long_concatenation

    try:
        return cst.parse_module(checked.plain)
    except cst.ParserSyntaxError as exc:
        run = long_concatenation(checked.plain)
        if run is not None:
            line, col = run[0], run[1] + 1
            message = f"more than {LIBCST_REPEATS} implicitly concatenated strings: castpile's parser takes no more; join some"
        else:
            line, col = exc.raw_line, exc.raw_column + 1
            detail = str(exc.message) if hasattr(exc, "message") else str(exc).splitlines()[0]
            message = f"castpile's parser cannot read this, although Python can: {detail}"
        col = checked.form_feeds.column(line, col)
        raise TranspileError([Diagnostic(path, line, col, message, source_line(checked.text, line))]) from None


def locate(module, path: str, checked: Checked, errors) -> list[Diagnostic]:
    """The analysis' ``errors`` as diagnostics with 1-based lines and columns (positions resolved only on this error path)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = []
    for node, message in errors:
        start = positions[node].start
        col = checked.form_feeds.column(start.line, start.column + 1)
        found.append(Diagnostic(path, start.line, col, message, source_line(checked.text, start.line)))
    return found
