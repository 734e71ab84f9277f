"""``@castpile.jit``: a kernel in a plain script or notebook cell, transpiled where it is decorated.

``@castpile.jit`` (or ``@castpile.jit(**triton_jit_keywords)``) reads the source of the
file or cell that defines the kernel (through :mod:`linecache`, as ``inspect`` does),
transpiles it whole, once per source text (the compile cache, :mod:`castpile.cache`,
then a table in this process), and hands ``triton.jit`` a function made from the
kernel's transpiled ``def``:

- its code names the cache entry as its file, and keeps the user's line numbers, so
  ``inspect.getsource`` (which ``@triton.jit`` and the interpreter call) returns the
  transpiled text, and Triton's errors and tracebacks give the user's lines;
- its globals are the kernel's own (the module's or the notebook's namespace), so other
  ``@triton.jit`` functions, constants and the ``tl`` alias resolve as they would for
  ``@triton.jit``; its defaults, annotations and closure cells are the kernel's;
- the helpers it calls are defined once per text in this process, in a namespace of
  their own, and bound under their ``_castpile_`` names in the kernel's globals: a kernel
  decorated again, or another cell's kernel, finds the same objects there, so Triton's
  check that a compiled kernel's globals have not changed holds.

Diagnostics are the kernel's only: errors in other functions of the same file are
left out (those statements are blanked, the rest transpiled again), so each kernel
raises :class:`castpile.TranspileError` for its own lines, named by the path its code
object gives (a script's path, a notebook cell's ``<ipython-input-...>`` name).  A
kernel in a module that castpile already transpiled (the import hook, ``castpile run``,
a CLI output) goes to ``triton.jit`` as it is.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from .options import APPENDED_MARK, HELPERS_TITLE, WRAPS_TITLE, debug_waits_from_env

if TYPE_CHECKING:  # imported by jit() on first use, for the whole module (see there)
    import ast
    import linecache
    from collections.abc import Iterable

    from triton.runtime.jit import JITFunction

_Kernel = TypeVar("_Kernel", bound=Callable[..., Any])

_OPTIONS = {"strategy": "loop"}
_transpiled: dict[str, tuple[str, str, ast.Module]] = {}
"""Key of a source (:func:`castpile.cache.entry_key`) -> the file name its code gives, its transpiled text, its tree."""
_helpers: dict[str, object] = {}
"""A helper statement's text -> the one object defined for it in this process."""


@overload
def jit(fn: _Kernel, /) -> JITFunction[_Kernel]: ...


@overload
def jit(
    *,
    version: Any = None,
    repr: Callable[..., Any] | None = None,
    launch_metadata: Callable[..., Any] | None = None,
    do_not_specialize: Iterable[int | str] | None = None,
    do_not_specialize_on_alignment: Iterable[int | str] | None = None,
    debug: bool | None = None,
    noinline: bool | None = None,
) -> Callable[[_Kernel], JITFunction[_Kernel]]: ...


def jit(fn: Any = None, /, **options: Any) -> Any:
    """Transpile the kernel ``fn`` and return ``triton.jit(transpiled, **options)``; see the module docstring.

    Typed as ``triton.jit`` is (both call forms, its keywords): ``kernel[grid](...)`` is checked against the
    kernel's parameters, and a keyword ``triton.jit`` does not take is an error for type checkers."""
    if fn is None:
        return lambda kernel: jit(kernel, **options)
    global ast, linecache
    import ast  # bound here, for the whole module: `import castpile` (the CLI's copy of a plain file) stays cheap
    import linecache

    import triton

    from .compiler.errors import TranspileError

    try:
        prepared = _prepared(fn, {**_OPTIONS, **debug_waits_from_env()})
    except (TranspileError, ValueError) as error:  # the user's decorator line, then this one: no castpile internals
        raise error.with_traceback(None) from None
    if prepared is None:
        return triton.jit(fn, **options)
    function, wrap = prepared
    return wrap(triton.jit(function, **options))


def _error(path: str, line: int, message, **params):
    """A :class:`TranspileError` with the catalogue's ``message`` (an E7xx entry) at ``path:line``."""
    from .compiler.errors import TranspileError

    return TranspileError([message.at(path, line, 1, linecache.getline(path, line).rstrip("\r\n"), **params)])


