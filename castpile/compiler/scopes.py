"""Scopes: which names mean castpile, triton and triton.language where.

castpile resolves names itself instead of running libcst's qualified-name
provider over the whole file (seven times the cost of parsing): it reads the
import statements and the bindings of each scope, which is all the contract
needs::

    import castpile as cp                  # cp.multicast_like -> "multicast_like"
    from castpile import multicast_like    # multicast_like    -> "multicast_like"
    def k(multicast_like): ...             # a parameter shadows it: left alone

A module-level name that is also bound to anything else (a local
``def multicast_like``) is not castpile's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .walk import Walker

CASTPILE_NAMES = ("multicast_like", "signal", "wait")


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else ``None``."""
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


@dataclass
class Scope:
    """The castpile/triton-related bindings of one scope, and the names it binds otherwise."""

    castpile_modules: set[str] = field(default_factory=set)
    castpile_names: dict[str, str] = field(default_factory=dict)
    tl_modules: set[str] = field(default_factory=set)
    tl_names: dict[str, str] = field(default_factory=dict)  # from triton.language import load as ld
    triton_modules: set[str] = field(default_factory=set)
    other: set[str] = field(default_factory=set)

    def add_import(self, node: cst.Import | cst.ImportFrom) -> None:
        """Record what one import statement binds."""
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = dotted(alias.name) or ""
                local = alias.asname.name.value if alias.asname else name.split(".")[0]
                if alias.asname is None:
                    # `import triton.language` binds `triton`; `import castpile.x` binds `castpile`.
                    {"castpile": self.castpile_modules, "triton": self.triton_modules}.get(
                        name.split(".")[0], self.other
                    ).add(local)
                elif name == "castpile":
                    self.castpile_modules.add(local)
                elif name == "triton.language":
                    self.tl_modules.add(local)
                elif name == "triton":
                    self.triton_modules.add(local)
                else:
                    self.other.add(local)
            return
        module = dotted(node.module) if node.module is not None and not node.relative else None
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = alias.name.value if isinstance(alias.name, cst.Name) else dotted(alias.name)
            local = alias.asname.name.value if alias.asname else name
            if module == "castpile" and name in CASTPILE_NAMES:
                self.castpile_names[local] = name
            elif module == "triton" and name == "language":
                self.tl_modules.add(local)
            elif module == "triton.language":
                self.tl_names[local] = name
            else:
                self.other.add(local)

    def bound(self, name: str) -> bool:
        """Whether this scope binds ``name`` at all."""
        return (
            name in self.other
            or name in self.castpile_modules
            or name in self.castpile_names
            or name in self.tl_modules
            or name in self.tl_names
            or name in self.triton_modules
        )


class Resolver:
    """Resolves call targets inside one function, given the scopes that enclose it.

    ``scopes`` runs from the module's to the innermost function's; a name means
    what the innermost scope that binds it says (class bodies do not enclose).
    A name that a scope binds to anything besides castpile or triton is not theirs.
    """

    def __init__(self, scopes: list[Scope]):
        self.scopes = scopes

    def inner(self, local: Scope) -> "Resolver":
        """The resolver of a function nested in this one, whose own scope is ``local``."""
        return Resolver([*self.scopes, local])

    def _scope_of(self, name: str) -> Scope | None:
        for scope in reversed(self.scopes[1:]):
            if scope.bound(name):
                return None if name in scope.other else scope
        module = self.scopes[0]
        return None if name in module.other else module

    def castpile(self, func: cst.BaseExpression) -> str | None:
        """``"multicast_like"``/``"signal"``/``"wait"`` when ``func`` names castpile's."""
        name = dotted(func)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        scope = self._scope_of(head)
        if scope is None:
            return None
        if not rest:
            return scope.castpile_names.get(head)
        if head in scope.castpile_modules and rest in CASTPILE_NAMES:
            return rest
        return None

    def triton_language(self, func: cst.BaseExpression) -> str | None:
        """``"load"`` for ``tl.load``, ``triton.language.load`` or ``ld`` from
        ``from triton.language import load as ld``, else ``None``."""
        name = dotted(func)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        scope = self._scope_of(head)
        if scope is None:
            return None
        if not rest:
            return scope.tl_names.get(head)
        if head in scope.tl_modules and "." not in rest:
            return rest
        if head in scope.triton_modules and rest.startswith("language.") and rest.count(".") == 1:
            return rest.split(".")[1]
        return None


def is_triton_jit(decorator: cst.Decorator) -> bool:
    """``@triton.jit``, ``@jit`` or ``@triton.jit(...)``."""
    expr = decorator.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    name = dotted(expr)
    return name is not None and name.split(".")[-1] == "jit"


def is_constexpr_annotation(annotation: cst.Annotation | None) -> bool:
    """``tl.constexpr``, ``triton.language.constexpr`` or ``constexpr``."""
    if annotation is None:
        return False
    name = dotted(annotation.annotation)
    return name is not None and name.split(".")[-1] == "constexpr"


def collect_scope(body, scope: Scope) -> None:
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
