"""The plan: what analysis found and lowering replaces, as typed records.

Each record of a use holds the original node it replaces (``node``) and what
lowering needs to know about it, so lowering works from the plan alone:

* :class:`Binding`, :class:`SliceAlias`: statements that name a stack;
* :class:`Load`, :class:`Store`, :class:`AugStore`: an access read, written or updated;
* :class:`CallOn`: ``tl.load/store/atomic_*`` or ``castpile.signal/wait`` on an access;
* :class:`Reduction`: ``tl.sum/max/min(..., axis=0)`` of an access; :class:`GuardedReduce`: a multi-operand
  ``tl.reduce`` of one whose axis only Triton's compile knows;
* :class:`MulticastParam`, :class:`HelperCall`: a parameter annotated ``castpile.Multicast``, and a call
  that passes multicast tensors to such parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from .diagnostics import Message


@dataclass(eq=False)
class Binding:
    """``name = multicast_like(example, ptr_tile, shape=..., strides=..., ptr_mask=..., align=..., remote=...)``."""

    name: str
    node: cst.Assign | cst.Param  # a Multicast parameter's binding: its parameter
    example: cst.BaseExpression | None  # None for a parameter's (its layout comes from the tensors passed)
    dtype: cst.BaseExpression | None = None  # the example is a dtype (tl.bfloat16): the buffers' element type
    table: cst.BaseExpression | None = None  # table form: table[lo:hi]
    lo: cst.BaseExpression | None = None
    hi: cst.BaseExpression | None = None
    start: cst.Name | None = None  # a named slice or peer (tile = table[lo:hi], tile = table[r]): the name holding it
    peer_table: cst.BaseExpression | None = None  # one peer: table[peer], P = ()
    peer: cst.BaseExpression | None = None
    tile: cst.BaseExpression | None = None  # tile form
    ptr_mask: cst.BaseExpression | None = None
    shape: list[cst.BaseExpression] | None = None
    strides: list[cst.BaseExpression] | None = None
    align: cst.BaseExpression | None = None  # an integer literal, or a compile-time value checked by Triton's compile
    remote: str | None = None  # remote="nvshmem": remote peers through NVSHMEM (table form only)
    rebound: frozenset[str] = frozenset()  # names the arguments use that are assigned at or after the binding
    constexpr_rebound: frozenset[str] = frozenset()  # those of them that are constexpr
    param: MulticastParam | None = None  # a Multicast parameter: the binding of whatever tensor is passed

    @property
    def ndim(self) -> int:
        """How many indices an access takes."""
        if self.param is not None:
            return self.param.ndim
        if self.shape is not None:
            return len(self.shape)
        if self.strides is not None:
            return len(self.strides)
        return 1


@dataclass(eq=False)
class Access:
    """``bufs[i_0, ..., i_k]``: the binding, the index nodes and how to evaluate them.

    ``pure_indices`` says for each explicit index whether it is free of side effects
    and cheap (names, literals, arithmetic, ``tl.arange``), so that its text may be
    repeated in the offsets and the bounds mask; any other index must be evaluated
    once.  ``spans`` holds the extents that a trailing ``...`` stands for.  ``nonnegative``
    says for each explicit index whether it is proven never negative (its bounds need no
    lower half), ``summands`` holds its summands with their signs, those classed as scalars
    first, then the others (see :mod:`castpile.compiler.index_facts`).  ``mask_bounded``: the call's ``mask=``
    proves the index inside the binding's extent, so the access has no bounds mask (see
    :mod:`castpile.compiler.mask_bounds`).
    """

    binding: Binding
    subscript: cst.Subscript
    pure_indices: list[bool] = field(default_factory=list)
    spans: list[cst.BaseExpression] = field(default_factory=list)
    nonnegative: list[bool] = field(default_factory=list)
    summands: list[tuple[list[tuple[int, cst.BaseExpression]], list[tuple[int, cst.BaseExpression]]]] = field(
        default_factory=list
    )
    mask_bounded: bool = False

    @property
    def pure(self) -> bool:
        """Whether every index may be repeated."""
        return all(self.pure_indices)


@dataclass(eq=False)
class Load:
    """An access read as a value (``node`` is the access itself)."""

    node: cst.Subscript
    access: Access


@dataclass(eq=False)
class Store:
    """``bufs[idx] = value`` (``value_pure``: the value has no side effects)."""

    node: cst.Assign
    access: Access
    value_pure: bool = True


@dataclass(eq=False)
class AugStore:
    """``bufs[idx] op= value``; ``operator`` is the binary operator, as in ``"+"``."""

    node: cst.AugAssign
    access: Access
    operator: str


@dataclass(eq=False)
class CallOn:
    """``tl.load/store/atomic_*`` or ``castpile.signal/wait`` on an access (or, for
    signal and wait, on plain pointers: ``access`` is ``None``); ``positions`` maps the call's
    parameters to argument positions; ``result_used`` is false for a call that
    stands alone as a statement; ``checked``: compile-time keywords of a signal or wait that Triton's
    compile must check (values that are not literals of the allowed set), so its helper names the call's site."""

    node: cst.Call
    op: str
    access: Access | None
    positions: dict[str, int]
    result_used: bool = True
    impure: frozenset[str] = frozenset()  # the value parameters whose argument has side effects
    checked: frozenset[str] = frozenset()


