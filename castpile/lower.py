"""Lowering: the Triton source that replaces each binding and access.

Every function here takes nodes *after* their children were rewritten (so an
index that is itself a multicast load is already lowered) and returns one
line of source; :mod:`castpile.emit` puts it in place.  A table binding::

    bufs = multicast_like(out, dev_ptrs[:WORLD], shape=(n,))
    x = bufs[offs]

becomes::

    bufs = dev_ptrs
    x = _castpile_load_loop(bufs, WORLD, None, out, offs, (offs >= 0) & (offs < n))

The arguments of every access helper are the stack (``src, count, smask``),
the example pointer, the element offsets and the mask; see
:mod:`castpile.helpers`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst

from .algebra import bounds_mask, offsets, simplify
from .analyse import ATOMICS, CALL_PARAMS, Access, Binding, _call_arguments

_EMPTY = cst.Module(body=[])
_ATOMIC_NODES = (cst.Name, cst.Integer, cst.Attribute, cst.Subscript, cst.Call, cst.SimpleString)


def code(node: cst.CSTNode) -> str:
    """The source of ``node`` (outer parentheses included), on one line.

    A sub-expression that spans lines is re-rendered on one (comments inside it are
    dropped): lowering may repeat an index, and the replacement must not add lines.
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


def _align(access: Access) -> str | None:
    """The binding's ``align=`` (bytes), passed to every helper of its accesses."""
    return None if access.binding.align is None else str(access.binding.align)


