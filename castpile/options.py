"""castpile's options and their one check: the version, the lowering strategies, which inputs need the compiler.

Every front end (the CLI, the import hook, :func:`castpile.transpile`) checks a
strategy where it enters, with :func:`check_strategy`::

    >>> check_strategy("gather")
    'gather'
    >>> check_strategy("bogus")
    Traceback (most recent call last):
    ...
    ValueError: unknown strategy 'bogus': choose one of loop, gather
"""

VERSION = "0.3.0"

STRATEGIES = ("loop", "gather")
"""How accesses are lowered: a loop over the buffers, or one gather of P + I pointers."""


def check_strategy(strategy: str) -> str:
    """``strategy`` if it is one of :data:`STRATEGIES`, else ``ValueError``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    return strategy


def mentions_castpile(source: bytes) -> bool:
    """Whether ``source`` may use castpile; a file that does not is copied through as it is.

    The one test every front end uses to skip the compiler (it loads libcst and sympy).
    """
    return b"castpile" in source
