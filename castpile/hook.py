"""Import hook: transpile a package's kernel modules when they are imported.

``install_import_hook("mypkg")`` puts an :class:`ImportHook` on ``sys.meta_path``,
just before the standard path finder (so pytest's assertion rewriter, which sits in
front, keeps the test modules it claims).  For a module named ``mypkg`` or
``mypkg.*`` it asks the finders behind it where the module is; when that is a ``.py``
file whose bytes contain ``castpile``, the module is loaded from the transpiled entry
in the compile cache (:mod:`castpile.cache`), built first if it is missing, damaged by
accident (the seal catches truncation, partial writes, bit rot), not a regular file, or
could have been written by another user (ownership and permission checks).  Nothing
stops the cache's owner from rewriting an entry with a recomputed seal; it then runs,
as any code the owner writes would.  Every other module is left to the normal finders
untouched.

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
  still finds it if the entry is removed while the process runs.

A warm import reads the source, hashes it, checks the entry and compiles it with
Python's own compiler: libcst is imported only when an entry has to be built.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

from . import cache
from .compiler.errors import TranspileError
from .options import check_strategy, mentions_castpile


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
    """Loads one module from its cache entry (exec_module is importlib's own)."""

    def __init__(self, hook: ImportHook, spec: importlib.machinery.ModuleSpec, source: bytes):
        self._hook = hook
        self._name = spec.name
        self._path = spec.origin
        self._source = source
        self._original = spec.loader
        self._package = spec.submodule_search_locations is not None
        self._built: tuple[Path, bytes] | None = None
        self.error: TranspileImportError | None = None

    def _build(self) -> tuple[Path, bytes]:
        """The entry's path and bytes, transpiling and storing them when the cache lacks them."""
        if self._built is None:
            directory = cache.prepare_dir(self._hook.cache_dir)
            key = cache.entry_key(self._source, self._path, self._hook.options)
            entry = cache.entry_path(directory, self._name, key)
            data = cache.load(entry, key)
            if data is None:
                from .compiler import transpile_source

                out = transpile_source(self._source, self._path, **self._hook.options)
                data = cache.store(entry, key, out)
            self._built = (entry, data)
        return self._built

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
        return compile(data, os.fspath(entry), "exec", dont_inherit=True)

    def get_source(self, fullname):
        return importlib.util.decode_source(self._build()[1])

    def is_package(self, fullname):
        return self._package

    def get_resource_reader(self, fullname):
        return self._original.get_resource_reader(fullname)


class ImportHook(importlib.abc.MetaPathFinder):
    """The installed hook; ``uninstall()`` or leaving its ``with`` block removes it."""

    def __init__(self, packages: tuple[str, ...], cache_dir: Path, options: dict[str, str]):
        self.packages = packages
        self.cache_dir = cache_dir
        self.options = options

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
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        try:
            source = spec.loader.get_data(spec.origin)
        except OSError:
            return None
        if not mentions_castpile(source):
            return None
        new = importlib.machinery.ModuleSpec(
            fullname,
            _Loader(self, spec, source),
            origin=spec.origin,
            is_package=spec.submodule_search_locations is not None,
        )
        new.submodule_search_locations = spec.submodule_search_locations
        new.has_location = True
        return new

    def uninstall(self) -> None:
        """Remove the hook; modules already imported stay as they are."""
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]

    def __enter__(self) -> ImportHook:
        return self

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def __repr__(self) -> str:
        return f"ImportHook(packages={self.packages!r}, cache_dir={str(self.cache_dir)!r}, options={self.options!r})"


def install_import_hook(*packages: str, cache_dir=None, strategy: str = "loop") -> ImportHook:
    """Transpile modules named ``pkg`` or ``pkg.*`` on import, caching the output.

    ``cache_dir`` defaults to ``$CASTPILE_CACHE_DIR``, else the user cache dir; it is
    created 0700 when the first module is built.  ``strategy`` is passed to
    :func:`castpile.transpile`.  Returns the hook, also a context manager.
    """
    if not packages or not all(isinstance(p, str) and p and not p.startswith(".") for p in packages):
        raise ValueError(f"install_import_hook needs absolute package names, got {packages!r}")
    hook = ImportHook(tuple(packages), cache.cache_dir(cache_dir), {"strategy": check_strategy(strategy)})
    meta = sys.meta_path
    at = next((i for i, f in enumerate(meta) if f is importlib.machinery.PathFinder), len(meta))
    meta.insert(at, hook)
    return hook
