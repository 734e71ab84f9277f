"""``castpile run [--strategy S] (SCRIPT | -m MODULE) [ARGS...]``: run a script, a zipapp or a module as
``__main__``, transpiled, with the modules beside it hooked.

What ``python SCRIPT ARGS...`` (or ``python -m MODULE ARGS...``) does, but for the text that runs:

- SCRIPT, a Python file, is transpiled (through the compile cache,
  :func:`castpile.cache.transpiled_file`) and run as the module ``__main__`` (``__file__`` is
  SCRIPT's absolute path, ``sys.argv`` is ``[SCRIPT, *ARGS]``, ``sys.path[0]`` is SCRIPT's
  directory), with the import hook installed for every module and package that SCRIPT's
  directory holds.
- SCRIPT, a zip archive (a zipapp, ``app.pyz``) or a directory, runs the ``__main__.py`` it
  holds, as Python does: ``sys.path[0]`` is the archive (or directory) itself, ``__file__`` is
  ``<archive>/__main__.py``, and the hook takes every top-level module and package in it.
- ``-m MODULE`` finds MODULE on ``sys.path`` as ``python -m`` does (the current directory
  first; its parent packages are imported; a package runs its ``__main__`` submodule), with
  the hook installed first for MODULE's top-level package and for every module and package of
  the current directory, and runs MODULE's code as the hook transpiles it: ``__spec__`` is its
  spec, ``__file__`` its file, ``sys.argv[0]`` that file, ``sys.path[0]`` the current directory.

Options come before SCRIPT (or ``-m MODULE``); everything after it is the program's.

The exit status is the program's: 0 when it ends, ``sys.exit``'s code (a message is
printed, with status 1), 130 on Ctrl-C; an uncaught exception prints its traceback and
gives 1.  Tracebacks name the user's files and lines, not the cache entries the code
was compiled from, and start at the program's own frame.  A castpile diagnostic in
SCRIPT or in a module it imports prints the located message alone: status 1.  SCRIPT
missing or unreadable, MODULE not found, or bad options: status 2; castpile failing on
SCRIPT (a bug): 3.
"""

from __future__ import annotations

import contextlib
import os
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .options import Strategy

_OPTIONS_WITH_VALUES = ("--strategy",)


