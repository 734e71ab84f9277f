"""Scopes: what the names of each scope stand for, as far as castpile and Triton are concerned.

castpile resolves names itself instead of running libcst's qualified-name
provider over the whole file (seven times the cost of parsing): it reads what
each scope binds (imports, and assignments of a name or attribute chain), which
is all the contract needs::

    import castpile as cp                  # cp.multicast_like -> castpile.multicast_like
    from castpile import multicast_like    # multicast_like    -> castpile.multicast_like
    tl = triton.language                   # tl.max            -> triton.language.max
    mcl = cp.multicast_like                # mcl               -> castpile.multicast_like
    def k(multicast_like): ...             # a parameter shadows it: left alone

A name that one scope binds to different things (an import and a ``def``, other
imports under ``if`` and ``else``) stands for none of them; what an ``except``
handler binds does not count against a name its ``try`` body imported (an import
fallback).  A name a function declares ``global`` is the module's: what the function binds it
to counts as a binding of the module's name.  Names a star import may bind are not guessed.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

import libcst as cst

from .walk import Walker

CASTPILE_NAMES = ("multicast_like", "signal", "wait")
_OTHER = None  # what a name stands for when castpile does not follow its binding


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
    """What one scope binds: for each name imported, the qualified names it is bound to
    (``tl`` -> ``{"triton.language"}``); for each name assigned a name or attribute chain, those
    chains (``tl = triton.language``), read in this scope; the names bound to anything else;
    whether a star import may bind more; and the names a ``global`` statement gives to the module
    (which this scope then does not bind)."""

    imports: dict[str, set[str]] = field(default_factory=dict)
    aliases: dict[str, set[str]] = field(default_factory=dict)
    other: set[str] = field(default_factory=set)
    starred: bool = False
    declared_global: set[str] = field(default_factory=set)

    def add_import(self, node: cst.Import | cst.ImportFrom) -> None:
        """Record what one import statement binds."""
        if isinstance(node, cst.Import):
            for alias in node.names:
                name = dotted(alias.name) or ""
                if alias.asname is None:  # `import triton.language` binds `triton`
                    self._import(name.split(".")[0], name.split(".")[0])
                else:
                    self._import(cst.ensure_type(alias.asname.name, cst.Name).value, name)
            return
        if isinstance(node.names, cst.ImportStar):
            self.starred = True
            return
        module = dotted(node.module) if node.module is not None and not node.relative else None
        for alias in node.names:
            name = cst.ensure_type(alias.name, cst.Name).value  # `from m import a`: never dotted
            local = cst.ensure_type(alias.asname.name, cst.Name).value if alias.asname else name
            if module is None:  # a relative import: not followed
                self.other.add(local)
            else:
                self._import(local, f"{module}.{name}")

    def _import(self, local: str, qualified: str) -> None:
        self.imports.setdefault(local, set()).add(qualified)

    def add_alias(self, name: str, value: cst.BaseExpression) -> None:
        """``name = value``: a name or attribute chain is followed, anything else is not."""
        chain = dotted(value)
        if chain is None:
            self.other.add(name)
        else:
            self.aliases.setdefault(name, set()).add(chain)

    def bound(self, name: str) -> bool:
        """Whether this scope binds ``name`` at all."""
        if name in self.declared_global:
            return False
        return name in self.imports or name in self.aliases or name in self.other

    def merge(self, other: Scope, keep_out: AbstractSet[str] = frozenset()) -> None:
        """Add what ``other`` binds (a block walked apart), except the names in ``keep_out``."""
        for mine, theirs in ((self.imports, other.imports), (self.aliases, other.aliases)):
            for name, meanings in theirs.items():
                if name not in keep_out:
                    mine.setdefault(name, set()).update(meanings)
        self.other |= other.other - keep_out
        self.starred = self.starred or other.starred
        self.declared_global |= other.declared_global


class Resolver:
    """Resolves call targets inside one function, given the scopes that enclose it.

    ``scopes`` runs from the module's to the innermost function's; a name means
    what the innermost scope that binds it says (class bodies do not enclose).
    """

    def __init__(self, scopes: list[Scope]):
        self.scopes = scopes

    def inner(self, local: Scope) -> Resolver:
        """The resolver of a function nested in this one, whose own scope is ``local``."""
        return Resolver([*self.scopes, local])

    def _meanings(self, name: str, depth: int, following: frozenset) -> set[str | None]:
        """What ``name`` may stand for, seen from the scope ``scopes[depth - 1]`` (a qualified
        name, or ``None`` for anything castpile does not follow, an unbound name included)."""
        level = next((k for k in range(depth - 1, 0, -1) if self.scopes[k].bound(name)), 0)
        scope = self.scopes[level]
        if (level, name) in following:  # `tl = tl`: the binding being followed adds nothing
            return set()
        meanings: set[str | None] = set(scope.imports.get(name, ()))
        if name in scope.other or not scope.bound(name):
            meanings.add(_OTHER)
        for chain in scope.aliases.get(name, ()):
            head, _, rest = chain.partition(".")
            for meaning in self._meanings(head, level + 1, following | {(level, name)}):
                meanings.add(meaning if meaning is _OTHER or not rest else f"{meaning}.{rest}")
        return meanings

    def _chain_meanings(self, node: cst.BaseExpression) -> tuple[str | None, set[str | None]]:
        """The head name of a Name/Attribute chain and what the chain may stand for."""
        chain = dotted(node)
        if chain is None:
            return None, {_OTHER}
        head, _, rest = chain.partition(".")
        meanings = self._meanings(head, len(self.scopes), frozenset())
        return head, {m if m is _OTHER or not rest else f"{m}.{rest}" for m in meanings}

    def qualified(self, node: cst.BaseExpression) -> str | None:
        """What a name or attribute chain stands for (``triton.language.max``), when every binding
        that could be in force agrees; else ``None``."""
        _, meanings = self._chain_meanings(node)
        return next(iter(meanings)) if len(meanings) == 1 else None

    def castpile(self, func: cst.BaseExpression) -> str | None:
        """``"multicast_like"``/``"signal"``/``"wait"`` when ``func`` names castpile's."""
        module, _, member = (self.qualified(func) or "").rpartition(".")
        return member if module == "castpile" and member in CASTPILE_NAMES else None

    def triton_language(self, func: cst.BaseExpression) -> str | None:
        """``"load"`` for ``tl.load``, ``triton.language.load``, ``ld`` from
        ``from triton.language import load as ld`` or ``ld = tl.load``, else ``None``."""
        module, _, member = (self.qualified(func) or "").rpartition(".")
        return member if module == "triton.language" else None

    def ambiguous(self, func: cst.BaseExpression) -> tuple[str, str] | None:
        """``(head, meaning)`` when the head of ``func`` may stand for ``triton`` or something in it
        (``meaning``: ``triton.language``, ``triton.language.load``) and also for something else, so
        castpile cannot tell what ``func`` calls."""
        chain = dotted(func)
        if chain is None:
            return None
        head = chain.partition(".")[0]
        meanings = self._meanings(head, len(self.scopes), frozenset())
        known = sorted(m for m in meanings if m is not _OTHER and (m == "triton" or m.startswith("triton.")))
        return (head, known[0]) if known and len(meanings) > 1 else None

    def missing_import(self, func: cst.BaseExpression) -> tuple[str, str] | None:
        """``(name, import)`` when ``func`` spells one of castpile's names (``multicast_like``,
        ``castpile.signal``, ``cp.wait``) through a name that no scope binds and no star import may bind:
        ``name`` is that name, ``import`` the statement to add."""
        chain = dotted(func)
        if chain is None or any(scope.bound(chain.partition(".")[0]) or scope.starred for scope in self.scopes):
            return None
        if chain in CASTPILE_NAMES:
            return chain, f"from castpile import {chain}"
        head, _, rest = chain.partition(".")
        if rest in CASTPILE_NAMES:
            return head, "import castpile" if head == "castpile" else f"import castpile as {head}"
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


