"""The plain command-line forms, recognised without argparse (which costs more than copying a small file), and
the plain files (:func:`mentions_castpile`, re-exported by :mod:`castpile.options` for every front end).

Shared by :mod:`castpile.__main__` (which copies a file without castpile before
the CLI module loads, or even :mod:`castpile.options`) and :mod:`castpile.cli`::

    >>> plain_form(["k.py", "-o", "out.py"])
    ('k.py', 'out.py')
    >>> plain_form(["k.py", "--check"]) is None
    True
"""

from __future__ import annotations

SUBCOMMANDS = ("run", "show", "cache")
"""First arguments that name a subcommand, never a SRC (a file of that name is written ``./run``)."""


def plain_form(argv: list[str]) -> tuple[str, str | None] | None:
    """``(SRC, OUT)`` for ``SRC``, ``SRC -o OUT`` and ``-o OUT SRC`` (``--output`` too);
    None for anything else, which argparse then parses.  What this accepts, argparse
    would parse to the same sources and output with every other option at its default.  A subcommand
    (:data:`SUBCOMMANDS`) is None too."""
    if argv[:1] and argv[0] in SUBCOMMANDS:
        return None
    src = out = None
    rest = iter(argv)
    for arg in rest:
        if arg in ("-o", "--output") and out is None:
            out = next(rest, None)
            if out is None or out.startswith("-"):
                return None
        elif src is None and (arg == "-" or not arg.startswith("-")):
            src = arg
        else:
            return None
    return None if src is None else (src, out)


def mentions_castpile(source: bytes) -> bool:
    """Whether ``source`` may use castpile; a file that does not is copied through as it is.

    The one test every front end uses to skip the compiler (it loads libcst and sympy), so it
    must never change a diagnosis.  Without the word castpile, what analysis can report is a
    call in a jit function (whose decorator spells ``jit``) through a head that no import
    reaches: ``multicast_like``, ``signal`` or ``wait`` by name (``(wait)(x)`` too) or as the
    attribute of an unbound name (``cp.signal(x)``).  A file that has those words goes to the
    compiler; one that does not is copied.
    """
    if b"castpile" in source or b"multicast_like" in source:
        return True
    if b"jit" not in source or (b"signal" not in source and b"wait" not in source):
        return False
    import re

    return re.search(rb"\b(?:signal|wait)\b", source) is not None
