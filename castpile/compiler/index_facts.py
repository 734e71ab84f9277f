"""What castpile proves of a jit function's index expressions: that one is never negative, that one is a scalar.

Both decide how an access is lowered (docs/language.md, "What castpile emits for an index"):

* an index proven non-negative gets no ``i >= 0`` in the bounds mask.  The proof: integer literals,
  ``tl.program_id``, ``tl.num_programs``, ``tl.arange(a, b)`` with ``a`` proven, sums and products of proven
  expressions (``//`` and ``%`` by a positive literal too), ``x[:, None]``-style subscripts, ``tl.multiple_of`` /
  ``tl.max_contiguous`` / ``tl.max_constancy`` of one, parameters known positive where the access is
  (:meth:`IndexFacts.assuming`), and names that are no parameter and whose every assignment
  in the function is proven: ``=`` (and ``:=``) of a proven value, ``+=`` / ``*=`` of one, and ``for`` over
  ``range`` / ``tl.range`` / ``tl.static_range`` starting at a proven value with a proven step (counting up).
  Names assigned in a cycle (``row += nprog``) are proven together: every value any of them ever holds is made
  from proven values.  Anything else (a parameter, a global, a load, a subtraction) is not proven, and keeps its
  check.  Like the offsets themselves, the proof takes Triton's integer arithmetic not to wrap around;
* an index classed as a scalar goes into the buffer's pointer before the tensor offsets (``base=``; one that mixes
  scalar and tensor summands has its scalar summands go there where the binding has no bounds).  Scalars:
  literals, ``tl.program_id``, ``tl.num_programs``, parameters, globals, loop variables of ranges, and arithmetic
  of those.  The class need not be right: the helpers check, when Triton compiles them, that ``base`` is a
  scalar, and add it to the tensor offsets otherwise (the offsets then are what they would be without the split,
  a jit helper's parameter that is a tensor among them).

    >>> from castpile.compiler.scopes import Resolver, Scope, collect_scope
    >>> module = cst.parse_module("import triton.language as tl\\n")
    >>> scope = Scope()
    >>> collect_scope(module.body, scope)
    >>> body = [cst.parse_statement(s).body[0] for s in ("row = tl.program_id(0)", "row += tl.num_programs(0)")]
    >>> facts = IndexFacts(Resolver([scope]), {"row": body, "cols": [cst.parse_statement("cols = tl.arange(0, B)").body[0]]}, {"D"})
    >>> [facts.nonnegative(cst.parse_expression(e)) for e in ("row", "D*row + cols", "cols[:, None]", "row - 1")]
    [True, False, True, False]
    >>> [sign for sign, _ in facts.summands(cst.parse_expression("D*row - cols"))[0]]
    [1]
"""

from __future__ import annotations

import libcst as cst

from .scopes import Resolver

_TRANSPARENT = ("multiple_of", "max_contiguous", "max_constancy")  # tl calls whose value is their first argument
_RANGES = ("range", "static_range")  # tl.range, tl.static_range (and the builtin range)
_RANGE_SLOTS = ("arg1", "arg2", "step")  # their arguments' keywords, in the builtin's order


