"""Untranspiled kernels in Triton's interpreter: castpile's how-to message, not the error of an argument.

Python evaluates a call's arguments before the call, so under ``TRITON_INTERPRET=1`` an
untranspiled ``multicast_like(out, dev_ptrs[:WORLD])`` fails on the table slice (Triton's
``unsupported tensor index``) before :data:`castpile.multicast_like` can say how to
transpile.  Imported in interpreter mode, castpile wraps the interpreter's grid launch
once: an error raised on a line of the kernel that lies inside a call of castpile's names
(as the kernel's globals resolve them) becomes castpile's how-to error at that
``path:line``.  Every other error passes through unchanged.

Importing this module is cheap: Triton's interpreter is wrapped when it is imported.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.util
import inspect
import sys
import textwrap

INTERPRETER = "triton.runtime.interpreter"


def install(is_marker, how: str) -> None:
    """Wrap Triton's interpreter now if it is imported, else as soon as it is.

    ``is_marker(value)`` says whether a global is one of castpile's names; ``how`` is the
    how-to template (its ``{name}`` the castpile name).
    """
    module = sys.modules.get(INTERPRETER)
    if module is not None:
        _wrap(module, is_marker, how)
    elif not any(isinstance(finder, _WrapOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapOnImport(is_marker, how))


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when Triton's interpreter module is found, wraps it after it runs."""

    def __init__(self, is_marker, how: str):
        self.is_marker, self.how = is_marker, how

    def find_spec(self, name, path, target=None):
        if name != INTERPRETER:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            _wrap(module, self.is_marker, self.how)

        spec.loader.exec_module = exec_module
        return spec


def _wrap(module, is_marker, how: str) -> None:
    executor = getattr(module, "GridExecutor", None)
    error_type = getattr(module, "InterpreterError", None)
    if executor is None or error_type is None:
        return
    # castpile imported again (new markers) wraps Triton's own launch again, not its earlier wrapper
    launch = getattr(executor.__call__, "castpile_wraps", executor.__call__)

    def call(self, *args, **kwargs):
        try:
            return launch(self, *args, **kwargs)
        except error_type as error:
            hint = untranspiled_call(self.fn, error.__cause__, is_marker, how)
            if hint is None:
                raise
            raise error_type(hint) from error.__cause__

    call.castpile_wraps = launch  # type: ignore[attr-defined]  # a function attribute, which mypy does not model
    executor.__call__ = call


def untranspiled_call(fn, error: BaseException | None, is_marker, how: str) -> str | None:
    """The how-to message for ``error`` if it was raised inside a call of a castpile name in ``fn``, else None.

    >>> untranspiled_call(len, None, callable, "{name}") is None
    True
    """
    line = _failing_line(fn, error)
    if line is None:
        return None
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _castpile_name(node.func, fn.__globals__, is_marker)
        end = node.end_lineno if node.end_lineno is not None else node.lineno  # ast.parse sets it
        if name and node.lineno + first - 1 <= line <= end + first - 1:
            return f"{fn.__code__.co_filename}:{line}: " + how.format(name=name)
    return None


def _failing_line(fn, error: BaseException | None) -> int | None:
    """The line of ``fn``'s own frame where ``error`` was raised (its innermost frame of ``fn``)."""
    line = None
    tb = error.__traceback__ if error is not None else None
    while tb is not None:
        if tb.tb_frame.f_code is fn.__code__:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _castpile_name(func: ast.expr, scope: dict, is_marker) -> str | None:
    """``multicast_like`` for ``multicast_like(...)`` or ``cp.multicast_like(...)`` when it is castpile's."""
    if isinstance(func, ast.Name):
        value = scope.get(func.id)
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        value = getattr(scope.get(func.value.id), func.attr, None)
    else:
        return None
    return value.__name__ if value is not None and is_marker(value) else None
