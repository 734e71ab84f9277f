"""Lowering Multicast parameters: a parameter becomes what a binding's accesses need, and each call passes it.

``def total(bufs: cp.Multicast, offs)`` becomes (on the same line)::

    def total(bufs, bufs_count: tl.constexpr, bufs_smask, bufs_example, bufs_shape0, bufs_stride0, bufs_align: tl.constexpr, offs)

``bufs`` holds the stack (a table slice's first address, or a tile), then its buffer count, ``ptr_mask``
(``None`` for none), the example pointer, one extent per element dim when the tensors passed have a
``shape=`` (``None`` from a caller whose tensor has none, when others have), one stride per element dim (the caller's strides, or contiguous ones), ``align=``, and for
``remote=`` tensors the table (whose header names the scratch for NVSHMEM transfers).  A call
``total(bufs, offs)`` passes the binding's values right after it, by position, or by keyword when the tensor
is passed by keyword.  Triton compiles the helper once per set of constexpr values it is called with.
"""

from __future__ import annotations

from dataclasses import dataclass

from .algebra import strides
from .lower_bindings import StackText
from .plan import HelperCall, MulticastParam


@dataclass
class ParamNames:
    """The names of the parameters a Multicast parameter becomes, after its own."""

    count: str
    smask: str
    example: str
    shape: tuple[str, ...]
    strides: tuple[str, ...]
    align: str
    table: str | None  # remote= tensors: the table, whose header names the scratch for NVSHMEM transfers

    def constexpr(self) -> set[str]:
        return {self.count, self.align}

    def ordered(self) -> list[str]:
        return [
            self.count,
            self.smask,
            self.example,
            *self.shape,
            *self.strides,
            self.align,
            *([self.table] if self.table is not None else []),
        ]


class PassedLowering:
    """The parameters, stacks and calls of Multicast parameters, for one :class:`~castpile.compiler.lower.Lowerer`."""

    def __init__(self, lowerer):
        self.lowerer = lowerer
        self._names: dict[MulticastParam, ParamNames] = {}

    def names(self, param: MulticastParam) -> ParamNames:
        """The (cached) names of ``param``'s added parameters."""
        if param not in self._names:
            chosen: set[str] = set()

            def fresh(suffix: str) -> str:
                """A parameter name no word of the module is (other functions' parameters may share it)."""
                name = f"{param.name}_{suffix}"
                while name in self.lowerer.words or name in chosen:
                    name += "_"
                chosen.add(name)
                self.lowerer.taken.add(name)  # no name made later in this function takes it
                return name

            shape = tuple(fresh(f"shape{d}") for d in range(param.ndim)) if param.shaped else ()
            self._names[param] = ParamNames(
                fresh("count"),
                fresh("smask"),
                fresh("example"),
                shape,
                tuple(fresh(f"stride{d}") for d in range(param.ndim)),
                fresh("align"),
                fresh("table") if param.remote is not None else None,
            )
        return self._names[param]

    def parameters(self, param: MulticastParam) -> str:
        """The parameter list that replaces ``bufs: castpile.Multicast``."""
        names = self.names(param)
        constexpr = names.constexpr()
        added = [f"{name}: {param.constexpr}" if name in constexpr else name for name in names.ordered()]
        return ", ".join([param.name, *added])

    def stack(self, param: MulticastParam):
        """How accesses through ``param`` name their stack: by the parameters it becomes."""
        names = self.names(param)
        return StackText(
            param.name,
            names.count,
            names.smask,
            names.example,
            names.shape or None,
            names.strides,
            table=names.table,
            align=names.align,
            shape_optional=param.shape_optional,
        )

    def call(self, use: HelperCall) -> str:
        """The call with each multicast tensor's values after it."""
        render = self.lowerer.render
        args = []
        for k, arg in enumerate(use.node.args):
            value = render.text(arg.value)
            keyword = arg.keyword.value if arg.keyword is not None else None
            args.append(value if keyword is None else f"{keyword}={value}")
            if k not in use.passed:
                continue
            param, binding = use.passed[k]
            stack = self.lowerer.stack(binding)
            extents = stack.shape or ("None",) * param.ndim  # no shape=: no bounds (shape_optional)
            values = [
                stack.count,
                stack.smask,
                stack.example,
                *(extents if param.shaped else ()),
                *strides(stack.shape, stack.strides, param.ndim),
                stack.align or "None",
                *([stack.table] if param.remote is not None else []),
            ]
            if keyword is None:
                args += values
            else:
                args += [f"{name}={value}" for name, value in zip(self.names(param).ordered(), values)]
        return f"{render.text(use.node.func)}({', '.join(args)})"