def collect_globals(module: cst.Module, scope: Scope) -> None:
    """Add to the module's ``scope`` (collected by :func:`collect_scope`) what any function that declares a name
    ``global`` binds that name to (``def setup(): global wait; from castpile import wait``)."""
    scope.declared_global.clear()  # `global` at the top level changes nothing
    _GlobalsCollector(scope).walk(module)


class _GlobalsCollector(Walker):
    """Adds to the module's scope what each function, at any depth, binds the names it declares ``global`` to."""

    def __init__(self, scope: Scope):
        super().__init__()
        self.scope = scope

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        local = Scope()
        collect_scope(node.body.body, local)
        if local.declared_global:
            bound = set(local.imports) | set(local.aliases) | local.other
            self.scope.merge(replace(local, declared_global=set()), keep_out=bound - local.declared_global)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        return False  # no function is defined inside a simple statement (a lambda declares nothing global)


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

    def visit_Global(self, node: cst.Global) -> None:
        self.scope.declared_global.update(item.name.value for item in node.names)

    def visit_Try(self, node: cst.Try) -> bool:
        """``try: import triton.language as tl`` ``except ImportError: tl = None``: the fallback does not shadow tl."""
        body = Scope()
        collect_scope(node.body.body, body)
        fallbacks = Scope()
        for handler in node.handlers:
            collect_scope(handler.body.body, fallbacks)
            if handler.name is not None:
                _ScopeCollector(fallbacks).walk(handler.name)
        self.scope.merge(body)
        self.scope.merge(fallbacks, keep_out=set(body.imports))
        for block in (node.orelse, node.finalbody):
            if block is not None:
                self.walk(block)
        return False

    def _targets(self, target: cst.BaseExpression, value: cst.BaseExpression | None = None) -> None:
        """``target`` bound to ``value`` (``None``: to something castpile does not follow)."""
        if isinstance(target, cst.Name):
            if value is None:
                self.scope.other.add(target.value)
            else:
                self.scope.add_alias(target.value, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._targets(element.value)
        elif isinstance(target, cst.StarredElement):
            self._targets(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._targets(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._targets(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._targets(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._targets(node.target, node.value)

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:  # case x, case [*_] as x
            self._targets(node.name)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self._targets(node.name)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:  # case {**rest}
            self._targets(node.rest)
