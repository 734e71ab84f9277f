"""Whether an access's ``mask=`` proves its index inside the binding's extent, so that its bounds need no check.

The 1-D row a persistent loop reads (docs/language.md, "What castpile emits for an index")::

    bufs = multicast_like(x, table[:W], shape=(M * D,))
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    for row in range(tl.program_id(0), M, tl.num_programs(0)):
        h = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0)

Where a lane's mask holds, ``0 <= cols < D`` (so ``D >= 1``), and in the loop ``0 <= row < M``: the index
``D*row + cols`` lies in ``[0, D*(M - 1) + D - 1] = [0, M*D - 1]``, inside the extent ``M * D``.  The proof, every
part required:

* the binding has one extent, ``shape=(E,)``, and no ``remote=``; the access's one index is ``row * c + t`` (either
  order of both, no other summand), written there or through a name whose one assignment is that sum, in the body of
  the statement that bounds ``row`` below; ``row * c`` likewise (``start = row * D``), ``row`` in it also widened
  (``row.to(tl.int64)``, ``tl.cast(row, tl.int64)``), hints (``tl.multiple_of``...) around the product or the
  arange let through;
* ``c`` is a positive integer literal or a parameter that is never assigned; ``t`` is ``tl.arange(a, b)`` with ``a``
  proven non-negative (:mod:`.index_facts`) and both arguments integer literals, parameters never assigned, or
  ``+ - *`` of those (so it has one value wherever it is read: not so of a ``tl.static_range`` variable's), written
  there or through a name whose one assignment is that call; or a name proven non-negative whose value the mask
  reads (column blocks: ``cols = c + tl.arange(0, BLOCK)`` under ``mask=cols < D`` in the call, or, where the
  mask or the index is a name, the lanes' one assignment before theirs);
* the call's ``mask=`` is a ``&`` of conditions, one of them ``t < c`` (or ``c > t``), written there or through a
  name whose one assignment is that ``&``;
* ``row`` is proven non-negative and below ``U`` where the access is, ``U`` a parameter never assigned and ``c * U``
  equal to ``E`` (as integer algebra; the access's helper checks, when Triton compiles it, that ``E`` is an integer:
  ``row < U`` bounds nothing for a float ``U``): ``row`` is the target of an enclosing ``for row in range(..., U[, step])``
  (``tl.range`` too) that is its only assignment, or ``while row < U:`` or ``if row < U:`` (``U > row``) encloses the
  access and no assignment of ``row`` in its body comes before the access's statement (and the names' assignments) or
  holds it, or an early exit ``if row >= U: return`` (``continue``, ``break``) comes before the access in a block that
  holds it, no assignment of ``row`` between, the names assigned after it;
* every name looked through has its one assignment on a line before the access in a block that holds it, and the
  module binds no global of that name (Triton reads a global of the name where the name is read first or assigned in
  one branch only; a star import may bind any).

A block of a flat buffer (``offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)``, ``mask = offs < n``,
``shape=(n,)``) is the simpler case: the index proven non-negative (``BLOCK`` by :mod:`.arange_ends`) and the mask
a ``&`` of conditions with ``offs < F`` among them, ``F`` equal to the extent, literals and parameters never
assigned on both sides; a mask read through its name reads the index's value (the index's one assignment comes
before the mask's).

    >>> import libcst as cst
    >>> from castpile.compiler.index_facts import IndexFacts
    >>> from castpile.compiler.scopes import Resolver, Scope, collect_scope
    >>> module = cst.parse_module("import triton.language as tl\\n")
    >>> scope = Scope()
    >>> collect_scope(module.body, scope)
    >>> body = "    cols = tl.arange(0, B)\\n    mask = cols < D\\n    for row in range(tl.program_id(0), M, 4):\\n        pass\\n"
    >>> function = cst.ensure_type(cst.parse_statement("def k(M, D, B):\\n" + body), cst.FunctionDef)
    >>> cols, mask = (line.body[0] for line in function.body.body[:2])
    >>> loop = function.body.body[2]
    >>> facts = IndexFacts(Resolver([scope]), {"row": [loop], "cols": [cols], "mask": [mask]}, {"M", "D", "B"})
    >>> proof = MaskBounds(facts)
    >>> index, extent = cst.parse_expression("row * D + cols"), cst.parse_expression("M * D")
    >>> around = [function.body, loop, loop.body]  # the nodes that hold the access, outermost first
    >>> proof.holds(index, extent, cst.Name("mask"), around)
    True
    >>> proof.holds(index, cst.parse_expression("M * D + 1"), cst.Name("mask"), around)
    False
"""

