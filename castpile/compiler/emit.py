"""Emit: splice the lowered text in place of each planned node and append the helpers.

Each planned node is swapped for its placeholder name in the tree; libcst renders
every other byte as it was read, and the placeholders are then replaced by the
lowered text (which never goes through a parser again).  A replacement keeps the
line count of the code it replaces (extra line breaks go inside its closing
parenthesis), so every input line keeps its number.  The helpers the module calls
are appended after its last line, named with the lowering's prefix.  When module-level
code after a rewritten kernel may launch it before those lines run (an
``if __name__ == "__main__":`` block, a launch at import), the first such statement
gets ``__import__("castpile").define_helpers(globals())`` in front (see :mod:`castpile.early`).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import libcst as cst

from ..options import HELPERS_TITLE, WRAPS_TITLE, appended_header
from .calling import GIVING_UP, HELPER_PREFIX, REMOTE_KERNEL, SITE_WORD
from .lower import Lowering
from .plan import STATEMENTS, Plan
from .walk import Walker, rebuild

# The family modules of the package castpile.compiler.helpers, found (not run: they import triton) through the
# import system, in the order their helpers are appended.
_HELPERS_SPEC = importlib.util.find_spec(f"{__package__}.helpers")
assert _HELPERS_SPEC is not None and _HELPERS_SPEC.origin is not None  # a package of this one, in its files
_HELPER_FILES = sorted(Path(_HELPERS_SPEC.origin).parent.glob("[!_]*.py"))


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


_CLOSER = "\0"
"""Stands before a padded closing parenthesis until :func:`_indent_closers` knows the line's indentation
(a NUL never survives parsing, so no source holds one)."""


def _padded(text: str, lines: int, newline: str) -> str:
    """``text`` (ending in ``)``) with ``lines`` newlines before its last parenthesis."""
    if lines == 0:
        return text
    return text[:-1] + newline * lines + _CLOSER + text[-1]


def _indentation_above(code: str, at: int) -> str:
    """The indentation of the last line before position ``at`` that holds code."""
    end = at
    while end > 0:
        start = max(code.rfind("\n", 0, end), code.rfind("\r", 0, end)) + 1
        line = code[start:end]
        if line.strip():
            return line[: len(line) - len(line.lstrip(" \t"))]
        end = max(start - 1, 0)
    return ""


def _indent_closers(code: str) -> str:
    r"""Each padded closing parenthesis indented as the code above it.

    A ``)`` at column 0 is legal inside parentheses, but in a kernel nested in a function it
    would make the kernel's source start at column 0 too, and Triton, which dedents that source
    to find its ``def``, would find none::

        >>> _indent_closers("def f():\n    x = (1\n\0)\n")
        'def f():\n    x = (1\n    )\n'
    """
    pieces, at = [], code.find(_CLOSER)
    done = 0
    while at != -1:
        pieces += [code[done:at], _indentation_above(code, at)]
        done = at + 1
        at = code.find(_CLOSER, done)
    return "".join(pieces) + code[done:]


_EARLY_HELPERS = '__import__("castpile").define_helpers(globals())'


class _Calls(Walker):
    """Whether a statement calls anything when the module runs (not in function or class bodies)."""

    def __init__(self):
        super().__init__()
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        self.found = True
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


def _first_launch_site(module: cst.Module, paths: set) -> cst.BaseStatement | None:
    """The first module-level statement, from the first one that holds a rewritten kernel on,
    that calls anything when the module runs: from there on, a kernel may be launched."""
    started = False
    for statement in module.body:
        started = started or statement in paths
        if started:
            calls = _Calls()
            calls.walk(statement)
            if calls.found:
                return statement
    return None


def _or_first(trigger: cst.BaseExpression, expression: cst.BaseExpression) -> cst.BaseExpression:
    """``trigger or (expression)``: ``expression``'s value, once ``trigger`` (which gives ``None``) has run."""
    if not expression.lpar:
        expression = expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BooleanOperation(left=trigger, operator=cst.Or(), right=expression)