def run_main(argv: list[str]) -> int:
    """``castpile run`` with ``argv`` (what follows ``run``); returns the exit status."""
    import argparse

    from .options import STRATEGIES, debug_waits_from_env

    parser = argparse.ArgumentParser(
        prog="castpile run",
        usage=f"castpile run [-h] [--strategy {{{','.join(STRATEGIES)}}}] (SCRIPT | -m MODULE) [ARGS ...]",
        description="Run SCRIPT (a Python file, a zipapp or a directory with a __main__.py) or MODULE as __main__, "
        "as python does, transpiled, with the import hook on for the modules beside it.",
        epilog="Exit status: the script's or module's (sys.exit's code; 1 for an uncaught exception or a castpile diagnostic; "
        "130 on Ctrl-C); 2 when SCRIPT cannot be read, MODULE cannot be found or the options are wrong.",
    )
    parser.add_argument("--strategy", choices=STRATEGIES, default="loop", help="lowering of accesses (default: loop)")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run this module, as python -m does")
    parser.add_argument("script", metavar="SCRIPT", nargs="?", help="the Python file, zipapp or directory to run")
    at = _script_index(argv)
    try:
        options = parser.parse_args(argv[: at + 1])
        if options.script is None and options.module is None:
            parser.error("the following arguments are required: SCRIPT (or -m MODULE)")
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        debug_waits_from_env()
    except ValueError as exc:
        print(f"castpile run: error: {exc}", file=sys.stderr)
        return 2
    args = argv[at + 1 :]
    if options.module is not None:
        return run_module(options.module, args, options.strategy)
    if _is_archive(options.script):
        return run_archive(options.script, args, options.strategy)
    try:
        with open(options.script, "rb") as f:
            source = f.read()
    except OSError as exc:
        print(f"castpile run: error: {options.script}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return run_script(options.script, source, args, options.strategy)


def _script_index(argv: list[str]) -> int:
    """Where SCRIPT (or ``-m``'s MODULE) stands in ``argv``: the first argument that is no option, nor an
    option's value; everything after it is the program's."""
    k = 0
    while k < len(argv) and argv[k].startswith("-") and argv[k] != "-":
        if argv[k] == "--":
            return k + 1
        if argv[k] == "-m":
            return k + 1
        if argv[k].startswith("-m"):  # -mMODULE, as python takes it
            return k
        k += 2 if argv[k] in _OPTIONS_WITH_VALUES else 1
    return k


def _is_archive(target: str) -> bool:
    """Whether Python would run ``target`` as a zip archive or directory holding ``__main__``, not as a file of
    source (what ``python TARGET`` decides the same way: a path entry that an importer takes)."""
    import zipimport

    if os.path.isdir(target):
        return True
    try:
        zipimport.zipimporter(os.path.abspath(target))
    except (zipimport.ZipImportError, OSError):
        return False
    return True


def run_script(script: str, source: bytes, args: list[str], strategy: Strategy) -> int:
    """Run ``source`` (read from ``script``) as ``__main__`` with ``args`` (``CASTPILE_DEBUG_WAITS`` as for the
    import hook); the exit status."""
    path = os.path.abspath(script)
    code = _transpiled_main(script, path, source, strategy)
    if isinstance(code, int):
        return code
    directory = os.path.dirname(path)
    attributes = {"__file__": path, "__loader__": None, "__spec__": None, "__cached__": None}
    with _hooked(_importable_names(directory), strategy):
        return _execute(code, attributes, [script, *args], directory)


def run_archive(target: str, args: list[str], strategy: Strategy) -> int:
    """Run the ``__main__.py`` of the zip archive or directory ``target`` as ``python TARGET`` does (transpiled,
    the archive's modules hooked); the exit status."""
    import importlib.machinery

    from .hook import _python_source as python_source

    entry = os.path.abspath(target)
    try:
        spec = importlib.machinery.PathFinder.find_spec("__main__", [entry])
        found = python_source(spec) if spec is not None else None
    except SyntaxError as exc:  # zipimport compiles the module to find it
        return _syntax_error(exc, exc.filename or os.path.join(entry, "__main__.py"))
    except (ImportError, OSError) as exc:
        print(f"castpile run: error: {target}: cannot read: {exc}", file=sys.stderr)
        return 2
    finally:
        sys.path_importer_cache.pop(entry, None)  # the entry goes on sys.path below: found again there
    if spec is None or found is None:
        kind = "directory" if os.path.isdir(target) else "zip archive"
        print(f"castpile run: error: {target}: this {kind} holds no __main__.py to run", file=sys.stderr)
        return 2
    origin, source = found
    shown = os.path.join(target, os.path.relpath(origin, entry))
    code = _transpiled_main(shown, origin, source, strategy)
    if isinstance(code, int):
        return code
    attributes = {"__file__": origin, "__loader__": spec.loader, "__spec__": spec, "__cached__": None}
    attributes["__package__"] = ""
    with _hooked(_archive_names(entry), strategy):
        return _execute(code, attributes, [target, *args], entry)


def run_module(name: str, args: list[str], strategy: Strategy) -> int:
    """Run the module ``name`` as ``python -m NAME`` does (transpiled by the import hook, which takes its top-level
    package and the current directory's modules); the exit status."""
    cwd = os.getcwd()
    saved = sys.path[:1]
    sys.path[:1] = [cwd]  # where python -m finds NAME, before finding it
    top = name.split(".")[0]
    names = {*_importable_names(cwd), *([top] if top.isidentifier() and top != "castpile" else [])}
    try:
        with _hooked(sorted(names), strategy):  # before finding NAME: its spec is the hook's
            spec, error = _module_spec(name)
            if spec is None:
                print(f"castpile run: error: -m {name}: {error}", file=sys.stderr)
                return 1 if error.startswith("error while finding") else 2  # the first: the user's code raised
            try:
                code = spec.loader.get_code(spec.name)
            except SyntaxError as exc:
                return _syntax_error(exc, exc.filename or spec.origin)
            attributes = {"__file__": spec.origin, "__loader__": spec.loader, "__spec__": spec}
            attributes.update(__cached__=spec.cached, __package__=spec.parent)
            return _execute(code, attributes, [spec.origin, *args], cwd)
    finally:
        sys.path[:1] = saved


def _module_spec(name: str):
    """``(spec, None)`` for the module ``python -m NAME`` runs (a package's ``__main__``), or ``(None, why not)``."""
    import importlib.util

    target = name
    while True:
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:  # a parent that is no package, a bad name
            return None, f"no module named {target!r} ({exc})"
        except Exception as exc:  # a parent package that fails to import: the user's code
            return None, f"error while finding module specification for {target!r} ({type(exc).__name__}: {exc})"
        if spec is None and target != name:
            return None, f"{name!r} is a package without a __main__ module, which python -m needs to run it"
        if spec is None:
            return None, f"no module named {target!r}"
        if spec.submodule_search_locations is None or target != name:
            break
        target = f"{name}.__main__"
    if spec.loader is None or not hasattr(spec.loader, "get_code") or spec.origin is None:
        return None, f"{target!r} has no Python code to run (found {spec.origin})"
    return spec, None


def _transpiled_main(shown: str, path: str, source: bytes, strategy: Strategy) -> types.CodeType | int:
    """The code of ``source`` (the file ``path``, named ``shown`` in diagnostics) transpiled for ``__main__``, or
    the exit status when it does not transpile (1) or castpile fails on it (3)."""
    from . import cache
    from .compiler.errors import TranspileError
    from .options import debug_waits_from_env

    options: dict[str, Any] = {"strategy": strategy, **debug_waits_from_env()}

    def build() -> bytes:
        from .compiler import transpile_source

        return transpile_source(source, shown, **options)

    try:
        filename, text = cache.transpiled_file(
            "__main__", path, source, options, build, in_memory=cache.in_memory_name(path)
        )
    except TranspileError as error:
        print(error.render(), file=sys.stderr)
        return 1
    except Exception as exc:  # a bug in castpile, not in the script
        from .reporting import report_internal_error

        return report_internal_error(shown, exc)
    try:
        return compile(text, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:  # a file without castpile, which castpile passed through as it is
        return _syntax_error(exc, path)


def _syntax_error(exc: SyntaxError, path: str) -> int:
    """Print ``exc`` as Python does for a program that does not compile, naming the user's file ``path``; 1."""
    import traceback

    exc.filename = path
    print("".join(traceback.format_exception_only(type(exc), exc)), end="", file=sys.stderr)
    return 1


@contextlib.contextmanager
def _hooked(names: list[str], strategy: Strategy):
    """The import hook for ``names`` (none for no names), installed for the ``with`` block."""
    from .hook import install_import_hook

    hook = install_import_hook(*names, strategy=strategy) if names else None
    try:
        yield
    finally:
        if hook is not None:
            hook.uninstall()


def _execute(code: types.CodeType, attributes: dict, argv: list[str], path0: str) -> int:
    """Run ``code`` as the module ``__main__`` (with ``attributes``), ``sys.argv`` and ``sys.path[0]`` set as
    Python sets them; the exit status."""
    from .compiler.errors import TranspileError
    from .hook import TranspileImportError

    main = types.ModuleType("__main__")
    main.__dict__.update(attributes)  # __cached__ among them (typeshed's ModuleType does not declare it)
    saved_main, saved = sys.modules.get("__main__"), (sys.argv, sys.path[:1])
    sys.modules["__main__"], sys.argv, sys.path[:1] = main, argv, [path0]
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
        sys.argv, sys.path[:1] = saved
        if saved_main is None:
            del sys.modules["__main__"]
        else:
            sys.modules["__main__"] = saved_main
    return 0


def _archive_names(archive: str) -> list[str]:
    """The top-level modules and packages that the zip archive or directory ``archive`` holds."""
    if os.path.isdir(archive):
        return _importable_names(archive)
    import zipfile

    try:
        with zipfile.ZipFile(archive) as z:
            entries = z.namelist()
    except (OSError, zipfile.BadZipFile):
        return []
    names = {e.split("/")[0] for e in entries if "/" in e.strip("/")}
    names |= {e[:-3] for e in entries if "/" not in e and e.endswith(".py")}
    return sorted(n for n in names if n.isidentifier() and n not in ("castpile", "__main__"))


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
    """Print ``exc``'s traceback as Python would, naming the user's files for castpile's cache entries, from the
    program's own frame on."""
    from .tracebacks import format_exception

    runner = __file__
    print(format_exception(exc, drop=lambda frame: frame.filename == runner), end="", file=sys.stderr)