from __future__ import annotations

import itertools

import libcst as cst

from .algebra import simplify
from .index_facts import IndexFacts
from .walk import Walker


class MaskBounds:
    """The proof of the module docstring, over one jit function's :class:`IndexFacts`."""

    def __init__(self, facts: IndexFacts):
        self.facts = facts

    def holds(
        self,
        index: cst.BaseExpression,
        extent: cst.BaseExpression,
        mask: cst.BaseExpression,
        ancestors: list[cst.CSTNode],
    ) -> bool:
        """Whether ``index`` lies in ``[0, extent)`` wherever ``mask`` holds (``ancestors``: the nodes that hold the
        access, outermost first)."""
        if self._masks_index(index, extent, mask, ancestors):
            return True
        sites: list[cst.CSTNode] = []
        if isinstance(index, cst.Name):  # offs = row * D + cols, assigned once where the row is bounded
            statements = self.facts.assignments.get(index.value, [])
            value = self.value_before(index.value, ancestors)
            if value is None:
                return False
            index, sites = value, statements
        scalars, others = self.facts.summands(index)
        summands = [node for sign, node in scalars + others if sign > 0]
        if len(summands) != 2 or len(scalars) + len(others) != 2:
            return False
        for scaled, lanes in (summands, summands[::-1]):
            product, product_sites = self._product(scaled, ancestors)
            if product is None or not self._lanes(lanes, mask, sites, ancestors):
                continue
            for factor, scale in ((product.left, product.right), (product.right, product.left)):
                if not (self._fixed(scale) and self._bounds_lanes(mask, lanes, scale, ancestors)):
                    continue
                row = self.facts.widened(factor) or factor
                readers = sites + product_sites
                if isinstance(row, cst.Name) and self._row_below(row.value, scale, extent, ancestors, readers):
                    return True
                if self._row_masked(row, scale, extent, mask, readers, ancestors):
                    return True
        return False

    def _product(
        self, node: cst.BaseExpression, ancestors: list[cst.CSTNode]
    ) -> tuple[cst.BinaryOperation | None, list[cst.CSTNode]]:
        """The ``row * c`` that ``node`` is (hints around it let through), or that a name's one assignment gives it,
        with that assignment (which must be where the row is bounded)."""
        sites: list[cst.CSTNode] = []
        node = self.facts.unhinted(node)
        if isinstance(node, cst.Name):  # start = row * D
            value = self.value_before(node.value, ancestors)
            if value is None:
                return None, sites
            sites = self.facts.assignments[node.value]
            node = self.facts.unhinted(value)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
            return node, sites
        return None, sites

    # -- a block of a flat buffer: 0 <= offs and offs < E under the mask -------------------------------------

    def _masks_index(
        self,
        index: cst.BaseExpression,
        extent: cst.BaseExpression,
        mask: cst.BaseExpression,
        ancestors: list[cst.CSTNode],
    ) -> bool:
        """Whether ``index`` is proven non-negative and ``mask`` is a ``&`` of conditions with ``index < F`` (``F >
        index``) among them, ``F`` equal to ``extent`` and both made of literals and parameters never assigned;
        a mask read through its name must read the index's value: the index a parameter never assigned, or a name
        whose one assignment comes before the mask's."""
        if not self.facts.nonnegative(index) or not self._constant(extent):
            return False
        masked = mask
        if isinstance(mask, cst.Name):
            value = self.value_before(mask.value, ancestors)
            if value is None or not self._read_before(index, mask.value, ancestors):
                return False
            masked = value
        for condition in _conjuncts(masked):
            limit = _upper(condition, index)
            if (
                limit is not None
                and self._constant(limit)
                and simplify(f"({_code(limit)})") == simplify(f"({_code(extent)})")
            ):
                return True
        return False

    def _read_before(self, index: cst.BaseExpression, mask: str, ancestors: list[cst.CSTNode]) -> bool:
        """Whether the mask's one assignment reads the value ``index`` has at the access: ``index`` is a parameter
        never assigned, or a name whose one assignment runs before the access (:meth:`value_before`) and before the
        mask's, on an earlier line of an outer or the same block (earlier on the same line)."""
        if not isinstance(index, cst.Name):
            return False
        if self._fixed(index):
            return True
        if self.value_before(index.value, ancestors) is None:
            return False
        assigned, masked = (_position(self.facts.assignments[name][0], ancestors) for name in (index.value, mask))
        return assigned is not None and masked is not None and assigned < masked

    # -- the lanes: t = tl.arange(a, b), 0 <= t < c under the mask ------------------------------------------

    def _lanes(
        self,
        lanes: cst.BaseExpression,
        mask: cst.BaseExpression,
        sites: list[cst.CSTNode],
        ancestors: list[cst.CSTNode],
    ) -> bool:
        """Whether ``lanes`` is proven non-negative and the mask reads the value the index does: an arange of
        constants (the same value wherever it is read), or a name (``cols = off + tl.arange(0, BLOCK)``; expanded,
        ``cols[None, :]``) that the index and the mask read alike (:meth:`_read_alike`; ``sites``: the named index's
        assignments)."""
        if self._arange(lanes, ancestors) is not None:
            return True
        name = _base_name(lanes)
        return name is not None and self.facts.nonnegative(lanes) and self._read_alike(name, mask, sites, ancestors)

    def _read_alike(
        self, name: str, mask: cst.BaseExpression, sites: list[cst.CSTNode], ancestors: list[cst.CSTNode]
    ) -> bool:
        """Whether the index and the mask read one value of ``name``: both in the access itself (``sites``, the
        assignments of the names the index is read through, empty, and the mask written in the call), or the
        name's one assignment runs before the access and before those assignments and the mask's."""
        readers = list(sites) + (self.facts.assignments.get(mask.value, []) if isinstance(mask, cst.Name) else [])
        if not readers:
            return True
        if self.value_before(name, ancestors) is None:
            return False
        assigned = _position(self.facts.assignments[name][0], ancestors)
        read = [_position(reader, ancestors) for reader in readers]
        return assigned is not None and all(place is not None and assigned < place for place in read)

    def _arange(self, node: cst.BaseExpression, ancestors: list[cst.CSTNode]) -> cst.Call | None:
        """The ``tl.arange`` call ``node`` is, or that a name's one assignment gives it."""
        value = self.value_before(node.value, ancestors) if isinstance(node, cst.Name) else node
        value = None if value is None else self.facts.unhinted(value)
        if not isinstance(value, cst.Call) or self.facts.resolver.triton_language(value.func) != "arange":
            return None
        if not all(not arg.star and self._constant(arg.value) for arg in value.args):
            return None  # its value is the same wherever it is read (not so of a tl.static_range variable's)
        return value if self.facts.nonnegative(value) else None

    def _bounds_lanes(
        self,
        mask: cst.BaseExpression,
        lanes: cst.BaseExpression,
        scale: cst.BaseExpression,
        ancestors: list[cst.CSTNode],
    ) -> bool:
        """Whether ``mask`` is a ``&`` of conditions with ``lanes < scale`` among them."""
        if isinstance(mask, cst.Name):
            value = self.value_before(mask.value, ancestors)
            if value is None:
                return False
            mask = value
        return any(_below(condition, lanes, scale) for condition in _conjuncts(mask))

    # -- the row: 0 <= row < U where the access is, c * U == extent ------------------------------------------

    def _row_below(
        self,
        row: str,
        scale: cst.BaseExpression,
        extent: cst.BaseExpression,
        ancestors: list[cst.CSTNode],
        sites: list[cst.CSTNode],
    ) -> bool:
        if not self.facts.nonnegative(cst.Name(row)):
            return False
        limit = self._limit(row, ancestors, sites)
        return limit is not None and self._fixed(limit) and _covers(scale, limit, extent)

    def _row_masked(
        self,
        row: cst.BaseExpression,
        scale: cst.BaseExpression,
        extent: cst.BaseExpression,
        mask: cst.BaseExpression,
        sites: list[cst.CSTNode],
        ancestors: list[cst.CSTNode],
    ) -> bool:
        """Whether the mask keeps the row below ``U`` itself: ``row`` (``row``, or a tile's ``rows[:, None]``) proven
        non-negative, a conjunct ``row < U`` (``U > row``) of the mask with ``U`` a parameter never assigned and
        ``scale * U`` the extent, and the mask reading the index's row (:meth:`_read_alike`)."""
        name = _base_name(row)
        if name is None or not self.facts.nonnegative(row):
            return False
        masked = self.value_before(mask.value, ancestors) if isinstance(mask, cst.Name) else mask
        if masked is None or not self._read_alike(name, mask, sites, ancestors):
            return False
        return any(
            (limit := _upper(condition, row)) is not None and self._fixed(limit) and _covers(scale, limit, extent)
            for condition in _conjuncts(masked)
        )

    def _limit(self, row: str, ancestors: list[cst.CSTNode], sites: list[cst.CSTNode]) -> cst.BaseExpression | None:
        """``U`` of the innermost ``for`` / ``while`` / ``if`` that holds the access and keeps ``row < U`` there, if
        any (``sites``: the assignments of the index's names, which must be in its body where the row is below ``U``
        too)."""
        for depth in range(len(ancestors) - 2, -1, -1):
            test, inside = ancestors[depth], ancestors[depth + 1]
            if isinstance(test, cst.For) and inside is test.body:
                limit = self._for_limit(row, test)
                within = [_holds_any(test.body, {id(site)}) for site in sites]
            elif isinstance(test, (cst.While, cst.If)) and inside is test.body:
                statement = ancestors[depth + 2] if depth + 2 < len(ancestors) else None
                limit = self._tested_limit(row, test, statement)
                within = [self._tested_limit(row, test, _holder(test, site)) is not None for site in sites]
            else:
                continue
            if limit is not None:
                return limit if all(within) else None
        return self._exit_limit(row, ancestors, sites)

    def _exit_limit(
        self, row: str, ancestors: list[cst.CSTNode], sites: list[cst.CSTNode]
    ) -> cst.BaseExpression | None:
        """``U`` of an early exit before the access in a block that holds it, ``if row >= U: return`` (``continue``,
        ``break``), when no assignment of ``row`` comes between (the guard's line excluded, the access's line
        included) and the names' assignments come after the guard."""
        assigning = set(map(id, self.facts.assignments.get(row, [])))
        for lines, at in reversed(_blocks(ancestors)):
            for guard in range(at - 1, -1, -1):
                line = lines[guard]
                limit = _exit_test(line, row)
                if limit is None:
                    continue
                after = lines[guard + 1 : at + 1]
                if any(_holds_any(later, assigning) for later in after):
                    return None
                if not all(any(_holds_any(later, {id(site)}) for later in after) for site in sites):
                    return None
                return limit
        return None

    def _for_limit(self, row: str, loop: cst.For) -> cst.BaseExpression | None:
        """``U`` of ``for row in range(..., U, ...)`` when the loop is ``row``'s only assignment and counts up."""
        if not (isinstance(loop.target, cst.Name) and loop.target.value == row):
            return None
        if self.facts.assignments.get(row) != [loop] or not self.facts.nonnegative(loop.target):
            return None
        args = self.facts.range_args(loop)
        return None if args is None else args[0] if len(args) == 1 else args[1]

    def _tested_limit(
        self, row: str, test: cst.While | cst.If, statement: cst.CSTNode | None
    ) -> cst.BaseExpression | None:
        """``U`` of ``while row < U:`` or ``if row < U:`` when no assignment of ``row`` in its body precedes or holds
        ``statement``."""
        limit = _compared(test.test, row, cst.LessThan, cst.GreaterThan)
        if limit is None:
            return None
        body = test.body
        if statement is None or not isinstance(body, cst.IndentedBlock) or statement not in body.body:
            return None
        assigning = set(map(id, self.facts.assignments.get(row, [])))
        for earlier in body.body[: body.body.index(statement) + 1]:
            if _holds_any(earlier, assigning):
                return None
        return limit

    # -- shared ----------------------------------------------------------------------------------------------

    def value_before(self, name: str, ancestors: list[cst.CSTNode]) -> cst.BaseExpression | None:
        """:meth:`_only_value`, where that assignment runs before the access whenever the access runs: a line of
        a block that holds the access, before the line that does (else Triton may read another value of the name:
        a global's, where the name is read before it is assigned or assigned in one branch only)."""
        value = self._only_value(name)
        if value is None or self.facts.maybe_global(name):
            return None
        statement = self.facts.assignments[name][0]
        for lines, at in _blocks(ancestors):
            if any(
                isinstance(line, cst.SimpleStatementLine) and _holds_any(line, {id(statement)}) for line in lines[:at]
            ):
                return value
        return None

    def _only_value(self, name: str) -> cst.BaseExpression | None:
        """The value of ``name``'s one assignment when it is a plain ``name = value``."""
        statements = self.facts.assignments.get(name, [])
        if name in self.facts.params or len(statements) != 1 or not isinstance(statements[0], cst.Assign):
            return None
        targets = statements[0].targets
        if len(targets) != 1 or not (isinstance(targets[0].target, cst.Name) and targets[0].target.value == name):
            return None
        return statements[0].value

    def _constant(self, node: cst.BaseExpression) -> bool:
        """An integer literal, a parameter no statement assigns, or ``+ - *`` of those."""
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply)):
            return self._constant(node.left) and self._constant(node.right)
        return self._fixed(node) and isinstance(node, cst.Name)

    def _fixed(self, node: cst.BaseExpression) -> bool:
        """A positive integer literal, or a parameter no statement assigns."""
        if isinstance(node, cst.Integer):
            return node.evaluated_value > 0
        return (
            isinstance(node, cst.Name)
            and node.value in self.facts.params
            and not self.facts.assignments.get(node.value)
        )


