"""Lowering bindings: the statements that replace ``multicast_like(...)`` and a table slice bound to a name.

A binding ``bufs = multicast_like(out, dev_ptrs[lo:hi], shape=(n,))`` becomes the stack in the bound
name and its arguments evaluated once where they might change later::

    bufs = dev_ptrs + lo

with the buffer count ``hi - lo``, the example ``out`` and the extent ``n`` held as :class:`StackText`
for the accesses that follow (:mod:`castpile.compiler.lower`); a Multicast parameter's binding comes
from :mod:`.lower_passing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import libcst as cst

from .algebra import simplify
from .calling import ALIGNMENT, ENTRY, SLICE_MASK, TYPED
from .plan import Binding, MulticastParam, SliceAlias
from .render import Renderer, code
from .walk import names_in


@dataclass
class StackText:
    """How a binding's accesses name their stack, and the statements that replace the binding."""

    src: str
    count: str
    smask: str
    example: str
    shape: tuple[str, ...] | None
    strides: tuple[str, ...] | None
    statements: list[str] = field(default_factory=list)
    table: str | None = None  # remote= bindings: the table, whose header names the scratch for NVSHMEM
    align: str | None = None
    shape_optional: bool = False  # a Multicast parameter's extents: None where a caller's tensor has no shape=


class _Passing(Protocol):
    def stack(self, param: MulticastParam) -> StackText: ...


class Lowerer(Protocol):
    """What a binding's lowering uses of :class:`castpile.compiler.lower.Lowerer` (named here, not imported:
    that module imports this one)."""

    @property
    def render(self) -> Renderer: ...

    @property
    def passing(self) -> _Passing: ...

    @property
    def site(self) -> str: ...

    def fresh(self, base: str) -> str: ...

    def called(self, helper: str) -> str: ...