def _user_source(fn) -> tuple[str, str]:
    """The path that ``fn``'s code names and the text there (a file, or a cell's linecache entry)."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(
            f"castpile.jit decorates a Python function (a def), not {type(fn).__name__}: "
            "put @castpile.jit directly above the def"
        )
    path = fn.__code__.co_filename
    text = "".join(linecache.getlines(path, fn.__globals__)) or _magic_cell_text(path, fn)
    if not text:
        from .compiler import diagnostics

        raise _error(path, fn.__code__.co_firstlineno, diagnostics.JIT_NO_SOURCE, function=fn.__name__)
    return path, text


def _magic_cell_text(path: str, fn) -> str:
    """The text of the IPython cell being run, when a cell magic (``%%time``) runs its body under ``path``, a name
    that linecache does not hold (``<timed exec>``): the body as IPython transforms it, with ``fn``'s def at the line
    its code gives; registered in linecache under ``path`` (for diagnostics and tracebacks); "" otherwise."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not (path.startswith("<") and path.endswith(">")):
        return ""
    try:
        cell = shell.history_manager.input_hist_raw[-1]
    except (AttributeError, IndexError):
        return ""
    if not cell.startswith("%%"):
        return ""
    body = shell.transform_cell(cell.split("\n", 1)[1] if "\n" in cell else "")
    lines = body.splitlines(keepends=True)
    line = fn.__code__.co_firstlineno
    if not 0 < line <= len(lines) or not (lines[line - 1].lstrip().startswith(("@", "def "))):
        return ""
    linecache.cache[path] = (len(body), None, lines, path)
    return body


@functools.lru_cache(maxsize=16)
def _parsed(text: str, path: str) -> ast.Module:
    """``text`` parsed (once: a file's kernels are decorated one after another); never modified."""
    return ast.parse(text, path)


def _kernel_def(tree: ast.Module, fn) -> ast.FunctionDef | None:
    """The ``def`` of ``fn`` in ``tree``: its name, and its first decorator's line (or its own) where ``fn``'s code starts."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == fn.__name__:
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if first == fn.__code__.co_firstlineno:
                return node
    return None


def _is_jit_decorator(decorator: ast.expr) -> bool:
    """``@jit``, ``@castpile.jit``, ``@castpile.jit(...)``: a name whose last part is ``jit``, as the compiler reads it."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    return (isinstance(decorator, ast.Name) and decorator.id == "jit") or (
        isinstance(decorator, ast.Attribute) and decorator.attr == "jit"
    )


def _prepared(fn, options):
    """The function to hand ``triton.jit`` in place of ``fn``, and what wraps the kernel it gives (transpiled
    with ``options``); None when ``fn``'s own source is castpile's output already."""
    path, text = _user_source(fn)
    if APPENDED_MARK in text and HELPERS_TITLE in text:  # castpile's output, of any version
        return None
    source = tree = _parsed(text, path)
    kernel = _kernel_def(tree, fn)
    if kernel is None:
        from .compiler import diagnostics

        raise _error(path, fn.__code__.co_firstlineno, diagnostics.JIT_NO_DEF, function=fn.__name__)
    if not any(_is_jit_decorator(d) for d in kernel.decorator_list):
        from .compiler import diagnostics

        raise _error(path, kernel.lineno, diagnostics.JIT_NOT_AT_DEF, function=fn.__name__)
    own_lines = len(text.splitlines())
    text += _namespace_imports(fn.__globals__, _bound_names(tree), text)
    borrowed = _namespace_helpers(fn, tree, kernel)
    text += "".join(f"\n\n{helper_text}" for helper_text in borrowed.values())
    span = (kernel.decorator_list[0].lineno, kernel.end_lineno)
    filename, transpiled, tree = _transpile(fn, path, text, span, options)
    left = _helpers_left_to_triton(fn, path, source, tree, kernel)
    if left:
        from .compiler.errors import TranspileError

        raise TranspileError(left)
    _rebind_borrowed(fn, borrowed, tree, own_lines, filename)
    function = _function(_kernel_def(tree, fn), fn, filename)
    function.__castpile_user_def__ = _def_text(text, kernel)  # for later cells' kernels (_namespace_helpers)
    helpers, wraps = _appended(tree, transpiled)
    namespace = _define_helpers(helpers, transpiled, filename, fn.__globals__)
    mine = [s for s in wraps if isinstance(s, ast.Assign) and s.targets[0].id == fn.__name__]

    def wrap(kernel):
        scope = {**namespace, fn.__name__: kernel}
        for statement in mine:
            exec(compile(ast.Module([statement], []), filename, "exec"), scope)
        return scope[fn.__name__]

    return function, wrap


