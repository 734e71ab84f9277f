"""Rendering: the one-line source text of a planned node, the uses nested in it shown as their placeholders.

:mod:`castpile.compiler.lower` writes every replacement from these texts; a replacement never
adds lines, so a node that spans lines is re-rendered on one.
"""

from __future__ import annotations

import ast

import libcst as cst

from .walk import paths_to, rebuild

_EMPTY = cst.Module(body=[])
_ATOMIC_NODES = (cst.Name, cst.Integer, cst.Attribute, cst.Subscript, cst.Call, cst.SimpleString)


def code(node: cst.CSTNode) -> str:
    """The source of ``node`` (outer parentheses included), on one line.

    A sub-expression that spans lines is re-rendered on one (comments inside it are
    dropped): the replacement must not add lines.
    """
    text = _EMPTY.code_for_node(node).strip()
    if "\n" in text or "\r" in text:
        text = ast.unparse(ast.parse(f"({text})", mode="eval"))
        if getattr(node, "lpar", None):  # unparse drops the node's own parentheses
            text = f"({text})"
    return text


class Renderer:
    """The source of a node of the plan, uses nested in it shown as their placeholders."""

    def __init__(self, placeholders: dict[cst.CSTNode, str], paths: set[cst.CSTNode]):
        self.placeholders = placeholders
        self.paths = paths

    def _swap(self, original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        name = self.placeholders.get(original)
        if name is None:
            return updated
        assert isinstance(original, cst.BaseExpression)  # placeholders stand for expressions
        return cst.Name(name, lpar=original.lpar, rpar=original.rpar)

    def text(self, node: cst.CSTNode) -> str:
        if node not in self.paths:
            return code(node)
        rebuilt = rebuild(node, self._swap, self.paths)
        assert isinstance(rebuilt, cst.CSTNode)  # _swap returns one node for one
        return code(rebuilt)

    def text_with(self, node: cst.CSTNode, names: dict[cst.CSTNode, str]) -> str:
        """:meth:`text`, each node of ``names`` (nodes inside ``node``) shown as the name it maps to; ``node`` itself
        is shown as written even when it is a use (whose text this is)."""

        def swap(original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
            name = names.get(original)
            if original is node:
                return updated
            if name is None:
                return self._swap(original, updated)
            assert isinstance(original, cst.BaseExpression)  # names stand for expressions
            return cst.Name(name, lpar=original.lpar, rpar=original.rpar)

        rebuilt = rebuild(node, swap, self.paths | paths_to(node, set(names)))
        assert isinstance(rebuilt, cst.CSTNode)  # swap returns one node for one
        return code(rebuilt)

    def atom(self, node: cst.BaseExpression) -> str:
        """:meth:`text`, parenthesised unless the node is atomic."""
        text = self.text(node)
        if isinstance(node, _ATOMIC_NODES) or (node.lpar and node.rpar):
            return text
        return f"({text})"
