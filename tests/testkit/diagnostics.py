"""Diagnostics as the tests compare them: ``(line, column, id, parameters)``, the catalogue's id standing for the text.

The text of each id is castpile.compiler.diagnostics's; a test names the id and the parameters that matter, so a
message whose wording improves changes the catalogue and docs/language.md, not the tests::

    diagnostics_of(source) == [(9, 5, "E203", {"name": "bufs"})]
"""

import re
import textwrap

import pytest

import castpile


def diagnostics_of(
    source: str | bytes, path: str = "k.py", *, dedent: bool = False
) -> list[tuple[int, int, str, dict]]:
    """Every diagnostic of transpiling ``source`` (which must fail) as ``(line, col, id, params)``."""
    if dedent:
        source = textwrap.dedent(source)
    with pytest.raises(castpile.TranspileError) as info:
        castpile.transpile(source, path)
    return [(d.line, d.col, d.id, d.params) for d in info.value.diagnostics]


def ids_of(source: str | bytes, path: str = "k.py") -> list[str]:
    """The ids of every diagnostic of transpiling ``source``, in order."""
    return [d[2] for d in diagnostics_of(source, path)]


def headline(path, line: int, col: int, id: str, **params) -> str:
    """A diagnostic's first line as docs/language.md ("Errors") says it is printed, its text the catalogue's."""
    from castpile.compiler.diagnostics import CATALOGUE

    return f"{path}:{line}:{col}: error: {CATALOGUE[id].text(**params)} [castpile:{id}]"


def message_pattern(message) -> re.Pattern:
    """What a catalogue ``message`` may print, as a regular expression: its text with any value for each parameter."""
    import string

    parts = [
        re.escape(literal) + ("" if field is None else ".+")
        for literal, field, _, _ in string.Formatter().parse(message.template)
    ]
    return re.compile("".join(parts), re.S)
