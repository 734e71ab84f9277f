"""Analysis: find every multicast binding and access in a module, classify and check every use.

The result is a :class:`~castpile.compiler.plan.Plan`: for each node that lowering must
replace, what it is (see :mod:`castpile.compiler.plan`), and the problems found, each
tied to the node it is about.  Nothing is rewritten here.  Bindings are found by
:mod:`castpile.compiler.bindings`, names resolved by :mod:`castpile.compiler.scopes`; the walk
keeps its scopes in :mod:`.analysis_scope` and checks targets in :mod:`.analysis_targets`, and
classifies the uses here::

    >>> source = (b"from castpile import multicast_like\\n@triton.jit\\ndef k(out, table, W: tl.constexpr):\\n"
    ...           b"    bufs = multicast_like(out, table[:W])\\n    x = bufs[0]\\n")
    >>> plan = analyse(cst.parse_module(source), source)
    >>> [type(use).__name__ for use in plan.uses.values()], plan.errors
    (['Binding', 'Load'], [])
"""

from __future__ import annotations

import re

import libcst as cst

from .analysis_targets import TargetChecks
from .contract import (
    CALL_PARAMS,
    REDUCTION_PARAMS,
    REDUCTIONS,
    REQUIRED,
    SIGNAL_OPS,
    WAIT_COMPARISONS,
    argument_positions,
    constexpr_ok,
    literal_bool,
    literal_int,
    literal_string,
)
from .plan import Access, AugStore, Binding, CallOn, Load, Plan, Reduction, Step, Store
from .scopes import Scope, collect_scope, dotted


def analyse(module: cst.Module, source: bytes) -> Plan:
    """Find bindings and accesses in every ``@triton.jit`` function of ``module`` (parsed from ``source``)."""
    scope = Scope()
    collect_scope(module.body, scope)
    plan = Plan(words=set(re.findall(r"\w+", source.decode("utf-8", errors="replace"))))
    _ModuleAnalyser(scope, plan).walk(module)
    return plan


class _ModuleAnalyser(TargetChecks):
    """Walks the module; inside ``@triton.jit`` functions, classifies every multicast use (binding, load,
    store, call on an access, reduction) and checks its arguments and indices."""

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
                access = self.access(target.target)
                if access is not None and single:
                    self.plan.uses[node] = Store(node, access, value_pure=self.pure(node.value))
                    self.own(access)
                elif access is not None:
                    self.own(access)
                    self.error(target.target, "a multicast store must be a single assignment `bufs[idx] = value`")
                else:
                    self.refuse_targets(target.target, "a tuple assignment")
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        if self.is_multicast_name(node.target):
            self.refuse_targets(node.target, "an augmented assignment")
        access = self.access(node.target)
        if access is not None:
            bare = node.operator.with_changes(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
            self.plan.uses[node] = AugStore(node, access, _code(bare).rstrip("="))  # no backslash continuation around it
            self.own(access)
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
        if op in CALL_PARAMS and node.args and self.access(node.args[0].value) is not None:
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
        access = self.access(node.args[0].value)
        if access is None and op != "wait":
            self.error(node.args[0].value, f"castpile.{op} takes a multicast access such as bufs[idx]")
            return
        if op in ("signal", "wait") and not self._flag_keywords(node, op, positions, access):
            problems.append(op)
        if problems:
            return
        if access is not None:
            self.own(access)
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

    def _flag_keywords(self, node: cst.Call, op: str, positions: dict[str, int], access: Access | None) -> bool:
        """Whether ``castpile.wait``'s ``cmp=`` and ``castpile.signal``'s ``op=`` are string literals among the
        allowed ones (Triton takes them as constexprs), and ``op="add"`` comes without ``wait_for=`` and not on a
        ``remote=`` binding; each problem reported."""
        keyword, allowed = ("cmp", WAIT_COMPARISONS) if op == "wait" else ("op", SIGNAL_OPS)
        if keyword not in positions:
            return True
        value = node.args[positions[keyword]].value
        given = literal_string(value)
        if given not in allowed:
            spelled = ", ".join(f'"{name}"' for name in allowed)
            hint = ' (the flag on the left: cmp="ge" waits until flag >= value)' if op == "wait" else ""
            self.error(value, f"castpile.{op}: {keyword}= must be one of the string literals {spelled}{hint}")
            return False
        if given != "add":
            return True
        if "wait_for" in positions:
            self.error(node.args[positions["wait_for"]].value,
                       'castpile.signal: op="add" takes no wait_for= (an add never waits for a value); signal with '
                       'op="set" and wait_for=, or let the waiting side wait with cmp="ge" on a count')
            return False
        if access is not None and access.binding.remote is not None:
            self.error(value, f'castpile.signal(op="add") on \'{access.binding.name}\', a remote= binding: NVSHMEM\'s '
                              "signal_op adds to 64-bit words only and castpile's flags have the binding's type "
                              "(signal pads are int32), and a get-add-put would not be atomic; use op=\"set\", or a "
                              "binding without remote= for peers in one NVLink domain")
            return False
        return True

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
        self.own(access)
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
        access = self.access(node) if node is not None else None
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
        return frozenset(name for name, k in positions.items() if not self.pure(call.args[k].value))

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        access = self.access(node)
        if access is None:
            if self.enclosing_binding(node.value):
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
        access.pure_indices = [self.pure(v) for v in values if not isinstance(v, cst.Ellipsis)]

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


_STEP_OPERATORS = {
    cst.Add: "add", cst.Subtract: "sub", cst.Multiply: "mul", cst.Divide: "truediv", cst.FloorDivide: "floordiv",
    cst.Modulo: "mod",
}
"""The operators of an elementwise step with a scalar (see ``_castpile_apply`` in helpers/reduction.py)."""

_NOT_INTEGERS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Float, cst.Imaginary)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)
