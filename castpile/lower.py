"""Lowering: the Triton source that replaces each binding and access.

Every function here takes nodes *after* their children were rewritten (so an
index that is itself a multicast load is already lowered) and returns source on
one line; :mod:`castpile.emit` puts it in place.  A table binding::

    bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    x = bufs[offs]

becomes::

    bufs = dev_ptrs
    x = _castpile_load_loop(bufs, WORLD, None, out, offs, (offs >= 0) & (offs < n))

The arguments of every access helper are the stack (``src, count, smask``), the
example pointer, the element offsets and the bounds mask, then the user's
arguments in the contract's order; see :mod:`castpile.helpers`.  Every index,
value and mask is evaluated once, in source order: indices that are not pure
go through ``*_castpile_index((i, ...), extents, strides)`` in expressions, and
into fresh names on the statement's own line in stores.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field

import libcst as cst

from .algebra import bounds_mask, offsets, simplify, strides
from .analyse import ATOMICS, Access, Binding, CallOn, Reduction, SliceAlias

HELPER_PREFIX = "_castpile_"
_EMPTY = cst.Module(body=[])
_ATOMIC_NODES = (cst.Name, cst.Integer, cst.Attribute, cst.Subscript, cst.Call, cst.SimpleString)
# The user's arguments that carry values, in the order the helpers take them; each is
# passed by position (Triton evaluates keyword arguments before positional ones), the
# others (constexpr options) by keyword.
_VALUE_ARGUMENTS = {
    "load": ("mask", "other"),
    "store": ("value", "mask"),
    "atomic_cas": ("cmp", "val"),
    "signal": ("value", "wait_for", "mask"),
    "wait": ("value", "reset", "mask"),
    **{name: ("val", "mask") for name in ATOMICS},
}
_DEFAULTS = {"mask": "None", "other": "None", "value": "1", "wait_for": "None", "reset": "0"}
_OPTIONS = {
    "load": ("cache_modifier", "eviction_policy", "volatile"),
    "store": ("cache_modifier", "eviction_policy"),
    "atomic_cas": ("sem", "scope"),
    "signal": ("sem", "scope"),
    "wait": ("sem", "scope"),
    **{name: ("sem", "scope") for name in ATOMICS},
}


def code(node: cst.CSTNode) -> str:
    """The source of ``node`` (outer parentheses included), on one line.

    A sub-expression that spans lines is re-rendered on one (comments inside it are
    dropped): the replacement must not add lines.
    """
    text = _EMPTY.code_for_node(node).strip()
    if "\n" in text or "\r" in text:
        text = ast.unparse(ast.parse(f"({text})", mode="eval"))
    return text


def atom(node: cst.BaseExpression) -> str:
    """``node``'s source, parenthesised unless it is atomic."""
    text = code(node)
    if isinstance(node, _ATOMIC_NODES) or (node.lpar and node.rpar):
        return text
    return f"({text})"


def _tuple(items) -> str:
    """A tuple display of source texts."""
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def helper_prefix(taken: set[str]) -> str:
    """``_castpile_``, or ``_castpile2_``, ... if a name of the file already starts with it."""
    for prefix in itertools.chain([HELPER_PREFIX], (f"_castpile{k}_" for k in itertools.count(2))):
        if not any(name.startswith(prefix) for name in taken):
            return prefix
    raise AssertionError("unreachable")


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


