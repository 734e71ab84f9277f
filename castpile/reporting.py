"""What every front end prints for a castpile bug: :func:`report_internal_error`.

Shared by the command line (:mod:`castpile.cli`) and ``castpile run`` (:mod:`castpile.runner`), which
otherwise do not import each other.  The standard library only, loaded on call.
"""


def report_internal_error(where: str, exc: BaseException) -> int:
    """Report a castpile bug (never the user's fault): exit 3, nothing written."""
    import sys
    import traceback

    print(
        f"castpile: internal error while transpiling {where}: this is a bug in castpile; nothing was written. "
        "Please report it at the castpile issue tracker with the input file and this trace:",
        file=sys.stderr,
    )
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    return 3
