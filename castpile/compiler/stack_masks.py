"""Per-buffer access masks: an access's ``mask=`` built with one flag per buffer, which belongs in ``ptr_mask=``.

The mask of an access has the elements' shape I (broadcast over the stack dims P); a mask of the tile's
shape is a mistake that Triton would either reject inside a helper or, when I happens to have the same
extent, silently read as a mask over elements.  castpile sees no shapes, so it decides from the text:
a mask is per buffer when it reaches a ``tl.arange(a, b)`` of the stack's extent that the access's indices
do not reach.  "Reaches" follows the names the jit function assigns (``ranks = tl.arange(0, W)``,
``m = ranks < rank``), every assignment of a name counting; an arange is of the stack's extent when the
binding's tile or ``ptr_mask`` expression reaches the same arange (by its text), or, for a table slice
``table[lo:hi]``, when ``b - a`` is ``hi - lo`` or, as integers, ``hi - lo`` rounded up to a power of two.
Inside a helper, through a Multicast parameter, the stack is each caller's: an arange of the helper is of
the stack's extent when, its parameters replaced by what a call passes, it is of the extent of the tensor
that call passes (:func:`passed_per_buffer`)::

    ranks = tl.arange(0, W)
    bufs = multicast_like(out, table[:W])
    tl.load(bufs[offs], mask=ranks <= rank)       # per buffer: an error that names ptr_mask=
    tl.load(bufs[ranks], mask=ranks <= rank)      # ranks indexes the elements too: an element mask
"""

from __future__ import annotations

import libcst as cst

from .algebra import simplify
from .plan import Binding
from .scopes import Resolver
from .walk import Walker


class Aranges:
    """The ``tl.arange`` calls that expressions of one jit function reach, through the names it assigns
    (``values``: each name's assigned expressions)."""

    def __init__(self, resolver: Resolver, values: dict[str, list[cst.BaseExpression]]):
        self.resolver = resolver
        self.values = values

    def reached(self, *nodes: cst.BaseExpression | None) -> dict[str, cst.Call]:
        """Each arange ``nodes`` reach, by its text (``arange(0, W)``), the first found for each."""
        finder = _ArangeFinder(self.resolver)
        todo = [node for node in nodes if node is not None]
        seen: set[str] = set()
        while todo:
            finder.names = []
            finder.walk(todo.pop())
            for name in finder.names:
                if name not in seen:
                    seen.add(name)
                    todo.extend(self.values.get(name, ()))
        return finder.found

    def per_buffer(self, binding: Binding, indices: list[cst.BaseExpression], mask: cst.BaseExpression) -> str | None:
        """The text of an arange of ``binding``'s stack extent that ``mask`` reaches and ``indices`` do not, if any
        (none for one peer, P = (): every mask is then over the elements)."""
        if binding.peer is not None:
            return None
        return next((text for text, call in self.unindexed(indices, mask).items() if self.spans(binding, call)), None)

    def unindexed(self, indices: list[cst.BaseExpression], mask: cst.BaseExpression) -> dict[str, cst.Call]:
        """The aranges ``mask`` reaches and ``indices`` do not, by text."""
        elements = self.reached(*indices)
        return {text: call for text, call in self.reached(mask).items() if text not in elements}

    def spans(self, binding: Binding, call: cst.Call) -> bool:
        """Whether ``tl.arange(a, b)`` is of ``binding``'s stack extent (a binding of this function)."""
        return _code_of_arange(call) in self.reached(binding.tile, binding.ptr_mask) or (
            binding.table is not None and _spans_the_slice(call, binding)
        )


def passed_per_buffer(
    unindexed: dict[str, cst.Call], arguments: dict[str, cst.BaseExpression], binding: Binding, aranges: Aranges
) -> str | None:
    """The text of an arange among a helper's ``unindexed`` ones that, each parameter named in ``arguments`` replaced
    by the argument a call passes it, is of the stack extent of ``binding``, the tensor that call passes (``aranges``:
    those of the calling function), if any."""
    if binding.peer is not None:
        return None
    return next(
        (text for text, call in unindexed.items() if aranges.spans(binding, _Substitute(arguments).transform(call))),
        None,
    )


class _Substitute(cst.CSTTransformer):
    """An expression with the names in ``arguments`` replaced by their expressions."""

    def __init__(self, arguments: dict[str, cst.BaseExpression]):
        super().__init__()
        self.arguments = arguments

    def transform(self, call: cst.Call) -> cst.Call:
        return cst.ensure_type(call.visit(self), cst.Call)

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.arguments.get(original_node.value, updated_node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        return False  # ``tl.arange`` keeps its ``tl`` (and ``x.shape`` its attribute)


def _code_of_arange(call: cst.Call) -> str:
    """``arange(0, W)``: how :class:`_ArangeFinder` names an arange."""
    return "arange(" + ", ".join(_code(arg.value) for arg in call.args) + ")"


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _extent(lo: cst.BaseExpression | None, hi: cst.BaseExpression) -> str:
    """``hi - lo`` as text (``lo`` absent: 0)."""
    return f"({_code(hi)}) - ({_code(lo) if lo is not None else '0'})"


def _spans_the_slice(call: cst.Call, binding: Binding) -> bool:
    """Whether ``tl.arange(a, b)`` spans ``binding``'s table slice: ``b - a`` is ``hi - lo``, or its padded extent."""
    if binding.hi is None or len(call.args) < 2 or any(arg.keyword is not None or arg.star for arg in call.args[:2]):
        return False
    count = simplify(_extent(binding.lo, binding.hi))
    extent = simplify(_extent(call.args[0].value, call.args[1].value))
    return extent == count or (count.isdigit() and extent == str(1 << max(int(count) - 1, 0).bit_length()))


class _ArangeFinder(Walker):
    """The ``tl.arange`` calls (by text) and the names in a subtree; nested functions are not entered."""

    def __init__(self, resolver: Resolver):
        super().__init__()
        self.resolver = resolver
        self.found: dict[str, cst.Call] = {}
        self.names: list[str] = []

    def visit_Call(self, node: cst.Call) -> bool:
        if self.resolver.triton_language(node.func) == "arange":
            self.found.setdefault(_code_of_arange(node), node)
            return False
        return True

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        self.walk(node.value)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False
