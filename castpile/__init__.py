"""castpile: multicast tensors for Triton kernels.

A kernel binds ``bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))`` and
subscripts ``bufs`` like a tensor whose leading dims run over the buffers;
castpile rewrites those subscripts into plain Triton.  Transpile a file with
``castpile kernel.py -o out.py`` or :func:`transpile`, or on import with
:func:`install_import_hook`, or where it is decorated, with ``@castpile.jit``.

The package: :mod:`castpile.compiler` (the four passes), :mod:`castpile.gpu`
(symmetric memory, bound launches, the CPU simulator, collectives), and the front
ends (:mod:`castpile.cli`, :mod:`castpile.hook` with :mod:`castpile.cache`).
Importing castpile is cheap (no libcst, no sympy): transpiled modules import it
for the names below, and GPU machines need nothing but triton to run them.
"""

from __future__ import annotations

from .jit import jit  # binds castpile.jit to the decorator, over the submodule of that name
from .options import STRATEGIES, VERSION

__version__ = VERSION

_HOW = (
    "castpile.{name} only has meaning inside a kernel that castpile has transpiled: "
    "run `castpile kernel.py -o kernel_out.py` and import the output, or call "
    "castpile.install_import_hook('your_package') before importing your kernels"
)


def transpile(source: bytes | str, path: str = "<string>", *, strategy: str = "loop") -> bytes:
    """Transpile one module's source; raises :class:`TranspileError` with every located error.

    >>> transpile(b"x = 1\\n")  # no castpile use: the bytes come back unchanged
    b'x = 1\\n'
    """
    from .compiler import transpile_source

    return transpile_source(source, path, strategy=strategy)


class _Marker:
    """A source-level marker that castpile rewrites away; used without transpiling, it says how to transpile.

    Calling it raises that error; so does reading its ``__triton_builtin__``, which Triton
    reads from every global an ``@triton.jit`` function references before it compiles the
    function (the JIT's dependency scan, then the code generator's name lookup).  So a
    compiled kernel that was not transpiled reports the how-to message even where an
    argument, evaluated before the call, could not compile (``dev_ptrs[:WORLD]``).  The
    interpreter evaluates that argument first and fails on it before any call.
    """

    def __init__(self, name: str, doc: str):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        raise RuntimeError(_HOW.format(name=self.__name__))

    @property
    def __triton_builtin__(self):
        raise RuntimeError(_HOW.format(name=self.__name__))

    def __repr__(self) -> str:
        return f"<castpile marker {self.__name__}>"


multicast_like = _Marker("multicast_like", "Bind a multicast tensor (a source-level marker; see docs/language.md).")
signal = _Marker("signal", "Set flags in every addressed buffer (a source-level marker).")
wait = _Marker("wait", "Spin until every addressed flag holds a value (a source-level marker).")


def define_helpers(scope: dict) -> None:
    """Define the helpers appended to the calling transpiled module now (``scope``: its globals), for its
    module-level code that launches kernels before reaching them; see :mod:`castpile.early`."""
    import sys

    from .early import define_helpers as define

    define(scope, sys._getframe(1).f_code.co_filename)


def __getattr__(name):
    """``Diagnostic`` and ``TranspileError`` load on first use: the CLI copies a
    file that never mentions castpile without compiling :mod:`castpile.compiler.errors`."""
    if name in ("Diagnostic", "TranspileError"):
        from .compiler import errors

        value = globals()[name] = getattr(errors, name)
        return value
    if name == "testing":  # imported here: `from . import testing` would look the name up, calling this again
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), "Diagnostic", "TranspileError", "testing"})


def install_import_hook(*packages, cache_dir=None, strategy="loop"):
    """Transpile the modules of ``packages`` on import; see :mod:`castpile.hook`."""
    from .hook import install_import_hook as install

    return install(*packages, cache_dir=cache_dir, strategy=strategy)


__all__ = [
    "Diagnostic",
    "STRATEGIES",
    "TranspileError",
    "define_helpers",
    "install_import_hook",
    "jit",
    "multicast_like",
    "signal",
    "transpile",
    "wait",
    "__version__",
]
