"""Bindings: the multicast tensors a jit function binds, checked against the contract.

One :class:`JitBindings` per ``@triton.jit`` function: each
``name = multicast_like(...)`` becomes a :class:`~castpile.compiler.plan.Binding` in the
plan (table slice, one peer ``table[r]``, or tile form; the example a pointer or a dtype),
a name bound once to a table slice or entry (``tile = dev_ptrs[:W]``, ``tile = dev_ptrs[r]``)
passed as ``ptr_tile`` becomes a :class:`~castpile.compiler.plan.SliceAlias`, and every
problem a located error.  The
function's constexpr names grow by its ``tl.static_range`` loop variables and
its names annotated ``tl.constexpr``.

A binding's arguments are evaluated where it stands: each binding records the names
its arguments use that the function assigns at or after it (``Binding.rebound``),
which lowering copies at the binding, and the loops around it (``loops``), in which
its name may not be used before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from . import diagnostics
from .algebra import simplify
from .contract import (
    BINDING_KEYWORDS,
    REMOTE_BACKENDS,
    TRITON_DTYPES,
    argument_positions,
    constexpr_ok,
    is_literal,
    literal_int,
)
from .plan import Binding, Plan, SliceAlias
from .scopes import Resolver, is_constexpr_annotation
from .walk import Walker, names_in


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _is_none(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def table_slice(tile: cst.BaseExpression) -> cst.Slice | None:
    """The slice of ``table[lo:hi]``, else ``None``."""
    if isinstance(tile, cst.Subscript) and len(tile.slice) == 1 and isinstance(tile.slice[0].slice, cst.Slice):
        return tile.slice[0].slice
    return None


def table_entry(tile: cst.BaseExpression) -> cst.Index | None:
    """The index of ``table[r]`` (one peer), or the first of ``table[a, b]`` (which the binding refuses), else
    ``None`` (``x[None, :]`` is a tensor with a dim added, not a table entry)."""
    if not isinstance(tile, cst.Subscript):
        return None
    indices = [e.slice for e in tile.slice if isinstance(e.slice, cst.Index)]
    if len(indices) < len(tile.slice):
        return None
    if any(isinstance(index.value, cst.Name) and index.value.value == "None" for index in indices):
        return None
    return indices[0]


_NOT_A_RANK = (
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Float,
    cst.Imaginary,
    cst.Ellipsis,
    cst.Tuple,
    cst.List,
    cst.Dict,
    cst.Set,
)


def _wrong_align(node: cst.BaseExpression) -> bool:
    """Whether ``align=`` is a literal that is no power-of-two integer (a negative number, a string, ``True``...);
    any other expression is a compile-time value, checked when Triton compiles the binding (v1.3)."""
    align = literal_int(node)
    return is_literal(node) and (align is None or align <= 0 or bool(align & (align - 1)))


class JitBindings:
    """The bindings of one jit function (``bindings`` by name, their statements in ``assigns``, the loops
    around each in ``loops``), and every name's assigning statements (``assignments``)."""

    def __init__(self, func: cst.FunctionDef, resolver: Resolver, constexprs: set[str], plan: Plan):
        finder = _BindingFinder(resolver)
        finder.walk(func.body)
        self.plan = plan
        self.resolver = resolver
        self.constexprs = constexprs | finder.constexprs
        self.assigns = set(finder.found)
        self.values = finder.values
        self.assignments = {name: [statement for statement, _ in found] for name, found in finder.assignments.items()}
        self.bindings: dict[str, Binding] = {}
        self.loops = {assign: finder.sites[assign].loops for assign in finder.found}
        self._finder = finder
        bindings = self.bindings
        for assign in finder.found:
            target = assign.targets[0].target
            if len(assign.targets) != 1 or not isinstance(target, cst.Name):
                plan.error(assign, diagnostics.BINDING_NOT_PLAIN)
                continue
            name = target.value
            if name in bindings:
                plan.error(assign, diagnostics.BOUND_TWICE, name=name)
                continue
            binding = self._binding(name, assign)
            if binding is not None:
                bindings[name] = binding
                self.plan.uses[assign] = binding

    def _binding(self, name: str, assign: cst.Assign) -> Binding | None:
        call = cst.ensure_type(assign.value, cst.Call)  # the finder collects `name = multicast_like(...)` only
        positions, problems = argument_positions(call, BINDING_KEYWORDS, 0)
        args = {key: call.args[position].value for key, position in positions.items()}
        for problem, params in problems:
            self.plan.error(call, problem, call="multicast_like", **params)
        for required in ("example", "ptr_tile"):
            if required not in args:
                self.plan.error(call, diagnostics.MISSING_ARGUMENT, call="multicast_like", keyword=required)
        if problems or "example" not in args or "ptr_tile" not in args:
            return None
        binding = Binding(name, assign, args["example"])
        ok = self._example(binding)
        tile = args["ptr_tile"]
        alias = None
        if isinstance(tile, cst.Name) and tile.value in self._finder.slice_names:
            alias = self._finder.only_slice_reaching(tile.value, assign)
            if alias is None:
                what, spelled = (
                    ("entry", "table[r]") if tile.value in self._finder.entry_names else ("slice", "table[lo:hi]")
                )
                self.plan.error(tile, diagnostics.SLICE_NAME_REACHED, name=tile.value, what=what, spelled=spelled)
                return None
        if alias is not None:
            tile = alias.value
        slice_, entry = table_slice(tile), table_entry(tile)
        if slice_ is not None:
            assert isinstance(tile, cst.Subscript)  # what table_slice found its slice in
            ok = self._table_form(binding, tile, slice_) and ok
            if ok and alias is not None:
                assert binding.table is not None  # _table_form sets it
                self.plan.uses[alias] = SliceAlias(alias, binding.table, binding.lo)
                binding.start = cst.ensure_type(args["ptr_tile"], cst.Name)  # the name an alias is reached through
        elif entry is not None:
            assert isinstance(tile, cst.Subscript)  # what table_entry found its index in
            ok = self._peer_form(binding, tile, entry) and ok
            if ok and alias is not None:
                assert binding.peer_table is not None  # _peer_form sets it
                self.plan.uses[alias] = SliceAlias(alias, binding.peer_table, None, binding.peer)
                binding.start = cst.ensure_type(args["ptr_tile"], cst.Name)  # the name an alias is reached through
        else:
            binding.tile = tile
        if "ptr_mask" in args and not _is_none(args["ptr_mask"]):
            binding.ptr_mask = args["ptr_mask"]
        for key in ("shape", "strides"):
            if key in args:
                value = args[key]
                if _is_none(value):
                    continue
                if (
                    not isinstance(value, cst.Tuple)
                    or not value.elements
                    or any(isinstance(e, cst.StarredElement) for e in value.elements)
                ):
                    self.plan.error(value, diagnostics.NOT_A_TUPLE, keyword=key)
                    ok = False
                    continue
                setattr(binding, key, [e.value for e in value.elements])
        if binding.shape is not None and binding.strides is not None and len(binding.shape) != len(binding.strides):
            self.plan.error(
                args["strides"], diagnostics.STRIDES_LENGTH, strides=len(binding.strides), shape=len(binding.shape)
            )
            ok = False
        if "align" in args and not _is_none(args["align"]):
            if _wrong_align(args["align"]):
                self.plan.error(args["align"], diagnostics.ALIGN)
                ok = False
            binding.align = args["align"]
        remote = args.get("remote")
        if remote is not None and not _is_none(remote):
            ok = self._remote(binding, remote) and ok
        evaluated = [args[key] for key in ("example", "shape", "strides", "ptr_mask", "align") if key in args]
        evaluated.append(tile)
        binding.rebound = frozenset(self._finder.rebound(assign, name, names_in(*evaluated)))
        binding.constexpr_rebound = binding.rebound & self.constexprs
        return binding if ok else None

    def _example(self, binding: Binding) -> bool:
        """A pointer, or (v1.2) a dtype of ``triton.language`` through any of its names: the buffers' element type;
        (v1.3) a constexpr name (a ``tl.constexpr`` parameter) holds no pointer, so it holds that dtype."""
        example = binding.example
        assert example is not None  # a multicast_like binding's first argument
        module, _, member = (self.resolver.qualified(example) or "").rpartition(".")
        if (module == "triton.language" and member in TRITON_DTYPES) or (
            isinstance(example, cst.Name) and example.value in self.constexprs
        ):
            binding.dtype = example
        elif isinstance(example, cst.Call) and self.resolver.triton_language(example.func) == "pointer_type":
            self.plan.error(example, diagnostics.EXAMPLE_POINTER_TYPE)
            return False
        return True

    def _peer_form(self, binding: Binding, tile: cst.Subscript, entry: cst.Index) -> bool:
        """``table[r]``: one peer, the buffer whose address is entry ``r`` of the table (v1.2)."""
        if len(tile.slice) != 1 or entry.star is not None:
            self.plan.error(tile, diagnostics.ENTRY_INDICES)
            return False
        value = entry.value
        if isinstance(value, _NOT_A_RANK) or (isinstance(value, cst.Name) and value.value in ("True", "False")):
            self.plan.error(value, diagnostics.NOT_AN_ENTRY, code=_code(value))
            return False
        binding.peer_table, binding.peer = tile.value, value
        return True

    def _remote(self, binding: Binding, value: cst.BaseExpression) -> bool:
        """``remote="nvshmem"``: a string literal naming a backend, on a table slice or entry."""
        name = value.evaluated_value if isinstance(value, cst.SimpleString) else None
        if name not in REMOTE_BACKENDS:
            self.plan.error(value, diagnostics.REMOTE_BACKEND, backends=" or ".join(map(repr, REMOTE_BACKENDS)))
            return False
        if binding.table is None and binding.peer_table is None:
            self.plan.error(value, diagnostics.REMOTE_NEEDS_TABLE)
            return False
        binding.remote = name
        return True

    def _table_form(self, binding: Binding, tile: cst.Subscript, slice_: cst.Slice) -> bool:
        binding.table = tile.value
        binding.lo, binding.hi = slice_.lower, slice_.upper
        if slice_.step is not None:
            self.plan.error(slice_.step, diagnostics.SLICE_STEP)
            return False
        if slice_.upper is None:
            self.plan.error(tile, diagnostics.SLICE_UNBOUNDED)
            return False
        ok = True
        for bound in (slice_.lower, slice_.upper):
            if bound is not None and not constexpr_ok(bound, self.constexprs):
                self.plan.error(bound, diagnostics.SLICE_NOT_CONSTEXPR)
                ok = False
        if ok:
            lo = _code(slice_.lower) if slice_.lower is not None else "0"
            count = simplify(f"({_code(slice_.upper)}) - ({lo})")
            if count.lstrip("-").isdigit() and int(count) <= 0:
                self.plan.error(tile, diagnostics.SLICE_EMPTY, count=max(int(count), 0))
                ok = False
        return ok


