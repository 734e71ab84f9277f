"""Emit: put the lowered source in place and append the helpers.

Each planned node is swapped for a placeholder name in the tree; libcst renders
every other byte as it was read, and the placeholders are then replaced by the
lowered text (which never goes through a parser again).  A replacement keeps the
line count of the code it replaces (extra line breaks go inside its closing
parenthesis), so every input line keeps its number.  The helpers a module calls
are appended after its last line.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

import libcst as cst

from . import __version__
from .analyse import AugStore, Binding, CallOn, Load, Plan, Reduction, SliceAlias, Store
from .lower import HELPER_PREFIX, Lowerer, code
from .walk import paths_to, rebuild

_HELPERS_FILE = Path(__file__).with_name("helpers.py")


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _padded(text: str, lines: int, newline: str) -> str:
    """``text`` (ending in ``)``) with ``lines`` newlines before its last parenthesis."""
    if lines == 0:
        return text
    return text[:-1] + newline * lines + text[-1]


class _Rewriter:
    """Replaces every node of the plan, children first (see :func:`castpile.walk.rebuild`)."""

    def __init__(self, module: cst.Module, plan: Plan, lowerer: Lowerer, stem: str):
        self.module = module
        self.plan = plan
        self.lower = lowerer
        self.stem = stem
        self.texts: dict[str, str] = {}  # placeholder -> lowered text
        self.updated: dict[cst.CSTNode, cst.CSTNode] = {}  # original -> children rewritten
        self.newline = module.default_newline
        self.leave = {cst.Subscript: self._subscript, cst.Assign: self._assign, cst.AugAssign: self._aug_assign,
                      cst.Call: self._call}

    def replace(self, original: cst.CSTNode, updated: cst.CSTNode):
        self.updated[original] = updated
        use = self.plan.uses.get(original)
        leave = self.leave.get(type(original))
        return updated if use is None or leave is None else leave(original, updated, use)

    def _current(self, node: cst.CSTNode) -> cst.CSTNode:
        """``node`` with its children rewritten (itself when nothing inside it changed)."""
        return self.updated.get(node, node)

    def _lines(self, node: cst.CSTNode) -> int:
        return len(_LINE_BREAK.findall(self.module.code_for_node(node)))

    def _placeholder(self, text: str) -> cst.Name:
        name = f"{self.stem}{len(self.texts)}"
        self.texts[name] = text
        return cst.Name(name)

    def _expression(self, original: cst.BaseExpression, text: str) -> cst.BaseExpression:
        name = self._placeholder(_padded(text, self._lines(original), self.newline))
        return name.with_changes(lpar=original.lpar, rpar=original.rpar)

    def _statements(self, original, texts: list[str]):
        lines = self._lines(original)
        if lines:
            last = texts[-1]
            if not last.endswith(")"):  # `name = value` made by lowering: the name holds no " = "
                name, _, value = last.partition(" = ")
                last = f"{name} = ({value})"
            texts = texts[:-1] + [_padded(last, lines, self.newline)]
        return cst.Expr(self._placeholder("; ".join(texts)), semicolon=original.semicolon)

    def _subscript(self, original, updated, use):
        if isinstance(use, Load):
            return self._expression(original, self.lower.load(use.access, updated))
        return updated

    def _assign(self, original, updated, use):
        if isinstance(use, Binding):
            return self._statements(original, self.lower.binding(use))
        if isinstance(use, SliceAlias):
            return self._statements(original, self.lower.slice_alias(use))
        if isinstance(use, Store):
            subscript = self._current(use.access.subscript)
            return self._statements(original, self.lower.store(use.access, subscript, updated.value, use.value_pure))
        return updated

    def _aug_assign(self, original, updated, use):
        if isinstance(use, AugStore):
            subscript = self._current(use.access.subscript)
            operator = code(updated.operator).rstrip("=")
            return self._statements(original, self.lower.augmented_store(use.access, subscript, operator, updated.value))
        return updated

    def _call(self, original, updated, use):
        if isinstance(use, CallOn):
            subscript = self._current(use.access.subscript) if use.access is not None else None
            return self._expression(original, self.lower.call_on(use, subscript, updated))
        if isinstance(use, Reduction):
            subscript = self._current(use.access.subscript)
            dtype = updated.args[0].value.args[0].value if use.dtype is not None else None
            load = self._current(use.load) if use.load is not None else None
            return self._expression(original, self.lower.reduction(use, subscript, dtype, load))
        return updated


@lru_cache(maxsize=1)
def _helper_sources() -> tuple[dict[str, str], dict[str, set[str]], list[str]]:
    """Each helper's source, the helpers it calls, and their order in helpers.py."""
    text = _HELPERS_FILE.read_text()
    tree = ast.parse(text)
    sources, calls, order = {}, {}, []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            lines = text.splitlines()[start - 1 : node.end_lineno]
            sources[node.name] = "\n".join(lines)
            calls[node.name] = {
                n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("_castpile_")
            } - {node.name}
            order.append(node.name)
    return sources, calls, order


def helpers_block(used: set[str], newline: str, prefix: str = HELPER_PREFIX) -> str:
    """The source appended to a module that calls ``used`` helpers (with their dependencies),
    their names starting with ``prefix``."""
    sources, calls, order = _helper_sources()
    needed, todo = set(), list(used)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(calls[name])
    body = "\n\n\n".join(sources[name] for name in order if name in needed)
    text = (
        "\n\n# ---- castpile " + __version__ + " helpers: generated, called by the rewritten accesses above ----\n"
        "import triton\nimport triton.language as tl\n\n\n" + body + "\n"
    )
    return text.replace(HELPER_PREFIX, prefix).replace("\n", newline)


def render(module: cst.Module, source: bytes, plan: Plan, strategy: str) -> bytes:
    """The rewritten module's bytes (``source`` is what ``module`` was parsed from), helpers appended."""
    lowerer = Lowerer(strategy, plan.taken_names)
    stem = f"{lowerer.prefix}slot"
    while stem.encode() in source:  # placeholders must not occur in comments or strings either
        stem += "_"
    rewriter = _Rewriter(module, plan, lowerer, stem)
    code = rebuild(module, rewriter.replace, paths_to(module, set(plan.uses))).code
    placeholder = re.compile(re.escape(stem) + r"\d+")

    def lowered(match: re.Match) -> str:  # an index may hold lowered accesses: expand those too
        return placeholder.sub(lowered, rewriter.texts[match.group()])

    code = placeholder.sub(lowered, code)
    if lowerer.helpers:
        newline = module.default_newline
        if code and not code.endswith(newline):
            code += newline
        code += helpers_block(lowerer.helpers, newline, lowerer.prefix)
    return code.encode(module.encoding)
