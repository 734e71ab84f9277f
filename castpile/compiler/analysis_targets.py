"""The analysis walk's target checks: where a multicast tensor or access may not stand.

Assignment, loop, comprehension and ``with`` targets, ``del``, annotated assignments,
f-strings, bare names and call arguments: each misuse is reported at its node.
"""

from __future__ import annotations

import libcst as cst

from . import diagnostics
from .analysis_scope import ScopeModel
from .walk import Walker


class TargetChecks(ScopeModel):
    """The scope model, and a diagnostic for each place a multicast tensor or access cannot be lowered."""

    def refuse_targets(self, target: cst.BaseExpression | None, where: str) -> None:
        """Multicast accesses and tensors inside a target that castpile cannot lower."""
        if target is None:
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.refuse_targets(element.value, where)
        elif isinstance(target, cst.StarredElement):
            self.refuse_targets(target.value, where)
        elif self.is_multicast_name(target):
            self.reported.add(target)
            self.plan.error(target, diagnostics.REASSIGNED, name=target.value)
        elif (access := self.access(target)) is not None:
            self.own(access)
            self.plan.error(target, diagnostics.ACCESS_AS_TARGET, where=where, name=access.binding.name)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
        access = self.access(node.target)
        if self.is_multicast_name(node.target) or access is not None:
            self.reported.add(node.target)
            self.plan.error(node.target, diagnostics.ANNOTATED)
        if access is not None:
            self.own(access)
        return True

    def visit_Del(self, node: cst.Del) -> bool:
        if self.bindings:
            if isinstance(node.target, (cst.Tuple, cst.List)):
                targets = [element.value for element in node.target.elements]
            else:
                targets = [node.target]
            for target in targets:
                if self.is_multicast_name(target) or self.access(target) is not None:
                    self.plan.error(target, diagnostics.DELETED)
        return False

    def visit_For(self, node: cst.For) -> bool:
        self.refuse_targets(node.target, "a for loop")
        return True

    def visit_CompFor(self, node: cst.CompFor) -> bool:
        self.refuse_targets(node.target, "a comprehension")
        return True

    def visit_WithItem(self, node: cst.WithItem) -> bool:
        if node.asname is not None:
            self.refuse_targets(node.asname.name, "a with statement")
        return True

    def visit_FormattedString(self, node: cst.FormattedString) -> bool:
        if self.bindings:
            finder = _NamesIn(set(self.bindings))
            finder.walk(node)
            for name in finder.found:
                self.plan.error(name, diagnostics.IN_FSTRING, name=name.value)
            return not finder.found
        return True

    def visit_Name(self, node: cst.Name) -> None:
        if node in self.reported:
            return
        if self.is_multicast_name(node):
            self.plan.error(node, diagnostics.SUBSCRIPT_ONLY, name=node.value)
        elif self.bound_later_in_this_loop(node):
            in_its_own = self.binding_walked is not None
            message = diagnostics.USED_IN_OWN_BINDING_IN_LOOP if in_its_own else diagnostics.USED_BEFORE_BINDING_IN_LOOP
            self.plan.error(node, message, name=node.value)
        elif self.enclosing_binding(node):
            self.plan.error(node, diagnostics.NESTED_USE, name=node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)
        return False

    def visit_Param(self, node: cst.Param) -> bool:
        for part in (node.annotation, node.default):  # its name is a definition, not a use
            if part is not None:
                self.walk(part)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        if node.value in self.handled_args:
            return False
        if self.is_multicast_name(node.value):
            name = node.value.value
            self.plan.error(node.value, diagnostics.PASSED, name=name)
            return False
        self.walk(node.value)
        return False


class _NamesIn(Walker):
    """The ``Name`` nodes among ``names`` inside a subtree."""

    def __init__(self, names: set[str]):
        super().__init__()
        self.names = names
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.found.append(node)
