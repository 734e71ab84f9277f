"""Multicast parameters: jit functions that take multicast tensors, and the calls that pass them.

A parameter annotated ``castpile.Multicast`` (any import form) of a module-level ``@triton.jit``
function receives a multicast tensor at every call site and is used inside as the binding passed::

    @triton.jit
    def total(bufs: cp.Multicast, offs):
        return tl.sum(bufs[offs], axis=0)

    @triton.jit
    def k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
        bufs = cp.multicast_like(out, table[:W], shape=(n,))
        tl.store(out + tl.arange(0, BLOCK), total(bufs, tl.arange(0, BLOCK)))

:class:`Helpers` finds those functions before the walk (a call may come before the ``def``), gives
the walk each parameter's binding (:meth:`Helpers.parameters`) and checks each call
(:meth:`Helpers.call`); after the walk, :meth:`Helpers.resolve` gives every parameter the element
dims of the tensors it receives (through other helpers too) and checks the accesses made through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from . import diagnostics
from .plan import Access, Binding, HelperCall, MulticastParam, Plan
from .scopes import Resolver, Scope, is_triton_jit
from .stack_masks import Aranges, passed_per_buffer

MULTICAST = "castpile.Multicast"


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


@dataclass
class _Signature:
    """A module-level jit function: its parameters that take arguments by position, those that take them by
    keyword only, and its Multicast parameters by name."""

    name: str
    positional: list[str]
    keyword_only: list[str]
    multicast: dict[str, MulticastParam] = field(default_factory=dict)


def _parameters(params: cst.Parameters) -> list[cst.Param]:
    return [*params.posonly_params, *params.params, *params.kwonly_params]


class Helpers:
    """The module's jit functions with Multicast parameters, their calls, and what each parameter receives."""

    def __init__(self, module: cst.Module, module_scope: Scope, plan: Plan):
        self.plan = plan
        self.module_resolver = Resolver([module_scope])
        self.constexpr = _constexpr_spelling(module_scope)
        self.functions: dict[str, _Signature] = {}
        self.received: dict[MulticastParam, list[tuple[cst.CSTNode, Binding]]] = {}
        self.bindings: dict[MulticastParam, Binding] = {}  # what the accesses inside each function see
        self.accesses: list[Access] = []  # through Multicast parameters, index counts checked once dims are known
        self.atomics: list[tuple[cst.Call, str, Access]] = []  # refused once a parameter is known to be remote=
        # masks of accesses through parameters that reach aranges their indices do not: per buffer at some call?
        self.masks: list[tuple[cst.BaseExpression, str, Access, dict[str, cst.Call]]] = []
        # per parameter, each call's arguments by parameter name, the tensor it passes and the caller's aranges
        self.calls: dict[MulticastParam, list[tuple[dict[str, cst.BaseExpression], Binding, Aranges]]] = {}
        defined: dict[str, list[cst.FunctionDef]] = {}
        for statement in module.body:
            if isinstance(statement, cst.FunctionDef):
                defined.setdefault(statement.name.value, []).append(statement)
        for name, defs in defined.items():
            bound_otherwise = name in module_scope.imports or name in module_scope.aliases
            if len(defs) == 1 and not bound_otherwise and any(is_triton_jit(d) for d in defs[0].decorators):
                self.functions[name] = self._signature(defs[0])

    def _signature(self, func: cst.FunctionDef) -> _Signature:
        params = func.params
        signature = _Signature(
            func.name.value,
            [p.name.value for p in (*params.posonly_params, *params.params)],
            [p.name.value for p in params.kwonly_params],
        )
        for param in _parameters(params):
            if is_multicast(param.annotation, self.module_resolver):
                signature.multicast[param.name.value] = MulticastParam(
                    param, func.name.value, param.name.value, self.constexpr
                )
        return signature

    # -- definitions ---------------------------------------------------------------------

    def parameters(self, func: cst.FunctionDef, resolver: Resolver, top_level: bool) -> dict[str, Binding]:
        """The bindings of ``func``'s Multicast parameters (``resolver``: the scopes around it), each planned
        to be rewritten; a misplaced annotation is an error."""
        annotated = [
            p
            for p in (*_parameters(func.params), func.params.star_arg, func.params.star_kwarg)
            if isinstance(p, cst.Param) and is_multicast(p.annotation, resolver)
        ]
        if not annotated:
            return {}
        name = func.name.value
        first_annotation = annotated[0].annotation
        assert first_annotation is not None  # is_multicast(None) is False
        if not any(is_triton_jit(d) for d in func.decorators):
            self.plan.error(
                first_annotation, diagnostics.MULTICAST_PARAM_NOT_JIT, function=name, param=annotated[0].name.value
            )
            return {}
        for param in annotated:
            if param.star in ("*", "**"):
                self.plan.error(param, diagnostics.MULTICAST_PARAM_STARRED, param=param.name.value)
        annotated = [param for param in annotated if param.star not in ("*", "**")]
        if not annotated:
            return {}
        signature = self.functions.get(name)
        if not top_level or signature is None or annotated[0] not in [p.node for p in signature.multicast.values()]:
            first_annotation = annotated[0].annotation
            assert first_annotation is not None
            self.plan.error(first_annotation, diagnostics.MULTICAST_HELPER_NOT_TOP_LEVEL, function=name)
            return {}
        bindings = {}
        for param in annotated:
            if param.default is not None:
                self.plan.error(param.default, diagnostics.MULTICAST_PARAM_DEFAULT, param=param.name.value)
            else:
                record = signature.multicast[param.name.value]
                self.plan.uses[param] = record
                self.received.setdefault(record, [])
                bindings[record.name] = self.bindings[record] = Binding(record.name, param, None, param=record)
        return bindings

    # -- calls ---------------------------------------------------------------------------

    def callee(self, func: cst.BaseExpression, resolver: Resolver) -> _Signature | None:
        """The module-level jit function that ``func`` names, unless an inner scope binds the name."""
        if not isinstance(func, cst.Name) or any(scope.bound(func.value) for scope in resolver.scopes[1:]):
            return None
        return self.functions.get(func.value)

    def call(
        self, node: cst.Call, signature: _Signature, multicast: dict[str, Binding], handled: set, aranges: Aranges
    ) -> None:
        """Check one call of ``signature``'s function (``multicast``: the tensors in scope at the call, ``aranges``:
        what the calling function's expressions reach); the arguments it judges go into ``handled``."""
        name = signature.name
        if any(arg.star for arg in node.args):
            if signature.multicast:
                self.plan.error(node, diagnostics.MULTICAST_CALL_STARRED, function=name)
            return
        bound: dict[str, int] = {}
        for k, arg in enumerate(node.args):
            if arg.keyword is not None:
                bound[arg.keyword.value] = k
            elif k < len(signature.positional):
                bound[signature.positional[k]] = k
        passed: dict[int, tuple[MulticastParam, Binding]] = {}
        ok = True
        parameters = {*signature.positional, *signature.keyword_only}
        for param, k in bound.items():
            value = node.args[k].value
            multicast_name = value.value if isinstance(value, cst.Name) and value.value in multicast else None
            if param not in parameters:
                continue  # an unknown keyword: Triton's to report (a multicast tensor there: the walk's)
            if param not in signature.multicast:
                if multicast_name is not None:
                    handled.add(value)
                    self.plan.error(
                        value, diagnostics.MULTICAST_TO_PLAIN_PARAM, name=multicast_name, param=param, function=name
                    )
                continue
            handled.add(value)
            record = signature.multicast[param]
            if multicast_name is None:
                ok = False
                self.plan.error(
                    value, diagnostics.NOT_MULTICAST_FOR_PARAM, param=param, function=name, code=_code(value)
                )
                continue
            binding = multicast[multicast_name]
            passed[k] = (record, binding)
            self.received.setdefault(record, []).append((value, binding))
            arguments = {name: node.args[j].value for name, j in bound.items()}
            self.calls.setdefault(record, []).append((arguments, binding, aranges))
        missing = [param for param in signature.multicast if param not in bound]
        for param in missing:
            ok = False
            self.plan.error(node, diagnostics.MULTICAST_PARAM_MISSING, function=name, param=param)
        if ok and passed:
            self.plan.uses[node] = HelperCall(node, passed)

    # -- after the walk ------------------------------------------------------------------

    def check_later(
        self,
        access: Access,
        count: bool = False,
        atomic: tuple[cst.Call, str] | None = None,
        mask: tuple[cst.BaseExpression, str, dict[str, cst.Call]] | None = None,
    ) -> None:
        """``access`` is made through a Multicast parameter: :meth:`resolve` checks its index ``count``, that the
        ``atomic`` call on it (its node and op) does not reach a ``remote=`` binding, or that the ``mask`` of a call
        on it (the mask, the op, the aranges it reaches that the indices do not) is not one flag per buffer of a
        tensor some call passes."""
        if count:
            self.accesses.append(access)
        if atomic is not None:
            self.atomics.append((*atomic, access))
        if mask is not None:
            self.masks.append((mask[0], mask[1], access, mask[2]))

    def resolve(self) -> None:
        """Every parameter's element dims, extents and ``remote`` from the tensors it receives (see :meth:`_layouts`),
        then the index counts of the accesses through parameters, atomics on ``remote=`` tensors, and masks of one
        flag per buffer of a tensor that a call binds and passes (see :func:`~.stack_masks.passed_per_buffer`)."""
        first_access: dict[MulticastParam, Access] = {}
        for access in self.accesses:
            param = access.binding.param
            assert param is not None  # the accesses collected here are those through parameters
            first_access.setdefault(param, access)
        layouts = self._layouts()
        for param in self.received:
            if param in layouts:
                (param.ndim, param.remote), shapes = layouts[param]
                param.shaped, param.shape_optional = True in shapes, shapes == {True, False}
                self.bindings[param].remote = param.remote
            elif param in first_access:  # never passed a tensor: its accesses say how many dims
                param.ndim = len(first_access[param].subscript.slice)
        for access in self.accesses:
            binding = access.binding
            count = len(access.subscript.slice)
            if count != binding.ndim:
                dims = f"{binding.ndim} element dim{'' if binding.ndim == 1 else 's'}"
                self.plan.error(
                    access.subscript,
                    diagnostics.MULTICAST_PARAM_INDEX_COUNT,
                    name=binding.name,
                    takes=f"{binding.ndim} ind{'ex' if binding.ndim == 1 else 'ices'}",
                    dims=dims,
                    given=count,
                )
        for node, op, access in self.atomics:
            if access.binding.remote is not None:
                self.plan.error(node, diagnostics.REMOTE_ATOMIC, op=op, name=access.binding.name)
        for mask, op, access, unindexed in self.masks:
            param = access.binding.param
            assert param is not None  # the masks collected here are those of accesses through parameters
            for arguments, binding, aranges in self.calls.get(param, ()):
                arange = passed_per_buffer(unindexed, arguments, binding, aranges)
                if arange is not None:
                    self.plan.error(mask, diagnostics.PER_BUFFER_MASK, op=op, name=param.name, arange=arange)
                    break

    def _layouts(self) -> dict[MulticastParam, tuple[tuple[int, str | None], set[bool]]]:
        """For each parameter that receives a tensor: ``((ndim, remote), shapes)``, ``shapes`` holding whether each
        tensor has a ``shape=``.  A call that passes a parameter on passes all its parameter receives, so the layouts
        grow until nothing changes (helpers that call each other included); a tensor whose element dims or
        ``remote=`` differ from the first one's is an error at its call."""
        layouts: dict[MulticastParam, tuple[tuple[int, str | None], set[bool]]] = {}
        refused: set[cst.CSTNode] = set()
        changed = True
        while changed:
            changed = False
            for param, received in self.received.items():
                for node, binding in received:
                    if binding.param is not None:
                        if binding.param not in layouts:
                            continue
                        kind, shapes = layouts[binding.param]
                    else:
                        kind, shapes = (binding.ndim, binding.remote), {binding.shape is not None}
                    if param not in layouts:
                        layouts[param] = (kind, set(shapes))
                        changed = True
                    elif kind != layouts[param][0]:
                        if node not in refused:
                            refused.add(node)
                            self.plan.error(
                                node,
                                diagnostics.MULTICAST_PARAM_LAYOUTS,
                                param=param.name,
                                function=param.function,
                                here=_describe(kind),
                                there=_describe(layouts[param][0]),
                            )
                    elif not shapes <= layouts[param][1]:
                        layouts[param][1].update(shapes)
                        changed = True
        return layouts