def _blocks(ancestors: list[cst.CSTNode]) -> list[tuple[list[cst.CSTNode], int]]:
    """The blocks that hold the access, outermost first: each one's lines, and where the line that holds it is."""
    found = []
    for block, inside in itertools.pairwise(ancestors):
        lines: list[cst.CSTNode] = list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []
        if inside in lines:
            found.append((lines, lines.index(inside)))
    return found


def _position(statement: cst.CSTNode, ancestors: list[cst.CSTNode]) -> tuple[int, int, int] | None:
    """Where ``statement`` is among the lines before the access in the blocks that hold it: (the block's depth, the
    line, the statement's place on the line); statements of an outer block come first."""
    for depth, (lines, at) in enumerate(_blocks(ancestors)):
        for number, line in enumerate(lines[:at]):
            if isinstance(line, cst.SimpleStatementLine):
                for place, small in enumerate(line.body):
                    if _holds_any(small, {id(statement)}):
                        return depth, number, place
    return None


def _upper(condition: cst.BaseExpression, index: cst.BaseExpression) -> cst.BaseExpression | None:
    """``F`` of ``condition`` when it is ``index < F`` or ``F > index`` (the index spelt alike, or ``+ - *`` of the
    same names and literals that the algebra finds equal to it: ``offs + 0``)."""
    if not isinstance(condition, cst.Comparison) or len(condition.comparisons) != 1:
        return None
    operator, right = condition.comparisons[0].operator, condition.comparisons[0].comparator
    if isinstance(operator, cst.LessThan) and _same(condition.left, index):
        return right
    if isinstance(operator, cst.GreaterThan) and _same(right, index):
        return condition.left
    return None


