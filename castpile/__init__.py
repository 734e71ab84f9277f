"""castpile: multicast tensors for Triton kernels.

A kernel binds ``bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))`` and
subscripts ``bufs`` like a tensor whose leading dims run over the buffers;
castpile rewrites those subscripts into plain Triton.  Transpile a file with
``castpile kernel.py -o out.py`` or :func:`transpile`, or on import with
:func:`install_import_hook`, or where it is decorated, with ``@castpile.jit``.

The package: :mod:`castpile.compiler` (the four passes), :mod:`castpile.gpu`
(symmetric memory, bound launches, the CPU simulator, collectives), and the front
ends (:mod:`castpile.cli` with :mod:`castpile.__main__`, :mod:`castpile.runner`,
:mod:`castpile.jit`, :mod:`castpile.hook`, :mod:`castpile.testing` with
:mod:`castpile.pytest_plugin`), one layer over the pieces they share
(:mod:`castpile.cache`, :mod:`castpile.files`, :mod:`castpile.options`,
:mod:`castpile.plain_args`, :mod:`castpile.reporting`, :mod:`castpile.tracebacks`); no module imports one that
imports it back, through any chain (tests/test_layout.py).
Importing castpile is cheap (no libcst, no sympy, not even typing or ``__future__``: annotations are strings): transpiled modules
import it for the names below, GPU machines need nothing but triton to run them, and
``castpile plain.py -o out.py`` copies a file without castpile at about the cost of a
copy: the names below load on first use (the language's from :mod:`castpile.markers`,
``jit`` from :mod:`castpile.jit`, the version and strategies from :mod:`castpile.options`,
``Diagnostic`` and ``TranspileError`` from the compiler, ``testing``).
"""

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; type checkers read it as True
if TYPE_CHECKING:
    from typing import Any

    from .compiler.errors import Diagnostic, TranspileError
    from .hook import ImportHook
    from .jit import jit
    from .markers import Multicast, multicast_like, signal, wait
    from .options import STRATEGIES, VERSION, Strategy

    __version__ = VERSION


def transpile(
    source: "bytes | str", path: str = "<string>", *, strategy: "Strategy" = "loop", debug_waits: "float | None" = None
) -> bytes:
    """Transpile one module's source; raises :class:`TranspileError` with every located error.

    ``debug_waits``: seconds after which each ``castpile.wait`` gives up and records its ``path:line``
    (docs/one-gpu.md, "Hangs that name their line"); this function does not read ``CASTPILE_DEBUG_WAITS``.

    >>> transpile(b"x = 1\\n")  # no castpile use: the bytes come back unchanged
    b'x = 1\\n'
    """
    from .compiler import transpile_source

    return transpile_source(source, path, strategy=strategy, debug_waits=debug_waits)


if os.environ.get("TRITON_INTERPRET") == "1":
    from .interpreter_hint import install as _install_interpreter_hint
    from .markers import _HOW, _Marker

    _install_interpreter_hint(lambda value: isinstance(value, _Marker), _HOW)


def define_helpers(scope: "dict[str, Any]") -> None:
    """Define the helpers appended to the calling transpiled module now (``scope``: its globals), for its
    module-level code that launches kernels before reaching them; see :mod:`castpile.early`."""
    import sys

    from .early import define_helpers as define

    define(scope, sys._getframe(1).f_code.co_filename)


_MARKERS = ("Multicast", "multicast_like", "signal", "wait")


def __getattr__(name: str) -> "Any":
    """The language's names (:mod:`castpile.markers`), ``jit``, ``Diagnostic``, ``TranspileError`` and the version
    and strategies (:mod:`castpile.options`) load on first use: the CLI copies a file that never mentions castpile
    without compiling any of them."""
    if name == "jit":  # importing the submodule binds castpile.jit to it; the decorator is bound over it here
        from .jit import jit as value

        globals()["jit"] = value
        return value
    if name in ("STRATEGIES", "VERSION", "__version__"):
        from .options import STRATEGIES, VERSION

        globals().update(STRATEGIES=STRATEGIES, VERSION=VERSION, __version__=VERSION)
        return globals()[name]
    if name in _MARKERS:
        from . import markers

        globals().update({n: getattr(markers, n) for n in _MARKERS})
        return globals()[name]
    if name in ("Diagnostic", "TranspileError"):
        from .compiler import errors

        value = globals()[name] = getattr(errors, name)
        return value
    if name == "testing":  # imported here: `from . import testing` would look the name up, calling this again
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    names = {*_MARKERS, "Diagnostic", "TranspileError", "jit", "testing", "STRATEGIES", "VERSION", "__version__"}
    return sorted({*globals(), *names} - {"TYPE_CHECKING"})


def install_import_hook(*packages: str, cache_dir: "Any" = None, strategy: "Strategy" = "loop") -> "ImportHook":
    """Transpile the modules of ``packages`` on import; see :mod:`castpile.hook`."""
    from .hook import install_import_hook as install

    return install(*packages, cache_dir=cache_dir, strategy=strategy)


__all__ = [
    "STRATEGIES",
    "Diagnostic",
    "Multicast",
    "TranspileError",
    "__version__",
    "define_helpers",
    "install_import_hook",
    "jit",
    "multicast_like",
    "signal",
    "transpile",
    "wait",
]