def _with_early_helpers(
    statement: cst.BaseStatement | cst.SimpleStatementSuite,
) -> cst.BaseStatement | cst.SimpleStatementSuite | None:
    """``statement`` defining the helpers before anything else in it runs, on its own lines; ``None``
    for a ``def`` or ``class`` (which runs nothing that could launch a kernel)."""
    trigger = cst.parse_expression(_EARLY_HELPERS)
    first = cst.Expr(trigger, semicolon=cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" ")))
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return statement.with_changes(body=[first, *statement.body])
    if isinstance(statement, (cst.If, cst.While)):
        return statement.with_changes(test=_or_first(trigger, statement.test))
    if isinstance(statement, cst.For):
        return statement.with_changes(iter=_or_first(trigger, statement.iter))
    if isinstance(statement, cst.With):
        item = statement.items[0]
        return statement.with_changes(
            items=[item.with_changes(item=_or_first(trigger, item.item)), *statement.items[1:]]
        )
    if isinstance(statement, cst.Match):
        return statement.with_changes(subject=_or_first(trigger, statement.subject))
    if isinstance(statement, (cst.Try, cst.TryStar)):  # in front of its body's first statement that can take it
        block = statement.body
        if isinstance(block, cst.SimpleStatementSuite):
            return statement.with_changes(body=_with_early_helpers(block))
        block = cst.ensure_type(block, cst.IndentedBlock)
        for k, inner in enumerate(block.body):
            rewritten = _with_early_helpers(inner)
            if rewritten is not None:
                return statement.with_changes(
                    body=block.with_changes(body=[*block.body[:k], rewritten, *block.body[k + 1 :]])
                )
    return None


def _replace_uses(
    module: cst.Module, plan: Plan, lowering: Lowering, launch_site: cst.BaseStatement | None
) -> tuple[str, dict[str, str]]:
    """The module's code with every planned node swapped for its placeholder, and each
    placeholder's text, padded to the line count of the node it replaces; ``launch_site``
    defines the helpers first."""
    newline = module.default_newline
    texts: dict[str, str] = {}

    def lines(node: cst.CSTNode, parentheses_kept: bool = True) -> int:
        """The line breaks inside ``node`` that its replacement must keep: not those of the
        parentheses (when they stay) or the semicolon around it, which stay in the output as they were."""
        inner = node.with_changes(lpar=[], rpar=[]) if parentheses_kept and hasattr(node, "lpar") else node
        if hasattr(node, "semicolon"):
            inner = inner.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
        return len(_LINE_BREAK.findall(module.code_for_node(inner)))

    def swap(original: cst.CSTNode, updated: cst.CSTNode):
        if original is launch_site:
            assert isinstance(updated, cst.BaseStatement)  # the launch site is a statement
            return _with_early_helpers(updated) or updated
        name = lowering.placeholders.get(original)
        if name is None:
            return updated
        replacement = lowering.replacements[original]
        if isinstance(original, cst.Param):  # a Multicast parameter: the parameters it becomes, its comma kept
            bare = original.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            breaks = len(_LINE_BREAK.findall(module.code_for_node(bare)))
            texts[name] = replacement[0] + (newline * breaks + _CLOSER if breaks else "")
            return original.with_changes(name=cst.Name(name), annotation=None)
        if isinstance(plan.uses[original], STATEMENTS):
            texts[name] = _statements(replacement, lines(original), newline)
            assert isinstance(original, cst.BaseSmallStatement)  # what a statement use is planned at
            return cst.Expr(cst.Name(name), semicolon=original.semicolon)
        if len(replacement) > 1:  # a call standing alone as a statement, become statements: no parentheses
            texts[name] = _statements(replacement, lines(original, parentheses_kept=False), newline)
            return cst.Name(name)
        texts[name] = _padded(replacement[0], lines(original), newline)
        assert isinstance(original, cst.BaseExpression)  # any other planned node is an expression
        return cst.Name(name, lpar=original.lpar, rpar=original.rpar)

    dirty = lowering.paths if launch_site is None else lowering.paths | {launch_site}
    return cst.ensure_type(rebuild(module, swap, dirty), cst.Module).code, texts


def _statements(texts: list[str], lines: int, newline: str) -> str:
    """Statements on one line, ``;``-separated, the last padded to ``lines`` line breaks."""
    if lines:
        last = texts[-1]
        if not last.endswith(")"):  # `name = value` made by lowering: the name holds no " = "
            name, _, value = last.partition(" = ")
            last = f"{name} = ({value})"
        texts = [*texts[:-1], _padded(last, lines, newline)]
    return "; ".join(texts)