def _same(node: cst.BaseExpression, index: cst.BaseExpression) -> bool:
    if node.deep_equals(index):
        return True
    return _polynomial(node) and _polynomial(index) and simplify(f"({_code(node)})") == simplify(f"({_code(index)})")


def _polynomial(node: cst.BaseExpression) -> bool:
    """Integer literals and names under ``+ - *``."""
    if isinstance(node, (cst.Integer, cst.Name)):
        return True
    return (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply))
        and _polynomial(node.left)
        and _polynomial(node.right)
    )


def _compared(condition: cst.BaseExpression, row: str, operator: type, flipped: type) -> cst.BaseExpression | None:
    """``U`` of ``condition`` when it is ``row <operator> U`` or ``U <flipped> row`` (``row < U`` or ``U > row``)."""
    if not isinstance(condition, cst.Comparison) or len(condition.comparisons) != 1:
        return None
    left, (comparison,) = condition.left, condition.comparisons
    if isinstance(comparison.operator, operator) and isinstance(left, cst.Name) and left.value == row:
        return comparison.comparator
    right = comparison.comparator
    if isinstance(comparison.operator, flipped) and isinstance(right, cst.Name) and right.value == row:
        return left
    return None


def _exit_test(line: cst.CSTNode, row: str) -> cst.BaseExpression | None:
    """``U`` of ``if row >= U: return`` (or ``U <= row``; ``continue`` or ``break``; nothing else in it, no ``else``)."""
    if not isinstance(line, cst.If) or line.orelse is not None:
        return None
    body = line.body
    statements = body.body if isinstance(body, cst.SimpleStatementSuite) else None
    if (
        isinstance(body, cst.IndentedBlock)
        and len(body.body) == 1
        and isinstance(body.body[0], cst.SimpleStatementLine)
    ):
        statements = body.body[0].body
    if (
        statements is None
        or len(statements) != 1
        or not isinstance(statements[0], (cst.Return, cst.Continue, cst.Break))
    ):
        return None
    return _compared(line.test, row, cst.GreaterThanEqual, cst.LessThanEqual)


