"""Import hook: transpile a package's kernel modules when they are imported.

``install_import_hook("mypkg")`` puts an :class:`ImportHook` on ``sys.meta_path``,
just before the standard path finder (so pytest's assertion rewriter, which sits in
front, keeps the test modules it claims).  For a module named ``mypkg`` or
``mypkg.*`` it asks the finders behind it where the module is; when that is a ``.py``
file (on disk or in a zip archive) whose bytes contain ``castpile``, the module is
loaded from the transpiled entry in the compile cache (:mod:`castpile.cache`), built
first if it is missing, damaged by accident (the seal catches truncation, partial
writes, bit rot), not a regular file, or could have been written by another user
(ownership and permission checks).  Nothing stops the cache's owner from rewriting an
entry with a recomputed seal; it then runs, as any code the owner writes would.  Every
other module is left to the normal finders untouched.  The cache is an optimisation:
when it fails (an ``OSError`` of any kind), the module is transpiled in memory and
imported from there, and the hook warns once (:class:`CacheWarning`).

What the loaded module looks like:

- ``__file__``, ``__spec__.origin`` and ``__path__`` are the user's, so files next to
  the module and submodules are found as usual.
- Its code is compiled from the cache entry and names the entry as its file, so
  ``inspect.getsource`` (which ``@triton.jit`` and the interpreter call) returns the
  transpiled text.  Naming the user's file instead would make Triton read and compile
  the untransformed source.  The entry keeps every line at its number, so tracebacks,
  Triton's compile errors and interpreter errors give the user's line numbers, in a
  file named ``<module>-<key>.py`` in the cache.
- The loader also serves the transpiled text through ``get_source``, so the interpreter
  still finds it if the entry is removed while the process runs, and ``inspect`` finds
  the text of a module transpiled in memory, whose code names no file.

A warm import reads the source, hashes it, checks the entry and compiles it with
Python's own compiler: libcst is imported only when an entry has to be built.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import zipimport
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import cache
from .cache import CacheWarning
from .compiler.errors import TranspileError
from .options import check_strategy, debug_waits_from_env, mentions_castpile

if TYPE_CHECKING:
    from os import PathLike

    from .options import Strategy

__all__ = ["CacheWarning", "ImportHook", "TranspileImportError", "hooked_options", "install_import_hook"]


class TranspileImportError(SyntaxError):
    """A module could not be transpiled on import; ``str()`` is the located message."""

    def __init__(self, error: TranspileError):
        self.diagnostics = error.diagnostics
        self.rendered = error.render()
        heads = [d.headline() for d in self.diagnostics]
        if self.diagnostics:
            d = self.diagnostics[0]
            super().__init__("\n".join(heads), (d.path, d.line, d.col, d.source_line))
        else:
            super().__init__(self.rendered)

    def __str__(self) -> str:
        return self.rendered


class _Loader(importlib.abc.InspectLoader):
    """Loads one module from its cache entry, else from memory (exec_module is importlib's own)."""

    def __init__(self, hook: ImportHook, spec: importlib.machinery.ModuleSpec, path: str, source: bytes):
        self._hook = hook
        self._name = spec.name
        self._path = path
        self._source = source
        self._original = spec.loader
        self._package = spec.submodule_search_locations is not None
        self._built: tuple[str, bytes] | None = None
        self.hook_options = hook.options
        self.error: TranspileImportError | None = None

    @functools.cached_property
    def _transpiled(self) -> bytes:
        from .compiler import transpile_source

        return transpile_source(self._source, self._path, **self._hook.options)

    def _build(self) -> tuple[str, bytes]:
        """The file name the module's code gives and its transpiled bytes.

        The name is the cache entry's, the entry built and stored first when missing.  When
        the cache fails (any OSError: no directory, an unsafe one, a full, read-only or
        size-limited file system, an entry removed before its rename), the text stays in
        memory under a name that is no file; ``inspect`` then gets it from :meth:`get_source`.
        """
        if self._built is None:
            try:
                self._built = self._through_cache()
            except OSError as failure:
                self._hook.report_cache_failure(self._name, failure)
                self._built = (cache.in_memory_name(self._path), self._transpiled)
        return self._built

    def _through_cache(self) -> tuple[str, bytes]:
        hook = self._hook
        return cache.cached(
            hook.cache_dir, self._name, self._path, self._source, hook.options, lambda: self._transpiled
        )

    def get_code(self, fullname):
        try:
            entry, data = self._build()
        except TranspileError as e:
            # importlib's exec_module runs this code, which raises the error.  Named as
            # importlib's own frame-removing helper, it is trimmed from the traceback by
            # CPython together with importlib's frames, as for a SyntaxError in a normal
            # module: the user sees the import line and the located error only.
            self.error = TranspileImportError(e)
            code = compile("raise __loader__.error\n", "<frozen importlib._bootstrap>", "exec", dont_inherit=True)
            return code.replace(co_name="_call_with_frames_removed")
        from .tracebacks import install

        install()  # the module's errors name the user's file and line, not the entry's
        return compile(data, entry, "exec", dont_inherit=True)

    def get_source(self, fullname):
        return importlib.util.decode_source(self._build()[1])

    def is_package(self, fullname):
        return self._package

    def get_resource_reader(self, fullname):
        return self._original.get_resource_reader(fullname)


def _python_source(spec: importlib.machinery.ModuleSpec) -> tuple[str, bytes] | None:
    """The path and bytes of the module's Python source, read through its loader, or None.

    A plain ``.py`` file, or one in a zip archive (where a ``.pyc`` next to it is what
    zipimport would run: the hook transpiles the source instead).  Anything else (an
    extension module, a namespace package, a module with no source) is None.
    """
    loader, path = spec.loader, spec.origin
    if path is None:
        return None
    if isinstance(loader, zipimport.zipimporter) and path.endswith(".pyc"):
        path = path[:-1]
    elif not isinstance(loader, (importlib.machinery.SourceFileLoader, zipimport.zipimporter)):
        return None
    try:
        return path, loader.get_data(path)
    except OSError:
        return None


def hooked_options(spec: importlib.machinery.ModuleSpec) -> dict[str, Any] | None:
    """The options an installed hook transpiles the module of ``spec`` with, or None where no hook does."""
    return spec.loader.hook_options if isinstance(spec.loader, _Loader) else None


class ImportHook(importlib.abc.MetaPathFinder):
    """The installed hook; ``uninstall()`` or leaving its ``with`` block removes it."""

    def __init__(self, packages: tuple[str, ...], cache_dir: Path, options: dict[str, Any]):
        self.packages = packages
        self.cache_dir = cache_dir
        self.options = options
        self._cache_failed = False

    def _wants(self, name: str) -> bool:
        if name == "castpile" or name.startswith("castpile."):
            return False
        return any(name == p or name.startswith(p + ".") for p in self.packages)

    def _normal_spec(self, fullname, path, target):
        """The spec the finders behind this one give."""
        meta = sys.meta_path
        start = next((i + 1 for i, f in enumerate(meta) if f is self), 0)
        for finder in meta[start:]:
            find = getattr(finder, "find_spec", None)
            if find is None or isinstance(finder, ImportHook):
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def find_spec(self, fullname, path=None, target=None):
        if not self._wants(fullname):
            return None
        spec = self._normal_spec(fullname, path, target)
        found = _python_source(spec) if spec is not None else None
        if found is None or not mentions_castpile(found[1]):
            return None
        new = importlib.machinery.ModuleSpec(
            fullname,
            _Loader(self, spec, *found),
            origin=found[0],
            is_package=spec.submodule_search_locations is not None,
        )
        new.submodule_search_locations = spec.submodule_search_locations
        new.has_location = True
        return new

    def report_cache_failure(self, module: str, failure: OSError) -> None:
        """Warn, the first time only, that the cache failed and modules are transpiled in memory."""
        if not self._cache_failed:
            self._cache_failed = True
            cache.warn_failure(self.cache_dir, module, failure)  # at the user's import line

    def uninstall(self) -> None:
        """Remove the hook; modules already imported stay as they are."""
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]

    def __enter__(self) -> ImportHook:
        return self

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def __repr__(self) -> str:
        return f"ImportHook(packages={self.packages!r}, cache_dir={str(self.cache_dir)!r}, options={self.options!r})"


def install_import_hook(
    *packages: str, cache_dir: str | PathLike[str] | None = None, strategy: Strategy = "loop"
) -> ImportHook:
    """Transpile modules named ``pkg`` or ``pkg.*`` on import, caching the output.

    ``cache_dir`` defaults to ``$CASTPILE_CACHE_DIR``, else the user cache dir; it is
    created 0700 when the first module is built.  ``strategy`` is passed to
    :func:`castpile.transpile`, and so is ``CASTPILE_DEBUG_WAITS`` as it is now (``ValueError`` for a
    bad value): its seconds are part of every entry's key.  Returns the hook, also a context manager.
    """
    if not packages or not all(isinstance(p, str) and p and not p.startswith(".") for p in packages):
        raise ValueError(f"install_import_hook needs absolute package names, got {packages!r}")
    options = {"strategy": check_strategy(strategy), **debug_waits_from_env()}
    hook = ImportHook(tuple(packages), cache.cache_dir(cache_dir), options)
    meta = sys.meta_path
    at = next((i for i, f in enumerate(meta) if f is importlib.machinery.PathFinder), len(meta))
    meta.insert(at, hook)
    return hook
