"""Which parameters an access proves positive: the ends of the ``tl.arange`` calls its index evaluates.

Triton refuses ``tl.arange(a, b)`` unless ``b > a`` (when it compiles the kernel, and in its interpreter), so where
an access's index evaluates ``tl.arange(a, P)`` with ``a`` proven non-negative and ``P`` a parameter that no
statement assigns, ``P >= 1`` wherever the access runs.  That proves ``tl.program_id(0) * BLOCK`` and a loop
``for c in range(0, D, BLOCK)`` non-negative for that access (docs/language.md, "What castpile emits for an
index").  Only what the index surely evaluates counts: its own text, and the one assignment of each name it reads
that runs before it whenever it runs (``value_before``, :meth:`castpile.compiler.mask_bounds.MaskBounds.value_before`),
or what every assignment of the name evaluates (the one that ran last before the access was compiled with it);
not a conditional expression's branches (a constexpr condition prunes one), nor an arange elsewhere in the
function (a constexpr ``if`` or an empty ``tl.static_range`` may leave it out of the compiled kernel).

    >>> from castpile.compiler.index_facts import IndexFacts
    >>> from castpile.compiler.scopes import Resolver, Scope, collect_scope
    >>> scope = Scope()
    >>> collect_scope(cst.parse_module("import triton.language as tl\\n").body, scope)
    >>> facts = IndexFacts(Resolver([scope]), {}, {"BLOCK", "n"})
    >>> values = {"offs": cst.parse_expression("tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")}
    >>> sorted(evaluated_ends([cst.Name("offs")], facts, values.get))
    ['BLOCK']
    >>> sorted(evaluated_ends([cst.parse_expression("tl.arange(0, BLOCK) if n > 0 else 0")], facts, values.get))
    []
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

from .index_facts import IndexFacts


def evaluated_ends(
    indices: Iterable[cst.BaseExpression],
    facts: IndexFacts,
    value_before: Callable[[str], cst.BaseExpression | None],
) -> frozenset[str]:
    """The parameters ``P`` of the ``tl.arange(a, P)`` calls that evaluating ``indices`` evaluates (``a`` proven
    non-negative, ``P`` assigned nowhere); ``value_before`` gives a name's value where it is looked through, or
    ``None``: then the ends that every assignment of the name evaluates, where each is a plain ``name = value``
    (whichever ran last before the access was compiled)."""
    return _ends(list(indices), facts, value_before, frozenset())


def _ends(
    pending: list[cst.BaseExpression],
    facts: IndexFacts,
    value_before: Callable[[str], cst.BaseExpression | None],
    visiting: frozenset[str],
) -> frozenset[str]:
    ends: set[str] = set()
    seen: set[str] = set(visiting)
    while pending:
        node = pending.pop()
        if isinstance(node, cst.Name):
            if node.value not in seen:
                seen.add(node.value)
                value = value_before(node.value)
                if value is not None:
                    pending.append(value)
                else:
                    ends |= _every_assignments_ends(node.value, facts, value_before, visiting | {node.value})
        elif isinstance(node, cst.BinaryOperation):
            pending += [node.left, node.right]
        elif isinstance(node, cst.UnaryOperation):
            pending.append(node.expression)
        elif isinstance(node, cst.Attribute):
            pending.append(node.value)
        elif isinstance(node, cst.Subscript):
            pending.append(node.value)
            pending += [element.slice.value for element in node.slice if isinstance(element.slice, cst.Index)]
        elif isinstance(node, cst.Call):
            end = _arange_end(node, facts)
            if end is not None:
                ends.add(end)
            pending += [node.func] if isinstance(node.func, cst.Attribute) else []
            pending += [arg.value for arg in node.args]
    return frozenset(ends)


def _every_assignments_ends(
    name: str,
    facts: IndexFacts,
    value_before: Callable[[str], cst.BaseExpression | None],
    visiting: frozenset[str],
) -> frozenset[str]:
    """The ends every assignment of ``name`` evaluates, when it has assignments, each a plain ``name = value``, and
    the name is no parameter and no global the module may bind."""
    statements = facts.assignments.get(name, [])
    if not statements or name in facts.params or facts.maybe_global(name):
        return frozenset()
    values = []
    for statement in statements:
        if not (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)
            and statement.targets[0].target.value == name
        ):
            return frozenset()
        values.append(statement.value)
    return frozenset.intersection(*(_ends([value], facts, value_before, visiting) for value in values))


def _arange_end(call: cst.Call, facts: IndexFacts) -> str | None:
    """``P`` of ``tl.arange(a, P)``, ``a`` proven non-negative and ``P`` a parameter no statement assigns."""
    if facts.resolver.triton_language(call.func) != "arange" or len(call.args) != 2:
        return None
    start, end = call.args
    if any(arg.star or arg.keyword is not None for arg in call.args) or not facts.nonnegative(start.value):
        return None
    name = end.value
    if isinstance(name, cst.Name) and name.value in facts.params and not facts.assignments.get(name.value):
        return name.value
    return None