def _covers(scale: cst.BaseExpression, limit: cst.BaseExpression, extent: cst.BaseExpression) -> bool:
    """Whether ``scale * limit`` is ``extent`` as integer algebra (parenthesised: the extent may span lines)."""
    return simplify(f"({_code(scale)}) * ({_code(limit)})") == simplify(f"({_code(extent)})")


def _base_name(node: cst.BaseExpression) -> str | None:
    """The name ``node`` is, or that it subscripts (``rows[:, None]``)."""
    if isinstance(node, cst.Subscript):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _conjuncts(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of ``node``'s ``&`` chain."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitAnd):
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _below(condition: cst.BaseExpression, lanes: cst.BaseExpression, scale: cst.BaseExpression) -> bool:
    """Whether ``condition`` is ``lanes < scale`` or ``scale > lanes``."""
    if not isinstance(condition, cst.Comparison) or len(condition.comparisons) != 1:
        return False
    operator, right = condition.comparisons[0].operator, condition.comparisons[0].comparator
    if isinstance(operator, cst.LessThan):
        return condition.left.deep_equals(lanes) and right.deep_equals(scale)
    if isinstance(operator, cst.GreaterThan):
        return condition.left.deep_equals(scale) and right.deep_equals(lanes)
    return False


class _Holds(Walker):
    def __init__(self, wanted: set[int]):
        super().__init__()
        self.wanted = wanted
        self.found = False

    def walk(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.found = True
        if not self.found:
            super().walk(node)


def _holder(test: cst.While | cst.If, node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of ``test``'s body that is or holds ``node``, if any."""
    body = test.body
    statements = body.body if isinstance(body, cst.IndentedBlock) else ()
    return next((statement for statement in statements if _holds_any(statement, {id(node)})), None)


def _holds_any(statement: cst.CSTNode, wanted: set[int]) -> bool:
    """Whether ``statement`` is or holds a node whose ``id`` is in ``wanted``."""
    holds = _Holds(wanted)
    holds.walk(statement)
    return holds.found


def _code(node: cst.BaseExpression) -> str:
    return cst.Module([]).code_for_node(node)
