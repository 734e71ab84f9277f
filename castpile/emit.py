"""Emit: put the lowered source in place and append the helpers.

Only the planned nodes change; libcst renders every other byte as it was read.
A replacement keeps the line count of the code it replaces (extra newlines go
inside its closing parenthesis), so every input line keeps its number.  The
helpers a module calls are appended after its last line.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import libcst as cst

from . import __version__
from .analyse import AugStore, Binding, CallOn, Load, Plan, Reduction, SliceAlias, Store
from .lower import HELPER_PREFIX, Lowerer, code
from .walk import paths_to, rebuild

_HELPERS_FILE = Path(__file__).with_name("helpers.py")


def _padded(text: str, lines: int, newline: str) -> str:
    """``text`` (ending in ``)``) with ``lines`` newlines before its last parenthesis."""
    if lines == 0:
        return text
    return text[:-1] + newline * lines + text[-1]


class _Rewriter:
    """Replaces every node of the plan, children first (see :func:`castpile.walk.rebuild`)."""

    def __init__(self, module: cst.Module, plan: Plan, lowerer: Lowerer):
        self.module = module
        self.plan = plan
        self.lower = lowerer
        self.updated: dict[cst.CSTNode, cst.CSTNode] = {}  # original -> children rewritten
        self.newline = module.default_newline
        self.config = module.config_for_parsing
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
        return self.module.code_for_node(node).count("\n")

    def _expression(self, original: cst.CSTNode, text: str) -> cst.BaseExpression:
        return cst.parse_expression(_padded(text, self._lines(original), self.newline), self.config)

    def _statements(self, original, texts: list[str]):
        lines = self._lines(original)
        if lines:
            last = texts[-1]
            if not last.endswith(")"):  # `name = value` made by lowering: the name holds no " = "
                name, _, value = last.partition(" = ")
                last = f"{name} = ({value})"
            texts = texts[:-1] + [_padded(last, lines, self.newline)]
        parsed = list(cst.parse_statement("; ".join(texts) + self.newline, self.config).body)
        parsed[-1] = parsed[-1].with_changes(semicolon=original.semicolon)
        return cst.FlattenSentinel(parsed) if len(parsed) > 1 else parsed[0]

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


def render(module: cst.Module, plan: Plan, strategy: str) -> bytes:
    """The rewritten module's bytes, helpers appended."""
    lowerer = Lowerer(strategy, plan.taken_names)
    rewriter = _Rewriter(module, plan, lowerer)
    rewritten = rebuild(module, rewriter.replace, paths_to(module, set(plan.uses)))
    out = rewritten.bytes
    if not lowerer.helpers:
        return out
    newline = module.default_newline
    if out and not out.endswith(newline.encode(module.encoding)):
        out += newline.encode(module.encoding)
    return out + helpers_block(lowerer.helpers, newline, lowerer.prefix).encode(module.encoding)