def _helpers_left_to_triton(fn, path: str, source: ast.Module, transpiled: ast.Module, kernel: ast.FunctionDef) -> list:
    """The E704 diagnostics: one for each function of the file that the kernel reaches by name, that castpile rewrites (it uses
    castpile), and that is bound, when the kernel is decorated, to a ``@triton.jit`` function of the user's own
    source: Triton would run its untranspiled text.  Functions not yet bound (defined after the kernel) are
    left to Triton's own error."""
    from triton.runtime import JITFunction
    from triton.runtime.interpreter import InterpretedFunction

    jit_functions = (JITFunction, InterpretedFunction)  # what @triton.jit gives, compiled and interpreted
    defs = {node.name: node for node in source.body if isinstance(node, ast.FunctionDef)}
    rewritten = {
        node.name
        for node in transpiled.body
        if isinstance(node, ast.FunctionDef) and node.name in defs and ast.dump(node) != ast.dump(defs[node.name])
    }
    reached, frontier = set(), [kernel]
    while frontier:
        for node in ast.walk(frontier.pop()):
            if isinstance(node, ast.Name) and node.id in defs and node.id not in reached and node.id != fn.__name__:
                reached.add(node.id)
                frontier.append(defs[node.id])
    left = []
    for name in sorted(reached & rewritten, key=lambda n: defs[n].lineno):
        bound = fn.__globals__.get(name)
        if isinstance(bound, jit_functions) and bound.fn.__code__.co_filename == path:
            from .compiler import diagnostics

            message = diagnostics.JIT_HELPER_LEFT_TO_TRITON
            left += _error(path, defs[name].lineno, message, function=name, kernel=kernel.name).diagnostics
    return left


def _def_text(text: str, node: ast.FunctionDef) -> str:
    """The lines of the ``def`` ``node`` in ``text``, its decorators first, dedented."""
    import textwrap

    start, end = _lines_of(node)
    return textwrap.dedent("".join(text.splitlines(keepends=True)[start - 1 : end]))


def _jit_functions() -> tuple[Any, ...]:
    """What ``@triton.jit`` gives, compiled and interpreted."""
    from triton.runtime import JITFunction
    from triton.runtime.interpreter import InterpretedFunction

    return (JITFunction, InterpretedFunction)


def _namespace_helpers(fn, tree: ast.Module, kernel: ast.FunctionDef) -> dict[str, str]:
    """The helpers that the kernel calls by a name its source does not bind, found in its globals (a function of
    an earlier notebook cell, or of another file) and that take a multicast tensor, name -> the user's text of their
    ``def``: appended to the kernel's text, castpile lowers their calls as Python resolves them (a helper's lowered
    parameters depend on what its callers pass it, so the kernel gets the helper as lowered for its own calls)."""
    from . import cache

    defined = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    bound = _bound_names(tree)
    found: dict[str, str] = {}
    frontier: list[ast.AST] = [kernel]
    while frontier:
        for node in ast.walk(frontier.pop()):
            if not isinstance(node, ast.Name) or node.id in found:
                continue
            if node.id in defined and node.id != fn.__name__:
                frontier.append(defined.pop(node.id))
                continue
            value: Any = fn.__globals__.get(node.id)
            if node.id in bound or not isinstance(value, _jit_functions()):
                continue
            helper_text = getattr(value.fn, "__castpile_user_def__", None)
            code = value.fn.__code__
            if helper_text is None and cache.source_of(code.co_filename) is None:
                _check_transpiled(value, kernel.name)  # a @triton.jit function of the user's: E704 if it uses castpile
            if helper_text is None or "Multicast" not in helper_text or value.fn.__name__ != node.id:
                continue
            found[node.id] = helper_text
            frontier.append(ast.parse(helper_text))
    return found


def _check_transpiled(helper, kernel: str) -> None:
    """Raise E704 at ``helper``'s ``def`` (in its own file or cell) where it is a ``@triton.jit`` function that uses
    castpile, which Triton would run untranspiled."""
    from . import options

    lines = linecache.getlines(helper.fn.__code__.co_filename, helper.fn.__globals__)
    first = helper.fn.__code__.co_firstlineno
    try:
        node = _kernel_def(ast.parse("".join(lines)), helper.fn) if lines else None
    except SyntaxError:
        node = None
    if node is None:
        return
    written = _def_text("".join(lines), node)
    if not ("Multicast" in written or options.mentions_castpile(written.encode())):
        return
    from .compiler import diagnostics
    from .compiler.errors import TranspileError

    path = helper.fn.__code__.co_filename
    message = diagnostics.JIT_HELPER_LEFT_TO_TRITON
    raise TranspileError(_error(path, node.lineno or first, message, function=node.name, kernel=kernel).diagnostics)


