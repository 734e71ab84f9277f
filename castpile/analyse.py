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
    """``bufs[i_0, ..., i_k]``: the binding and the index nodes."""

    binding: Binding
    subscript: cst.Subscript


@dataclass(eq=False)
class Load:
    """An access read as a value."""

    access: Access


@dataclass(eq=False)
class Store:
    """``bufs[idx] = value``."""

    access: Access


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
    arguments: dict[str, cst.BaseExpression]


@dataclass(eq=False)
class Reduction:
    """``tl.sum/max/min(X, axis=0)`` where X is ``bufs[idx]`` or ``tl.load(bufs[idx], mask=m)``,
    optionally converted with ``.to(T)``."""

    op: str
    access: Access
    dtype: cst.BaseExpression | None
    load: cst.Call | None = None


@dataclass
class Plan:
    """What lowering replaces (keyed by the original node) and the problems found."""

    uses: dict[cst.CSTNode, object] = field(default_factory=dict)
    owned: set[cst.CSTNode] = field(default_factory=set)
    errors: list[tuple[cst.CSTNode, str]] = field(default_factory=list)


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


def _call_arguments(call: cst.Call, params: tuple[str, ...], skip: int) -> tuple[dict, list[str]]:
    """Map a call's arguments after the first ``skip`` positional ones to parameter names."""
    named: dict[str, cst.BaseExpression] = {}
    problems = []
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.star:
            problems.append("*args and **kwargs cannot be used here")
    for i, arg in enumerate(positional[skip:]):
        if i >= len(params):
            problems.append(f"too many positional arguments (at most {len(params) + skip})")
            break
        named[params[i]] = arg.value
    for arg in call.args:
        if arg.keyword is not None:
            key = arg.keyword.value
            if key not in params:
                problems.append(f"unexpected keyword argument '{key}'")
            elif key in named:
                problems.append(f"argument '{key}' given twice")
            else:
                named[key] = arg.value
    return named, problems


