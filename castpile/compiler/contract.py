"""The language contract's tables: recognised calls, their parameters, constexpr expressions.

Everything here is what the language contract (docs/language.md) fixes, in one place, with the one
routine that binds a call's arguments to those parameters::

    >>> CALL_PARAMS["atomic_add"]
    ('val', 'mask', 'sem', 'scope')
    >>> constexpr_ok(cst.parse_expression("(r + 1) * C"), {"r", "C"})
    True
"""

from __future__ import annotations

import libcst as cst

from .diagnostics import GIVEN_TWICE, STARRED_ARGUMENTS, TOO_MANY_POSITIONAL, UNEXPECTED_KEYWORD, Message

ATOMICS = ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg")
REDUCTIONS = ("sum", "max", "min", "argmax", "argmin", "reduce", "xor_sum", "reduce_or")
REDUCTION_PARAMS = {  # the reductions' parameters (a tensor method's lack the first)
    "sum": ("input", "axis", "keep_dims", "dtype"),
    **dict.fromkeys(("max", "min"), ("input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims")),
    **dict.fromkeys(("argmax", "argmin"), ("input", "axis", "tie_break_left", "keep_dims")),
    "reduce": ("input", "axis", "combine_fn", "keep_dims"),
    **dict.fromkeys(("xor_sum", "reduce_or"), ("input", "axis", "keep_dims")),
}
CALL_PARAMS = {  # positional parameter names after the pointer, per call
    "load": ("mask", "other", "boundary_check", "padding_option", "cache_modifier", "eviction_policy", "volatile"),
    "store": ("value", "mask", "boundary_check", "cache_modifier", "eviction_policy"),
    "atomic_cas": ("cmp", "val", "sem", "scope"),
    "signal": ("value", "wait_for", "sem", "scope", "mask", "op"),
    "wait": ("value", "cmp", "sem", "scope", "reset", "mask", "decrement"),
    **dict.fromkeys(ATOMICS, ("val", "mask", "sem", "scope")),
}
VALUE_PARAMS = {  # the parameters that carry run-time values (the others are compile-time options)
    "load": ("mask", "other"),
    "store": ("value", "mask"),
    "atomic_cas": ("cmp", "val"),
    "signal": ("value", "wait_for", "mask"),
    "wait": ("value", "reset", "mask"),
    **dict.fromkeys(ATOMICS, ("val", "mask")),
}
REQUIRED = {"store": ("value",), "atomic_cas": ("cmp", "val"), **dict.fromkeys(ATOMICS, ("val",))}
WAIT_COMPARISONS = ("eq", "ne", "ge", "gt", "le", "lt")
"""What ``castpile.wait(..., cmp=)`` may name: the flag on the left (``"ge"``: until flag >= value), as NVSHMEM's
``signal_wait_until``."""
SIGNAL_OPS = ("set", "add")
"""What ``castpile.signal(..., op=)`` may name: an atomic exchange (or, with ``wait_for``, a compare-and-swap), or add."""
SEMANTICS = ("acquire", "release", "acq_rel", "relaxed")
"""What a signal's or a wait's ``sem=`` may name (Triton's atomics' semantics)."""
SCOPES = ("gpu", "cta", "sys")
"""What a signal's or a wait's ``scope=`` may name (Triton's atomics' scopes)."""
FLAG_OPTIONS = {
    "signal": {"op": SIGNAL_OPS, "sem": SEMANTICS, "scope": SCOPES},
    "wait": {"cmp": WAIT_COMPARISONS, "sem": SEMANTICS, "scope": SCOPES},
}
"""The compile-time keywords of castpile.signal and castpile.wait and the values each may take."""
BINDING_PARAMS = ("example", "ptr_tile", "shape", "strides", "ptr_mask")
BINDING_KEYWORDS = (*BINDING_PARAMS, "align", "remote")
TRITON_DTYPES = (
    "int1",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8e5",
    "float8e5b16",
    "float8e4nv",
    "float8e4b8",
    "float8e4b15",
)
"""The element types of ``triton.language`` that a binding's ``example`` may name instead of a pointer (v1.2)."""
REMOTE_BACKENDS = ("nvshmem",)
"""What ``multicast_like(..., remote=...)`` may name: how accesses reach buffers that loads and stores cannot."""


