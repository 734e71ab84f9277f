"""Analysis: find every multicast binding and access in a module, classify and check every use.

The result is a :class:`~castpile.compiler.plan.Plan`: for each node that lowering must
replace, what it is (see :mod:`castpile.compiler.plan`), and the problems found, each
tied to the node it is about.  Nothing is rewritten here.  Bindings are found by
:mod:`castpile.compiler.bindings`, names resolved by :mod:`castpile.compiler.scopes`::

    >>> source = (b"from castpile import multicast_like\\n@triton.jit\\ndef k(out, table, W: tl.constexpr):\\n"
    ...           b"    bufs = multicast_like(out, table[:W])\\n    x = bufs[0]\\n")
    >>> plan = analyse(cst.parse_module(source), source)
    >>> [type(use).__name__ for use in plan.uses.values()], plan.errors
    (['Binding', 'Load'], [])
"""

from __future__ import annotations

import re

import libcst as cst

from .contract import (
    CALL_PARAMS,
    PURE_TL_CALLS,
    REDUCTION_PARAMS,
    REDUCTIONS,
    REQUIRED,
    argument_positions,
    constexpr_ok,
    literal_bool,
    literal_int,
)
from .bindings import JitBindings
from .plan import Access, AugStore, Binding, CallOn, Load, Plan, Reduction, Step, Store
from .scopes import Resolver, Scope, collect_scope, dotted, is_constexpr_annotation, is_triton_jit
from .walk import Walker

def analyse(module: cst.Module, source: bytes) -> Plan:
    """Find bindings and accesses in every ``@triton.jit`` function of ``module`` (parsed from ``source``)."""
    scope = Scope()
    collect_scope(module.body, scope)
    plan = Plan(words=set(re.findall(r"\w+", source.decode("utf-8", errors="replace"))))
    _ModuleAnalyser(scope, plan).walk(module)
    return plan


