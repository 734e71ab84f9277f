"""The loop bodies around a stacked reduction that benchmarks/sweeps/sweep_row_bodies.py times: their source.

    python benchmarks/kernels/row_bodies_spec.py           # write row_bodies.py and hand_row_bodies.py
    python benchmarks/kernels/row_bodies_spec.py --check   # exit 1 if either is stale

Every kernel is a persistent row loop (``for row in range(pid, M, nprog)`` or the same ``while``) over an
M x D table of W same-layout buffers, BLOCK_D >= D, that sums the row over the stack in fp32 and then does
one of :data:`BODIES` with it.  ``row_bodies.py`` holds them in the castpile language, for every
loop, binding and cast (:func:`cp_name`); ``make generated`` transpiles it into ``generated/``.
``hand_row_bodies.py`` holds the same bodies by hand (:func:`hand_name`): a ``tl.static_range`` loop over the
table's addresses accumulating in fp32, the pointer written ``ptr + row * D + cols`` as hand code writes it.

Bindings: ``2d`` is ``multicast_like(ex, table[:W], shape=(M, D))`` read as ``bufs[row, cols]``; ``1d`` is
``shape=(M * D,)`` read as ``tl.load(bufs[row * D + cols], mask=cols < D)``, the row offset the user's.
Casts: ``to`` converts before the reduction (``tl.sum(x.to(tl.float32), axis=0)``), ``dtype`` asks
``tl.sum`` for it (``dtype=tl.float32``).
"""

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: What the body does with the row ``h`` (the stack's fp32 sum): name -> what it is.
BODIES = {
    "none": "normalise h by its root mean square",
    "res_before": "a residual row loaded before the reduction, added, then normalised",
    "res_after": "a residual row loaded after the reduction, added, then normalised",
    "res_weight": "residual after, normalised, scaled by a weight row loaded in the loop",
    "res_weight_hoisted": "res_weight with the weight row loaded once, before the loop",
    "scalar": "normalised, scaled by a scalar, and the row's 1/rms stored as a scalar per row",
    "two_stacks": "a second stacked reduction (another table's row) added, then normalised",
}
LOOPS = ("for", "while")
BINDINGS = ("2d", "1d")
CASTS = ("to", "dtype")
#: Every kernel's parameters, castpile and hand alike (``table2``: the second stack's addresses, ``stats``: M floats).
PARAMS = "ex, table, table2, res, w, out, stats, M, D, eps, alpha, W: tl.constexpr, BLOCK_D: tl.constexpr"


def cp_name(body: str, loop: str, binding: str, cast: str) -> str:
    return f"cp_{body}_{loop}_{binding}_{cast}"


def hand_name(body: str, loop: str) -> str:
    return f"hand_{body}_{loop}"


def _stack_sum(binding: str, cast: str, bufs: str) -> str:
    access = f"{bufs}[row, cols]" if binding == "2d" else f"tl.load({bufs}[row * D + cols], mask=mask, other=0)"
    if cast == "to":
        return f"tl.sum({access}.to(tl.float32), axis=0)"
    return f"tl.sum({access}, axis=0, dtype=tl.float32)"


def _hand_sum(table: str, name: str) -> list[str]:
    return [
        f"{name} = tl.zeros((BLOCK_D,), tl.float32)",
        "for p in tl.static_range(W):",
        f"    {name} += tl.load(_peer({table}, p, ex) + row * D + cols, mask=mask, other=0).to(tl.float32)",
    ]


def _body(body: str, total: list[str]) -> tuple[list[str], list[str]]:
    """(lines before the loop, lines of the loop body) given ``total``, the lines that leave the stack sum in ``h``
    (``two_stacks``: and the second in ``g``)."""
    res = "tl.load(res + row * D + cols, mask=mask, other=0).to(tl.float32)"
    norm = "scale = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / D + eps)"
    store = "tl.store(out + row * D + cols, ({}).to(out.dtype.element_ty), mask=mask)"
    before: list[str] = []
    if body == "none":
        lines = [*total, norm, store.format("h * scale")]
    elif body == "res_before":
        lines = [f"r = {res}", *total, "h += r", norm, store.format("h * scale")]
    elif body == "res_after":
        lines = [*total, f"h += {res}", norm, store.format("h * scale")]
    elif body == "res_weight":
        weight = "wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)"
        lines = [*total, f"h += {res}", norm, weight, store.format("h * scale * wt")]
    elif body == "res_weight_hoisted":
        before = ["wt = tl.load(w + cols, mask=mask, other=0).to(tl.float32)"]
        lines = [*total, f"h += {res}", norm, store.format("h * scale * wt")]
    elif body == "scalar":
        lines = [*total, norm, "tl.store(stats + row, scale)", store.format("h * (scale * alpha)")]
    elif body == "two_stacks":
        lines = [*total, "h += g", norm, store.format("h * scale")]
    else:
        raise ValueError(body)
    return before, lines


def _kernel(name: str, doc: str, head: list[str], before: list[str], lines: list[str], loop: str) -> str:
    out = ["@triton.jit", f"def {name}({PARAMS}):", f'    """{doc}"""', *(f"    {x}" for x in head)]
    out += ["    cols = tl.arange(0, BLOCK_D)", "    mask = cols < D", *(f"    {x}" for x in before)]
    if loop == "for":
        out.append("    for row in range(tl.program_id(0), M, tl.num_programs(0)):")
        out += [f"        {x}" for x in lines]
    else:
        out += ["    row = tl.program_id(0)", "    while row < M:"]
        out += [f"        {x}" for x in lines] + ["        row += tl.num_programs(0)"]
    return "\n".join(out) + "\n"


def cp_source() -> str:
    parts = [
        '"""Loop bodies around a stacked reduction, in the castpile language: written by row_bodies_spec.py (do not edit;',
        'benchmarks/sweeps/sweep_row_bodies.py times them against hand_row_bodies.py)."""',
        "",
        "import triton",
        "import triton.language as tl",
        "from castpile import multicast_like",
        "",
    ]
    for body, what in BODIES.items():
        for loop in LOOPS:
            for binding in BINDINGS:
                for cast in CASTS:
                    shape = "(M, D)" if binding == "2d" else "(M * D,)"
                    head = [f"bufs = multicast_like(ex, table[:W], shape={shape}, align=16)"]
                    total = [f"h = {_stack_sum(binding, cast, 'bufs')}"]
                    if body == "two_stacks":
                        head.append(f"more = multicast_like(ex, table2[:W], shape={shape}, align=16)")
                        total.append(f"g = {_stack_sum(binding, cast, 'more')}")
                    before, lines = _body(body, total)
                    doc = f"{what} ({loop} loop, {binding} binding, cast: {cast})."
                    parts += ["", _kernel(cp_name(body, loop, binding, cast), doc, head, before, lines, loop)]
    return "\n".join(parts)


def hand_source() -> str:
    parts = [
        '"""The loop bodies of row_bodies.py by hand: written by row_bodies_spec.py (do not edit)."""',
        "",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        "def _peer(table, p: tl.constexpr, ex):",
        '    """Buffer ``p``\'s address, typed and 16-byte aligned."""',
        "    return tl.multiple_of(tl.load(table + p).to(tl.pointer_type(ex.dtype.element_ty)), 16)",
        "",
    ]
    for body, what in BODIES.items():
        for loop in LOOPS:
            total = _hand_sum("table", "h")
            if body == "two_stacks":
                total += _hand_sum("table2", "g")
            before, lines = _body(body, total)
            parts += ["", _kernel(hand_name(body, loop), f"{what} ({loop} loop), by hand.", [], before, lines, loop)]
    return "\n".join(parts)


OUTPUTS = {HERE / "row_bodies.py": cp_source, HERE / "hand_row_bodies.py": hand_source}

#: A 2-D stack reduction's call in generated/row_bodies_*.py as castpile writes it since issue 35's rule
#: (docs/language.md, "What castpile emits for an index"): the row's scalar offset in ``base=``, the bounds without
#: the lower bounds that the loop's ``row`` and ``cols`` (an arange) are proven to satisfy.  A 1-D access
#: (``bufs[row * D + cols]`` with ``shape=(M * D,)``) under ``mask=cols < D`` has no bounds since the mask rule
#: (castpile/compiler/mask_bounds.py) and its row offset in ``base=``.
_RULED_CALL = re.compile(
    r'_castpile_reduce_loop\((\w+), W, None, ex, cols, \(row < M\) & \(cols < D\), "sum", (.*?), base=D\*row\)'
)
_MASKED_CALL = re.compile(
    r'_castpile_reduce_loop\((\w+), W, None, ex, cols, _castpile_unbounded\((\w+)\), "sum", (.*?), base=D\*row\)'
)


def before_rule(text: str) -> str:
    """The generated module ``text`` as castpile's lowering wrote it before issue 35's rules (at 7e43397): each stack
    reduction's offsets ``D*row + cols`` added to the buffer's pointer at once, the 2-D bounds
    ``(row >= 0) & (row < M) & (cols >= 0) & (cols < D)`` and the 1-D bounds ``(D*row + cols >= 0) & (D*row + cols <
    E)`` (``E`` the binding's extent name, which the mask rule's ``_castpile_unbounded(E)`` names).  The helpers take no ``base=`` then, and do what they did
    (``_castpile_rebased`` returns the pointer as it is)::

        >>> before_rule('_castpile_reduce_loop(bufs, W, None, ex, cols, (row < M) & (cols < D), "sum", align=16, base=D*row)')
        '_castpile_reduce_loop(bufs, W, None, ex, D*row + cols, (row >= 0) & (row < M) & (cols >= 0) & (cols < D), "sum", align=16)'
        >>> before_rule('_castpile_reduce_loop(b, W, None, ex, cols, _castpile_unbounded(b_shape0), "sum", mask, base=D*row)')
        '_castpile_reduce_loop(b, W, None, ex, D*row + cols, (D*row + cols >= 0) & (D*row + cols < b_shape0), "sum", mask)'
    """

    def call(m: re.Match) -> str:
        bounds = "(row >= 0) & (row < M) & (cols >= 0) & (cols < D)"
        return f'_castpile_reduce_loop({m.group(1)}, W, None, ex, D*row + cols, {bounds}, "sum", {m.group(2)})'

    def flat(m: re.Match) -> str:
        offs = "D*row + cols"
        bounds = f"({offs} >= 0) & ({offs} < {m.group(2)})"
        return f'_castpile_reduce_loop({m.group(1)}, W, None, ex, {offs}, {bounds}, "sum", {m.group(3)})'

    out = _MASKED_CALL.sub(flat, _RULED_CALL.sub(call, text))
    if out == text or "base=D*row" in out:
        raise ValueError("not a generated row_bodies module as castpile writes it since issue 35")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if an output is stale")
    args = parser.parse_args(argv)
    stale = [path for path, make in OUTPUTS.items() if not path.exists() or path.read_text() != make()]
    if args.check:
        for path in stale:
            print(f"stale: {path.name} (run python {Path(__file__).name})")
        return 1 if stale else 0
    for path in stale:
        path.write_text(OUTPUTS[path]())
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