@dataclass(eq=False)
class Step:
    """One elementwise step between an access and its reduction, as ``_castpile_apply`` names it: ``to``,
    ``bitcast``, ``to_rtne``, ``to_rtz`` (``.to(T, ...)``, ``operand`` the type); an arithmetic operator with a
    scalar ``operand`` on the right (``add``, ``sub``, ``mul``, ``truediv``, ``floordiv``, ``mod``) or on the left
    (``radd``, ``rsub``, ...); ``neg``; or one of :data:`UNARY_STEPS` (``exp``: ``tl.exp(x)``; no operand)."""

    kind: str
    operand: cst.BaseExpression | None = None


UNARY_STEPS = frozenset(
    {"abs", "ceil", "cos", "erf", "exp", "exp2", "floor", "log", "log2", "rsqrt", "sigmoid", "sin", "sqrt", "sqrt_rn"}
)
"""Triton's elementwise math functions of one tensor that may stand between an access and its reduction as steps."""


@dataclass(eq=False)
class Reduction:
    """``tl.sum/max/min/argmax/argmin/xor_sum/reduce_or(X, axis=0)`` or ``tl.reduce(X, 0, fn)`` (or
    ``X.sum(axis=0)``...) where X is ``bufs[idx]`` or ``tl.load(bufs[idx], ...)`` taken through ``steps``,
    innermost first; ``options`` holds the reduction's other arguments by parameter name (``dtype``,
    ``keep_dims``, ``return_indices``, ``return_indices_tie_break_left``, ``tie_break_left``, ``combine_fn``);
    ``load_positions`` maps the load's parameters to argument positions.  With ``axis`` (a compile-time value
    written other than as a literal) it is the stack's reduction where ``axis`` holds 0, and Triton's reduction of
    the access loaded as P + I anywhere else, decided when Triton compiles it."""

    node: cst.Call
    op: str
    access: Access
    steps: list[Step] = field(default_factory=list)
    options: dict[str, cst.BaseExpression] = field(default_factory=dict)
    load: cst.Call | None = None
    load_positions: dict[str, int] = field(default_factory=dict)
    load_impure: frozenset[str] = frozenset()  # the load's parameters whose argument has side effects
    axis: cst.BaseExpression | None = None  # a compile-time axis= that is no literal (None: the literal 0)


@dataclass(eq=False)
class GuardedReduce:
    """``tl.reduce((X, Y, ...), axis, fn)`` with an access (``name`` its binding's) among its operands and ``axis``
    a compile-time value written other than as a literal: Triton's reduction of the loaded operands, refused when
    Triton compiles it where ``axis`` holds 0 (the stack's padded and ``ptr_mask``-false buffers would take part;
    with the literal 0 that is E419 at once)."""

    node: cst.Call
    name: str
    axis: cst.BaseExpression


@dataclass(eq=False)
class SliceAlias:
    """``tile = table[lo:hi]`` (or ``tile = table[r]``: ``peer`` is ``r``), a name bound once to a table slice
    (or one table entry) and passed as a ``ptr_tile``."""

    node: cst.Assign
    table: cst.BaseExpression
    lo: cst.BaseExpression | None
    peer: cst.BaseExpression | None = None


@dataclass(eq=False)
class MulticastParam:
    """``bufs: castpile.Multicast``, a parameter of the jit function ``function`` that receives a multicast tensor
    at every call site.  ``ndim`` and ``remote`` (the ``remote=`` backend, or ``None``) are those of every tensor
    passed; ``shaped``: some have a ``shape=``, ``shape_optional``: others have none (their extents arrive as
    ``None``); ``constexpr`` is how the module spells ``tl.constexpr`` where the function is defined."""

    node: cst.Param
    function: str
    name: str
    constexpr: str
    ndim: int = 1
    shaped: bool = False
    shape_optional: bool = False
    remote: str | None = None


@dataclass(eq=False)
class HelperCall:
    """``helper(bufs, ...)``: a call that passes multicast tensors to Multicast parameters; ``passed`` maps the
    position in ``node.args`` of each such argument to the parameter and the binding passed."""

    node: cst.Call
    passed: dict[int, tuple[MulticastParam, Binding]]


Use = Binding | SliceAlias | Load | Store | AugStore | CallOn | Reduction | GuardedReduce | MulticastParam | HelperCall
"""What a planned node is: each record's ``node`` is the node it replaces."""

STATEMENTS = (Binding, SliceAlias, Store, AugStore)
"""The uses that replace whole statements (the others replace expressions)."""


@dataclass
class Plan:
    """The uses lowering replaces (keyed by their node), the problems found, the
    words of the file (every identifier, comments and strings included), which no
    generated name may start, and the kernels that emit wraps for NVSHMEM."""

    uses: dict[cst.CSTNode, Use] = field(default_factory=dict)
    errors: list[tuple[cst.CSTNode, Message, dict[str, object]]] = field(default_factory=list)
    words: set[str] = field(default_factory=set)
    remote_kernels: list[str] = field(default_factory=list)  # module-level jit functions with a remote= binding

    def error(self, node: cst.CSTNode, message: Message, **params) -> None:
        """A problem at ``node``: ``message`` of the catalogue with ``params`` (its text is made when it is reported)."""
        self.errors.append((node, message, params))