def argument_positions(
    call: cst.Call, params: tuple[str, ...], skip: int
) -> tuple[dict[str, int], list[tuple[Message, dict[str, object]]]]:
    """Map parameter names to positions in ``call.args`` for the arguments after the first ``skip``; the
    problems found, each a message of the catalogue and its parameters (but ``call``, which the caller names).

    >>> argument_positions(cst.parse_expression("f(p, v, sem='relaxed')"), ("val", "mask", "sem"), 1)
    ({'val': 1, 'sem': 2}, [])
    >>> argument_positions(cst.parse_expression("f(p, v, val=1)"), ("val", "mask"), 1)[1]
    [(Message('E404', "{call}: argument '{keyword}' given twice"), {'keyword': 'val'})]
    """
    named: dict[str, int] = {}
    problems: list[tuple[Message, dict[str, object]]] = []
    if any(a.star for a in call.args):
        problems.append((STARRED_ARGUMENTS, {}))
    positional = [i for i, a in enumerate(call.args) if a.keyword is None and not a.star]
    for k, position in enumerate(positional[skip:]):
        if k >= len(params):
            problems.append((TOO_MANY_POSITIONAL, {"most": len(params) + skip}))
            break
        named[params[k]] = position
    for position, arg in enumerate(call.args):
        if arg.keyword is not None:
            key = arg.keyword.value
            if key not in params:
                problems.append((UNEXPECTED_KEYWORD, {"keyword": key}))
            elif key in named:
                problems.append((GIVEN_TWICE, {"keyword": key}))
            else:
                named[key] = position
    return named, problems


CONSTEXPR_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo, cst.LeftShift, cst.RightShift)
PURE_TL_CALLS = ("arange", "program_id", "num_programs", "multiple_of", "max_contiguous", "max_constancy", "cast")
"""``tl`` functions without side effects whose calls an index may repeat."""


def constexpr_ok(node: cst.BaseExpression, constexprs: set[str]) -> bool:
    """Integer literals and constexpr names combined with + - * // % << >>."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Name):
        return node.value in constexprs
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, CONSTEXPR_OPERATORS):
        return constexpr_ok(node.left, constexprs) and constexpr_ok(node.right, constexprs)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return constexpr_ok(node.expression, constexprs)
    return False


_LITERALS = (
    cst.Integer,
    cst.Float,
    cst.Imaginary,
    cst.SimpleString,
    cst.ConcatenatedString,
    cst.FormattedString,
    cst.Tuple,
    cst.List,
    cst.Dict,
    cst.Set,
)


def is_literal(node: cst.BaseExpression) -> bool:
    """Whether ``node`` is written as a literal (a number, signed or not, a string, ``None``, ``True``, ``False``, a
    display): a value castpile reads itself.  Any other expression given as a compile-time value (``AX``, ``C - 2``,
    ``mod.G``, ``16 if BIG else 8``) only Triton's compile knows.

    >>> is_literal(cst.parse_expression("-1")), is_literal(cst.parse_expression("AX"))
    (True, False)
    """
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    if isinstance(node, cst.Name):
        return node.value in ("None", "True", "False")
    return isinstance(node, _LITERALS)


def literal_bool(node: cst.BaseExpression | None) -> bool | None:
    """``True`` or ``False`` for those literals, else ``None``."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def literal_int(node: cst.BaseExpression | None) -> int | None:
    """The value of an integer literal, else ``None``."""
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    return None


def literal_string(node: cst.BaseExpression | None) -> str | None:
    """The value of a (non-bytes, non-f) string literal, else ``None``."""
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return node.evaluated_value
    return None
