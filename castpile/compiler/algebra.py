"""Index algebra: element offsets and bounds masks, simplified with sympy.

Indices, extents and strides arrive as source text on one line.  Integer literals,
names and ``+ - *`` become sympy terms; anything else (``i[:, None]``, calls, ``//``)
is an opaque integer symbol that prints back as its own text.  Products print as
products, never powers (Triton tensors have no ``**``)::

    >>> offsets(("i[:, None]", "j[None, :]"), ("M", "N"), None)
    'N*i[:, None] + j[None, :]'
    >>> offsets(("i", "j", "k"), ("n", "n", "n"), None)
    'i*n*n + j*n + k'
    >>> offsets(("3 - j", "j"), None, ("1", "1"))   # the sum keeps the indices' shape
    '3 + 0*j'
    >>> bounds_mask(("offs",), ("n",))
    '(offs >= 0) & (offs < n)'

Conversion and printing take time linear in the length of the text.
"""

from __future__ import annotations

import ast
from functools import lru_cache

import sympy as sp
from sympy.printing.precedence import precedence
from sympy.printing.str import StrPrinter

_ATOMIC = (ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.Call)
_LINEAR = (ast.Add, ast.Sub)


class _Terms:
    """Converts source text to sympy, remembering how each symbol prints."""

    def __init__(self):
        self.text: dict[sp.Symbol, str] = {}
        self.names: dict[str, sp.Symbol] = {}
        self.mentioned: dict[sp.Symbol, None] = {}  # every symbol converted so far, in order (terms that cancel too)

    def convert(self, source: str) -> sp.Expr:
        source = source.strip()
        return self._node(ast.parse(source, mode="eval").body, source.encode("utf-8"))

    def _name(self, name: str) -> sp.Symbol:
        if name not in self.names:
            symbol = self.names[name] = sp.Symbol(name, integer=True)
            self.text[symbol] = name
        self.mentioned[self.names[name]] = None
        return self.names[name]

    def _opaque(self, node: ast.expr, source: bytes) -> sp.Symbol:
        # One line of text: ast's column offsets are byte offsets into it.
        text = source[node.col_offset : node.end_col_offset].decode("utf-8")
        symbol = sp.Symbol(f"_cp{len(self.text)}'", integer=True)  # never a Python name: no clash with the user's
        self.text[symbol] = text if isinstance(node, _ATOMIC) else f"({text})"
        self.mentioned[symbol] = None
        return symbol

    def _node(self, node: ast.expr, source: bytes) -> sp.Expr:
        if isinstance(node, ast.BinOp) and isinstance(node.op, _LINEAR):
            terms = []
            while isinstance(node, ast.BinOp) and isinstance(node.op, _LINEAR):  # a left-nested chain
                term = self._node(node.right, source)
                terms.append(term if isinstance(node.op, ast.Add) else -term)
                node = node.left
            terms.append(self._node(node, source))
            return sp.Add(*terms)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            factors = []
            while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                factors.append(self._node(node.right, source))
                node = node.left
            factors.append(self._node(node, source))
            return sp.Mul(*factors)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return sp.Integer(node.value)
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self._node(node.operand, source)
            return -inner if isinstance(node.op, ast.USub) else inner
        return self._opaque(node, source)


class _Printer(StrPrinter):
    """Prints sympy terms back as Triton source: symbols as their text, powers as products."""

    def __init__(self, terms: _Terms):
        super().__init__()
        self.terms = terms

    def _as_ordered_terms(self, expr, order=None):
        # Alphabetical by text, numbers last: sympy's own term order sorts in quadratic time.
        return sorted(expr.args, key=lambda term: (term.is_number, self._print(term)))

    def _print_Symbol(self, expr):
        return self.terms.text[expr]

    def _print_Pow(self, expr, rational=False):
        base, exponent = expr.as_base_exp()
        if exponent.is_Integer and exponent > 0:
            return "*".join([self.parenthesize(base, precedence(sp.Mul(2, 3, evaluate=False)))] * int(exponent))
        return super()._print_Pow(expr, rational)


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
    return _offsets(indices, shape, strides)[0]


def _offsets(indices: tuple[str, ...], shape, strides) -> tuple[str, bool]:
    """:func:`offsets`, and whether the sum is 0."""
    terms = _Terms()
    index_terms = [terms.convert(i) for i in indices]
    shaping = list(terms.mentioned)
    stride_terms = _strides(terms, len(indices), shape, strides)
    total = sp.Add(*(i * s for i, s in zip(index_terms, stride_terms)))
    # A stride of 0 or terms that cancel drop an index from the sum; ``0*i`` keeps its shape in the offsets.
    present = total.free_symbols
    kept = [f"0*{terms.text[symbol]}" for symbol in shaping if symbol not in present]
    if not kept:
        return _render(total, terms), total == 0
    return " + ".join(([] if total == 0 else [_render(total, terms)]) + kept), total == 0


@lru_cache(maxsize=4096)
def split_offsets(
    scalars: tuple[str, ...], tensors: tuple[str, ...], shape: tuple[str, ...] | None, strides: tuple[str, ...] | None
) -> tuple[str, str] | None:
    """The offsets of indices ``scalars[d] + tensors[d]`` as two sums, ``base`` (of the scalar parts) and the rest,
    for the buffer's pointer to take ``base`` first; ``None`` where the scalar parts sum to 0::

        >>> split_offsets(("row", "0"), ("0", "cols"), ("M", "D"), None)
        ('D*row', 'cols')
    """
    base, zero = _offsets(scalars, shape, strides)
    return None if zero else (base, _offsets(tensors, shape, strides)[0])


@lru_cache(maxsize=4096)
def strides(shape: tuple[str, ...] | None, strides: tuple[str, ...] | None, ndim: int) -> tuple[str, ...]:
    """Each dim's stride as source: ``strides`` simplified, else contiguous for ``shape``, else ``1``.

    >>> strides(("m", "n", "n"), None, 3)
    ('n*n', 'n', '1')
    """
    terms = _Terms()
    return tuple(_render(s, terms) for s in _strides(terms, ndim, shape, strides))


@lru_cache(maxsize=4096)
def bounds_mask(indices: tuple[str, ...], shape: tuple[str, ...], lower: tuple[bool, ...] | None = None) -> str | None:
    """``0 <= i_d < extent_d`` for every dim, folded where literals decide it; ``None`` if always true.  ``lower``:
    for each dim, whether ``i_d >= 0`` is checked (where it is not, the index is proven non-negative)::

        >>> bounds_mask(("row", "cols"), ("M", "D"), (False, False))
        '(row < M) & (cols < D)'
    """
    terms = _Terms()
    parts = []
    for d, (index, extent) in enumerate(zip(indices, shape)):
        i, n = terms.convert(index), terms.convert(extent)
        checks = (sp.Ge(i, 0), sp.Lt(i, n)) if lower is None or lower[d] else (sp.Lt(i, n),)
        for cond in checks:
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
    return _render(sp.expand(terms.convert(source)), terms)