class Lowerer:
    """Builds replacement source; one per module and strategy.

    ``taken`` holds every name of the module: the names it makes (hoisted binding
    arguments, temporaries, the helpers' prefix) are fresh.
    """

    def __init__(self, strategy: str, taken: set[str]):
        self.strategy = strategy
        self.taken = set(taken)
        self.prefix = helper_prefix(self.taken)
        self.helpers: set[str] = set()
        self._stacks: dict[Binding, StackText] = {}
        self._temporaries = itertools.count()

    def fresh(self, base: str) -> str:
        """A name no line of the module uses, made from ``base``."""
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def _helper(self, name: str) -> str:
        self.helpers.add(HELPER_PREFIX + name)
        return self.prefix + name

    # -- bindings ------------------------------------------------------------------------

    def stack(self, binding: Binding) -> StackText:
        """The (cached) names and statements of one binding."""
        if binding not in self._stacks:
            self._stacks[binding] = self._build_stack(binding)
        return self._stacks[binding]

    def _hoisted(self, binding: Binding, node: cst.BaseExpression, suffix: str, statements: list[str]) -> str:
        """A name or literal as is; anything else evaluated once at the binding."""
        if isinstance(node, (cst.Name, cst.Integer)):
            return code(node)
        name = self.fresh(f"{binding.name}_{suffix}")
        statements.append(f"{name} = {code(node)}")
        return name

    def _build_stack(self, binding: Binding) -> StackText:
        statements: list[str] = []
        example = self._hoisted(binding, binding.example, "example", statements)
        smask = "None"
        if binding.table is not None:
            lo = code(binding.lo) if binding.lo is not None else "0"
            count = simplify(f"({code(binding.hi)}) - ({lo})")
            statements.append(f"{binding.name} = {simplify(f'{atom(binding.table)} + ({lo})')}")
        else:
            statements.append(f"{binding.name} = {code(binding.tile)}")
            count = f"{binding.name}.numel"
        shape = strides_ = None
        if binding.shape is not None:
            shape = tuple(self._hoisted(binding, n, f"shape{d}", statements) for d, n in enumerate(binding.shape))
        if binding.strides is not None:
            strides_ = tuple(self._hoisted(binding, n, f"stride{d}", statements) for d, n in enumerate(binding.strides))
        if binding.tile is not None and binding.ptr_mask is not None:
            smask = self.fresh(f"{binding.name}_mask")
            statements.append(f"{smask} = {code(binding.ptr_mask)}")
        return StackText(binding.name, count, smask, example, shape, strides_, statements)

    def binding(self, binding: Binding) -> list[str]:
        """The statements that replace ``name = multicast_like(...)``."""
        return self.stack(binding).statements

    def slice_alias(self, alias: SliceAlias) -> list[str]:
        """``tile = table[lo:hi]`` becomes ``tile = table + lo``: the start of the slice."""
        lo = code(alias.lo) if alias.lo is not None else "0"
        return [f"{code(alias.node.targets[0].target)} = {simplify(f'{atom(alias.table)} + ({lo})')}"]

    # -- indices -------------------------------------------------------------------------

    def _index_texts(self, access: Access, subscript: cst.Subscript) -> list[str]:
        """One text per element dim: the explicit indices, then what a trailing ``...`` stands for."""
        explicit = [code(e.slice.value) for e in subscript.slice if not isinstance(e.slice.value, cst.Ellipsis)]
        if not access.spans:
            return explicit
        r = len(access.spans)
        trailing, span = self._helper("trailing"), self._helper("span")
        return [i if i.isdigit() else f"{trailing}({i}, {r})" for i in explicit] + [
            f"{span}({code(n)}, {d}, {r})" for d, n in enumerate(access.spans)
        ]

    def _where(self, access: Access, indices: list[str], pure: bool) -> str:
        """``offs, bounds`` of an access: inline when the indices may repeat, else through the index helper."""
        stack = self.stack(access.binding)
        if pure:
            offs = offsets(tuple(indices), stack.shape, stack.strides)
            bounds = bounds_mask(tuple(indices), stack.shape) if stack.shape is not None else None
            return f"{offs}, {bounds or 'None'}"
        extents = _tuple(stack.shape) if stack.shape is not None else "None"
        steps = strides(stack.shape, stack.strides, len(indices))
        return f"*{self._helper('index')}({_tuple(indices)}, {extents}, {_tuple(steps)})"

    def _prefix(self, access: Access, where: str) -> str:
        stack = self.stack(access.binding)
        return f"{stack.src}, {stack.count}, {stack.smask}, {stack.example}, {where}"

    def _access_prefix(self, access: Access, subscript: cst.Subscript) -> str:
        """The stack and ``offs, bounds`` of an access inside an expression."""
        return self._prefix(access, self._where(access, self._index_texts(access, subscript), access.pure))

    def _hoisted_indices(self, access: Access, subscript: cst.Subscript, statements: list[str]) -> str:
        """The stack and ``offs, bounds`` of a stored access, impure indices first put in fresh names."""
        indices = self._index_texts(access, subscript)
        for d, pure in enumerate(access.pure_indices):
            if not pure:
                name = self.fresh(f"{self.prefix}i{next(self._temporaries)}")
                statements.append(f"{name} = {indices[d]}")
                indices[d] = name
        return self._prefix(access, self._where(access, indices, True))

    # -- calls ---------------------------------------------------------------------------

    def _call(self, helper: str, *args: str, **keywords: str | None) -> str:
        rendered = [*args, *(f"{key}={value}" for key, value in keywords.items() if value is not None)]
        return f"{self._helper(helper)}({', '.join(rendered)})"

    def _align(self, access: Access) -> str | None:
        return None if access.binding.align is None else str(access.binding.align)

    @staticmethod
    def _values(names: tuple[str, ...], given: dict[str, str]) -> list[str]:
        """The value arguments by position, defaults filled in up to the last one given."""
        last = max((k for k, name in enumerate(names) if name in given), default=-1)
        return [given[name] if name in given else _DEFAULTS[name] for name in names[: last + 1]]

    @staticmethod
    def arguments(call: cst.Call, positions: dict[str, int]) -> dict[str, str]:
        """The source of each argument of (the rewritten) ``call`` by parameter name."""
        return {name: code(call.args[position].value) for name, position in positions.items()}

    def load(self, access: Access, subscript: cst.Subscript) -> str:
        """``bufs[idx]`` read as a value."""
        return self._call(f"load_{self.strategy}", self._access_prefix(access, subscript), align=self._align(access))

    def store(self, access: Access, subscript: cst.Subscript, value: cst.BaseExpression, value_pure: bool) -> list[str]:
        """``bufs[idx] = value``: the value first, as Python evaluates it, then the indices."""
        statements: list[str] = []
        value_text = code(value)
        if not value_pure and not access.pure:
            name = self.fresh(f"{self.prefix}v{next(self._temporaries)}")
            statements.append(f"{name} = {value_text}")
            value_text = name
        prefix = self._hoisted_indices(access, subscript, statements)
        statements.append(self._call(f"store_{self.strategy}", prefix, value_text, align=self._align(access)))
        return statements

    def augmented_store(self, access: Access, subscript: cst.Subscript, operator: str, value: cst.BaseExpression) -> list[str]:
        """``bufs[idx] op= value``: the indices once, load, the value, op, store."""
        statements: list[str] = []
        prefix = self._hoisted_indices(access, subscript, statements)
        align = self._align(access)
        loaded = self._call(f"load_{self.strategy}", prefix, align=align)
        statements.append(self._call(f"store_{self.strategy}", prefix, f"{loaded} {operator} {atom(value)}", align=align))
        return statements

    def reduction(self, use: Reduction, subscript: cst.Subscript, dtype: cst.BaseExpression | None,
                  load: cst.Call | None) -> str:
        """``tl.sum/max/min(bufs[idx], axis=0)`` (of a ``tl.load`` too) over the valid buffers only."""
        access = use.access
        given = self.arguments(load, use.load_positions) if load is not None else {}
        helper = "reduce_loop" if self.strategy == "loop" and access.binding.table is not None else "reduce_gather"
        return self._call(
            helper, self._access_prefix(access, subscript), f'"{use.op}"', *self._values(("mask", "other"), given),
            acc_dtype=code(dtype) if dtype is not None else None,
            **{key: given.get(key) for key in _OPTIONS["load"]}, align=self._align(access),
        )

    def call_on(self, use: CallOn, subscript: cst.Subscript | None, call: cst.Call) -> str:
        """``tl.load/store/atomic_*``, ``castpile.signal/wait`` with the rewritten ``call``."""
        op, access = use.op, use.access
        given = self.arguments(call, use.positions)
        options = {key: given.get(key) for key in _OPTIONS[op]}
        if access is None:  # castpile.wait on plain pointers
            return self._call("wait_flags", code(call.args[0].value), *self._values(_VALUE_ARGUMENTS[op], given), **options)
        prefix = self._access_prefix(access, subscript)
        values = self._values(_VALUE_ARGUMENTS[op], given)
        keep_old = None if use.result_used else "False"
        s = self.strategy
        if op in ATOMICS:
            return self._call(f"atomic_{s}", prefix, f'"{op[len("atomic_"):]}"', *values, **options,
                              align=self._align(access), keep_old=keep_old)
        if op == "atomic_cas":
            return self._call(f"atomic_cas_{s}", prefix, *values, **options, align=self._align(access), keep_old=keep_old)
        name = {"load": f"load_{s}", "store": f"store_{s}", "signal": "signal", "wait": "wait"}[op]
        return self._call(name, prefix, *values, **options, align=self._align(access))