def _rebind_borrowed(fn, borrowed: dict[str, str], tree: ast.Module, own_lines: int, filename: str) -> None:
    """Bind each helper of ``borrowed`` in the kernel's globals to the helper as lowered for this text's calls (its
    ``def`` in ``tree`` after the kernel's own ``own_lines``), where that differs from the one bound there: the
    parameters a Multicast parameter becomes depend on what the callers pass (a ``shape=``, ``remote=``)."""
    import triton

    scope = fn.__globals__
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name in borrowed and node.lineno > own_lines):
            continue
        current = scope[node.name]
        if [a.arg for a in node.args.args] == list(current.fn.__code__.co_varnames[: current.fn.__code__.co_argcount]):
            continue  # lowered as the one bound already (or untranspiled with the same parameters: not castpile's)
        function = _function(node, current.fn, filename)
        setattr(function, "__castpile_user_def__", borrowed[node.name])  # noqa: B010 (FunctionType declares no such name)
        scope[node.name] = triton.jit(function)


def _bound_names(tree: ast.Module) -> set[str]:
    """Every name that ``tree`` binds somewhere (assigned, imported, defined)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _namespace_imports(scope: dict, bound: set[str], text: str) -> str:
    """Imports for the names of ``scope`` (the kernel's globals) that mean castpile, one of its markers,
    triton or triton.language and that the source does not bind (an earlier notebook cell did), so that
    castpile reads them as the kernel will; appended after the last line, where they move no line."""
    package = sys.modules[__package__]  # castpile itself, loaded already: this module is one of its names

    markers = {id(getattr(package, name)): name for name in ("Multicast", "multicast_like", "signal", "wait")}
    lines = []
    for name, value in scope.items():
        if name in bound or not isinstance(name, str) or not name.isidentifier():
            continue
        if isinstance(value, types.ModuleType) and value.__name__ in ("castpile", "triton", "triton.language"):
            lines.append(f"import {value.__name__} as {name}\n")
        elif id(value) in markers:
            lines.append(f"from castpile import {markers[id(value)]} as {name}\n")
    if not lines:
        return ""
    return ("" if text.endswith("\n") else "\n") + "".join(lines)


def _transpile(fn, path: str, text: str, span: tuple[int, int], options: dict) -> tuple[str, str, ast.Module]:
    """The file name, transpiled text and tree of ``text``, errors outside the kernel's lines ``span`` blanked away."""
    from .compiler.errors import TranspileError

    while True:
        try:
            return _transpile_whole(fn, path, text, options)
        except TranspileError as error:
            inside = [d for d in error.diagnostics if span[0] <= d.line <= span[1]]
            blanked = None if inside else _blanked(text, path, {d.line for d in error.diagnostics}, span)
            if blanked is None or blanked == text:
                raise TranspileError(inside or error.diagnostics) from None
            text = blanked


def _blanked(text: str, path: str, lines: set[int], span: tuple[int, int]) -> str | None:
    """``text`` with the outermost statement around each of ``lines`` that leaves the kernel's ``span``
    alone turned into ``pass`` (every line kept); None where some line has no such statement."""
    out = text.splitlines(keepends=True)
    tree = _parsed(text, path)
    for line in lines:
        statement = _outermost(tree, line, span)
        if statement is None:
            return None
        start, end = _lines_of(statement)
        first = out[start - 1]
        out[start - 1] = first[: len(first) - len(first.lstrip())] + "pass\n"
        for k in range(start, end):
            out[k] = "\n"
    return "".join(out)


def _lines_of(statement: ast.stmt) -> tuple[int, int]:
    """A parsed statement's first line (its first decorator's, for a decorated definition) and last line."""
    decorators = getattr(statement, "decorator_list", None)
    assert statement.end_lineno is not None  # ast.parse sets it on every statement
    return (decorators[0].lineno if decorators else statement.lineno), statement.end_lineno


def _outermost(tree: ast.Module, line: int, span: tuple[int, int]) -> ast.stmt | None:
    """The outermost statement that holds ``line`` and does not reach into ``span``."""
    body = tree.body
    while True:
        for statement in body:
            start, end = _lines_of(statement)
            if start <= line <= end:
                break
        else:
            return None
        if end < span[0] or start > span[1]:
            return statement
        body = [child for child in ast.iter_child_nodes(statement) if isinstance(child, ast.stmt)]


def _transpile_whole(fn, path: str, text: str, options: dict) -> tuple[str, str, ast.Module]:
    from . import cache

    source = text.encode("utf-8")
    key = cache.entry_key(source, path, options)
    if key not in _transpiled:

        def build() -> bytes:
            from .compiler import transpile_source

            return transpile_source(source, path, **options)

        module = fn.__module__ if (fn.__module__ or "-").replace(".", "_").isidentifier() else "__main__"
        filename, transpiled = cache.transpiled_file(
            module, path, source, options, build, in_memory=cache.in_memory_name(path, "castpile.jit")
        )
        _transpiled[key] = (filename, transpiled, ast.parse(transpiled, filename))
        from .tracebacks import install

        install()  # the kernel's errors name the user's file and line, not the entry's
    return _transpiled[key]


def _function(kernel: ast.FunctionDef, fn, filename: str) -> types.FunctionType:
    """``fn`` made from the transpiled ``kernel``: compiled under ``filename``, with ``fn``'s globals,
    defaults, annotations and closure cells (inside a function that binds ``fn``'s free names)."""
    kernel = ast.copy_location(
        ast.FunctionDef(kernel.name, kernel.args, kernel.body, [], kernel.returns, kernel.type_comment), kernel
    )
    free = fn.__code__.co_freevars
    binds = [ast.Assign([ast.Name(name, ast.Store())], ast.Constant(None)) for name in free]
    outer = ast.FunctionDef(
        "castpile_closure",
        ast.arguments([], [], None, [], [], None, []),
        [*binds, kernel, ast.Return(ast.Name(kernel.name, ast.Load()))],
        [],
        None,
        None,
    )
    module = ast.Module([outer], [])
    ast.fix_missing_locations(ast.copy_location(outer, kernel))
    code = next(c for c in compile(module, filename, "exec").co_consts if isinstance(c, types.CodeType))
    code = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__name__)
    cells = dict(zip(free, fn.__closure__ or ()))
    function = types.FunctionType(
        code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(cells[name] for name in code.co_freevars)
    )
    function.__kwdefaults__ = fn.__kwdefaults__
    function.__annotations__ = dict(fn.__annotations__)
    function.__qualname__ = fn.__qualname__
    function.__doc__ = fn.__doc__
    function.__dict__.update(fn.__dict__)
    return function


