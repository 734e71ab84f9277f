"""Analysis: find every multicast binding and access in a module, classify and check every use.

The result is a :class:`~castpile.compiler.plan.Plan`: for each node that lowering must
replace, what it is (see :mod:`castpile.compiler.plan`), and the problems found, each
tied to the node it is about.  Nothing is rewritten here.  Bindings are found by
:mod:`castpile.compiler.bindings`, names resolved by :mod:`castpile.compiler.scopes`; the walk
keeps its scopes in :mod:`.analysis_scope` and checks targets in :mod:`.analysis_targets`, Multicast
parameters and the calls that pass multicast tensors are checked by :mod:`.passing`, and the uses are
classified here::

    >>> source = (b"from castpile import multicast_like\\n@triton.jit\\ndef k(out, table, W: tl.constexpr):\\n"
    ...           b"    bufs = multicast_like(out, table[:W])\\n    x = bufs[0]\\n")
    >>> plan = analyse(cst.parse_module(source), source)
    >>> [type(use).__name__ for use in plan.uses.values()], plan.errors
    (['Binding', 'Load'], [])
"""

from __future__ import annotations

import re

import libcst as cst

from . import diagnostics
from .analysis_targets import TargetChecks
from .arange_ends import evaluated_ends
from .contract import (
    CALL_PARAMS,
    FLAG_OPTIONS,
    REDUCTION_PARAMS,
    REDUCTIONS,
    REQUIRED,
    SIGNAL_OPS,
    VALUE_PARAMS,
    WAIT_COMPARISONS,
    argument_positions,
    constexpr_ok,
    is_literal,
    literal_bool,
    literal_int,
    literal_string,
)
from .index_facts import IndexFacts
from .mask_bounds import MaskBounds
from .passing import Helpers
from .plan import UNARY_STEPS, Access, AugStore, Binding, CallOn, GuardedReduce, Load, Plan, Reduction, Step, Store
from .scopes import Scope, collect_globals, collect_scope, dotted


def analyse(module: cst.Module, source: bytes) -> Plan:
    """Find bindings and accesses in every ``@triton.jit`` function of ``module`` (parsed from ``source``)."""
    scope = Scope()
    collect_scope(module.body, scope)
    if b"global" in source:  # no function declares a name global otherwise
        collect_globals(module, scope)
    plan = Plan(words=set(re.findall(r"\w+", source.decode("utf-8", errors="replace"))))
    helpers = Helpers(module, scope, plan)
    _ModuleAnalyser(scope, plan, helpers).walk(module)
    helpers.resolve()
    return plan