@dataclass(frozen=True)
class _Site:
    """Where an assignment or a use of a name stands: its place in source order and the loops around it."""

    order: int
    loops: frozenset[cst.CSTNode]

    def may_reach(self, later: _Site) -> bool:
        """Whether a value assigned here may be the one seen at ``later``: it comes first, or a loop holds both."""
        return self.order < later.order or bool(self.loops & later.loops)

    def may_run_between(self, binding: _Site, use: _Site) -> bool:
        """Whether an assignment here may run after ``binding`` and before ``use``: it stands after the binding,
        and before the use or in a loop around the use that the binding is not in."""
        return self.order > binding.order and (self.order < use.order or bool((self.loops & use.loops) - binding.loops))


class _BindingFinder(Walker):
    """What a jit function's body binds: multicast_like assignments, table-slice names, constexpr names.

    ``sites`` places every assignment statement, ``assignments`` every name's assignments (``values``:
    the expressions assigned to it, an augmented assignment's operand among them) and
    ``mentions`` every other occurrence of a name (a name bound to ``table[lo:hi]`` may stand
    for that slice where no other assignment reaches); ``constexprs`` holds ``tl.static_range``
    loop variables and names annotated ``tl.constexpr``.  Nested functions are not entered.
    """

    def __init__(self, resolver: Resolver):
        super().__init__()
        self.resolver = resolver
        self.found: list[cst.Assign] = []
        self.slice_names: set[str] = set()  # names assigned a table slice or entry
        self.entry_names: set[str] = set()  # names assigned a table entry
        self.sites: dict[cst.CSTNode, _Site] = {}
        self.assignments: dict[str, list[tuple[cst.CSTNode, _Site]]] = {}
        self.values: dict[str, list[cst.BaseExpression]] = {}
        self.mentions: dict[str, list[_Site]] = {}
        self.constexprs: set[str] = set()
        self._order = 0
        self._loops: list[cst.CSTNode] = []  # the loops around the walk, innermost last
        self._around: frozenset[cst.CSTNode] = frozenset()
        self._targets: set[cst.Name] = set()

    def _site(self) -> _Site:
        self._order += 1
        return _Site(self._order, self._around)

    def _enter_loop(self, node: cst.CSTNode) -> None:
        self._loops.append(node)
        self._around = frozenset(self._loops)

    def _leave_loop(self) -> None:
        self._loops.pop()
        self._around = frozenset(self._loops)

    def _place(self, node: cst.CSTNode) -> None:
        self.sites[node] = self._site()

    def _count(self, target: cst.BaseExpression, statement: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self.assignments.setdefault(target.value, []).append((statement, self.sites[statement]))
            self._targets.add(target)
            value = getattr(statement, "value", None)
            if isinstance(value, cst.BaseExpression):
                self.values.setdefault(target.value, []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._count(element.value, statement)
        elif isinstance(target, cst.StarredElement):
            self._count(target.value, statement)

    def rebound(self, binding: cst.Assign, bound: str, names: set[str]) -> set[str]:
        """Those of ``names`` (what the binding of ``bound`` evaluates) that an assignment may change between
        the binding and a use of ``bound``; ``bound`` itself if among them (the binding rebinds it)."""
        site = self.sites[binding]
        uses = [use for use in self.mentions.get(bound, ()) if use.order > site.order]
        changed = {bound} & names
        for name in names - changed:
            if any(at.may_run_between(site, use) for _, at in self.assignments.get(name, ()) for use in uses):
                changed.add(name)
        return changed

    def only_slice_reaching(self, name: str, binding: cst.Assign) -> cst.Assign | None:
        """The table-slice assignment of ``name`` that ``binding`` sees, if no other assignment may reach it."""
        site = self.sites[binding]
        reaching = [statement for statement, at in self.assignments[name] if at.may_reach(site)]
        if len(reaching) == 1 and isinstance(reaching[0], cst.Assign) and _slice_assignment(reaching[0]):
            return reaching[0]
        return None

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self._targets:
            self.mentions.setdefault(node.value, []).append(self._site())

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)  # `a.b` mentions `a`, not `b`
        return False

    def visit_While(self, node: cst.While) -> None:
        self._enter_loop(node)

    def leave_While(self, original_node: cst.While) -> None:
        self._leave_loop()

    def leave_For(self, original_node: cst.For) -> None:
        self._leave_loop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        self._place(node)
        for target in node.targets:
            self._count(target.target, node)
        if isinstance(node.value, cst.Call) and self.resolver.castpile(node.value.func) == "multicast_like":
            self.found.append(node)
        elif _slice_assignment(node):
            name = cst.ensure_type(node.targets[0].target, cst.Name).value  # _slice_assignment: one name
            self.slice_names.add(name)
            if table_slice(node.value) is None:
                self.entry_names.add(name)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._place(node)
        self._count(node.target, node)
        if isinstance(node.target, cst.Name) and is_constexpr_annotation(node.annotation):
            self.constexprs.add(node.target.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._place(node)
        self._count(node.target, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._place(node)
        self._count(node.target, node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._place(node)  # Triton's compiler binds a comprehension's variable in the function's scope
        self._count(node.target, node)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._place(node)
            self._count(node.asname.name, node)

    def visit_For(self, node: cst.For) -> None:
        self._enter_loop(node)  # its target is assigned on every pass
        self._place(node)
        self._count(node.target, node)
        if (
            isinstance(node.target, cst.Name)
            and isinstance(node.iter, cst.Call)
            and self.resolver.triton_language(node.iter.func) == "static_range"
        ):
            self.constexprs.add(node.target.value)


def _slice_assignment(node: cst.Assign) -> bool:
    """``name = table[lo:hi]`` or ``name = table[r]``."""
    single = len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
    return single and (table_slice(node.value) is not None or table_entry(node.value) is not None)