@lru_cache(maxsize=1)
def _helper_sources() -> tuple[dict[str, str], dict[str, set[str]], list[str]]:
    """Each helper's source, the helpers it calls, and their order: family module by module (by file name),
    each in its own order.  A family's imports of other families' helpers are not copied."""
    sources, calls, order = {}, {}, []
    for path in _HELPER_FILES:
        text = path.read_text()
        for node in ast.parse(text).body:
            if isinstance(node, ast.FunctionDef):
                name, start = node.name, node.decorator_list[0].lineno if node.decorator_list else node.lineno
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.startswith("_castpile_")
            ):  # a module-level name the helpers use
                name, start = node.targets[0].id, node.lineno
            else:
                continue
            assert name not in sources, f"{name} is defined in two helper modules"
            sources[name] = "\n".join(text.splitlines()[start - 1 : node.end_lineno])
            calls[name] = {
                n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("_castpile_")
            } - {name}
            order.append(name)
    return sources, calls, order


DEBUG_NOTE = (
    "# debug mode (CASTPILE_DEBUG_WAITS): the _until helpers give up at deadline_ns, recording their site; "
    'docs/one-gpu.md, "Hangs that name their line"'
)
"""The line under the helpers' header of a module whose waits give up (debug mode), saying so."""


def helpers_block(used: set[str], newline: str, prefix: str = HELPER_PREFIX, remote_kernels: Sequence[str] = ()) -> str:
    """The source appended to a module that calls ``used`` helpers (with their dependencies),
    their names starting with ``prefix``; then each of ``remote_kernels`` wrapped for NVSHMEM."""
    if remote_kernels:
        used = used | {REMOTE_KERNEL}
    sources, calls, order = _helper_sources()
    needed, todo = set(), list(used)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(calls[name])
    body = "\n\n\n".join(sources[name] for name in order if name in needed)
    note = DEBUG_NOTE + "\n" if needed & set(GIVING_UP.values()) else ""
    text = f"\n\n{appended_header(HELPERS_TITLE)}\n{note}import triton\nimport triton.language as tl\n\n\n{body}\n"
    text = text.replace(HELPER_PREFIX, prefix)
    if remote_kernels:  # after the renaming: a kernel's own name may start with the default prefix
        wrap = prefix + REMOTE_KERNEL[len(HELPER_PREFIX) :]
        text += f"\n\n{appended_header(WRAPS_TITLE)}\n" + "".join(
            f"{name} = {wrap}({name})\n" for name in remote_kernels
        )
    return text.replace("\n", newline)


def _sites(code: str, word: str, path: str) -> str:
    """``code`` with each ``word`` replaced by the string literal ``"path:line"`` of the line it stands on.

    >>> _sites("a(s)\\nb(s)\\n", "s", "k.py")
    "a('k.py:1')\\nb('k.py:2')\\n"
    """
    pieces, line, last = [], 1, 0
    for match in re.finditer(r"\b" + re.escape(word) + r"\b", code):
        line += len(_LINE_BREAK.findall(code, last, match.start()))
        pieces += [code[last : match.start()], ascii(f"{path}:{line}")]
        last = match.end()
    return "".join(pieces) + code[last:]


def emit(module: cst.Module, plan: Plan, lowering: Lowering, path: str = "<string>") -> bytes:
    """The rewritten module's bytes: each use of ``plan`` replaced as ``lowering`` says, helpers appended;
    stores name their site in ``path``."""
    launch_site = _first_launch_site(module, lowering.paths) if lowering.helpers else None
    code, texts = _replace_uses(module, plan, lowering, launch_site)
    placeholder = re.compile(r"\b" + re.escape(lowering.prefix) + r"slot\d+\b")

    def expanded(match: re.Match) -> str:  # an index may hold lowered accesses: expand those too
        return placeholder.sub(expanded, texts[match.group()])

    code = _sites(_indent_closers(placeholder.sub(expanded, code)), lowering.prefix + SITE_WORD, path)
    if lowering.helpers:
        newline = module.default_newline
        if code and not code.endswith(newline):
            code += newline
        code += helpers_block(lowering.helpers, newline, lowering.prefix, plan.remote_kernels)
    return code.encode(module.encoding)
