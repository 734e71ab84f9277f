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
from typing import TYPE_CHECKING, NamedTuple

from . import diagnostics
from .diagnostics import Message
from .errors import Diagnostic, TranspileError, source_line

if TYPE_CHECKING:  # imported where a source is checked (see check)
    from .libcst_gaps import FormFeeds

# Deeper nesting, counted as libcst nests (an `and` of n operands is n - 1 levels),
# is refused with a diagnostic rather than transpiled.
MAX_DEPTH = 20_000

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class Checked(NamedTuple):
    """A source that Python accepts and libcst can take: its text for display, the bytes
    libcst parses (form feeds in indentation taken out), the form feeds to put back,
    and the deepest nesting libcst will meet (levels, line, byte column)."""

    text: str
    plain: bytes
    form_feeds: FormFeeds
    levels: int
    deepest: tuple[int, int]


def check(source: bytes, path: str) -> Checked:
    """What libcst needs to parse ``source``, or a :class:`TranspileError` for what it cannot."""
    from .libcst_gaps import LIBCST_REPEATS, FormFeeds, measure

    text = _decode_for_display(source)
    nesting = measure(_python_tree(source, path, text))
    if nesting.crowded is not None:
        clause = nesting.crowded
        raise refusal(
            path,
            text,
            clause.target.lineno,
            clause.target.col_offset,
            diagnostics.TOO_MANY_FOR_CLAUSES,
            limit=LIBCST_REPEATS,
        )
    if nesting.depth > MAX_DEPTH:
        raise refusal(path, text, nesting.line, nesting.col, diagnostics.TOO_DEEP, depth=nesting.depth, limit=MAX_DEPTH)
    plain, form_feeds = FormFeeds.take_out(source)
    # a concatenation of strings nests in libcst, unseen in Python's tree
    return Checked(text, plain, form_feeds, nesting.depth + LIBCST_REPEATS, (nesting.line, nesting.col))


def refusal(path: str, text: str, line: int, byte_col: int, message: Message, **params) -> TranspileError:
    """``message`` located at ``line`` and the byte column ``byte_col`` (0-based) of that line."""
    shown = source_line(text, line)
    col = len(shown.encode("utf-8")[:byte_col].decode("utf-8", errors="replace")) + 1
    return TranspileError([message.at(path, line, col, shown, **params)])


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
        raise TranspileError([diagnostics.NUL_BYTE.at(path, line, col, source_line(text, line))])
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        source.decode(encoding)
    except UnicodeDecodeError as exc:
        line, col = _byte_position(source, exc.start)
        found = diagnostics.UNDECODABLE.at(
            path, line, col, source_line(text, line), byte=f"{source[exc.start]:#04x}", encoding=exc.encoding
        )
        raise TranspileError([found]) from None
    except SyntaxError as exc:  # an unknown or inconsistent coding cookie
        line = exc.lineno or 1
        raise TranspileError([diagnostics.SYNTAX.at(path, line, 1, source_line(text, line), detail=exc.msg)]) from None
    try:
        return ast.parse(source, path)
    except SyntaxError as exc:
        line, col = exc.lineno or 1, max(exc.offset or 1, 1)
        raise TranspileError(
            [diagnostics.SYNTAX.at(path, line, col, source_line(text, line), detail=exc.msg)]
        ) from None
    except (RecursionError, MemoryError):
        raise TranspileError([diagnostics.TOO_DEEP_FOR_PYTHON.at(path, 1, 1)]) from None


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
        params: dict[str, object]
        if run is not None:
            line, col = run[0], run[1] + 1
            message, params = diagnostics.TOO_MANY_STRINGS, {"limit": LIBCST_REPEATS}
        else:
            line, col = exc.raw_line, exc.raw_column + 1
            detail = str(exc.message) if hasattr(exc, "message") else str(exc).splitlines()[0]
            message, params = diagnostics.PARSER_GAP, {"detail": detail}
        col = checked.form_feeds.column(line, col)
        raise TranspileError([message.at(path, line, col, source_line(checked.text, line), **params)]) from None


def locate(module, path: str, checked: Checked, errors) -> list[Diagnostic]:
    """The analysis' ``errors`` as diagnostics with 1-based lines and columns (positions resolved only on this error path)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = []
    for node, message, params in errors:
        start = positions[node].start
        col = checked.form_feeds.column(start.line, start.column + 1)
        found.append(message.at(path, start.line, col, source_line(checked.text, start.line), **params))
    return found
