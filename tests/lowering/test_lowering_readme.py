"""README.md's before and after snippets: the first is valid input, the second castpile's output for it."""

import re
from pathlib import Path

from testkit.lowering import head_and_helpers, transpile


def test_the_readmes_before_snippet_transpiles_to_its_after_snippet():
    """README.md shows a whole module before and after: the first is valid input, the second castpile's output."""
    text = (Path(__file__).parents[2] / "README.md").read_text()
    shown = text[text.index("\nBefore (`samples/allreduce_oneshot.py`") :]  # the pair after the first screen
    before, after = re.findall(r"```python[^\n]*\n(.*?)```", shown, re.S)[:2]
    head, _ = head_and_helpers(transpile(before, "loop"))
    assert head == after
