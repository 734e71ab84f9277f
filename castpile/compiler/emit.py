"""Emit: splice the lowered text in place of each planned node and append the helpers.

Each planned node is swapped for its placeholder name in the tree; libcst renders
every other byte as it was read, and the placeholders are then replaced by the
lowered text (which never goes through a parser again).  A replacement keeps the
line count of the code it replaces (extra line breaks go inside its closing
parenthesis), so every input line keeps its number.  The helpers the module calls
are appended after its last line, named with the lowering's prefix.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

import libcst as cst

from ..options import VERSION
from .lower import HELPER_PREFIX, Lowering
from .plan import STATEMENTS, Plan
from .walk import rebuild

# The module castpile.compiler.helpers, found (not run: it imports triton) through the import system.
_HELPERS_FILE = Path(importlib.util.find_spec(f"{__package__}.helpers").origin)


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _padded(text: str, lines: int, newline: str) -> str:
    """``text`` (ending in ``)``) with ``lines`` newlines before its last parenthesis."""
    if lines == 0:
        return text
    return text[:-1] + newline * lines + text[-1]


def _replace_uses(module: cst.Module, plan: Plan, lowering: Lowering) -> tuple[str, dict[str, str]]:
    """The module's code with every planned node swapped for its placeholder, and each
    placeholder's text, padded to the line count of the node it replaces."""
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
        name = lowering.placeholders.get(original)
        if name is None:
            return updated
        replacement = lowering.replacements[original]
        if isinstance(plan.uses[original], STATEMENTS):
            texts[name] = _statements(replacement, lines(original), newline)
            return cst.Expr(cst.Name(name), semicolon=original.semicolon)
        if len(replacement) > 1:  # a call standing alone as a statement, become statements: no parentheses
            texts[name] = _statements(replacement, lines(original, parentheses_kept=False), newline)
            return cst.Name(name)
        texts[name] = _padded(replacement[0], lines(original), newline)
        return cst.Name(name, lpar=original.lpar, rpar=original.rpar)

    return rebuild(module, swap, lowering.paths).code, texts


def _statements(texts: list[str], lines: int, newline: str) -> str:
    """Statements on one line, ``;``-separated, the last padded to ``lines`` line breaks."""
    if lines:
        last = texts[-1]
        if not last.endswith(")"):  # `name = value` made by lowering: the name holds no " = "
            name, _, value = last.partition(" = ")
            last = f"{name} = ({value})"
        texts = texts[:-1] + [_padded(last, lines, newline)]
    return "; ".join(texts)


@lru_cache(maxsize=1)
def _helper_sources() -> tuple[dict[str, str], dict[str, set[str]], list[str]]:
    """Each helper's source, the helpers it calls, and their order in helpers.py."""
    text = _HELPERS_FILE.read_text()
    tree = ast.parse(text)
    sources, calls, order = {}, {}, []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            name, start = node.name, node.decorator_list[0].lineno if node.decorator_list else node.lineno
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.startswith("_castpile_"):  # a module-level name the helpers use
            name, start = node.targets[0].id, node.lineno
        else:
            continue
        sources[name] = "\n".join(text.splitlines()[start - 1 : node.end_lineno])
        calls[name] = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id.startswith("_castpile_")} - {name}
        order.append(name)
    return sources, calls, order


def helpers_block(used: set[str], newline: str, prefix: str = HELPER_PREFIX, remote_kernels: list[str] = ()) -> str:
    """The source appended to a module that calls ``used`` helpers (with their dependencies),
    their names starting with ``prefix``; then each of ``remote_kernels`` wrapped for NVSHMEM."""
    if remote_kernels:
        used = used | {HELPER_PREFIX + "remote_kernel"}
    sources, calls, order = _helper_sources()
    needed, todo = set(), list(used)
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(calls[name])
    body = "\n\n\n".join(sources[name] for name in order if name in needed)
    text = (
        "\n\n# ---- castpile " + VERSION + " helpers: generated, called by the rewritten accesses above ----\n"
        "import triton\nimport triton.language as tl\n\n\n" + body + "\n"
    )
    text = text.replace(HELPER_PREFIX, prefix)
    if remote_kernels:  # after the renaming: a kernel's own name may start with the default prefix
        text += "\n\n" + "".join(f"{name} = {prefix}remote_kernel({name})\n" for name in remote_kernels)
    return text.replace("\n", newline)


def emit(module: cst.Module, plan: Plan, lowering: Lowering) -> bytes:
    """The rewritten module's bytes: each use of ``plan`` replaced as ``lowering`` says, helpers appended."""
    code, texts = _replace_uses(module, plan, lowering)
    placeholder = re.compile(r"\b" + re.escape(lowering.prefix) + r"slot\d+\b")

    def expanded(match: re.Match) -> str:  # an index may hold lowered accesses: expand those too
        return placeholder.sub(expanded, texts[match.group()])

    code = placeholder.sub(expanded, code)
    if lowering.helpers:
        newline = module.default_newline
        if code and not code.endswith(newline):
            code += newline
        code += helpers_block(lowering.helpers, newline, lowering.prefix, plan.remote_kernels)
    return code.encode(module.encoding)
