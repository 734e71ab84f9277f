"""A fast walk over libcst trees, and a rebuild that touches only changed paths.

libcst's own visitors rebuild every node they pass and visit every token and
whitespace node; castpile only needs statements and expressions.  ``Walker``
calls ``visit_<Type>(node)`` (return ``False`` to skip the children) and
``leave_<Type>(node)`` like a ``CSTVisitor``, over the fields that can hold
code, and keeps the chain of ancestors in ``self.ancestors``::

    class Names(Walker):
        def visit_Name(self, node):
            print(node.value)

    Names().walk(cst.parse_expression("f(a, b.c)"))   # f, a, b (c is an attribute)

``rebuild(node, replace, dirty)`` returns ``node`` with ``replace(original,
rebuilt)`` applied to every node, descending only into nodes in ``dirty``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import libcst as cst

# Fields that hold only tokens, whitespace or comments, never code.
_SKIPPED = (
    "whitespace",
    "lpar",
    "rpar",
    "comma",
    "semicolon",
    "leading_lines",
    "lines_after",
    "header",
    "footer",
    "colon",
    "equal",
    "dot",
    "operator",
    "newline",
    "indent",
    "asynchronous",
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def code_fields(node_type: type) -> tuple[str, ...]:
    """The fields of a libcst node type that may hold statements or expressions."""
    names = _FIELDS.get(node_type)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(node_type) if not any(s in f.name for s in _SKIPPED))
        _FIELDS[node_type] = names
    return names


def children(node: cst.CSTNode):
    """The code-holding children of ``node``, in source order."""
    for name in code_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


class Walker:
    """Depth-first walk with ``visit_<Type>`` / ``leave_<Type>`` hooks."""

    def __init__(self):
        self.ancestors: list[cst.CSTNode] = []
        self._hooks: dict[type, tuple] = {}

    def walk(self, node: cst.CSTNode) -> None:
        hooks = self._hooks.get(type(node))
        if hooks is None:
            name = type(node).__name__
            hooks = (getattr(self, f"visit_{name}", None), getattr(self, f"leave_{name}", None))
            self._hooks[type(node)] = hooks
        visit, leave = hooks
        if visit is None or visit(node) is not False:
            self.ancestors.append(node)
            for child in children(node):
                self.walk(child)
            self.ancestors.pop()
        if leave is not None:
            leave(node)


class _Names(Walker):
    def __init__(self):
        super().__init__()
        self.found: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.found.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)  # `a.b` mentions `a`, not `b`
        return False


def names_in(*nodes: cst.CSTNode | None) -> set[str]:
    """Every name that the code of ``nodes`` mentions (``None`` entries are skipped)."""
    names = _Names()
    for node in nodes:
        if node is not None:
            names.walk(node)
    return names.found


Replace = Callable[[cst.CSTNode, cst.CSTNode], "cst.CSTNode | cst.FlattenSentinel"]


def rebuild(node: cst.CSTNode, replace: Replace, dirty: set) -> cst.CSTNode | cst.FlattenSentinel:
    """``node`` with its dirty descendants rebuilt (children first), then ``replace`` applied."""
    if node not in dirty:
        return node
    changes: dict[str, object] = {}
    for name in code_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            new = rebuild(value, replace, dirty)
            if new is not value:
                changes[name] = new
        elif isinstance(value, (tuple, list)) and any(item in dirty for item in value if isinstance(item, cst.CSTNode)):
            items: list[object] = []
            for item in value:
                new = rebuild(item, replace, dirty) if isinstance(item, cst.CSTNode) else item
                items.extend(new.nodes if isinstance(new, cst.FlattenSentinel) else [new])
            changes[name] = type(value)(items)
    updated = node.with_changes(**changes) if changes else node
    return replace(node, updated)


def paths_to(root: cst.CSTNode, targets: set) -> set:
    """Every node on a path from ``root`` to a node of ``targets`` (the targets included)."""
    dirty: set = set()
    stack: list[cst.CSTNode] = []

    def visit(node: cst.CSTNode) -> None:
        stack.append(node)
        if node in targets:
            dirty.update(stack)
        for child in children(node):
            visit(child)
        stack.pop()

    visit(root)
    return dirty