class IndexFacts:
    """The proofs for one jit function: ``assignments`` holds each name's assigning statements (``=``, ``:=``, ``+=``,
    ``for``, ``with``... as :class:`castpile.compiler.bindings.JitBindings` collects them), ``params`` its
    parameters' names."""

    def __init__(
        self,
        resolver: Resolver,
        assignments: dict[str, list[cst.CSTNode]],
        params: set[str],
        positive: frozenset[str] = frozenset(),
    ):
        self.resolver = resolver
        self.assignments = assignments
        self.params = params
        self.positive = positive
        self._proven: dict[str, set[str]] = {}
        self._assumed: dict[frozenset[str], IndexFacts] = {}

    def assuming(self, positive: frozenset[str]) -> IndexFacts:
        """These facts where the parameters in ``positive`` are known to be positive (where an access is, its index
        evaluating ``tl.arange(0, P)``: :mod:`castpile.compiler.arange_ends`); the same object if nothing is new.

            >>> from castpile.compiler.scopes import Resolver, Scope, collect_scope
            >>> scope = Scope()
            >>> collect_scope(cst.parse_module("import triton.language as tl\\n").body, scope)
            >>> facts = IndexFacts(Resolver([scope]), {}, {"B"})
            >>> index = cst.parse_expression("tl.program_id(0) * B")
            >>> facts.nonnegative(index), facts.assuming(frozenset({"B"})).nonnegative(index)
            (False, True)
        """
        if positive <= self.positive:
            return self
        known = self.positive | positive
        if known not in self._assumed:
            self._assumed[known] = IndexFacts(self.resolver, self.assignments, self.params, known)
        return self._assumed[known]

    # -- non-negative ------------------------------------------------------------------------------

    def nonnegative(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` is proven never negative."""
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Name):
            return node.value in self.positive or self._name(node.value, "nonnegative")
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, (cst.Add, cst.Multiply)):
                return self.nonnegative(node.left) and self.nonnegative(node.right)
            if isinstance(node.operator, (cst.FloorDivide, cst.Modulo)):
                return self.nonnegative(node.left) and _positive_literal(node.right)
            return False
        if isinstance(node, cst.Subscript):
            return _expands(node) and self.nonnegative(node.value)
        if isinstance(node, cst.Call):
            return self._nonnegative_call(node)
        return False

    def _nonnegative_call(self, node: cst.Call) -> bool:
        widened = self.widened(node)
        if widened is not None:
            return self.nonnegative(widened)
        called = self.resolver.triton_language(node.func)
        if called in ("program_id", "num_programs"):
            return True
        first = _positional(node, 1)
        if called == "arange" or called in _TRANSPARENT:
            return first is not None and self.nonnegative(first[0])
        return False

    def _nonnegative_assignment(self, name: str, statement: cst.CSTNode) -> bool:
        """Whether ``statement`` gives ``name`` only proven values."""
        return _assigns(name, statement, self.nonnegative, self._counts_up, self._nonnegative_update)

    def _nonnegative_update(self, statement: cst.AugAssign) -> bool:
        if isinstance(statement.operator, (cst.AddAssign, cst.MultiplyAssign)):
            return self.nonnegative(statement.value)
        return isinstance(statement.operator, (cst.FloorDivideAssign, cst.ModuloAssign)) and _positive_literal(
            statement.value
        )

    def _counts_up(self, loop: cst.For) -> bool:
        """A range loop from a proven start by a proven step."""
        bounds = self._range(loop)
        if bounds is None:
            return False
        start, step = bounds
        return (start is None or self.nonnegative(start)) and (step is None or self.nonnegative(step))

    # -- scalar ----------------------------------------------------------------------------------------

    def scalar(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` is classed as a scalar (see the module's docstring: a class, checked where Triton
        compiles)."""
        if isinstance(node, cst.Integer):
            return True
        if isinstance(node, cst.Name):
            if node.value in self.params or node.value not in self.assignments:
                return node.value not in ("None", "True", "False")
            return self._name(node.value, "scalar")
        if isinstance(node, cst.BinaryOperation):
            return self.scalar(node.left) and self.scalar(node.right)
        if isinstance(node, cst.UnaryOperation):
            return not isinstance(node.operator, cst.Not) and self.scalar(node.expression)
        if isinstance(node, cst.Call):
            widened = self.widened(node)
            if widened is not None:
                return self.scalar(widened)
            called = self.resolver.triton_language(node.func)
            if called in ("program_id", "num_programs"):
                return True
            first = _positional(node, 1)
            return called in _TRANSPARENT and first is not None and self.scalar(first[0])
        return False

    def _scalar_assignment(self, name: str, statement: cst.CSTNode) -> bool:
        return _assigns(
            name, statement, self.scalar, lambda loop: self._range(loop) is not None, lambda aug: self.scalar(aug.value)
        )

    def summands(
        self, node: cst.BaseExpression
    ) -> tuple[list[tuple[int, cst.BaseExpression]], list[tuple[int, cst.BaseExpression]]]:
        """The summands of ``node`` (its top-level ``+`` / ``-`` chain, parentheses followed), each with its sign:
        the scalar ones, then the others."""
        scalars: list[tuple[int, cst.BaseExpression]] = []
        others: list[tuple[int, cst.BaseExpression]] = []
        for sign, summand in _summands(node, 1):
            (scalars if self.scalar(summand) else others).append((sign, summand))
        return scalars, others

    # -- values kept -----------------------------------------------------------------------------------

    def maybe_global(self, name: str) -> bool:
        """Whether the module may bind ``name`` (a statement there binds it, or a star import may): what Triton
        reads where the function reads the name before assigning it, or after assigning it in one branch only."""
        module = self.resolver.scopes[0] if self.resolver.scopes else None
        return module is not None and (module.bound(name) or module.starred)

    def widened(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """``x`` of ``x.to(tl.int64)`` or ``tl.cast(x, tl.int64)`` (``dtype=`` too): a cast that keeps every integer
        value, else ``None``."""
        if not isinstance(node, cst.Call) or any(arg.star for arg in node.args):
            return None
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to" and len(node.args) == 1:
            value, dtype = node.func.value, node.args[0]
        elif (
            self.resolver.triton_language(node.func) == "cast" and len(node.args) == 2 and node.args[0].keyword is None
        ):
            value, dtype = node.args[0].value, node.args[1]
        else:
            return None
        if dtype.keyword is not None and dtype.keyword.value != "dtype":
            return None
        return value if self.resolver.triton_language(dtype.value) == "int64" else None

    def unhinted(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """``node`` without the ``tl.multiple_of`` / ``tl.max_contiguous`` / ``tl.max_constancy`` around it (their
        value is their first argument)."""
        while isinstance(node, cst.Call) and self.resolver.triton_language(node.func) in _TRANSPARENT:
            first = _positional(node, 1)
            if first is None:
                break
            node = first[0]
        return node

    # -- shared --------------------------------------------------------------------------------------

    def _name(self, name: str, kind: str) -> bool:
        """A name's fact (``kind``: ``"nonnegative"`` or ``"scalar"``): no parameter nor global, assigned, and every assignment
        proven, the names of the function taken together (the greatest fixpoint: every name is assumed proven, and
        those with an assignment not proven under that assumption dropped until none is; every value a name left
        then ever holds comes from proven assignments)."""
        names = self._proven.get(kind)
        if names is None:
            names = {
                n
                for n, statements in self.assignments.items()
                if statements and n not in self.params and not self.maybe_global(n)
            }
            self._proven[kind] = names  # consulted, shrinking, while the fixpoint is found
            check = self._nonnegative_assignment if kind == "nonnegative" else self._scalar_assignment
            changed = True
            while changed:
                changed = False
                for other in sorted(names):
                    if not all(check(other, statement) for statement in self.assignments[other]):
                        names.discard(other)
                        changed = True
        return name in names

    def range_args(self, loop: cst.For) -> list[cst.BaseExpression] | None:
        """The 1 to 3 arguments of ``for name in range(...)`` as the builtin takes them (``tl.range``,
        ``tl.static_range`` too, whose ``arg1=`` / ``arg2=`` / ``step=`` keywords are placed where they go and other
        keywords are options), or ``None`` for another loop or target.

            >>> from castpile.compiler.scopes import Resolver, Scope, collect_scope
            >>> scope = Scope()
            >>> collect_scope(cst.parse_module("import triton.language as tl\\n").body, scope)
            >>> facts = IndexFacts(Resolver([scope]), {}, set())
            >>> loop = cst.parse_statement("for r in tl.range(M, step=2, num_stages=3):\\n    pass\\n")
            >>> [cst.Module([]).code_for_node(a) for a in facts.range_args(loop)]
            ['0', 'M', '2']
        """
        call = loop.iter
        if not isinstance(loop.target, cst.Name) or not isinstance(call, cst.Call):
            return None
        builtin = (
            isinstance(call.func, cst.Name)
            and call.func.value == "range"
            and not any(scope.bound("range") for scope in self.resolver.scopes)
        )
        if not builtin and self.resolver.triton_language(call.func) not in _RANGES:
            return None
        if any(arg.star for arg in call.args) or (builtin and any(arg.keyword is not None for arg in call.args)):
            return None
        slots: list[cst.BaseExpression | None] = [arg.value for arg in call.args if arg.keyword is None]
        if len(slots) > 3:
            return None
        slots += [None] * (3 - len(slots))
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in _RANGE_SLOTS:
                at = _RANGE_SLOTS.index(arg.keyword.value)
                if slots[at] is not None:
                    return None  # given twice: Triton refuses it
                slots[at] = arg.value
        first, second, step = slots
        if first is None:
            return None
        if second is None:
            return [first] if step is None else [cst.Integer("0"), first, step]
        return [first, second] if step is None else [first, second, step]

    def _range(self, loop: cst.For) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None] | None:
        """``(start, step)`` of a range loop (:meth:`range_args`; ``None``: 0, 1), or ``None`` for another loop."""
        args = self.range_args(loop)
        if args is None:
            return None
        return (args[0] if len(args) > 1 else None), (args[2] if len(args) == 3 else None)


def _assigns(name: str, statement: cst.CSTNode, value, loop, update) -> bool:
    """Whether ``statement`` gives ``name`` only values with a fact: ``value`` (of an expression) holds for what an
    ``=`` or ``:=`` assigns it, ``loop`` for a ``for`` over it, ``update`` for an augmented assignment; a statement
    that binds it otherwise (unpacked, ``with ... as``) has none."""
    if isinstance(statement, cst.Assign):
        direct = any(isinstance(t.target, cst.Name) and t.target.value == name for t in statement.targets)
        return direct and value(statement.value)
    if isinstance(statement, (cst.AnnAssign, cst.NamedExpr)):
        assigned = statement.value
        return isinstance(statement.target, cst.Name) and (assigned is None or value(assigned))
    if isinstance(statement, cst.AugAssign):
        return isinstance(statement.target, cst.Name) and update(statement)
    if isinstance(statement, cst.For):
        return loop(statement)
    return False


def _summands(node: cst.BaseExpression, sign: int) -> list[tuple[int, cst.BaseExpression]]:
    """The signed summands of ``node``'s ``+`` / ``-`` chain, left to right: walked with a stack, not recursive
    generators (those resume every enclosing one per summand, work quadratic in a long chain's length)."""
    found: list[tuple[int, cst.BaseExpression]] = []
    pending: list[tuple[int, cst.BaseExpression]] = [(sign, node)]
    while pending:
        sign, node = pending.pop()
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
            pending.append((sign if isinstance(node.operator, cst.Add) else -sign, node.right))
            pending.append((sign, node.left))
        else:
            found.append((sign, node))
    return found


def _positional(call: cst.Call, count: int) -> list[cst.BaseExpression] | None:
    """The first ``count`` arguments of ``call`` when they are positional, else ``None``."""
    args = call.args[:count]
    if len(args) < count or any(arg.keyword is not None or arg.star for arg in args):
        return None
    return [arg.value for arg in args]


def _positive_literal(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer) and node.evaluated_value > 0


def _expands(node: cst.Subscript) -> bool:
    """``x[:, None]``, ``x[None, :]``, ``x[..., None]``: a subscript that only adds unit dims (and keeps values)."""
    for element in node.slice:
        part = element.slice
        if isinstance(part, cst.Slice):
            if any(b is not None for b in (part.lower, part.upper, part.step)):
                return False
        elif not isinstance(part, cst.Index) or not (
            isinstance(part.value, cst.Ellipsis) or (isinstance(part.value, cst.Name) and part.value.value == "None")
        ):
            return False
    return True
