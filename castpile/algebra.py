"""Index algebra: element offsets and bounds masks, simplified with sympy.

Indices, extents and strides arrive as source text.  Integer literals, names
and ``+ - *`` become sympy terms; anything else (``i[:, None]``, calls, ``//``)
is an opaque integer symbol that prints back as its own text::

    >>> offsets(("i[:, None]", "j[None, :]"), ("M", "N"), None)
    'N*i[:, None] + j[None, :]'
    >>> offsets(("k",), None, ("1",))
    'k'
    >>> bounds_mask(("offs",), ("n",))
    '(offs >= 0) & (offs < n)'
"""

from __future__ import annotations

import ast
from functools import lru_cache

import sympy as sp
from sympy.printing.str import StrPrinter

_ATOMIC = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Call)


class _Terms:
    """Converts source text to sympy, remembering how each symbol prints."""

    def __init__(self):
        self.text: dict[sp.Symbol, str] = {}

    def symbol(self, name: str, text: str) -> sp.Symbol:
        sym = sp.Symbol(name, integer=True)
        self.text[sym] = text
        return sym

    def convert(self, source: str) -> sp.Expr:
        tree = ast.parse(source.strip(), mode="eval").body
        return self._node(tree, source.strip())

    def _node(self, node: ast.AST, source: str) -> sp.Expr:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return sp.Integer(node.value)
        if isinstance(node, ast.Name):
            return self.symbol(node.id, node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self._node(node.operand, source)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            left, right = self._node(node.left, source), self._node(node.right, source)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            return left * right
        text = ast.get_source_segment(source, node) or ast.unparse(node)
        if not isinstance(node, _ATOMIC):
            text = f"({text})"
        return self.symbol(f"_cp{len(self.text)}", text)


class _Printer(StrPrinter):
    """Prints sympy terms back as Triton source."""

    def __init__(self, terms: _Terms):
        super().__init__()
        self.terms = terms

    def _print_Symbol(self, expr):
        return self.terms.text[expr]


def _render(expr: sp.Expr, terms: _Terms) -> str:
    return _Printer(terms).doprint(expr)


def _strides(terms: _Terms, ndim: int, shape, strides) -> list[sp.Expr]:
    if strides is not None:
        return [terms.convert(s) for s in strides]
    if shape is None:
        return [sp.Integer(1)]
    extents = [terms.convert(s) for s in shape]
    return [sp.Mul(*extents[d + 1 :]) for d in range(ndim)]


@lru_cache(maxsize=4096)
def offsets(indices: tuple[str, ...], shape: tuple[str, ...] | None, strides: tuple[str, ...] | None) -> str:
    """``sum(i_d * stride_d)`` as simplified source; contiguous strides come from ``shape``."""
    terms = _Terms()
    index_terms = [terms.convert(i) for i in indices]
    stride_terms = _strides(terms, len(indices), shape, strides)
    return _render(sp.Add(*(i * s for i, s in zip(index_terms, stride_terms))), terms)


@lru_cache(maxsize=4096)
def bounds_mask(indices: tuple[str, ...], shape: tuple[str, ...]) -> str | None:
    """``0 <= i_d < extent_d`` for every dim, folded where literals decide it; ``None`` if always true."""
    terms = _Terms()
    parts = []
    for index, extent in zip(indices, shape):
        i, n = terms.convert(index), terms.convert(extent)
        low = sp.Ge(i, 0)
        high = sp.Lt(i, n)
        for cond in (low, high):
            if cond is sp.true:
                continue
            if cond is sp.false:
                return "False"
            parts.append(f"({_render(cond.lhs, terms)} {cond.rel_op} {_render(cond.rhs, terms)})")
    return " & ".join(parts) if parts else None


@lru_cache(maxsize=4096)
def simplify(source: str) -> str:
    """An integer expression, simplified: ``simplify("(W) - (0)") == "W"``."""
    terms = _Terms()
    return _render(terms.convert(source), terms)
