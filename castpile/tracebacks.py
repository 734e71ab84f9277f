"""Tracebacks that name the user's files: what every front end shows for an error raised in code castpile compiled.

Transpiled code runs from its cache entry (``<cache>/<module>-<key>.py``) or from memory
(``<file> (transpiled in memory)``): Triton reads a kernel's text through its code's file name, so the code must
name the transpiled text.  Its lines keep the user's numbers, so a traceback names the user's file and line
once each such frame is renamed, its line read from the user's file (or notebook cell) rather than the transpiled
one.  :func:`format_exception` does that; ``castpile run`` prints with it, and :func:`install` (called by
``@castpile.jit`` and the import hook when they first compile transpiled code) makes Python's uncaught-exception
hooks and IPython's (a notebook cell, Jupyter, nbclient) print with it too, for tracebacks that hold such a
frame; every other traceback is printed as before.  The standard library only, loaded on call.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from types import TracebackType

_installed = False


def format_exception(exc: BaseException, drop: Callable[[traceback.FrameSummary], bool] | None = None) -> str:
    """``exc``'s traceback as Python prints it (chained exceptions and groups too), each frame of transpiled code
    naming the user's file and line; the leading frames for which ``drop`` holds are left out of each part."""
    report = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    seen = set()
    todo = [report]
    while todo:
        part = todo.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        frames = list(part.stack)
        while drop is not None and frames and drop(frames[0]):
            frames.pop(0)
        part.stack = traceback.StackSummary.from_list([_user_frame(frame) for frame in frames])
        todo += [p for p in (part.__cause__, part.__context__) if p is not None]
        todo += getattr(part, "exceptions", None) or []
    return "".join(report.format())


def names_transpiled_code(exc: BaseException | None) -> bool:
    """Whether a frame of ``exc``'s traceback, or of an exception chained to it, runs code castpile transpiled."""
    from .cache import source_of

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb: TracebackType | None = exc.__traceback__
        while tb is not None:
            if source_of(tb.tb_frame.f_code.co_filename) is not None:
                return True
            tb = tb.tb_next
        if any(names_transpiled_code(e) for e in getattr(exc, "exceptions", ()) or ()):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _user_frame(frame: traceback.FrameSummary) -> traceback.FrameSummary:
    """``frame``, naming the user's file when it names transpiled code (its line then read from the user's file)."""
    from .cache import source_of

    source = source_of(frame.filename)
    if source is None:
        return frame
    return traceback.FrameSummary(source, frame.lineno, frame.name, line=_line_of(source, frame.lineno))


def _line_of(path: str, lineno: int | None) -> str:
    """Line ``lineno`` of the user's file ``path``: a file, a notebook cell (linecache holds it), or a member of a zip
    archive (a zipapp's modules)."""
    import linecache

    line = linecache.getline(path, lineno or 0)
    archive = path
    while not line and os.path.dirname(archive) not in ("", archive):
        archive = os.path.dirname(archive)
        if os.path.isfile(archive):
            import zipimport

            try:
                text = zipimport.zipimporter(archive).get_data(path).decode("utf-8", "replace")
            except (zipimport.ZipImportError, OSError):
                return ""
            lines = text.splitlines()
            return lines[lineno - 1] if lineno and 0 < lineno <= len(lines) else ""
    return line


def install() -> None:
    """Print uncaught tracebacks that hold transpiled code with :func:`format_exception`: ``sys.excepthook``,
    ``threading.excepthook`` and, in IPython, the shell's display of a cell's error.  Once per process; the hooks in
    place before keep every other traceback."""
    global _installed
    if _installed:
        return
    _installed = True
    import threading

    previous, previous_thread = sys.excepthook, threading.excepthook

    def excepthook(etype: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if names_transpiled_code(value):
            print(format_exception(value), end="", file=sys.stderr)
        else:
            previous(etype, value, tb)

    def thread_excepthook(args: threading.ExceptHookArgs) -> None:
        value = args.exc_value
        if value is not None and names_transpiled_code(value):
            name = args.thread.name if args.thread is not None else threading.get_ident()
            print(f"Exception in thread {name}:\n{format_exception(value)}", end="", file=sys.stderr)
        else:
            previous_thread(args)

    sys.excepthook = excepthook
    threading.excepthook = thread_excepthook
    _install_ipython()


def _install_ipython() -> None:
    """In an IPython shell (a notebook's kernel too), show a cell's error with :func:`format_exception` when its
    traceback holds transpiled code, through the shell's handler of custom exceptions (left alone when the user set
    one); IPython's own frames, which run the cell, are left out, as IPython leaves them out."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if ipython is None or shell is None or getattr(shell, "custom_exceptions", None) != ():
        return
    ipython_dir = os.path.dirname(str(ipython.__file__)) + os.sep

    def handler(shell, etype, value, tb, tb_offset=None):
        if names_transpiled_code(value):
            text = format_exception(value, drop=lambda frame: frame.filename.startswith(ipython_dir))
            try:  # IPython's own protocol for an exception that renders its traceback
                value._render_traceback_ = lambda: text.rstrip("\n").split("\n")
            except AttributeError:  # an exception without attributes of its own: shown as IPython shows a list
                shell._showtraceback(etype, value, text.rstrip("\n").split("\n"))
                return None
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
        return None

    shell.set_custom_exc((Exception,), handler)
