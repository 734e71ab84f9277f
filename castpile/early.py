"""Early helpers: a transpiled module's helpers defined before its module-level code launches a kernel.

castpile appends the helpers a module calls after its last line, so that every
input line keeps its number.  Module-level code that launches a kernel (an
``if __name__ == "__main__":`` block, a launch at import) runs before those lines,
so castpile puts ``__import__("castpile").define_helpers(globals())`` in front of
the first such statement, and :func:`define_helpers` runs the appended lines
there and then, read from the module's own file: the helpers' code names that
file and their lines in it, as Triton needs (``inspect.getsource``).  When the
module's code reaches those lines it defines the helpers again, which changes
nothing.

Importing this module is cheap (the standard library only, loaded on call).
"""

from .options import APPENDED_MARK, HELPERS_TITLE, WRAPS_TITLE


def define_helpers(scope: dict, filename: str) -> None:
    """Run the helpers appended to the module file ``filename`` in ``scope`` (its globals), and wrap for
    NVSHMEM those of its remote kernels already defined; once per module (``scope["__castpile_helpers__"]``
    records it: a ``while`` test calls this at every turn)."""
    import ast
    import linecache

    if scope.get("__castpile_helpers__") == filename:
        return
    lines = linecache.getlines(filename, scope)
    starts = [k for k, line in enumerate(lines) if line.startswith(APPENDED_MARK)]
    helpers = max(k for k in starts if HELPERS_TITLE in lines[k])
    wraps = next((k for k in starts if k > helpers and WRAPS_TITLE in lines[k]), len(lines))
    tree = ast.parse("".join(lines[helpers:]), filename)
    ast.increment_lineno(tree, helpers)
    statements = [
        s
        for s in tree.body
        if s.lineno <= wraps
        or (isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) and t.id in scope for t in s.targets))
    ]
    exec(compile(ast.Module(statements, type_ignores=[]), filename, "exec"), scope)
    scope["__castpile_helpers__"] = filename
