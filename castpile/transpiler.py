"""The pipeline: parse -> analyse -> lower -> emit.

    >>> transpile_source(b"import os\\n", "m.py")   # no castpile use: unchanged
    b'import os\\n'

Errors from any stage are collected with their locations and raised together as
one :class:`~castpile.errors.TranspileError`.  What Python itself rejects is
reported from Python's own parser first; what Python accepts but libcst cannot
take is found on Python's tree (see :mod:`castpile.gaps`).  libcst and the passes
then run in a thread whose C stack and recursion limit fit the depth of the
tree, so no input can overflow the stack and crash the process.
"""

from __future__ import annotations

import gc
import re
import sys
import threading

from . import STRATEGIES
from .errors import Diagnostic, TranspileError, source_line

# ast, libcst, sympy and the passes are imported when a file mentions castpile:
# a module that does not is copied through without loading them.

# Deeper nesting, counted as libcst nests (an `and` of n operands is n - 1 levels),
# is refused with a diagnostic rather than transpiled.
MAX_DEPTH = 20_000
# The worker thread's C stack: a base, and an allowance per level of nesting for
# libcst's parser and its conversion to Python objects, which recurse natively.
_STACK_BASE = 32 << 20
_STACK_PER_LEVEL = 4 << 10
# Python frames per level of nesting (libcst's visitors and code generation, and
# castpile's walks, each recurse a few frames per level), and the least limit.
_FRAMES_PER_LEVEL = 16
_RECURSION_LIMIT = 8000

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def _decode_for_display(source: bytes) -> str:
    return source.decode("utf-8", errors="replace")


def parse(source: bytes, path: str):
    """Python's ast of ``source``; what Python itself rejects becomes a located diagnostic.

    The bytes are decoded and ``ast.parse`` runs: both are fast and bounded, so
    undecodable bytes (comments included), NUL bytes and nesting beyond Python's
    own limits are reported before libcst (slow on such input) sees them.
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
    from .gaps import LIBCST_REPEATS, FormFeeds, measure
    from .lower import lower

    text = _decode_for_display(source)
    nesting = measure(parse(source, path))

    def refuse(line: int, byte_col: int, message: str) -> TranspileError:
        shown = source_line(text, line)
        col = len(shown.encode("utf-8")[:byte_col].decode("utf-8", errors="replace")) + 1
        return TranspileError([Diagnostic(path, line, col, message, shown)])

    too_deep = "expression nested too deeply for castpile; split it into smaller statements"
    if nesting.crowded is not None:
        clause = nesting.crowded
        raise refuse(clause.target.lineno, clause.target.col_offset,
                     f"comprehension with more than {LIBCST_REPEATS} 'for' clauses: castpile's parser takes no more; split it")
    if nesting.depth > MAX_DEPTH:
        raise refuse(nesting.line, nesting.col, f"{too_deep} (it nests {nesting.depth} levels; castpile takes {MAX_DEPTH})")
    plain, form_feeds = FormFeeds.take_out(source)

    def passes() -> bytes:
        module = _parse_cst(plain, path, text, form_feeds)
        plan = analyse(module, plain)
        if plan.errors:
            raise TranspileError(_locate(module, path, text, plan.errors, form_feeds))
        if not plan.uses:
            return source
        return form_feeds.put_back(emit(module, plan, lower(module, plan, strategy)))

    try:  # a concatenation of strings nests in libcst, unseen in Python's tree
        return _on_deep_stack(passes, nesting.depth + LIBCST_REPEATS)
    except RecursionError:
        raise refuse(nesting.line, nesting.col, too_deep) from None


def _on_deep_stack(work, levels: int):
    """``work()``, run in a thread with a C stack and a recursion limit for ``levels``
    levels of nesting: its result, or its exception raised here."""
    outcome: list = []

    def run():
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the calling thread
            outcome.append((False, exc))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT, levels * _FRAMES_PER_LEVEL))
    try:
        previous = threading.stack_size(_STACK_BASE + levels * _STACK_PER_LEVEL)
        try:
            worker = threading.Thread(target=run, name="castpile-transpile", daemon=True)
            worker.start()
        finally:
            threading.stack_size(previous)
        worker.join()
    finally:
        sys.setrecursionlimit(limit)
    succeeded, value = outcome[0]
    if succeeded:
        return value
    raise value


def _parse_cst(source: bytes, path: str, text: str, form_feeds):
    """libcst's module of ``source`` (which Python accepts: a refusal is a gap of libcst's)."""
    import libcst as cst

    from .gaps import LIBCST_REPEATS, long_concatenation

    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        run = long_concatenation(source)
        if run is not None:
            line, col = run[0], run[1] + 1
            message = f"more than {LIBCST_REPEATS} implicitly concatenated strings: castpile's parser takes no more; join some"
        else:
            line, col = exc.raw_line, exc.raw_column + 1
            detail = str(exc.message) if hasattr(exc, "message") else str(exc).splitlines()[0]
            message = f"castpile's parser cannot read this, although Python can: {detail}"
        col = form_feeds.column(line, col)
        raise TranspileError([Diagnostic(path, line, col, message, source_line(text, line))]) from None


def _locate(module, path: str, text: str, errors, form_feeds) -> list[Diagnostic]:
    """Diagnostics with 1-based lines and columns (positions resolved only on this error path)."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    found = []
    for node, message in errors:
        start = positions[node].start
        col = form_feeds.column(start.line, start.column + 1)
        found.append(Diagnostic(path, start.line, col, message, source_line(text, start.line)))
    return found
