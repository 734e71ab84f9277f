"""castpile's options and their checks: the version, the lowering strategies, debug-mode waits, which inputs need the
compiler, and the header lines of what the compiler appends to a module (which :mod:`castpile.early` reads back).

Every front end (the CLI, the import hook, :func:`castpile.transpile`) checks a
strategy where it enters, with :func:`check_strategy`::

    >>> check_strategy("gather")
    'gather'
    >>> check_strategy("bogus")
    Traceback (most recent call last):
    ...
    ValueError: unknown strategy 'bogus': choose one of loop, gather
"""

from .plain_args import mentions_castpile as mentions_castpile  # defined there: the plain copy needs it alone

VERSION = "0.3.0"

APPENDED_MARK = "# ---- castpile "
HELPERS_TITLE = "helpers: generated, called by the rewritten accesses above"
WRAPS_TITLE = "the kernels with remote= bindings, launched with NVSHMEM"
"""The two parts appended after a module's last line, the helpers, then the NVSHMEM wraps, each start
with a comment line: :data:`APPENDED_MARK`, the version and the part's title."""


def appended_header(title: str) -> str:
    """The comment line that starts a part appended after a module's last line."""
    return f"{APPENDED_MARK}{VERSION} {title} ----"


STRATEGIES = ("loop", "gather")
"""How accesses are lowered: a loop over the buffers, or one gather of P + I pointers."""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the plain copy loads this module)
if TYPE_CHECKING:
    from typing import Literal

    Strategy = Literal["loop", "gather"]
    """The type of a ``strategy=`` argument: one of :data:`STRATEGIES` (type checkers reject any other string)."""


def check_strategy(strategy: str) -> str:
    """``strategy`` if it is one of :data:`STRATEGIES`, else ``ValueError``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    return strategy


DEBUG_WAITS_ENV = "CASTPILE_DEBUG_WAITS"
"""Seconds after which a ``castpile.wait`` gives up and records where it was (docs/one-gpu.md, "Hangs that name
their line"); read by the command line, the import hook and ``castpile.jit`` when they transpile."""


LONGEST_DEADLINE_NS = 2**63 - 1
"""A deadline reaches the kernels as an int64 of nanoseconds (``deadline_ns=``) and is recorded as one."""


def debug_waits_problem(seconds: object) -> str | None:
    """What keeps ``seconds`` from being debug-mode waits' deadline (``"is not ..."``), or None: a finite number
    whose nanoseconds, rounded, are at least 1 and fit an int64::

        >>> debug_waits_problem(1e-12)
        'is less than a nanosecond, the shortest deadline a wait can hold'
    """
    import numbers

    if not isinstance(seconds, numbers.Real) or isinstance(seconds, bool):
        return "is not a number of seconds"
    value = float(seconds)
    if value != value or value in (float("inf"), float("-inf")):
        return "is not a number of seconds"
    if value <= 0:
        return "is not more than 0 seconds"
    nanoseconds = value * 1e9
    if nanoseconds > LONGEST_DEADLINE_NS:
        return f"is more than {LONGEST_DEADLINE_NS // 10**9} seconds, the longest deadline a wait can hold"
    if round(nanoseconds) < 1:
        return "is less than a nanosecond, the shortest deadline a wait can hold"
    return None


def check_debug_waits(text: str, name: str = DEBUG_WAITS_ENV) -> float:
    """The seconds ``text`` (the value of the option ``name``) gives, else ``ValueError`` naming it::

        >>> check_debug_waits("2.5")
        2.5
        >>> check_debug_waits("soon")
        Traceback (most recent call last):
        ...
        ValueError: CASTPILE_DEBUG_WAITS='soon' is not a number of seconds: give how long a castpile.wait may spin \
before it gives up, as in CASTPILE_DEBUG_WAITS=5
    """
    try:
        seconds = float(text)
    except ValueError:
        problem: str | None = "is not a number of seconds"
    else:
        problem = debug_waits_problem(seconds)
        if problem is None:
            return seconds
    example = f"{name}=5" if name == DEBUG_WAITS_ENV else f"{name} 5"
    raise ValueError(
        f"{name}={text!r} {problem}: give how long a castpile.wait may spin before it gives up, as in {example}"
    )


def debug_waits_from_env(environ=None) -> dict[str, float]:
    """``{"debug_waits": seconds}`` when :data:`DEBUG_WAITS_ENV` is set (and not empty), else ``{}``: the transpile
    option a front end adds (``ValueError`` for a bad value)."""
    import os

    text = (os.environ if environ is None else environ).get(DEBUG_WAITS_ENV, "")
    return {"debug_waits": check_debug_waits(text)} if text.strip() else {}