def _constexpr_ok(node: cst.BaseExpression, constexprs: set[str]) -> bool:
    """Integer literals and constexpr names combined with + - * //."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Name):
        return node.value in constexprs
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)):
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
        self.resolvers: list[Resolver] = [Resolver(module_scope, Scope())]
        self.frames: list[dict[str, Binding] | None] = [None]  # bindings of the enclosing jit function
        self.binding_assigns: set[cst.Assign] = set()

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

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        local = Scope()
        params = [*node.params.posonly_params, *node.params.params, *node.params.kwonly_params]
        for extra in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(extra, cst.Param):
                params.append(extra)
        for param in params:
            local.other.add(param.name.value)
        _collect_scope(node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body, local)
        self.resolvers.append(Resolver(self.module_scope, local))
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
        return True

    # -- bindings ------------------------------------------------------------------------

    def _collect_bindings(self, func: cst.FunctionDef, constexprs: set[str]) -> dict[str, Binding]:
        bindings: dict[str, Binding] = {}
        finder = _BindingFinder(self.resolver)
        finder.walk(func.body)
        self.binding_assigns.update(finder.found)
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
                binding.function_names = finder.names
                bindings[name] = binding
                self.plan.uses[assign] = binding
        return bindings

    def _binding(self, name: str, assign: cst.Assign, constexprs: set[str]) -> Binding | None:
        call = assign.value
        args, problems = _call_arguments(call, BINDING_KEYWORDS, 0)
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
        slice_ = self._table_slice(tile)
        if slice_ is not None:
            ok = self._table_form(binding, tile, slice_, constexprs) and ok
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
                self.error(bound, "table slice bounds must be constexpr: integer literals or tl.constexpr parameters")
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
            return Access(bindings[node.value.value], node)
        return None

    def _bound_name(self, node: cst.BaseExpression) -> bool:
        return bool(self.bindings) and isinstance(node, cst.Name) and node.value in self.bindings

    def visit_Assign(self, node: cst.Assign) -> bool:
        if node in self.binding_assigns:
            for arg in node.value.args:
                self.walk(arg.value)
            return False
        if self.bindings:
            for target in node.targets:
                if self._bound_name(target.target):
                    self.error(target.target, f"'{target.target.value}' is a multicast tensor and cannot be reassigned")
                access = self._access(target.target)
                if access is not None:
                    if len(node.targets) != 1:
                        self.error(target.target, "a multicast store must be a single assignment `bufs[idx] = value`")
                    else:
                        self.plan.uses[node] = Store(access)
                        self.plan.owned.add(access.subscript)
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        if self._bound_name(node.target):
            self.error(node.target, f"'{node.target.value}' is a multicast tensor and cannot be reassigned")
        access = self._access(node.target)
        if access is not None:
            self.plan.uses[node] = AugStore(access)
            self.plan.owned.add(access.subscript)
        return True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        if self._bound_name(node.target) or self._access(node.target) is not None:
            self.error(node.target, "a multicast tensor cannot be the target of an annotated assignment")
        return True

    def visit_Del(self, node: cst.Del) -> bool:
        if self.bindings:
            for target in (node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]):
                target = getattr(target, "value", target)
                if self._bound_name(target) or self._access(target) is not None:
                    self.error(target, "a multicast tensor cannot be deleted")
        return False

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
            self._call_on(node, name, name)
            return True
        if not self.bindings:
            return True
        op = self.resolver.triton_language(node.func)
        if op in CALL_PARAMS and node.args and self._access(node.args[0].value) is not None:
            self._call_on(node, op, op)
        elif op in REDUCTIONS:
            self._reduction(node, op)
        return True

    def _call_on(self, node: cst.Call, op: str, params_key: str) -> None:
        if not node.args or node.args[0].keyword is not None:
            self.error(node, f"{op} needs the pointer (a multicast access) as its first argument")
            return
        arguments, problems = _call_arguments(node, CALL_PARAMS[params_key], 1)
        for problem in problems:
            self.error(node, f"{op}: {problem}")
        for unsupported in ("boundary_check", "padding_option"):
            if unsupported in arguments:
                self.error(arguments[unsupported], f"{unsupported}= is for block pointers, not multicast accesses")
                problems.append(unsupported)
        for required in REQUIRED.get(op, ()):
            if required not in arguments:
                self.error(node, f"{op}: missing argument '{required}'")
                problems.append(required)
        access = self._access(node.args[0].value)
        if access is None and op != "wait":
            self.error(node.args[0].value, f"castpile.{op} takes a multicast access such as bufs[idx]")
            return
        if problems:
            return
        if access is not None:
            self.plan.owned.add(access.subscript)
        self.plan.uses[node] = CallOn(op, access, arguments)

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
        load = None
        if isinstance(inner, cst.Call) and self.resolver.triton_language(inner.func) == "load" and inner.args:
            arguments, problems = _call_arguments(inner, CALL_PARAMS["load"], 1)
            other = arguments.pop("other", None)
            if problems or set(arguments) - {"mask"} or not (other is None or _literal_int(other) == 0):
                return  # only a masked load fuses: `other` would also fill the padded entries
            load, inner = inner, inner.args[0].value
        access = self._access(inner)
        if access is None:
            return
        rest = args[1:]
        if len(rest) != 1 or not isinstance(rest[0].value, cst.Integer) or rest[0].value.value != "0":
            return
        if rest[0].keyword is not None and rest[0].keyword.value != "axis":
            return
        self.plan.uses[node] = Reduction(op, access, dtype, load)

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        access = self._access(node)
        if access is None:
            return True
        binding = access.binding
        for element in node.slice:
            if isinstance(element.slice, cst.Slice):
                self.error(element.slice, f"slices are not multicast indices: index '{binding.name}' with tl.arange(...) tensors")
            elif element.slice.star is not None:
                self.error(element.slice, "starred indices are not supported")
        if len(node.slice) != binding.ndim:
            what = "shape" if binding.shape is not None else "strides" if binding.strides is not None else "no shape"
            self.error(
                node,
                f"'{binding.name}' takes {binding.ndim} ind{'ex' if binding.ndim == 1 else 'ices'} ({what}) "
                f"but is indexed with {len(node.slice)}",
            )
        if node not in self.plan.owned:
            self.plan.uses[node] = Load(access)
        for element in node.slice:
            self.walk(element.slice)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if self._bound_name(node):
            self.error(node, f"'{node.value}' is a multicast tensor and may only be subscripted, as in {node.value}[idx]")

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

    def visit_For(self, node: cst.For) -> bool:
        if self._bound_name(node.target):
            self.error(node.target, f"'{node.target.value}' is a multicast tensor and cannot be reassigned")
        return True


class _BindingFinder(Walker):
    """The assignments in a function body whose value is a call of castpile's multicast_like."""

    def __init__(self, resolver: Resolver):
        super().__init__()
        self.resolver = resolver
        self.found: list[cst.Assign] = []
        self.names: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and self.resolver.castpile(node.value.func) == "multicast_like":
            self.found.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)
