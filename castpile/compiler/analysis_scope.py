"""The analysis walk's scope model: the jit function being walked, its multicast bindings, and what is pure.

:class:`ScopeModel` is the base of the analysis walk (:mod:`castpile.compiler.analyse`): it
enters and leaves functions and lambdas, keeps the name resolvers and the bindings of the
enclosing jit function (those the walk has passed, and those still ahead), and answers
whether an expression is a multicast access, a multicast tensor's name, or pure.
"""

from __future__ import annotations

from typing import TypeGuard

import libcst as cst

from . import diagnostics
from .bindings import JitBindings
from .contract import PURE_TL_CALLS
from .index_facts import IndexFacts
from .passing import Helpers
from .plan import Access, Binding, Plan
from .scopes import Resolver, Scope, collect_scope, is_constexpr_annotation, is_triton_jit
from .stack_masks import Aranges
from .walk import Walker


class ScopeModel(Walker):
    """Walks the module keeping the scopes and the multicast bindings of the jit function being walked."""

    def __init__(self, module_scope: Scope, plan: Plan, helpers: Helpers):
        super().__init__()
        self.module_scope = module_scope
        self.plan = plan
        self.helpers = helpers
        self.handled_args: set[cst.CSTNode] = set()  # arguments of helper calls, judged by Helpers.call
        self.module_constexprs: set[str] = set()
        self.resolvers: list[Resolver] = [Resolver([module_scope])]
        self.frames: list[dict[str, Binding] | None] = [None]  # bindings of the enclosing jit function, once passed
        self.ahead: list[dict[str, cst.Assign]] = [{}]  # bindings the walk has not passed yet, by name
        self.arange_frames: list[Aranges | None] = [None]  # what the jit function's expressions reach
        self.fact_frames: list[IndexFacts | None] = [None]  # what the jit function's indices are proven to be
        self.binding_loops: dict[cst.Assign, frozenset[cst.CSTNode]] = {}
        self.binding_walked: cst.Assign | None = None  # the binding whose arguments are being walked
        self.binding_assigns: set[cst.Assign] = set()
        self.owned: set[cst.CSTNode] = set()  # accesses and loads lowered with the use around them
        self.reported: set[cst.CSTNode] = set()  # names with an error already: one diagnostic per mistake
        self.ambiguous_reported: set[str] = set()  # Triton names bound to two things, reported once each
        self.accesses: dict[cst.Subscript, Access] = {}
        self.constexprs: set[str] = set()  # of the jit function being walked

    @property
    def resolver(self) -> Resolver:
        return self.resolvers[-1]

    @property
    def bindings(self) -> dict[str, Binding] | None:
        return self.frames[-1]

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
        top_level = len(self.ancestors) == 1 and isinstance(self.ancestors[0], cst.Module)
        passed = self.helpers.parameters(node, self.resolver, top_level)
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
            self.frames.append(passed)
            self.ahead.append(
                {
                    binding.name: binding.node
                    for binding in found.bindings.values()
                    if isinstance(binding.node, cst.Assign)
                }
            )  # every one: JitBindings binds assignments
            self.arange_frames.append(Aranges(self.resolver, found.values))
            self.fact_frames.append(IndexFacts(self.resolver, found.assignments, {p.name.value for p in params}))
        else:
            self.frames.append(None)
            self.ahead.append({})
            self.arange_frames.append(None)
            self.fact_frames.append(None)
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
            self.plan.error(remote[0].node, diagnostics.REMOTE_KERNEL_NESTED, kernel=node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._leave_function()

    def _leave_function(self) -> None:
        self.resolvers.pop()
        self.frames.pop()
        self.ahead.pop()
        self.arange_frames.pop()
        self.fact_frames.pop()

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        self._enter_function(node.params, [cst.Expr(node.body)])
        self.frames.append(None)
        self.ahead.append({})
        self.arange_frames.append(None)
        self.fact_frames.append(None)
        return True

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._leave_function()

    def enclosing_binding(self, node: cst.BaseExpression) -> bool:
        """Whether ``node`` names a multicast tensor of an enclosing jit function from a nested function."""
        if not isinstance(node, cst.Name) or self.bindings is not None or self.resolver.scopes[-1].bound(node.value):
            return False
        return any(frame and node.value in frame for frame in self.frames)

    def access(self, node: cst.BaseExpression) -> Access | None:
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

    def bound_later_in_this_loop(self, node: cst.Name) -> bool:
        """Whether the walk has not passed the binding of ``node`` yet but is in a loop around it."""
        binding = self.ahead[-1].get(node.value)
        if binding is None:
            return False
        loops = self.binding_loops[binding]
        return any(ancestor in loops for ancestor in self.ancestors)

    def is_multicast_name(self, node: cst.CSTNode) -> TypeGuard[cst.Name]:
        bindings = self.bindings
        return bindings is not None and isinstance(node, cst.Name) and node.value in bindings

    def pure(self, node: cst.BaseExpression) -> bool:
        """Free of side effects and cheap to repeat: names, literals, operators, ``x[:, None]``, ``tl.arange``, the
        hints (``tl.multiple_of``...), and ``x.to(dtype)`` of those."""
        if isinstance(node, (cst.Name, cst.Integer, cst.Float, cst.Ellipsis, cst.SimpleString)):
            return not self.is_multicast_name(node)
        if isinstance(node, cst.Attribute):
            return self.pure(node.value)
        if isinstance(node, cst.UnaryOperation):
            return self.pure(node.expression)
        if isinstance(node, (cst.BinaryOperation, cst.BooleanOperation)):
            return self.pure(node.left) and self.pure(node.right)
        if isinstance(node, cst.Comparison):
            return self.pure(node.left) and all(self.pure(c.comparator) for c in node.comparisons)
        if isinstance(node, cst.Subscript):
            if self.access(node) is not None or not self.pure(node.value):
                return False
            for element in node.slice:
                part = element.slice
                if isinstance(part, cst.Index):
                    if not self.pure(part.value):
                        return False
                elif isinstance(part, cst.Slice) and any(
                    b is not None and not self.pure(b) for b in (part.lower, part.upper, part.step)
                ):
                    return False
            return True
        if isinstance(node, cst.Call):
            if (
                isinstance(node.func, cst.Attribute)
                and node.func.attr.value == "to"
                and not self.resolver.triton_language(node.func)
            ):  # a cast
                return self.pure(node.func.value) and all(a.star == "" and self.pure(a.value) for a in node.args)
            return self.resolver.triton_language(node.func) in PURE_TL_CALLS and all(
                a.star == "" and self.pure(a.value) for a in node.args
            )
        return False

    def own(self, access: Access) -> None:
        """``access`` is lowered by the statement or call around it, not as a load."""
        self.owned.add(access.subscript)
