"""Analysis: find every multicast binding and access, check every use.

The result is a :class:`Plan`: for each node that lowering must replace, what it
is (a binding, a load, a store, an augmented store, a call on an access), and
the problems found, each tied to the node it is about.  Nothing is rewritten
here.

    >>> import libcst as cst
    >>> plan = analyse(cst.parse_module(SAMPLE))            # doctest: +SKIP
    >>> [type(u).__name__ for u in plan.uses.values()]      # doctest: +SKIP
    ['Binding', 'Load']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .names import Resolver, Scope, is_constexpr_annotation, is_triton_jit
from .walk import Walker

ATOMICS = ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg")
REDUCTIONS = ("sum", "max", "min")
# Positional parameter names after the pointer, per call (the contract's signatures).
CALL_PARAMS = {
    "load": ("mask", "other", "boundary_check", "padding_option", "cache_modifier", "eviction_policy", "volatile"),
    "store": ("value", "mask", "boundary_check", "cache_modifier", "eviction_policy"),
    "atomic_cas": ("cmp", "val", "sem", "scope"),
    "signal": ("value", "wait_for", "sem", "scope", "mask"),
    "wait": ("value", "sem", "scope", "reset", "mask"),
    **{name: ("val", "mask", "sem", "scope") for name in ATOMICS},
}
REQUIRED = {"store": ("value",), "atomic_cas": ("cmp", "val"), **{name: ("val",) for name in ATOMICS}}
BINDING_PARAMS = ("example", "ptr_tile", "shape", "strides", "ptr_mask")
BINDING_KEYWORDS = BINDING_PARAMS + ("align",)


@dataclass(eq=False)
class Binding:
    """``name = multicast_like(example, ptr_tile, shape=..., strides=..., ptr_mask=...)``."""

    name: str
    node: cst.Assign
    example: cst.BaseExpression
    table: cst.BaseExpression | None = None  # table form: table[lo:hi]
    lo: cst.BaseExpression | None = None
    hi: cst.BaseExpression | None = None
    tile: cst.BaseExpression | None = None  # tile form
    ptr_mask: cst.BaseExpression | None = None
    shape: list[cst.BaseExpression] | None = None
    strides: list[cst.BaseExpression] | None = None
    align: int | None = None
    function_names: set[str] = field(default_factory=set)

    @property
    def ndim(self) -> int:
        """How many indices an access takes."""
        if self.shape is not None:
            return len(self.shape)
        if self.strides is not None:
            return len(self.strides)
        return 1


@dataclass(eq=False)
class Access:
    """``bufs[i_0, ..., i_k]``: the binding, the index nodes and how to evaluate them.

    ``pure_indices`` says for each explicit index whether it is free of side effects
    and cheap (names, literals, arithmetic, ``tl.arange``), so that its text may be
    repeated in the offsets and the bounds mask; any other index must be evaluated
    once.  ``spans`` holds the extents that a trailing ``...`` stands for.
    """

    binding: Binding
    subscript: cst.Subscript
    pure_indices: list[bool] = field(default_factory=list)
    spans: list[cst.BaseExpression] = field(default_factory=list)

    @property
    def pure(self) -> bool:
        """Whether every index may be repeated."""
        return all(self.pure_indices)


@dataclass(eq=False)
class Load:
    """An access read as a value."""

    access: Access


@dataclass(eq=False)
class Store:
    """``bufs[idx] = value`` (``value_pure``: the value has no side effects)."""

    access: Access
    value_pure: bool = True


@dataclass(eq=False)
class AugStore:
    """``bufs[idx] op= value``."""

    access: Access


@dataclass(eq=False)
class CallOn:
    """``tl.load/store/atomic_*`` or ``castpile.signal/wait`` on an access (or, for
    wait, on plain pointers: ``access`` is ``None``)."""

    op: str
    access: Access | None
    positions: dict[str, int]
    result_used: bool = True


@dataclass(eq=False)
class Reduction:
    """``tl.sum/max/min(X, axis=0)`` where X is ``bufs[idx]`` or ``tl.load(bufs[idx], ...)``,
    optionally converted with ``.to(T)``; ``load_positions`` maps the load's parameters
    to argument positions."""

    op: str
    access: Access
    dtype: cst.BaseExpression | None
    load: cst.Call | None = None
    load_positions: dict[str, int] = field(default_factory=dict)


@dataclass(eq=False)
class SliceAlias:
    """``tile = table[lo:hi]``, a name bound once to a table slice and passed as a ``ptr_tile``."""

    node: cst.Assign
    table: cst.BaseExpression
    lo: cst.BaseExpression | None


@dataclass
class Plan:
    """What lowering replaces (keyed by the original node) and the problems found."""

    uses: dict[cst.CSTNode, object] = field(default_factory=dict)
    owned: set[cst.CSTNode] = field(default_factory=set)
    errors: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    taken_names: set[str] = field(default_factory=set)


def analyse(module: cst.Module) -> Plan:
    """Find bindings and accesses in every ``@triton.jit`` function of ``module``."""
    scope = Scope()
    _collect_scope(module.body, scope)
    plan = Plan()
    _ModuleAnalyser(scope, plan).walk(module)
    return plan


def _collect_scope(body, scope: Scope) -> None:
    """Record the bindings of a block (not descending into functions or classes)."""
    for stmt in body:
        _ScopeCollector(scope).walk(stmt)


class _ScopeCollector(Walker):
    """The names a scope binds: imports, assignments, defs, loop and with targets."""

    def __init__(self, scope: Scope):
        super().__init__()
        self.scope = scope

    def visit_Import(self, node: cst.Import) -> bool:
        self.scope.add_import(node)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        self.scope.add_import(node)
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.scope.other.add(node.name.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.scope.other.add(node.name.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Try(self, node: cst.Try) -> bool:
        """``try: from castpile import x`` ``except ImportError: x = ...``: the fallback does not shadow x."""
        before = set(self.scope.castpile_names)
        self.walk(node.body)
        imported = set(self.scope.castpile_names) - before
        shadowed = set(self.scope.other)
        for handler in node.handlers:
            self.walk(handler)
        self.scope.other -= imported - shadowed
        for block in (node.orelse, node.finalbody):
            if block is not None:
                self.walk(block)
        return False

    def _targets(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.scope.other.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._targets(element.value)
        elif isinstance(target, cst.StarredElement):
            self._targets(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._targets(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target)


def argument_positions(call: cst.Call, params: tuple[str, ...], skip: int) -> tuple[dict[str, int], list[str]]:
    """Map parameter names to positions in ``call.args`` for the arguments after the first ``skip``.

    >>> argument_positions(cst.parse_expression("f(p, v, sem='relaxed')"), ("val", "mask", "sem"), 1)
    ({'val': 1, 'sem': 2}, [])
    """
    named: dict[str, int] = {}
    problems = []
    if any(a.star for a in call.args):
        problems.append("*args and **kwargs cannot be used here")
    positional = [i for i, a in enumerate(call.args) if a.keyword is None and not a.star]
    for k, position in enumerate(positional[skip:]):
        if k >= len(params):
            problems.append(f"too many positional arguments (at most {len(params) + skip})")
            break
        named[params[k]] = position
    for position, arg in enumerate(call.args):
        if arg.keyword is not None:
            key = arg.keyword.value
            if key not in params:
                problems.append(f"unexpected keyword argument '{key}'")
            elif key in named:
                problems.append(f"argument '{key}' given twice")
            else:
                named[key] = position
    return named, problems


_CONSTEXPR_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo, cst.LeftShift, cst.RightShift)
_PURE_TL_CALLS = ("arange", "program_id", "num_programs")


def _constexpr_ok(node: cst.BaseExpression, constexprs: set[str]) -> bool:
    """Integer literals and constexpr names combined with + - * // % << >>."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Name):
        return node.value in constexprs
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, _CONSTEXPR_OPERATORS):
        return _constexpr_ok(node.left, constexprs) and _constexpr_ok(node.right, constexprs)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return _constexpr_ok(node.expression, constexprs)
    return False