def _describe(kind: tuple[int, str | None]) -> str:
    ndim, remote = kind
    text = f"a tensor of {ndim} element dim{'' if ndim == 1 else 's'}"
    return text + (f" with remote={remote!r}" if remote is not None else " without remote=")


def is_multicast(annotation: cst.Annotation | None, resolver: Resolver) -> bool:
    """Whether ``annotation`` names ``castpile.Multicast`` (a string annotation that spells it too)."""
    if annotation is None:
        return False
    node = annotation.annotation
    if isinstance(node, cst.SimpleString):
        text = node.evaluated_value
        if not isinstance(text, str):  # a bytes literal names no type
            return False
        try:
            node = cst.parse_expression(text)
        except (cst.ParserSyntaxError, SyntaxError, ValueError):
            return False
    return resolver.qualified(node) == MULTICAST


def _constexpr_spelling(module_scope: Scope) -> str:
    """``tl.constexpr`` as the module can say it when a ``def`` runs: through its name for triton.language or
    triton, else a string annotation (which Triton reads as the same)."""
    for meanings, suffix in (("triton.language", "constexpr"), ("triton", "language.constexpr")):
        names = sorted(
            n
            for n, bound in module_scope.imports.items()
            if bound == {meanings} and n not in module_scope.aliases and n not in module_scope.other
        )
        if names:
            return f"{'tl' if 'tl' in names else names[0]}.{suffix}"
    return '"tl.constexpr"'
