"""Write (or, with --check, compare) the table of diagnostics in docs/language.md from the catalogue.

    python scripts/errors_table.py           # rewrite the table between its two markers
    python scripts/errors_table.py --check   # exit 1 if the table is not the catalogue's

The catalogue is castpile/compiler/diagnostics.py: one row per message, in its order.
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from castpile.compiler.diagnostics import CATALOGUE

DOC = ROOT / "docs" / "language.md"
BEGIN = "<!-- diagnostics table: written by scripts/errors_table.py from castpile/compiler/diagnostics.py -->\n"
END = "<!-- end of the diagnostics table -->\n"


def _code(text: str) -> str:
    """``text`` as a Markdown code span (messages quote code in single backticks, so a double fence holds them)."""
    if not text:
        return ""
    assert "``" not in text and "|" not in text, text
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def table() -> str:
    """The table, its markers included: id, the problem and the fix, ``{parameters}`` as the templates write them."""
    rows = ["| id | message | fix |\n", "|---|---|---|\n"]
    rows += [f"| `{m.id}` | {_code(m.problem)} | {_code(m.fix)} |\n" for m in CATALOGUE.values()]
    return BEGIN + "".join(rows) + END


def replaced(doc: str) -> str:
    """``doc`` with the table between the markers rewritten."""
    head, begin, rest = doc.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{DOC}: the diagnostics table's markers are missing")
    return head + table() + tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the table differs from the catalogue")
    args = parser.parse_args()
    doc = DOC.read_text()
    new = replaced(doc)
    if args.check:
        if new != doc:
            print(f"{DOC}: the diagnostics table differs from the catalogue; run python scripts/errors_table.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