def _literal_int(node: cst.BaseExpression | None) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


class _ModuleAnalyser(Walker):
    """Walks the module; inside ``@triton.jit`` functions, checks every multicast use."""

    def __init__(self, module_scope: Scope, plan: Plan):
        super().__init__()
        self.module_scope = module_scope
        self.plan = plan
        self.module_constexprs = set()
        self.resolvers: list[Resolver] = [Resolver([module_scope])]
        self.frames: list[dict[str, Binding] | None] = [None]  # bindings of the enclosing jit function
        self.binding_assigns: set[cst.Assign] = set()
        self.accesses: dict[cst.Subscript, Access] = {}
        self.slice_aliases: dict[str, cst.Assign] = {}  # of the jit function being walked
        self.constexprs: set[str] = set()  # likewise

    def error(self, node: cst.CSTNode, message: str) -> None:
        self.plan.errors.append((node, message))

    @property
    def resolver(self) -> Resolver:
        return self.resolvers[-1]

    @property
    def bindings(self) -> dict[str, Binding] | None:
        return self.frames[-1]

    # -- scopes --------------------------------------------------------------------------

    def visit_Module(self, node: cst.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)) and self._is_constexpr_value(small):
                        targets = small.targets if isinstance(small, cst.Assign) else [small]
                        for target in targets:
                            if isinstance(target.target, cst.Name):
                                self.module_constexprs.add(target.target.value)

    def _is_constexpr_value(self, node) -> bool:
        if isinstance(node, cst.AnnAssign) and is_constexpr_annotation(node.annotation):
            return True
        value = node.value
        return isinstance(value, cst.Call) and is_constexpr_annotation(cst.Annotation(value.func))

    def _enter_function(self, params: cst.Parameters, body) -> tuple[Scope, list[cst.Param]]:
        local = Scope()
        names = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if isinstance(extra, cst.Param):
                names.append(extra)
        for param in names:
            local.other.add(param.name.value)
        _collect_scope(body, local)
        self.resolvers.append(self.resolver.inner(local))
        return local, names

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        _, params = self._enter_function(node.params, node.body.body)
        if any(is_triton_jit(d) for d in node.decorators):
            constexprs = self.module_constexprs | {
                p.name.value for p in params if is_constexpr_annotation(p.annotation)
            }
            self.frames.append(self._collect_bindings(node, constexprs))
        else:
            self.frames.append(None)
        return True

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.resolvers.pop()
        self.frames.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._enter_function(node.params, [cst.Expr(node.body)])
        self.frames.append(None)
        return True

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.leave_FunctionDef(original_node)

    def _enclosing_binding(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` names a multicast tensor of an enclosing jit function from a nested function."""
        if not isinstance(node, cst.Name) or self.bindings is not None or self.resolver.scopes[-1].bound(node.value):
            return False
        return any(frame and node.value in frame for frame in self.frames)

    # -- bindings ------------------------------------------------------------------------

    def _collect_bindings(self, func: cst.FunctionDef, constexprs: set[str]) -> dict[str, Binding]:
        bindings: dict[str, Binding] = {}
        finder = _BindingFinder(self.resolver)
        finder.walk(func.body)
        constexprs = self.constexprs = constexprs | finder.constexprs
        self.binding_assigns.update(finder.found)
        self.slice_aliases = {
            name: assign for name, assign in finder.slice_assigns.items() if finder.assigned[name] == 1
        }
        for assign in finder.found:
            target = assign.targets[0].target
            if len(assign.targets) != 1 or not isinstance(target, cst.Name):
                self.error(assign, "multicast_like must be bound by a plain assignment: `name = multicast_like(...)`")
                continue
            name = target.value
            if name in bindings:
                self.error(assign, f"'{name}' is already bound by multicast_like in this function (one binding per name)")
                continue
            binding = self._binding(name, assign, constexprs)
            if binding is not None:
                bindings[name] = binding
                self.plan.uses[assign] = binding
        return bindings

    def _binding(self, name: str, assign: cst.Assign, constexprs: set[str]) -> Binding | None:
        call = assign.value
        positions, problems = argument_positions(call, BINDING_KEYWORDS, 0)
        args = {key: call.args[position].value for key, position in positions.items()}
        for problem in problems:
            self.error(call, f"multicast_like: {problem}")
        for required in ("example", "ptr_tile"):
            if required not in args:
                self.error(call, f"multicast_like: missing argument '{required}'")
        if problems or "example" not in args or "ptr_tile" not in args:
            return None
        binding = Binding(name, assign, args["example"])
        ok = True
        tile = args["ptr_tile"]
        alias = self.slice_aliases.get(tile.value) if isinstance(tile, cst.Name) else None
        if alias is not None:
            tile = alias.value
        slice_ = self._table_slice(tile)
        if slice_ is not None:
            ok = self._table_form(binding, tile, slice_, constexprs)
            if ok and alias is not None:
                self.plan.uses[alias] = SliceAlias(alias, binding.table, binding.lo)
            if "ptr_mask" in args:
                self.error(args["ptr_mask"], "ptr_mask applies to a tensor ptr_tile; a table slice has no entries to mask")
                ok = False
        else:
            binding.tile = tile
            binding.ptr_mask = args.get("ptr_mask")
        for key in ("shape", "strides"):
            if key in args:
                value = args[key]
                if isinstance(value, cst.Name) and value.value == "None":
                    continue
                if not isinstance(value, cst.Tuple) or not value.elements or any(
                    isinstance(e, cst.StarredElement) for e in value.elements
                ):
                    self.error(value, f"{key}= must be a non-empty tuple literal such as (n,) or (m, n)")
                    ok = False
                    continue
                setattr(binding, key, [e.value for e in value.elements])
        if binding.shape is not None and binding.strides is not None and len(binding.shape) != len(binding.strides):
            self.error(args["strides"], f"strides= has {len(binding.strides)} entries but shape= has {len(binding.shape)}")
            ok = False
        if "align" in args:
            align = _literal_int(args["align"])
            if align is None or align <= 0 or align & (align - 1):
                self.error(args["align"], "align= must be a power-of-two integer literal (bytes)")
                ok = False
            binding.align = align
        return binding if ok else None

    @staticmethod
    def _table_slice(tile: cst.BaseExpression) -> cst.Slice | None:
        if isinstance(tile, cst.Subscript) and len(tile.slice) == 1 and isinstance(tile.slice[0].slice, cst.Slice):
            return tile.slice[0].slice
        return None

    def _table_form(self, binding: Binding, tile: cst.Subscript, slice_: cst.Slice, constexprs: set[str]) -> bool:
        binding.table = tile.value
        binding.lo, binding.hi = slice_.lower, slice_.upper
        if slice_.step is not None:
            self.error(slice_.step, "a table slice takes no step")
            return False
        if slice_.upper is None:
            self.error(tile, "a table slice needs an upper bound: table[:WORLD] or table[lo:hi]")
            return False
        ok = True
        for bound in (slice_.lower, slice_.upper):
            if bound is not None and not _constexpr_ok(bound, constexprs):
                self.error(
                    bound,
                    "table slice bounds must be constexpr: integer literals, tl.constexpr parameters or names, "
                    "tl.static_range loop variables, and + - * // % of those",
                )
                ok = False
        lo, hi = _literal_int(slice_.lower) if slice_.lower is not None else 0, _literal_int(slice_.upper)
        if ok and lo is not None and hi is not None and hi <= lo:
            self.error(tile, f"empty table slice: it selects {max(hi - lo, 0)} buffers")
            ok = False
        return ok

    # -- uses ----------------------------------------------------------------------------

    def _access(self, node: cst.BaseExpression) -> Access | None:
        """The access if ``node`` is ``bufs[...]`` of a binding in scope."""
        bindings = self.bindings
        if (
            bindings
            and isinstance(node, cst.Subscript)
            and isinstance(node.value, cst.Name)
            and node.value.value in bindings
        ):
            access = self.accesses.get(node)
            if access is None:
                access = self.accesses[node] = Access(bindings[node.value.value], node)
            return access
        return None

    def _bound_name(self, node: cst.BaseExpression) -> bool:
        return bool(self.bindings) and isinstance(node, cst.Name) and node.value in self.bindings

    def _pure(self, node: cst.BaseExpression) -> bool:
        """Free of side effects and cheap to repeat: names, literals, operators, ``x[:, None]``, ``tl.arange``."""
        if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.Ellipsis, cst.SimpleString)):
            return not self._bound_name(node)
        if isinstance(node, cst.Attribute):
            return self._pure(node.value)
        if isinstance(node, cst.UnaryOperation):
            return self._pure(node.expression)
        if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
            return self._pure(node.left) and self._pure(node.right)
        if isinstance(node, cst.Comparison):
            return self._pure(node.left) and all(self._pure(c.comparator) for c in node.comparisons)
        if isinstance(node, cst.Subscript):
            if self._access(node) is not None or not self._pure(node.value):
                return False
            for element in node.slice:
                part = element.slice
                if isinstance(part, cst.Index):
                    if not self._pure(part.value):
                        return False
                elif any(b is not None and not self._pure(b) for b in (part.lower, part.upper, part.step)):
                    return False
            return True
        if isinstance(node, cst.Call):
            return self.resolver.triton_language(node.func) in _PURE_TL_CALLS and all(
                a.star == "" and self._pure(a.value) for a in node.args
            )
        return False

    def _own(self, access: Access) -> None:
        """``access`` is lowered by the statement or call around it, not as a load."""
        self.plan.owned.add(access.subscript)

    def _refuse_targets(self, target: cst.BaseExpression | None, where: str) -> None:
        """Multicast accesses and tensors inside a target that castpile cannot lower."""
        if target is None:
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._refuse_targets(element.value, where)
        elif isinstance(target, cst.StarredElement):
            self._refuse_targets(target.value, where)
        elif self._bound_name(target):
            self.error(target, f"'{target.value}' is a multicast tensor and cannot be reassigned")
        elif (access := self._access(target)) is not None:
            self._own(access)
            self.error(target, f"a multicast access cannot be the target of {where}; store it in its own statement `{access.binding.name}[idx] = value`")

    def visit_Assign(self, node: cst.Assign) -> bool:
        if node in self.binding_assigns:
            for arg in node.value.args:
                self.walk(arg.value)
            return False
        if self.bindings:
            single = len(node.targets) == 1
            for target in node.targets:
                access = self._access(target.target)
                if access is not None and single:
                    self.plan.uses[node] = Store(access, value_pure=self._pure(node.value))
                    self._own(access)
                elif access is not None:
                    self._own(access)
                    self.error(target.target, "a multicast store must be a single assignment `bufs[idx] = value`")
                else:
                    self._refuse_targets(target.target, "a tuple assignment")
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        if self._bound_name(node.target):
            self.error(node.target, f"'{node.target.value}' is a multicast tensor and cannot be reassigned")
        access = self._access(node.target)
        if access is not None:
            self.plan.uses[node] = AugStore(access)
            self._own(access)
        return True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        access = self._access(node.target)
        if self._bound_name(node.target) or access is not None:
            self.error(node.target, "a multicast tensor cannot be the target of an annotated assignment")
        if access is not None:
            self._own(access)
        return True

    def visit_Del(self, node: cst.Del) -> bool:
        if self.bindings:
            targets = node.target.elements if isinstance(node.target, (cst.Tuple, cst.List)) else [node.target]
            for target in targets:
                target = target.value if isinstance(target, cst.BaseElement) else target
                if self._bound_name(target) or self._access(target) is not None:
                    self.error(target, "a multicast tensor cannot be deleted")
        return False

    def visit_For(self, node: cst.For) -> bool:
        self._refuse_targets(node.target, "a for loop")
        return True

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self._refuse_targets(node.target, "a comprehension")
        return True

    def visit_WithItem(self, node: cst.WithItem) -> bool:
        if node.asname is not None:
            self._refuse_targets(node.asname.name, "a with statement")
        return True

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        if self.bindings:
            finder = _NamesIn(set(self.bindings))
            finder.walk(node)
            for name in finder.found:
                self.error(name, f"'{name.value}' is a multicast tensor and cannot be used inside an f-string; compute the value first")
            return not finder.found
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        name = self.resolver.castpile(node.func)
        if name == "multicast_like":
            if self.bindings is None:
                self.error(node, "multicast_like is only valid inside a @triton.jit function")
            else:
                # A binding's call is visited through its Assign; any other is misplaced.
                self.error(node, "multicast_like must be bound by a plain assignment: `name = multicast_like(...)`")
            return True
        if name in ("signal", "wait"):
            if self.bindings is None:
                self.error(node, f"castpile.{name} is only valid inside a @triton.jit function")
                return True
            self._call_on(node, name)
            return True
        if not self.bindings:
            return True
        op = self.resolver.triton_language(node.func)
        if op in CALL_PARAMS and node.args and self._access(node.args[0].value) is not None:
            self._call_on(node, op)
        elif op in REDUCTIONS:
            self._reduction(node, op)
        return True

    def _call_on(self, node: cst.Call, op: str) -> None:
        if node in self.plan.owned:  # the tl.load of a reduction, lowered with it
            return
        if not node.args or node.args[0].keyword is not None:
            self.error(node, f"{op} needs the pointer (a multicast access) as its first argument")
            return
        positions, problems = argument_positions(node, CALL_PARAMS[op], 1)
        for problem in problems:
            self.error(node, f"{op}: {problem}")
        for unsupported in ("boundary_check", "padding_option"):
            if unsupported in positions:
                self.error(node.args[positions[unsupported]].value, f"{unsupported}= is for block pointers, not multicast accesses")
                problems.append(unsupported)
        for required in REQUIRED.get(op, ()):
            if required not in positions:
                self.error(node, f"{op}: missing argument '{required}'")
                problems.append(required)
        access = self._access(node.args[0].value)
        if access is None and op != "wait":
            self.error(node.args[0].value, f"castpile.{op} takes a multicast access such as bufs[idx]")
            return
        if problems:
            return
        if access is not None:
            self._own(access)
        used = not (isinstance(self.ancestors[-1], cst.Expr) if self.ancestors else False)
        self.plan.uses[node] = CallOn(op, access, positions, result_used=used)

    def _reduction(self, node: cst.Call, op: str) -> None:
        args = node.args
        if not args or args[0].keyword is not None:
            return
        inner, dtype = args[0].value, None
        if (
            isinstance(inner, cst.Call)
            and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value == "to"
            and len(inner.args) == 1
            and inner.args[0].keyword is None
        ):
            inner, dtype = inner.func.value, inner.args[0].value
        load, positions = None, {}
        if isinstance(inner, cst.Call) and self.resolver.triton_language(inner.func) == "load" and inner.args:
            positions, problems = argument_positions(inner, CALL_PARAMS["load"], 1)
            if problems or {"boundary_check", "padding_option"} & set(positions):
                return
            load, inner = inner, inner.args[0].value
        access = self._access(inner)
        if access is None:
            return
        rest = args[1:]
        if len(rest) != 1 or not isinstance(rest[0].value, cst.Integer) or rest[0].value.value != "0":
            return
        if rest[0].keyword is not None and rest[0].keyword.value != "axis":
            return
        self._own(access)
        if load is not None:
            self.plan.owned.add(load)
        self.plan.uses[node] = Reduction(op, access, dtype, load, positions)

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        access = self._access(node)
        if access is None:
            if self._enclosing_binding(node.value):
                self.error(node, f"'{node.value.value}' is a multicast tensor of the enclosing jit function; nested functions and lambdas cannot use it")
                return False
            return True
        self._check_indices(access)
        if node not in self.plan.owned:
            self.plan.uses[node] = Load(access)
        for element in node.slice:
            self.walk(element.slice)
        return False

    def _check_indices(self, access: Access) -> None:
        """Slices, stars, the index count and a trailing ``...``; whether the indices are pure."""
        binding, node = access.binding, access.subscript
        elements = [element.slice for element in node.slice]
        for part in elements:
            if isinstance(part, cst.Slice):
                self.error(part, f"slices are not multicast indices: index '{binding.name}' with tl.arange(...) tensors")
            elif part.star is not None:
                self.error(part, "starred indices are not supported")
        values = [part.value for part in elements if isinstance(part, cst.Index)]
        ellipses = [v for v in values if isinstance(v, cst.Ellipsis)]
        if ellipses:
            self._ellipsis(access, values, ellipses)
        elif len(node.slice) != binding.ndim:
            what = "shape" if binding.shape is not None else "strides" if binding.strides is not None else "no shape"
            self.error(
                node,
                f"'{binding.name}' takes {binding.ndim} ind{'ex' if binding.ndim == 1 else 'ices'} ({what}) "
                f"but is indexed with {len(node.slice)}",
            )
        access.pure_indices = [self._pure(v) for v in values if not isinstance(v, cst.Ellipsis)]

    def _ellipsis(self, access: Access, values: list, ellipses: list) -> None:
        """``bufs[i, ...]``: the trailing dims at full extent, which must be constexpr powers of two."""
        binding = access.binding
        if len(ellipses) > 1 or values[-1] is not ellipses[0]:
            self.error(ellipses[-1], "'...' may only come last in a multicast index, as in bufs[i, ...]")
            return
        if binding.shape is None:
            self.error(ellipses[0], f"'...' needs the extents of '{binding.name}': give multicast_like a shape=")
            return
        spans = binding.shape[len(values) - 1 :]
        if len(values) - 1 > len(binding.shape):
            self.error(access.subscript, f"'{binding.name}' takes {len(binding.shape)} indices (shape) but is indexed with {len(values) - 1} and '...'")
            return
        for extent in spans:
            literal = _literal_int(extent)
            if not _constexpr_ok(extent, self.constexprs) or (literal is not None and (literal <= 0 or literal & (literal - 1))):
                self.error(ellipses[0], "'...' stands for full extents, which must be constexpr powers of two; "
                           f"'{_code(extent)}' is not")
                return
        access.spans = list(spans)

    def visit_Name(self, node: cst.Name) -> None:
        self.plan.taken_names.add(node.value)
        if self._bound_name(node):
            self.error(node, f"'{node.value}' is a multicast tensor and may only be subscripted, as in {node.value}[idx]")
        elif self._enclosing_binding(node):
            self.error(node, f"'{node.value}' is a multicast tensor of the enclosing jit function; nested functions and lambdas cannot use it")

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        if self._bound_name(node.value):
            name = node.value.value
            self.error(node.value, f"'{name}' is a multicast tensor and cannot be passed to a function; pass {name}[idx]")
            return False
        self.walk(node.value)
        return False


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class _NamesIn(Walker):
    """The ``Name`` nodes among ``names`` inside a subtree."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.found.append(node)


class _BindingFinder(Walker):
    """What a jit function's body binds: multicast_like assignments, table-slice names, constexpr names.

    ``assigned`` counts the bindings of each name (a name bound once to ``table[lo:hi]``
    may stand for that slice); ``constexprs`` holds ``tl.static_range`` loop variables
    and names annotated ``tl.constexpr``.  Nested functions are not entered.
    """

    def __init__(self, resolver: Resolver):
        super().__init__()
        self.resolver = resolver
        self.found: list[cst.Assign] = []
        self.slice_assigns: dict[str, cst.Assign] = {}
        self.assigned: dict[str, int] = {}
        self.constexprs: set[str] = set()

    def _count(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.assigned[target.value] = self.assigned.get(target.value, 0) + 1
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._count(element.value)
        elif isinstance(target, cst.StarredElement):
            self._count(target.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._count(target.target)
        if isinstance(node.value, cst.Call) and self.resolver.castpile(node.value.func) == "multicast_like":
            self.found.append(node)
        elif (
            len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and _ModuleAnalyser._table_slice(node.value) is not None
        ):
            self.slice_assigns[node.targets[0].target.value] = node

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._count(node.target)
        if isinstance(node.target, cst.Name) and is_constexpr_annotation(node.annotation):
            self.constexprs.add(node.target.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._count(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._count(node.target)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._count(node.asname.name)

    def visit_For(self, node: cst.For) -> None:
        self._count(node.target)
        if (
            isinstance(node.target, cst.Name)
            and isinstance(node.iter, cst.Call)
            and self.resolver.triton_language(node.iter.func) == "static_range"
        ):
            self.constexprs.add(node.target.value)