class _ModuleAnalyser(TargetChecks):
    """Walks the module; inside ``@triton.jit`` functions, classifies every multicast use (binding, load,
    store, call on an access, reduction) and checks its arguments and indices."""

    def visit_Assign(self, node: cst.Assign) -> bool:
        if node in self.binding_assigns:
            self.binding_walked = node
            for arg in cst.ensure_type(node.value, cst.Call).args:  # before the name is bound: they see what it held
                self.walk(arg.value)
            self.binding_walked = None
            use = self.plan.uses.get(node)
            if isinstance(use, Binding):
                bindings = self.bindings
                assert bindings is not None  # binding assignments are those of the jit function walked
                shadowed = bindings.get(use.name)
                if shadowed is not None and shadowed.param is not None:
                    self.plan.error(node.targets[0].target, diagnostics.MULTICAST_PARAM_REBOUND, name=use.name)
                bindings[use.name] = use
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
                    self.plan.error(target.target, diagnostics.STORE_NOT_SINGLE, name=access.binding.name)
                else:
                    self.refuse_targets(target.target, "a tuple assignment")
        return True

    def visit_AugAssign(self, node: cst.AugAssign) -> bool:
        if self.is_multicast_name(node.target):
            self.refuse_targets(node.target, "an augmented assignment")
        access = self.access(node.target)
        if access is not None:
            bare = node.operator.with_changes(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
            )
            self.plan.uses[node] = AugStore(
                node, access, _code(bare).rstrip("=")
            )  # no backslash continuation around it
            self.own(access)
        return True

    def visit_Call(self, node: cst.Call) -> bool:
        name = self.resolver.castpile(node.func)
        if name is None and self.bindings is not None:
            self._unresolved(node)
            callee = self.helpers.callee(node.func, self.resolver)
            if callee is not None:
                aranges = self.arange_frames[-1]
                assert aranges is not None  # calls with bindings in scope are in jit functions, which have aranges
                self.helpers.call(node, callee, self.bindings, self.handled_args, aranges)
        if name == "multicast_like":
            if self.bindings is None:
                self.plan.error(node, diagnostics.OUTSIDE_JIT, call=name)
            else:
                # A binding's call is visited through its Assign; any other is misplaced.
                self.plan.error(node, diagnostics.BINDING_NOT_PLAIN)
            return True
        if name in ("signal", "wait"):
            if self.bindings is None:
                self.plan.error(node, diagnostics.OUTSIDE_JIT, call=f"castpile.{name}")
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
            what = (
                f"castpile.{node.func.attr.value}" if isinstance(node.func, cst.Attribute) else f"castpile's {spelled}"
            )
            self.plan.error(node, diagnostics.NOT_DEFINED, name=spelled, statement=statement, what=what)
            return
        ambiguous = self.resolver.ambiguous(node.func) if self.bindings else None
        if ambiguous is not None and ambiguous[0] not in self.ambiguous_reported:
            head, meaning = ambiguous
            self.ambiguous_reported.add(head)
            self.plan.error(node, diagnostics.BOUND_TWO_WAYS, head=head, meaning=meaning, call=dotted(node.func))

    def _call_on(self, node: cst.Call, op: str) -> None:
        if node in self.owned:  # the tl.load of a reduction, lowered with it
            return
        if not node.args or node.args[0].keyword is not None:
            self.plan.error(node, diagnostics.POINTER_FIRST, call=op)
            return
        positions, problems = argument_positions(node, CALL_PARAMS[op], 1)
        for problem, params in problems:
            self.plan.error(node, problem, call=op, **params)
        wrong = bool(problems)
        for unsupported in ("boundary_check", "padding_option"):
            if unsupported in positions:
                argument = node.args[positions[unsupported]].value
                self.plan.error(argument, diagnostics.BLOCK_POINTER_KEYWORD, keyword=unsupported)
                wrong = True
        for required in REQUIRED.get(op, ()):
            if required not in positions:
                self.plan.error(node, diagnostics.MISSING_ARGUMENT, call=op, keyword=required)
                wrong = True
        access = self.access(node.args[0].value)  # None: signal or wait on plain pointers
        used = not (isinstance(self.ancestors[-1], cst.Expr) if self.ancestors else False)
        if op in ("signal", "wait") and not self._flag_keywords(node, op, positions, access, used):
            wrong = True
        if wrong:
            return
        if access is not None:
            self.own(access)
            if not self._element_mask(access, node, positions, op) or not self._owned_memory(
                access, node, positions, op
            ):
                return
            if access.binding.param is not None and op.startswith("atomic_"):
                self.helpers.check_later(access, atomic=(node, op))
            elif access.binding.remote is not None and op.startswith("atomic_"):
                self.plan.error(node, diagnostics.REMOTE_ATOMIC, op=op, name=access.binding.name)
                return
        if used and op == "signal":
            self.plan.error(node, diagnostics.RETURNS_NOTHING, call=f"castpile.{op}")
            return
        impure = self._impure_arguments(node, positions) & frozenset(VALUE_PARAMS[op])
        checked = self._checked_options(node, op, positions)
        self.plan.uses[node] = CallOn(node, op, access, positions, used, impure, checked)

    @staticmethod
    def _checked_options(node: cst.Call, op: str, positions: dict[str, int]) -> frozenset[str]:
        """The compile-time keywords of a signal or wait whose values are not literals of their allowed sets (a
        ``decrement=`` that is not a literal bool too): Triton's compile checks them.  Compile-time values stay
        where they are written: nothing compile-time is put in a run-time local."""
        allowed = FLAG_OPTIONS.get(op, {})
        checked = {
            keyword
            for keyword, values in allowed.items()
            if keyword in positions and literal_string(node.args[positions[keyword]].value) not in values
        }
        if "decrement" in positions and literal_bool(node.args[positions["decrement"]].value) is None:
            checked.add("decrement")
        return frozenset(checked)

    def _flag_keywords(
        self, node: cst.Call, op: str, positions: dict[str, int], access: Access | None, used: bool
    ) -> bool:
        """Whether ``castpile.wait``'s ``cmp=`` and ``castpile.signal``'s ``op=``, where string literals, are among
        the allowed ones (other compile-time values are checked when Triton compiles), ``op="add"`` comes without
        ``wait_for=`` and not on a ``remote=`` binding, and a counting wait (``decrement=True``) without ``reset=``
        or another ``cmp=`` than ``"ge"`` and not on a ``remote=`` binding; each problem reported."""
        keyword, allowed = ("cmp", WAIT_COMPARISONS) if op == "wait" else ("op", SIGNAL_OPS)
        given = None
        if keyword in positions:
            value = node.args[positions[keyword]].value
            given = literal_string(value)
            if (
                isinstance(value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
                and given not in allowed
            ):
                spelled = ", ".join(f'"{name}"' for name in allowed)
                self.plan.error(value, diagnostics.WAIT_CMP if op == "wait" else diagnostics.SIGNAL_OP, allowed=spelled)
                return False
        remote = access is not None and access.binding.remote is not None
        if op == "wait":
            return self._counting_wait(node, positions, given, access if remote else None, used)
        if given != "add":
            return True
        if "wait_for" in positions:
            self.plan.error(node.args[positions["wait_for"]].value, diagnostics.ADD_WITH_WAIT_FOR)
            return False
        if remote:
            assert access is not None  # remote: a remote= binding's access
            self.plan.error(node.args[positions["op"]].value, diagnostics.REMOTE_SIGNAL_ADD, name=access.binding.name)
            return False
        return True

    def _counting_wait(
        self, node: cst.Call, positions: dict[str, int], cmp: str | None, remote: Access | None, used: bool
    ) -> bool:
        """Whether a wait's ``decrement=`` goes with its other arguments (``cmp`` the literal ``cmp=`` given) and a
        wait on a ``remote=`` binding (``remote``) asks for neither a decrement nor its value; each problem reported."""
        decrement = node.args[positions["decrement"]].value if "decrement" in positions else None
        if remote is not None and (used or (decrement is not None and literal_bool(decrement) is not False)):
            form = "its value (v = castpile.wait(...))" if used else "a counting wait (decrement=)"
            self.plan.error(
                node if used or decrement is None else decrement,
                diagnostics.REMOTE_WAIT_FORM,
                name=remote.binding.name,
                form=form,
            )
            return False
        if decrement is None or literal_bool(decrement) is not True:
            return True  # a decrement= that is not a literal is checked when Triton compiles
        if "reset" in positions:
            self.plan.error(
                node.args[positions["reset"]].value, diagnostics.COUNTING_WAIT, what="no reset=", keyword="reset"
            )
            return False
        if "cmp" in positions and cmp is not None and cmp != "ge":
            self.plan.error(
                node.args[positions["cmp"]].value, diagnostics.COUNTING_WAIT, what='cmp="ge" only', keyword="cmp"
            )
            return False
        return True

    def _reduction(self, node: cst.Call, op: str, method: bool) -> None:
        """``tl.sum/max/min/argmax/argmin/xor_sum/reduce_or(X, axis=0)``, ``tl.reduce(X, 0, fn)`` or the method
        forms (``X.sum(axis=0)``...), X an access or a ``tl.load`` of one taken through elementwise steps (see
        :meth:`_stack_operand`): a stack reduction, or with an axis that is a compile-time value written other than
        as a literal (``axis=AX``), one that is the stack's where that value is 0; anything else, and any reduction
        of a one-peer access (``table[r]``: P = ()), is an ordinary reduction.  The reduction's other arguments
        (``tl.reduce``'s ``combine_fn`` among them) go to the helper as given."""
        params = REDUCTION_PARAMS[op][1:] if method else REDUCTION_PARAMS[op]
        positions, problems = argument_positions(node, params, 0)
        given = {name: node.args[k].value for name, k in positions.items()}
        operand = self._stack_operand(cst.ensure_type(node.func, cst.Attribute).value if method else given.get("input"))
        if operand is None:
            self._multi_operand_reduce(node, op, given)
            return
        for problem, problem_params in problems:
            self.plan.error(node, problem, call=f"tl.{op} of a multicast access", **problem_params)
        axis = given.get("axis")
        if problems or axis is None or (literal_int(axis) != 0 and is_literal(axis)):
            return
        if op == "reduce" and "combine_fn" not in given:  # Triton's own error
            return
        access, load, load_positions, steps = operand
        if access.binding.peer is not None:  # one peer, P = (): axis 0 is an element dim, an ordinary reduction
            return
        self.own(access)
        if load is not None and not self._element_mask(access, load, load_positions, "load", (op, steps)):
            self.owned.add(load)
            return
        if load is not None:
            self.owned.add(load)
        impure = self._impure_arguments(load, load_positions) & frozenset(VALUE_PARAMS["load"]) if load else frozenset()
        options = {name: given[name] for name in params if name in given and name not in ("input", "axis")}
        compile_time = None if literal_int(axis) == 0 else axis
        self.plan.uses[node] = Reduction(node, op, access, steps, options, load, load_positions, impure, compile_time)

    def _multi_operand_reduce(self, node: cst.Call, op: str, given: dict[str, cst.BaseExpression]) -> None:
        """A ``tl.reduce((X, Y, ...), 0, fn)`` with an operand that is an access (or its load, through elementwise
        steps) reduces the stack dim with its padded and ``ptr_mask``-false buffers: reported at the reduction; with
        an axis that is a compile-time value written other than as a literal, refused when Triton compiles it where
        that value is 0."""
        operands, axis = given.get("input"), given.get("axis")
        if op != "reduce" or not isinstance(operands, cst.Tuple) or axis is None:
            return
        if literal_int(axis) != 0 and is_literal(axis):
            return
        for element in operands.elements:
            operand = self._stack_operand(element.value)
            if operand is not None and operand[0].binding.peer is None:
                name = operand[0].binding.name
                if literal_int(axis) == 0:
                    self.plan.error(node, diagnostics.MULTI_OPERAND_REDUCE, name=name)
                else:
                    self.plan.uses[node] = GuardedReduce(node, name, axis)
                return

    def _stack_operand(
        self, node: cst.BaseExpression | None
    ) -> tuple[Access, cst.Call | None, dict[str, int], list[Step]] | None:
        """``(access, load, load_positions, steps)`` when ``node`` is ``bufs[idx]`` or ``tl.load(bufs[idx], ...)``
        taken through elementwise steps (:meth:`_step`), else ``None``."""
        steps = []
        while node is not None and (step := self._step(node)) is not None:
            steps.append(step[0])
            node = step[1]
        load = None
        load_positions: dict[str, int] = {}
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
        ``x op s`` / ``s op x`` for ``+ - * / // %`` and a scalar ``s`` (:meth:`_scalar`), ``-x``, or one of
        Triton's elementwise math functions of ``x`` alone (:data:`UNARY_STEPS`: ``tl.exp(x)``...)."""
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            return Step("neg"), node.expression
        if (
            isinstance(node, cst.Call)
            and self.resolver.triton_language(node.func) in UNARY_STEPS
            and len(node.args) == 1
            and not node.args[0].star
            and node.args[0].keyword is None
        ):
            return Step(str(self.resolver.triton_language(node.func))), node.args[0].value
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
            mode = rounding.evaluated_value if isinstance(rounding, cst.SimpleString) else None
            if bitcast is not False or mode not in ("rtne", "rtz"):
                return None
            return Step(f"to_{mode}", args["dtype"]), node.func.value
        if bitcast is None:
            return None
        return Step("bitcast" if bitcast else "to", args["dtype"]), node.func.value

    def _scalar(self, node: cst.BaseExpression) -> bool:
        """A number literal (signed) or a constexpr expression: a scalar whatever the kernel's shapes."""
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
            node = node.expression
        return isinstance(node, (cst.Integer, cst.Float)) or constexpr_ok(node, self.constexprs)

    def _element_mask(
        self,
        access: Access,
        call: cst.Call,
        positions: dict[str, int],
        op: str,
        reduction: tuple[str, list[Step]] | None = None,
    ) -> bool:
        """Whether the ``mask=`` of ``call`` on ``access`` (if any) is not one flag per buffer (see
        :mod:`castpile.compiler.stack_masks`); else an error.  Where the mask proves the bounds, ``access`` is
        marked ``mask_bounded``, except for a ``tl.load`` whose ``other`` is not a literal 0, or whose reduction
        (``reduction``: its op and the elementwise steps it takes the load through) is a ``tl.reduce`` or takes a
        step other than a cast: where the mask is off, the reduction folds each buffer's ``other`` through the steps
        (``0 + 1`` from each), and past the extent no buffer (0)."""
        if "mask" not in positions:
            return True
        mask = call.args[positions["mask"]].value
        indices = [element.slice.value for element in access.subscript.slice if isinstance(element.slice, cst.Index)]
        aranges = self.arange_frames[-1]
        assert aranges is not None  # accesses are in jit functions, which have their aranges
        if access.binding.param is not None:  # the stack is each caller's
            unindexed = aranges.unindexed(indices, mask)
            if unindexed:
                self.helpers.check_later(access, mask=(mask, op, unindexed))
            return True
        arange = aranges.per_buffer(access.binding, indices, mask)
        if arange is None:
            access.mask_bounded = (
                op not in ("atomic_cas", "signal", "wait")
                and ("other" not in positions or _zero(call.args[positions["other"]].value))
                and (reduction is None or _keeps_zero(*reduction))
                and self._mask_bounds(access, mask)
            )
            return True
        name = access.binding.name
        self.plan.error(mask, diagnostics.PER_BUFFER_MASK, op=op, name=name, arange=arange)
        return False

    def _mask_bounds(self, access: Access, mask: cst.BaseExpression) -> bool:
        """Whether ``mask`` proves the one index of ``access`` inside its binding's one extent (see
        :mod:`castpile.compiler.mask_bounds`)."""
        binding = access.binding
        if binding.remote is not None or binding.shape is None or len(binding.shape) != 1:
            return False
        if len(access.subscript.slice) != 1 or not isinstance(index := access.subscript.slice[0].slice, cst.Index):
            return False
        facts = self._facts_at([index.value])
        return facts is not None and MaskBounds(facts).holds(index.value, binding.shape[0], mask, self.ancestors)

    def _facts_at(self, indices: list[cst.BaseExpression]) -> IndexFacts | None:
        """The jit function's index facts where the access with ``indices`` is: the parameters that end an arange
        the indices evaluate known positive (:mod:`castpile.compiler.arange_ends`); ``None`` outside a jit function."""
        facts = self.fact_frames[-1]
        if facts is None:
            return None
        proof = MaskBounds(facts)
        return facts.assuming(evaluated_ends(indices, facts, lambda name: proof.value_before(name, self.ancestors)))

    def _owned_memory(self, access: Access, call: cst.Call, positions: dict[str, int], op: str) -> bool:
        """Whether a compare-and-swap on ``access`` (``tl.atomic_cas``, ``castpile.signal`` with ``wait_for``) has
        memory for its masked-off lanes to swap a value for itself: not when the example is a dtype and the tile a
        tensor (no table); else an error."""
        binding = access.binding
        wait_for = (
            op == "signal"
            and "wait_for" in positions
            and not (isinstance(value := call.args[positions["wait_for"]].value, cst.Name) and value.value == "None")
        )
        if (
            binding.dtype is None
            or binding.table is not None
            or binding.peer is not None
            or not (op == "atomic_cas" or wait_for)
        ):
            return True
        what = "tl.atomic_cas" if op == "atomic_cas" else "castpile.signal with wait_for="
        self.plan.error(call, diagnostics.DTYPE_TILE_CAS, what=what, name=binding.name)
        return False

    def _impure_arguments(self, call: cst.Call, positions: dict[str, int]) -> frozenset[str]:
        """The parameters of ``call`` whose argument is not pure (see :meth:`_pure`)."""
        return frozenset(name for name, k in positions.items() if not self.pure(call.args[k].value))

    def visit_Subscript(self, node: cst.Subscript) -> bool:
        access = self.access(node)
        if access is None:
            if isinstance(node.value, cst.Name) and self.enclosing_binding(node.value):
                self.plan.error(node, diagnostics.NESTED_USE, name=node.value.value)
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
                self.plan.error(part, diagnostics.SLICE_INDEX, name=binding.name)
            elif isinstance(part, cst.Index) and part.star is not None:
                self.plan.error(part, diagnostics.STARRED_INDEX)
        values = [part.value for part in elements if isinstance(part, cst.Index)]
        for value in values:
            if isinstance(value, _NOT_INTEGERS) or (
                isinstance(value, cst.Name) and value.value in ("None", "True", "False")
            ):
                self.plan.error(value, diagnostics.NOT_AN_INDEX, code=_code(value), name=binding.name)
        ellipses = [v for v in values if isinstance(v, cst.Ellipsis)]
        if ellipses and binding.param is not None:
            self.plan.error(ellipses[0], diagnostics.MULTICAST_PARAM_ELLIPSIS, name=binding.name)
        elif ellipses:
            self._ellipsis(access, values, ellipses)
        elif binding.param is not None:
            self.helpers.check_later(access, count=True)
        elif len(node.slice) != binding.ndim:
            what = "shape" if binding.shape is not None else "strides" if binding.strides is not None else "no shape"
            self.plan.error(
                node,
                diagnostics.INDEX_COUNT,
                name=binding.name,
                takes=_indices(binding.ndim),
                what=what,
                given=len(node.slice),
            )
        explicit = [v for v in values if not isinstance(v, cst.Ellipsis)]
        access.pure_indices = [self.pure(v) for v in explicit]
        facts = self._facts_at(explicit)
        if facts is not None:
            access.nonnegative = [facts.nonnegative(v) for v in explicit]
            access.summands = [facts.summands(v) for v in explicit]

    def _ellipsis(self, access: Access, values: list, ellipses: list) -> None:
        """``bufs[i, ...]``: the trailing dims at full extent, which must be constexpr powers of two."""
        binding = access.binding
        if len(ellipses) > 1 or values[-1] is not ellipses[0]:
            self.plan.error(ellipses[-1], diagnostics.ELLIPSIS_NOT_LAST, name=binding.name)
            return
        if binding.shape is None:
            self.plan.error(ellipses[0], diagnostics.ELLIPSIS_WITHOUT_SHAPE, name=binding.name)
            return
        spans = binding.shape[len(values) - 1 :]
        if len(values) - 1 > len(binding.shape):
            self.plan.error(
                access.subscript,
                diagnostics.ELLIPSIS_INDEX_COUNT,
                name=binding.name,
                takes=_indices(len(binding.shape)),
                given=len(values) - 1,
            )
            return
        for extent in spans:
            literal = literal_int(extent)
            if not constexpr_ok(extent, self.constexprs) or (
                literal is not None and (literal <= 0 or literal & (literal - 1))
            ):
                self.plan.error(ellipses[0], diagnostics.ELLIPSIS_EXTENT, extent=_code(extent))
                return
        access.spans = list(spans)


_STEP_OPERATORS = {
    cst.Add: "add",
    cst.Subtract: "sub",
    cst.Multiply: "mul",
    cst.Divide: "truediv",
    cst.FloorDivide: "floordiv",
    cst.Modulo: "mod",
}
"""The operators of an elementwise step with a scalar (see ``_castpile_apply`` in helpers/reduction.py)."""

_NOT_INTEGERS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString, cst.Float, cst.Imaginary)


def _indices(count: int) -> str:
    return f"{count} index" if count == 1 else f"{count} indices"


def _zero(node: cst.BaseExpression) -> bool:
    """A literal 0 (``0``, ``0.0``, ``-0.0``): a load's ``other`` under which a lane the mask turns off reduces as a
    lane past the extent does in a sum, max, min, argmax, argmin or bitwise reduction (no buffer taking part gives 0;
    the contract's stack reductions), so the mask may stand for the bounds."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        node = node.expression
    return isinstance(node, (cst.Integer, cst.Float)) and node.evaluated_value == 0


def _keeps_zero(op: str, steps: list[Step]) -> bool:
    """Whether a stack reduction ``op`` of a load through ``steps`` folds a buffer's 0 as no buffer at all: not a
    ``tl.reduce`` (a user's combine function), and casts only (``x + 1``, ``x * s`` with ``s`` infinite, ``-x``
    giving ``-0.0`` do not keep 0)."""
    return op != "reduce" and all(step.kind in _CASTS for step in steps)


_CASTS = frozenset({"to", "bitcast", "to_rtne", "to_rtz"})


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)
