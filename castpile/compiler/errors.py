"""Located diagnostics.

Every problem castpile finds in a user's file becomes a :class:`Diagnostic` that
knows its file, line and column; :class:`TranspileError` carries all of a file's
diagnostics at once and renders them the way compilers do::

    kern.py:12:9: error: 'bufs' is a multicast tensor and may only be subscripted, as in bufs[idx] [castpile:E201]
        x = bufs + 1
            ^

The messages and their ids are :mod:`castpile.compiler.diagnostics`, the catalogue.
"""

from __future__ import annotations


class Diagnostic:
    """One error at a 1-based line and 1-based column of ``path``: the catalogue's ``id``, the
    ``message`` it gives with ``params`` filled in, and the ``source_line`` shown under it.

    (A plain class: ``import castpile`` stays cheap for transpiled modules and the CLI.)
    """

    __slots__ = ("col", "id", "line", "message", "params", "path", "source_line")

    def __init__(self, path: str, line: int, col: int, id: str, message: str, params: dict, source_line: str = ""):
        self.path, self.line, self.col, self.source_line = path, line, col, source_line
        self.id, self.message, self.params = id, message, params

    def _key(self):
        return (self.path, self.line, self.col, self.id, self.message, self.source_line)

    def __eq__(self, other):
        return isinstance(other, Diagnostic) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"Diagnostic({self.path!r}, {self.line}, {self.col}, {self.id!r}, {self.message!r})"

    def headline(self) -> str:
        """``path:line:col: error: message [castpile:id]``."""
        return f"{self.path}:{self.line}:{self.col}: error: {self.message} [castpile:{self.id}]"

    def render(self) -> str:
        """The headline, then the source line and a caret under the column."""
        head = self.headline()
        if not self.source_line:
            return head
        text = self.source_line.rstrip("\r\n")
        caret = "".join(c if c == "\t" else " " for c in text[: max(self.col - 1, 0)]) + "^"
        return f"{head}\n    {text}\n    {caret}"


class TranspileError(Exception):
    """A file could not be transpiled; ``diagnostics`` holds every error found."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.line, d.col))
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render() for d in self.diagnostics)


def source_line(text: str, line: int) -> str:
    """The 1-based ``line`` of ``text`` (empty when out of range), lines broken as Python
    breaks them: at ``\\r\\n``, ``\\r`` and ``\\n`` only (a form feed, say, is no line break)."""
    import re  # here: `import castpile` stays cheap

    lines = re.split(r"\r\n|\r|\n", text)
    return lines[line - 1] if 0 < line <= len(lines) else ""