class BindingLowering:
    """The stacks of one module's bindings, made with its :class:`~castpile.compiler.lower.Lowerer`'s names and
    renderer."""

    def __init__(self, lowerer: Lowerer):
        self.lowerer = lowerer
        self._stacks: dict[Binding, StackText] = {}

    def stack(self, binding: Binding) -> StackText:
        """The (cached) names and statements of one binding."""
        if binding not in self._stacks:
            self._stacks[binding] = (
                self._build(binding) if binding.param is None else self.lowerer.passing.stack(binding.param)
            )
        return self._stacks[binding]

    def _hoisted(self, binding: Binding, node: cst.BaseExpression, suffix: str, statements: list[str]) -> str:
        """A literal, or a name the function does not assign at or after the binding, as is; anything else
        evaluated once at the binding."""
        if isinstance(node, cst.Integer) or (isinstance(node, cst.Name) and node.value not in binding.rebound):
            return code(node)
        constexpr = isinstance(node, cst.Name) and node.value in binding.constexpr_rebound
        return self._evaluated(binding, self.lowerer.render.text(node), suffix, statements, constexpr)

    def _evaluated(
        self, binding: Binding, text: str, suffix: str, statements: list[str], constexpr: bool = False
    ) -> str:
        """A fresh name that holds ``text``, evaluated at the binding.

        A constexpr is annotated ``tl.constexpr`` (a plain assignment would make it a tensor); the
        helpers that the accesses after the binding call are appended with ``tl`` imported.
        """
        name = self.lowerer.fresh(f"{binding.name}_{suffix}")
        statements.append(f"{name}: tl.constexpr = {text}" if constexpr else f"{name} = {text}")
        return name

    def start(self, table: cst.BaseExpression, lo: cst.BaseExpression | None) -> str:
        """The address of a table slice's first entry."""
        return simplify(f"{self.lowerer.render.atom(table)} + ({code(lo) if lo is not None else '0'})")

    def _build(self, binding: Binding) -> StackText:
        """The binding's statements: its arguments evaluated, the stack in the bound name (last, when an
        argument reads the name it rebinds)."""
        statements: list[str] = []
        smask = "None"
        anchor = "None"  # memory a dtype example's pointer may point at (see _castpile_typed)
        if binding.table is not None:
            assert binding.hi is not None  # a table slice has both ends (parse fills in an absent one)
            lo = code(binding.lo) if binding.lo is not None else "0"
            count = simplify(f"({code(binding.hi)}) - ({lo})")
            if names_in(binding.lo, binding.hi) & binding.rebound:
                count = self._evaluated(binding, count, "count", statements, constexpr=True)
            start = anchor = code(binding.start) if binding.start is not None else self.start(binding.table, binding.lo)
            stack = f"{binding.name} = {start}"
        elif binding.peer is not None:
            assert binding.peer_table is not None  # the table a peer is an entry of
            anchor = self.lowerer.render.text(binding.peer_table)
            entry = code(binding.start) if binding.start is not None else self.entry(binding.peer_table, binding.peer)
            stack = f"{binding.name} = {entry}"
            count = "1"
        else:
            assert binding.tile is not None  # neither a slice nor a peer: an expression of stacks
            stack = f"{binding.name} = {self.lowerer.render.text(binding.tile)}"
            count = f"{binding.name}.numel"
        if binding.dtype is not None:
            example = self._evaluated(
                binding, f"{self.lowerer.called(TYPED)}({anchor}, {code(binding.dtype)})", "example", statements
            )
        else:
            assert binding.example is not None  # only a parameter's binding has none, and passing builds those
            example = self._hoisted(binding, binding.example, "example", statements)
        arguments: list[str] = []
        shape = strides_ = None
        if binding.shape is not None:
            shape = tuple(self._hoisted(binding, n, f"shape{d}", arguments) for d, n in enumerate(binding.shape))
        if binding.strides is not None:
            strides_ = tuple(self._hoisted(binding, n, f"stride{d}", arguments) for d, n in enumerate(binding.strides))
        if binding.ptr_mask is not None:
            mask = self.lowerer.render.text(binding.ptr_mask)
            if binding.table is not None:
                mask = f"{self.lowerer.called(SLICE_MASK)}({mask}, {count})"
            smask = self._evaluated(binding, mask, "mask", arguments)
        align = self._align(binding, arguments) if binding.align is not None else None
        table = None
        if binding.remote:
            source = binding.table if binding.peer is None else binding.peer_table
            assert source is not None  # a remote binding is a slice or a peer of a table
            table = self._hoisted(binding, source, "table", arguments)
        if binding.name in binding.rebound:
            statements += [*arguments, stack]
        else:
            statements += [stack, *arguments]
        return StackText(binding.name, count, smask, example, shape, strides_, statements, table, align)

    def _align(self, binding: Binding, statements: list[str]) -> str:
        """A literal ``align=`` as it is; any other compile-time value as written (in a constexpr local when a name it
        uses may change after the binding), checked when Triton compiles the binding, naming its site (v1.3)."""
        assert binding.align is not None  # the caller's test
        if isinstance(binding.align, cst.Integer):
            return code(binding.align)
        align = self.lowerer.render.text(binding.align)
        if names_in(binding.align) & binding.rebound:
            align = self._evaluated(binding, align, "align", statements, constexpr=True)
        statements.append(f"{self.lowerer.called(ALIGNMENT)}({align}, {self.lowerer.site})")
        return align

    def entry(self, table: cst.BaseExpression, peer: cst.BaseExpression) -> str:
        """The address in entry ``peer`` of a table, loaded."""
        return f"{self.lowerer.called(ENTRY)}({self.lowerer.render.text(table)}, {self.lowerer.render.text(peer)})"

    def slice_alias(self, alias: SliceAlias) -> list[str]:
        """``tile = table[lo:hi]`` becomes ``tile = table + lo``, the start of the slice; ``tile = table[r]`` becomes
        ``tile = _castpile_table_entry(table, r)``, the address in that entry."""
        target = code(alias.node.targets[0].target)
        if alias.peer is not None:
            return [f"{target} = {self.entry(alias.table, alias.peer)}"]
        return [f"{target} = {self.start(alias.table, alias.lo)}"]