class _ModuleAnalyser(Walker):
    """Walks the module; inside ``@triton.jit`` functions, checks every multicast use."""

    def __init__(self, module_scope: Scope, plan: Plan):
        super().__init__()
        self.module_scope = module_scope
        self.plan = plan
        self.module_constexprs = set()
        self.resolvers: list[Resolver] = [Resolver([module_scope])]
        self.frames: list[dict[str, Binding] | None] = [None]  # bindings of the enclosing jit function, once passed
        self.ahead: list[dict[str, cst.Assign]] = [{}]  # bindings the walk has not passed yet, by name
        self.binding_loops: dict[cst.Assign, frozenset[cst.CSTNode]] = {}
        self.binding_walked: cst.Assign | None = None  # the binding whose arguments are being walked
        self.binding_assigns: set[cst.Assign] = set()
        self.owned: set[cst.CSTNode] = set()  # accesses and loads lowered with the use around them
        self.reported: set[cst.Name] = set()  # names with an error already: one diagnostic per mistake
        self.ambiguous_reported: set[str] = set()  # Triton names bound to two things, reported once each
        self.accesses: dict[cst.Subscript, Access] = {}
        self.constexprs: set[str] = set()  # of the jit function being walked

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
        collect_scope(body, local)
        self.resolvers.append(self.resolver.inner(local))
        return local, names

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        _, params = self._enter_function(node.params, node.body.body)
        if any(is_triton_jit(d) for d in node.decorators):
            constexprs = self.module_constexprs | {
                p.name.value for p in params if is_constexpr_annotation(p.annotation)
            }
            found = JitBindings(node, self.resolver, constexprs, self.plan)
            self._remote_kernel(node, found.bindings)
            self.binding_assigns |= found.assigns
            self.binding_loops.update(found.loops)
            self.constexprs = found.constexprs
            self.frames.append({})
            self.ahead.append({binding.name: binding.node for binding in found.bindings.values()})
        else:
            self.frames.append(None)
            self.ahead.append({})
        return True

    def _remote_kernel(self, node: cst.FunctionDef, bindings: dict[str, Binding]) -> None:
        """A jit function with a ``remote=`` binding is wrapped for NVSHMEM after the module's last line: by its
        module-level name, so it must be defined at the top level."""
        remote = [b for b in bindings.values() if b.remote is not None]
        if not remote:
            return
        if len(self.ancestors) == 1 and isinstance(self.ancestors[0], cst.Module):
            self.plan.remote_kernels.append(node.name.value)
        else:
            self.error(remote[0].node, f"'{node.name.value}' has a remote= binding, so it is a kernel that castpile "
                                       "wraps for NVSHMEM by name: define it at the top level of the module")

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.resolvers.pop()
        self.frames.pop()
        self.ahead.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._enter_function(node.params, [cst.Expr(node.body)])
        self.frames.append(None)
        self.ahead.append({})
        return True

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.leave_FunctionDef(original_node)

    def _enclosing_binding(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` names a multicast tensor of an enclosing jit function from a nested function."""
        if not isinstance(node, cst.Name) or self.bindings is not None or self.resolver.scopes[-1].bound(node.value):
            return False
        return any(frame and node.value in frame for frame in self.frames)

    # -- bindings ------------------------------------------------------------------------

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

    def _bound_later_in_this_loop(self, node: cst.Name) -> bool:
        """Whether the walk has not passed the binding of ``node`` yet but is in a loop around it."""
        binding = self.ahead[-1].get(node.value)
        if binding is None:
            return False
        loops = self.binding_loops[binding]
        return any(ancestor in loops for ancestor in self.ancestors)

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
            return self.resolver.triton_language(node.func) in PURE_TL_CALLS and all(
                a.star == "" and self._pure(a.value) for a in node.args
            )
        return False

    def _own(self, access: Access) -> None:
        """``access`` is lowered by the statement or call around it, not as a load."""
        self.owned.add(access.subscript)

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
            self.reported.add(target)
            self.error(target, f"'{target.value}' is a multicast tensor and cannot be reassigned")
        elif (access := self._access(target)) is not None:
            self._own(access)
            self.error(target, f"a multicast access cannot be the target of {where}; store it in its own statement `{access.binding.name}[idx] = value`")

    def visit_Assign(self, node: cst.Assign) -> bool:
        if node in self.binding_assigns:
            self.binding_walked = node
            for arg in node.value.args:  # before the name is bound: they see what it held
                self.walk(arg.value)
            self.binding_walked = None
            use = self.plan.uses.get(node)
            if isinstance(use, Binding):
                self.bindings[use.name] = use
                del self.ahead[-1][use.name]
            return False
        if self.bindings:
            single = len(node.targets) == 1
            for target in node.targets:
                access = self._access(target.target)
                if access is not None and single:
                    self.plan.uses[node] = Store(node, access, value_pure=self._pure(node.value))
                    self._own(access)
                elif access is not None:
                    self._own(access)
                    self.error(target.target, "a multicast store must be a single assignment `bufs[idx] = value`")
                else:
                    self._refuse_targets(target.target, "a tuple assignment")
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        if self._bound_name(node.target):
            self._refuse_targets(node.target, "an augmented assignment")
        access = self._access(node.target)
        if access is not None:
            bare = node.operator.with_changes(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
            self.plan.uses[node] = AugStore(node, access, _code(bare).rstrip("="))  # no backslash continuation around it
            self._own(access)
        return True

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        access = self._access(node.target)
        if self._bound_name(node.target) or access is not None:
            self.reported.add(node.target)
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
        if name is None and self.bindings is not None:
            self._unresolved(node)
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
            self._reduction(node, op, method=False)
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in REDUCTIONS and op is None:
            self._reduction(node, node.func.attr.value, method=True)
        return True

    def _unresolved(self, node: cst.Call) -> None:
        """A call in a jit function through one of castpile's names that no import reaches, or (in one
        with multicast tensors) through a Triton name bound to something else too."""
        missing = self.resolver.missing_import(node.func)
        if missing is not None:
            spelled, statement = missing
            what = f"castpile.{node.func.attr.value}" if spelled == "castpile" else f"castpile's {spelled}"
            self.error(node, f"'{spelled}' is not defined: add `{statement}` to use {what}")
            return
        ambiguous = self.resolver.ambiguous(node.func) if self.bindings else None
        if ambiguous is not None and ambiguous[0] not in self.ambiguous_reported:
            head, meaning = ambiguous
            self.ambiguous_reported.add(head)
            self.error(node, f"'{head}' is bound to {meaning} and also to something else, so castpile cannot tell "
                             f"what '{dotted(node.func)}' calls; bind '{head}' once (an import under `try` with a "
                             "fallback under `except ImportError` is fine)")

    def _call_on(self, node: cst.Call, op: str) -> None:
        if node in self.owned:  # the tl.load of a reduction, lowered with it
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
            if access.binding.remote is not None and op.startswith("atomic_"):
                self.error(node, f"tl.{op} on '{access.binding.name}', a remote= binding: NVSHMEM atomics are not among "
                                 "torch's Triton device functions, and a get-modify-put would not be atomic; use "
                                 "castpile.signal/wait, or a binding without remote= for peers in one NVLink domain")
                return
        used = not (isinstance(self.ancestors[-1], cst.Expr) if self.ancestors else False)
        if used and op in ("signal", "wait"):
            self.error(node, f"castpile.{op} returns nothing: call it as a statement of its own")
            return
        impure = self._impure_arguments(node, positions)
        self.plan.uses[node] = CallOn(node, op, access, positions, result_used=used, impure=impure)

    def _reduction(self, node: cst.Call, op: str, method: bool) -> None:
        """``tl.sum/max/min(X, axis=0)`` or ``X.sum/max/min(axis=0)``, X an access or a ``tl.load`` of one taken
        through elementwise steps (see :meth:`_stack_operand`): a stack reduction; anything else is an ordinary
        reduction.  The reduction's other arguments go to the helper as given."""
        params = REDUCTION_PARAMS[op][1:] if method else REDUCTION_PARAMS[op]
        positions, problems = argument_positions(node, params, 0)
        given = {name: node.args[k].value for name, k in positions.items()}
        operand = self._stack_operand(node.func.value if method else given.get("input"))
        if operand is None:
            return
        for problem in problems:
            self.error(node, f"tl.{op} of a multicast access: {problem}")
        if problems or "axis" not in given or literal_int(given["axis"]) != 0:
            return
        access, load, load_positions, steps = operand
        self._own(access)
        if load is not None:
            self.owned.add(load)
        impure = self._impure_arguments(load, load_positions) if load is not None else frozenset()
        options = {name: given[name] for name in params if name in given and name not in ("input", "axis")}
        self.plan.uses[node] = Reduction(node, op, access, steps, options, load, load_positions, impure)

    def _stack_operand(
        self, node: cst.BaseExpression | None
    ) -> tuple[Access, cst.Call | None, dict[str, int], list[Step]] | None:
        """``(access, load, load_positions, steps)`` when ``node`` is ``bufs[idx]`` or ``tl.load(bufs[idx], ...)``
        taken through elementwise steps (:meth:`_step`), else ``None``."""
        steps = []
        while node is not None and (step := self._step(node)) is not None:
            steps.append(step[0])
            node = step[1]
        load, load_positions = None, {}
        if isinstance(node, cst.Call) and self.resolver.triton_language(node.func) == "load" and node.args:
            load_positions, problems = argument_positions(node, CALL_PARAMS["load"], 1)
            if problems or {"boundary_check", "padding_option"} & set(load_positions):
                return None  # diagnosed as a tl.load of an access
            load, node = node, node.args[0].value
        access = self._access(node) if node is not None else None
        if access is None:
            return None
        return access, load, load_positions, steps[::-1]

    def _step(self, node: cst.BaseExpression) -> tuple[Step, cst.BaseExpression] | None:
        """``(step, x)`` when ``node`` is one elementwise step applied to ``x`` whose meaning does not depend on
        shapes castpile cannot see: ``x.to(T)`` (``bitcast=`` a literal, ``fp_downcast_rounding=`` a string literal),
        ``x op s`` / ``s op x`` for ``+ - * / // %`` and a scalar ``s`` (:meth:`_scalar`), or ``-x``."""
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return Step("neg"), node.expression
        if isinstance(node, cst.BinaryOperation) and type(node.operator) in _STEP_OPERATORS:
            name = _STEP_OPERATORS[type(node.operator)]
            if self._scalar(node.right):
                return Step(name, node.right), node.left
            if self._scalar(node.left):
                return Step("r" + name, node.left), node.right
            return None
        if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "to"):
            return None
        positions, problems = argument_positions(node, ("dtype", "fp_downcast_rounding", "bitcast"), 0)
        args = {name: node.args[k].value for name, k in positions.items()}
        if problems or "dtype" not in args:
            return None
        bitcast = literal_bool(args["bitcast"]) if "bitcast" in args else False
        rounding = args.get("fp_downcast_rounding")
        if isinstance(rounding, cst.Name) and rounding.value == "None":
            rounding = None
        if rounding is not None:
            rounding = rounding.evaluated_value if isinstance(rounding, cst.SimpleString) else None
            if bitcast is not False or rounding not in ("rtne", "rtz"):
                return None
            return Step(f"to_{rounding}", args["dtype"]), node.func.value
        if bitcast is None:
            return None
        return Step("bitcast" if bitcast else "to", args["dtype"]), node.func.value

    def _scalar(self, node: cst.BaseExpression) -> bool:
        """A number literal (signed) or a constexpr expression: a scalar whatever the kernel's shapes."""
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            node = node.expression
        return isinstance(node, (cst.Integer, cst.Float)) or constexpr_ok(node, self.constexprs)

    def _impure_arguments(self, call: cst.Call, positions: dict[str, int]) -> frozenset[str]:
        """The parameters of ``call`` whose argument is not pure (see :meth:`_pure`)."""
        return frozenset(name for name, k in positions.items() if not self._pure(call.args[k].value))

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        access = self._access(node)
        if access is None:
            if self._enclosing_binding(node.value):
                self.error(node, f"'{node.value.value}' is a multicast tensor of the enclosing jit function; nested functions and lambdas cannot use it")
                return False
            return True
        self._check_indices(access)
        if node not in self.owned:
            self.plan.uses[node] = Load(node, access)
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
        for value in values:
            if isinstance(value, _NOT_INTEGERS) or (isinstance(value, cst.Name) and value.value in ("None", "True", "False")):
                self.error(value, f"'{_code(value)}' is not an index: index '{binding.name}' with Triton integer scalars or tensors")
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
            literal = literal_int(extent)
            if not constexpr_ok(extent, self.constexprs) or (literal is not None and (literal <= 0 or literal & (literal - 1))):
                self.error(ellipses[0], "'...' stands for full extents, which must be constexpr powers of two; "
                           f"'{_code(extent)}' is not")
                return
        access.spans = list(spans)

    def visit_Name(self, node: cst.Name) -> None:
        if node in self.reported:
            return
        if self._bound_name(node):
            self.error(node, f"'{node.value}' is a multicast tensor and may only be subscripted, as in {node.value}[idx]")
        elif self._bound_later_in_this_loop(node):
            name = node.value
            where = "in its own binding, which is inside a loop" if self.binding_walked is not None else \
                f"in a loop before `{name} = multicast_like(...)` further on in it"
            self.error(node, f"'{name}' is used {where}, so from the second pass on it would be the multicast tensor; "
                             f"bind the multicast tensor to a name of its own, or bind it before the loop")
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


_STEP_OPERATORS = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "truediv", cst.FloorDivide: "floordiv",
    cst.Modulo: "mod",
}
"""The operators of an elementwise step with a scalar (see ``_castpile_apply`` in helpers/reduction.py)."""

_NOT_INTEGERS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Float, cst.Imaginary)


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