def _appended(tree: ast.Module, text: str) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The statements appended after the module's last line: the helpers, then the NVSHMEM wraps."""
    lines = text.splitlines()
    marks = [k + 1 for k, line in enumerate(lines) if line.startswith(APPENDED_MARK)]
    helpers = max((k for k in marks if HELPERS_TITLE in lines[k - 1]), default=None)
    if helpers is None:
        return [], []
    wraps = next((k for k in marks if k > helpers and WRAPS_TITLE in lines[k - 1]), len(lines) + 1)
    after = [s for s in tree.body if s.lineno > helpers]
    return [s for s in after if s.lineno < wraps], [s for s in after if s.lineno > wraps]


def _define_helpers(statements: list[ast.stmt], text: str, filename: str, scope: dict) -> dict:
    """Define the helper ``statements`` of ``text`` (those not defined yet in this process), bind them
    in ``scope``, and return the namespace they are defined in."""
    namespace: dict[str, object] = {"__name__": "castpile_jit_helpers"}
    for statement in statements:
        code = compile(ast.Module([statement], []), filename, "exec")
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            exec(code, namespace)
            continue
        if isinstance(statement, ast.FunctionDef):
            name = statement.name
        else:  # the helpers castpile appends are imports, definitions and `NAME = value` constants
            assert isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name)
            name = statement.targets[0].id
        segment = ast.get_source_segment(text, statement) or ""  # always found: the statement was parsed from text
        if segment not in _helpers:
            exec(code, namespace)
            _helpers[segment] = namespace[name]
        scope[name] = namespace[name] = _helpers[segment]
    return namespace


class _Module(types.ModuleType):
    """This module, where importing it by name (``import castpile.jit``, before anything has read the attribute
    ``castpile.jit``, which :mod:`castpile` binds to the decorator on first use) has made ``castpile.jit`` the
    module: calling it is calling the decorator, so ``@castpile.jit`` works either way."""

    def __call__(self, fn=None, /, **options):
        return jit(fn, **options)


sys.modules[__name__].__class__ = _Module
