"""Where libcst and Python's parser part ways, found with Python's own ast and tokens.

Three gaps matter to a byte-preserving compiler that must never crash:

* **Form feeds in indentation.**  Python resets the indentation column at a form
  feed, so ``"\\f    x = 1"`` is indented like ``"    x = 1"``; libcst drops a form
  feed there (anywhere else it keeps it).  :class:`FormFeeds` takes that part of the
  indentation out before libcst parses and puts it back into the output, whose
  lines keep their numbers and indentation.
* **Nesting.**  Python keeps the operands of ``and``/``or`` in one list; libcst pairs
  them, so an expression Python holds flat nests one level per operand in libcst,
  whose parser recurses on the C stack.  :func:`measure` finds the depth libcst's
  tree will have before libcst runs, so the caller can refuse it or give the
  parser the stack it needs.
* **Repetition.**  libcst refuses a comprehension with more ``for`` clauses, or a
  run of more implicitly concatenated strings, than :data:`LIBCST_REPEATS`, as a
  syntax error at a wrong place; :func:`measure` and :func:`long_concatenation`
  find where.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import NamedTuple

# libcst's parser builds at most this many nested nodes from one repetition
# (its MAX_RECURSION_DEPTH): string concatenations and comprehension `for` clauses.
LIBCST_REPEATS = 3000

_BOM = b"\xef\xbb\xbf"
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # one line as Python counts them, with its break
_INDENT_TO_LAST_FORM_FEED = re.compile(rb"[ \t\f]*\f")
_NOT_CODE = {tokenize.ENCODING, tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
_FSTRING_STARTS = {getattr(tokenize, name) for name in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, name)}
_FSTRING_ENDS = {getattr(tokenize, name) for name in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, name)}
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def _lines(source: bytes) -> list[bytes]:
    """``source`` split into lines at ``\\r\\n``, ``\\r`` and ``\\n`` (Python's line numbering), breaks kept."""
    return _LINE.findall(source)


def _tokens(source: bytes):
    """Python's tokens of ``source``, numbered by Python's lines (tokenize's reader splits at ``\\n`` only)."""
    return tokenize.tokenize(io.BytesIO(re.sub(rb"\r\n?", b"\n", source)).readline)


class FormFeeds:
    """The indentation, up to its last form feed, taken out of lines that start a statement or clause."""

    def __init__(self, taken: dict[int, bytes]):
        self.taken = taken  # 1-based line -> the bytes taken from its start (after a BOM)

    @classmethod
    def take_out(cls, source: bytes) -> tuple[bytes, FormFeeds]:
        """``source`` without those form feeds, and what was taken out."""
        if b"\f" not in source:
            return source, cls({})
        split = _lines(source)
        found = {}
        for number, line in enumerate(split, 1):
            start = len(_BOM) if number == 1 and line.startswith(_BOM) else 0
            indent = _INDENT_TO_LAST_FORM_FEED.match(line, start)
            if indent and line[indent.end() :].strip(b" \t\f\r\n"):
                found[number] = (start, indent.end())
        if not found:
            return source, cls({})
        taken = {}
        for number in _statement_starts(source, set(found)):
            start, end = found[number]
            line = split[number - 1]
            taken[number] = line[start:end]
            split[number - 1] = line[:start] + line[end:]
        return b"".join(split), cls(taken)

    def put_back(self, output: bytes) -> bytes:
        """``output`` (lines numbered as in the source) with what was taken out back in place."""
        if not self.taken:
            return output
        split = _lines(output)
        for number, indent in self.taken.items():
            line = split[number - 1]
            start = len(_BOM) if number == 1 and line.startswith(_BOM) else 0
            split[number - 1] = line[:start] + indent + line[start:]
        return b"".join(split)

    def column(self, line: int, col: int) -> int:
        """The source's column of ``col`` on ``line`` of the text with the form feeds taken out."""
        return col + len(self.taken.get(line, b""))


def _statement_starts(source: bytes, wanted: set[int]) -> set[int]:
    """The lines of ``wanted`` on which a logical line (a statement or clause) starts."""
    starts, at_start, last = set(), True, max(wanted, default=0)
    try:
        for token in _tokens(source):
            if token.start[0] > last:
                break
            if token.type == tokenize.NEWLINE:
                at_start = True
            elif token.type not in _NOT_CODE and at_start:
                starts.add(token.start[0])
                at_start = False
    except (tokenize.TokenError, SyntaxError):
        pass  # tokenize (pure Python before 3.12) may refuse what the parser took: lines read so far count
    return starts & wanted


class Nesting(NamedTuple):
    """How deep libcst's tree of a module goes, where, and what libcst will refuse."""

    depth: int
    line: int
    col: int  # 0-based, in UTF-8 bytes (as ast counts)
    crowded: ast.comprehension | None  # the first `for` clause past LIBCST_REPEATS of a comprehension


def measure(tree: ast.Module) -> Nesting:
    """The deepest node of ``tree`` as libcst nests it: the ``i``-th of ``n`` operands of
    ``and``/``or`` lies ``n - i`` levels below the operator (the first as deep as the
    second), the ``k``-th ``for`` clause of a comprehension ``k`` levels below its first."""
    depth, line, col, crowded = 0, 1, 0, None
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    push, extend = stack.append, stack.extend
    while stack:  # children are pushed last first: of equally deep nodes, the first in the source is reported
        node, level = stack.pop()
        node_line = getattr(node, "lineno", None)  # the nodes that have a position
        if level > depth and node_line is not None:
            depth, line, col = level, node_line, getattr(node, "col_offset", 0)
        kind = type(node)
        if isinstance(node, ast.BoolOp):
            count = len(node.values)
            extend([(value, level + count - max(i, 1)) for i, value in reversed(list(enumerate(node.values)))])
            continue
        if isinstance(node, _COMPREHENSIONS):
            extend([(clause, level + k) for k, clause in reversed(list(enumerate(node.generators, 1)))])
            if crowded is None and len(node.generators) > LIBCST_REPEATS:
                crowded = node.generators[LIBCST_REPEATS]
        below = level + 1
        for name in reversed(_code_fields(kind)):
            value = getattr(node, name, None)
            if isinstance(value, list):
                extend([(item, below) for item in reversed(value) if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                push((value, below))
    return Nesting(depth, line, col, crowded)


def _code_fields(kind: type[ast.AST]) -> tuple[str, ...]:
    """The fields of an ast node type that may hold nodes (a comprehension's clauses, pushed
    by :func:`measure` at their own depths, and the load/store context left out)."""
    names = _FIELDS.get(kind)
    if names is None:
        skipped = {"ctx", "generators"} if issubclass(kind, _COMPREHENSIONS) else {"ctx"}
        names = _FIELDS[kind] = tuple(name for name in kind._fields if name not in skipped)
    return names


def long_concatenation(source: bytes) -> tuple[int, int] | None:
    """Line and 0-based column of the first string of the first run of more than
    :data:`LIBCST_REPEATS` implicitly concatenated strings in ``source``, if any."""
    run, first, inside = 0, (1, 0), 0  # inside: how many f-/t-strings the token is in (Python 3.12+)
    for token in _tokens(source):
        opens = token.type in _FSTRING_STARTS
        if token.type in _FSTRING_ENDS:
            inside -= 1
        elif inside:
            inside += opens
        elif opens or token.type == tokenize.STRING:
            run, first = run + 1, first if run else token.start
            if run > LIBCST_REPEATS:
                return first
            inside += opens
        elif token.type not in (tokenize.NL, tokenize.COMMENT):
            run = 0
    return None
