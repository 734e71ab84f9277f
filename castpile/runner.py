"""``castpile run [--strategy S] SCRIPT [ARGS...]``: run a script as ``__main__``, transpiled, with its directory's modules hooked.

What ``python SCRIPT ARGS...`` does, but for the text that runs: SCRIPT is transpiled
(through the compile cache, :func:`castpile.cache.transpiled_file`) and run as the
module ``__main__`` (``__file__`` is SCRIPT's absolute path, ``sys.argv`` is
``[SCRIPT, *ARGS]``, ``sys.path[0]`` is SCRIPT's directory), with the import hook
installed for every module and package that SCRIPT's directory holds.  Options come
before SCRIPT; everything after it is the script's.

The exit status is the script's: 0 when it ends, ``sys.exit``'s code (a message is
printed, with status 1), 130 on Ctrl-C; an uncaught exception prints its traceback and
gives 1.  Tracebacks name the user's files and lines, not the cache entries the code
was compiled from, and start at the script's own frame.  A castpile diagnostic in
SCRIPT or in a module it imports prints the located message alone: status 1.  SCRIPT
missing or unreadable, or bad options: status 2; castpile failing on SCRIPT (a bug): 3.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

_OPTIONS_WITH_VALUES = ("--strategy",)


def run_main(argv: list[str]) -> int:
    """``castpile run`` with ``argv`` (what follows ``run``); returns the exit status."""
    import argparse

    from .options import STRATEGIES, debug_waits_from_env

    parser = argparse.ArgumentParser(
        prog="castpile run",
        description="Run SCRIPT as __main__, transpiled, with the import hook on for the modules in its directory.",
        epilog="Exit status: the script's (sys.exit's code; 1 for an uncaught exception or a castpile diagnostic; "
        "130 on Ctrl-C); 2 when SCRIPT cannot be read or the options are wrong.",
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="loop", help="lowering of accesses (default: loop)")
    parser.add_argument("script", metavar="SCRIPT", help="the Python file to run")
    at = _script_index(argv)
    try:
        options = parser.parse_args(argv[: at + 1])
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        debug_waits_from_env()
    except ValueError as exc:
        print(f"castpile run: error: {exc}", file=sys.stderr)
        return 2
    try:
        with open(options.script, "rb") as f:
            source = f.read()
    except OSError as exc:
        print(f"castpile run: error: {options.script}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return run_script(options.script, source, argv[at + 1 :], options.strategy)


def _script_index(argv: list[str]) -> int:
    """Where SCRIPT stands in ``argv``: the first argument that is no option, nor an option's value."""
    k = 0
    while k < len(argv) and argv[k].startswith("-") and argv[k] != "-":
        if argv[k] == "--":
            return k + 1
        k += 2 if argv[k] in _OPTIONS_WITH_VALUES else 1
    return k


def run_script(script: str, source: bytes, args: list[str], strategy: str) -> int:
    """Run ``source`` (read from ``script``) as ``__main__`` with ``args`` (``CASTPILE_DEBUG_WAITS`` as for the
    import hook); the exit status."""
    from . import cache
    from .compiler.errors import TranspileError
    from .hook import TranspileImportError, install_import_hook
    from .options import debug_waits_from_env

    path = os.path.abspath(script)
    options: dict[str, Any] = {"strategy": strategy, **debug_waits_from_env()}

    def build() -> bytes:
        from .compiler import transpile_source

        return transpile_source(source, script, **options)

    try:
        filename, text = cache.transpiled_file(
            "__main__", path, source, options, build, in_memory=cache.in_memory_name(path)
        )
    except TranspileError as error:
        print(error.render(), file=sys.stderr)
        return 1
    except Exception as exc:  # a bug in castpile, not in the script
        from .cli import report_internal_error

        return report_internal_error(script, exc)
    code = compile(text, filename, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__file__, main.__loader__, main.__spec__ = path, None, None
    main.__dict__["__cached__"] = None  # as runpy sets it (typeshed's ModuleType does not declare it)
    saved_main, saved = sys.modules.get("__main__"), (sys.argv, sys.path[0])
    sys.modules["__main__"], sys.argv, sys.path[0] = main, [script, *args], os.path.dirname(path)
    names = _importable_names(os.path.dirname(path))
    hook = install_import_hook(*names, strategy=strategy) if names else None
    try:
        exec(code, main.__dict__)
    except SystemExit as exc:
        return _exit_status(exc.code)
    except KeyboardInterrupt as exc:
        _print_traceback(exc)
        return 130
    except (TranspileError, TranspileImportError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except BaseException as exc:
        _print_traceback(exc)
        return 1
    finally:
        if hook is not None:
            hook.uninstall()
        sys.argv, sys.path[0] = saved
        if saved_main is None:
            del sys.modules["__main__"]
        else:
            sys.modules["__main__"] = saved_main
    return 0


def _importable_names(directory: str) -> list[str]:
    """The top-level modules and packages that ``directory`` holds: the names the hook takes."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    names = {name[:-3] for name in entries if name.endswith(".py")}
    names |= {name for name in entries if os.path.isdir(os.path.join(directory, name))}
    return sorted(name for name in names if name.isidentifier() and name != "castpile")


def _exit_status(code) -> int:
    """The status Python gives ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _print_traceback(exc: BaseException) -> None:
    """Print ``exc``'s traceback as Python would, naming the user's files for castpile's cache entries."""
    import traceback

    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    runner = __file__
    seen = set()
    todo = [report]
    while todo:
        part = todo.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        frames = list(part.stack)
        while frames and frames[0].filename == runner:
            frames.pop(0)
        part.stack = traceback.StackSummary.from_list([_user_frame(frame) for frame in frames])
        todo += [p for p in (part.__cause__, part.__context__) if p is not None]
        todo += getattr(part, "exceptions", None) or []
    print("".join(report.format()), end="", file=sys.stderr)


def _user_frame(frame):
    """``frame``, naming the user's file when it names a cache entry (its line then read from the user's file)."""
    import traceback

    from .cache import source_of

    source = source_of(frame.filename)
    if source is None:
        return frame
    return traceback.FrameSummary(source, frame.lineno, frame.name)