class Lowerer:
    """Builds replacement source; one per module and strategy."""

    def __init__(self, strategy: str):
        self.strategy = strategy
        self._stacks: dict[Binding, StackText] = {}
        self.helpers: set[str] = set()

    # -- bindings ------------------------------------------------------------------------

    def stack(self, binding: Binding) -> StackText:
        """The (cached) names and statements of one binding."""
        if binding not in self._stacks:
            self._stacks[binding] = self._build_stack(binding)
        return self._stacks[binding]

    def _fresh(self, binding: Binding, suffix: str) -> str:
        name = f"{binding.name}_{suffix}"
        while name in binding.function_names:
            name += "_"
        binding.function_names.add(name)
        return name

    def _hoisted(self, binding: Binding, node: cst.BaseExpression, suffix: str, statements: list[str]) -> str:
        """A name or literal as is; anything else evaluated once at the binding."""
        if isinstance(node, (cst.Name, cst.Integer)):
            return code(node)
        name = self._fresh(binding, suffix)
        statements.append(f"{name} = {code(node)}")
        return name

    def _build_stack(self, binding: Binding) -> StackText:
        statements: list[str] = []
        if binding.table is not None:
            lo = code(binding.lo) if binding.lo is not None else "0"
            count = simplify(f"({code(binding.hi)}) - ({lo})")
            start = simplify(f"{atom(binding.table)} + ({lo})")
            statements.append(f"{binding.name} = {start}")
            smask = "None"
        else:
            statements.append(f"{binding.name} = {code(binding.tile)}")
            count = f"{binding.name}.numel"
            smask = "None"
            if binding.ptr_mask is not None:
                smask = self._fresh(binding, "mask")
                statements.append(f"{smask} = {code(binding.ptr_mask)}")
        example = self._hoisted(binding, binding.example, "example", statements)
        shape = strides = None
        if binding.shape is not None:
            shape = tuple(self._hoisted(binding, n, f"shape{d}", statements) for d, n in enumerate(binding.shape))
        if binding.strides is not None:
            strides = tuple(self._hoisted(binding, n, f"stride{d}", statements) for d, n in enumerate(binding.strides))
        return StackText(binding.name, count, smask, example, shape, strides, statements)

    def binding(self, binding: Binding) -> list[str]:
        """The statements that replace ``name = multicast_like(...)``."""
        return self.stack(binding).statements

    # -- accesses ------------------------------------------------------------------------

    def _prefix(self, access: Access, subscript: cst.Subscript, user_mask: cst.BaseExpression | None) -> str:
        """``src, count, smask, example, offs, mask`` for an access."""
        stack = self.stack(access.binding)
        indices = tuple(code(element.slice.value) for element in subscript.slice)
        offs = offsets(indices, stack.shape, stack.strides)
        parts = []
        if stack.shape is not None:
            bounds = bounds_mask(indices, stack.shape)
            if bounds is not None:
                parts.append(bounds)
        if user_mask is not None:
            parts.append(atom(user_mask) if parts else code(user_mask))
        mask = " & ".join(parts) if parts else "None"
        return f"{stack.src}, {stack.count}, {stack.smask}, {stack.example}, {offs}, {mask}"

    def _call(self, helper: str, *args: str, **keywords: cst.BaseExpression | str | None) -> str:
        self.helpers.add(helper)
        rendered = [a for a in args]
        for key, value in keywords.items():
            if value is not None:
                rendered.append(f"{key}={value if isinstance(value, str) else code(value)}")
        return f"{helper}({', '.join(rendered)})"

    def load(self, access: Access, subscript: cst.Subscript) -> str:
        """``bufs[idx]`` read as a value."""
        return self._call(f"_castpile_load_{self.strategy}", self._prefix(access, subscript, None), align=_align(access))

    def fuses(self, access: Access) -> bool:
        """Whether a reduction over the stack axis becomes one accumulating loop."""
        return self.strategy == "loop" and access.binding.table is not None

    def reduction(
        self, op: str, access: Access, subscript: cst.Subscript, dtype: cst.BaseExpression | None,
        mask: cst.BaseExpression | None = None,
    ) -> str:
        """``tl.sum(bufs[idx], axis=0)`` (or max/min, of a masked ``tl.load``) without the P + I tensor."""
        return self._call(
            "_castpile_reduce_loop", self._prefix(access, subscript, mask), f'"{op}"', acc_dtype=dtype,
            align=_align(access),
        )

    def store(self, access: Access, subscript: cst.Subscript, value: str) -> str:
        """``bufs[idx] = value``."""
        return self._call(
            f"_castpile_store_{self.strategy}", self._prefix(access, subscript, None), value, align=_align(access)
        )

    def augmented_store(self, access: Access, subscript: cst.Subscript, operator: str, value: cst.BaseExpression) -> str:
        """``bufs[idx] op= value``: load, op, store."""
        loaded = self.load(access, subscript)
        return self.store(access, subscript, f"{loaded} {operator} {atom(value)}")

    def call_on(self, op: str, access: Access | None, subscript: cst.Subscript | None, call: cst.Call) -> str:
        """``tl.load/store/atomic_*``, ``castpile.signal/wait`` with the rewritten ``call``."""
        args, _ = _call_arguments(call, CALL_PARAMS[op], 1)
        if access is None:  # castpile.wait on plain pointers
            return self._call(
                "_castpile_wait_flags", code(call.args[0].value), code(args["mask"]) if "mask" in args else "None",
                value=args.get("value"), sem=args.get("sem"), scope=args.get("scope"), reset=args.get("reset"),
            )
        prefix = self._prefix(access, subscript, args.get("mask"))
        args["align"] = _align(access)
        s = self.strategy
        if op == "load":
            return self._call(
                f"_castpile_load_{s}", prefix, other=args.get("other"), cache_modifier=args.get("cache_modifier"),
                eviction_policy=args.get("eviction_policy"), volatile=args.get("volatile"), align=args["align"],
            )
        if op == "store":
            return self._call(
                f"_castpile_store_{s}", prefix, code(args["value"]), cache_modifier=args.get("cache_modifier"),
                eviction_policy=args.get("eviction_policy"), align=args["align"],
            )
        if op in ATOMICS:
            return self._call(
                f"_castpile_atomic_{s}", prefix, f'"{op[len("atomic_"):]}"', code(args["val"]),
                sem=args.get("sem"), scope=args.get("scope"), align=args["align"],
            )
        if op == "atomic_cas":
            return self._call(
                f"_castpile_atomic_cas_{s}", prefix, code(args["cmp"]), code(args["val"]),
                sem=args.get("sem"), scope=args.get("scope"), align=args["align"],
            )
        if op == "signal":
            return self._call(
                "_castpile_signal", prefix, value=args.get("value"), wait_for=args.get("wait_for"),
                sem=args.get("sem"), scope=args.get("scope"), align=args["align"],
            )
        return self._call(
            "_castpile_wait", prefix, value=args.get("value"), sem=args.get("sem"), scope=args.get("scope"),
            reset=args.get("reset"), align=args["align"],
        )
