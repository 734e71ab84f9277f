"""A fuzz :class:`~fuzz_model.Case` written as the kernel ``kernel`` in castpile's language, and
its parameters' types for an sm_90 compile.

Every kernel takes the same parameters (``example, table, res, resi, vals, mk, pm, ctr``,
the run-time ``n*`` shape, ``s*`` scalar indices, ``t*`` strides, ``r`` rank and ``ms``
mask, the constexprs ``LO``, ``R``, ``EVEN``); tests/fuzz_run.py passes them.
"""

from __future__ import annotations

import ast
import math
import re

from fuzz_model import FLAG_CONTEXTS, IMPORTS, TRITON_NAMES, Case, call_form, has_ptr_mask, poison_slot

SAME_SIZE = {"float32": "int32", "bfloat16": "int16", "int32": "float32"}  # a rebound example: other bits, same size
TRITON_TYPES = {"float32": "*fp32", "bfloat16": "*bf16", "int32": "*i32"}
EXTRA_VALUES = {"eviction_policy": '"evict_last"', "cache_modifier": '".cg"', "volatile": "True"}
# A conditional's other branch, never taken: another allowed value of the keyword (feature keyword_spellings)
OTHER_VALUES = {
    '"relaxed"': '"acq_rel"',
    '"acq_rel"': '"relaxed"',
    '"release"': '"relaxed"',
    '"acquire"': '"relaxed"',
    '"gpu"': '"sys"',
    '"sys"': '"gpu"',
    '"set"': '"add"',
    '"add"': '"set"',
    "True": "False",
    '"evict_last"': '"evict_first"',
    '".cg"': '".cg"',
}
EFFECT = "tl.atomic_add(ctr, 1)"  # an argument with a side effect: its value is how many ran before it


def _along(expr: str, axis: int, rank: int) -> str:
    """``expr`` (1-D) placed along ``axis`` of a rank-``rank`` tensor."""
    if rank == 1:
        return f"({expr})"
    return f"({expr})[{', '.join(':' if a == axis else 'None' for a in range(rank))}]"


def _flat(shape: tuple[int, ...]) -> str:
    """Row-major flat offsets of a tensor of ``shape`` (``0`` for a scalar)."""
    if not shape:
        return "0"
    terms = []
    for axis, n in enumerate(shape):
        stride = math.prod(shape[axis + 1 :])
        terms.append(f"{_along(f'tl.arange(0, {n})', axis, len(shape))} * {stride}")
    return " + ".join(terms)


def _with_effect(case: Case, slot: str, expr: str) -> str:
    return f"{expr} + {EFFECT}" if slot in case.effects else expr


def _binding(case: Case, body: list[str]) -> str | None:
    """Write the tile and the binding into ``body``; the binding statement (to break across lines), or None."""
    mcl = IMPORTS[case.importer][1]
    P = case.ptile
    if case.tile == "plain":
        return None
    if case.tile == "slice":
        tile = f"table[:{case.slice_count}]"
    elif case.tile == "slice_lo":
        tile = f"table[LO:LO + {case.slice_count}]"
    elif case.tile == "slice_named":
        body.append(f"tile = table[:{case.slice_count}]")
        tile = "tile"
    elif case.tile == "peer":
        tile = f"table[{'R' if case.rank_constexpr else 'r'}]"
    elif case.tile == "peer0d":
        body.append(f"tile = tl.load(table + {'R' if case.rank_constexpr else 'r'})")
        tile = "tile"
    else:
        body.append(f"tile = tl.load(table + {_flat(P)})")
        tile = "tile"
    if has_ptr_mask(case):
        body.append(f"pmask = tl.load(pm + {_flat(P)}) != 0")
    ndim = len(case.indices)
    texts = {}
    if case.shape is not None:
        texts["shape"] = f"({''.join(f'n{d}, ' for d in range(ndim))})"
    if case.explicit_strides:
        names = [f"t{d}" for d in range(ndim)] if case.strides_names else [str(s) for s in case.strides]
        texts["strides"] = f"({''.join(f'{s}, ' for s in names)})"
    if has_ptr_mask(case):
        texts["ptr_mask"] = "pmask"
    order = case.binding_order or tuple(k for k in ("shape", "strides", "ptr_mask") if k in texts)
    example = f"tl.{case.dtype}" if case.dtype_example else "example"
    args = [example, tile] + [
        texts[k] if i < case.binding_positional else f"{k}={texts[k]}" for i, k in enumerate(order)
    ]
    statement = f"{case.bound_name} = {_head(case, mcl)}({', '.join(args)})"
    body.append(statement)
    poison = poison_slot(case)
    rebinding = {
        "n": [f"n{d} = n{d} + 4" for d in range(ndim)],
        "t": [f"t{d} = t{d} + 1" for d in range(ndim)],
        "example": [f"example = example.to(tl.pointer_type(tl.{SAME_SIZE[case.dtype]}))"],
        "tile": [f"tile = tile * 0 + tl.load(table + {poison})" if P else f"tile = tl.load(table + {poison})"],
        "pmask": ["pmask = pmask == pmask"],
        "table": ["table = table + 1"],
        "r": ["r = r + 1"],
    }
    for name in case.rebound:
        body.extend(rebinding[name])
    return statement


def _head(case: Case, name: str) -> str:
    """How a castpile name is called: as imported, or in parentheses (feature heads)."""
    return f"({name})" if case.head == "paren" else name


def _value_name(text: str) -> str:
    """The name of a literal's value in tests/fuzz_options.py (and of a constexpr global): ``"relaxed"`` -> V_relaxed."""
    return "V_" + re.sub(r"\W", "", text)


def _spelled(case: Case, slot: str, text: str) -> str:
    """A compile-time keyword's value ``text`` (a literal) written as the case spells ``slot`` (v1.3)."""
    spelling = case.spellings.get(slot, "literal")
    if spelling == "parameter":
        return f"K_{slot}"
    if spelling == "conditional":
        other = OTHER_VALUES.get(text, '"eq"' if text != '"eq"' else '"ne"')
        return f"{text} if EVEN else {other}" if case.mask_on else f"{other} if EVEN else {text}"
    if spelling == "global":
        return _value_name(text)
    if spelling == "attribute":
        return f"fuzz_options.{_value_name(text)}"
    if spelling == "local":
        return f"l_{slot}"
    return text


def _compile_time_texts(case: Case) -> dict[str, str]:
    """Each compile-time keyword slot of the call, its literal text."""
    texts = {"sem": f'"{case.sem}"', "scope": f'"{case.scope}"', "decrement": "True", **EXTRA_VALUES}
    if case.context == "wait":
        texts["cmp"] = f'"{case.wait_cmp}"'
    if case.context == "signal":
        texts["op"] = f'"{case.signal_op}"'
    return {slot: texts[slot] for slot in case.spellings}


def keyword_constexprs(case: Case) -> dict:
    """The constexpr parameters ``K_<slot>`` of the compile-time keywords spelled as parameters, and their values."""
    texts = _compile_time_texts(case)
    return {f"K_{s}": ast.literal_eval(texts[s]) for s, how in case.spellings.items() if how == "parameter"}


def _index_names(case: Case, body: list[str]) -> list[str]:
    """Write the index statements; each index as the access writes it (inline: ``3 - a0`` in the subscript)."""
    names, axes = [], set()
    for d, index in enumerate(case.indices):
        if index.is_scalar and index.pid:
            body.append(f"i{d} = tl.program_id(0) + {index.value}")
            name = f"i{d}"
        elif index.is_scalar:
            name = f"s{d}" if index.runtime else str(index.value)
        elif case.inline_indices:
            if index.axis not in axes:
                axes.add(index.axis)
                body.append(f"a{index.axis} = {_along(f'tl.arange(0, {index.block})', index.axis, case.irank)}")
            name = f"a{index.axis} + {index.value}" if index.sign > 0 else f"{index.value} - a{index.axis}"
        else:
            arange = f"tl.arange(0, {index.block})"
            expr = f"{arange} + {index.value}" if index.sign > 0 else f"{index.value} - {arange}"
            body.append(f"i{d} = {_along(expr, index.axis, case.irank)}")
            name = f"i{d}"
        names.append(_with_effect(case, f"index{d}", name))
    return names


def _mask_text(case: Case, body: list[str]) -> str:
    """Write what the mask needs; the mask argument's text."""
    ishape = case.ishape
    if case.mask_form == "constexpr":
        return "EVEN"
    if case.mask_form == "none":
        return "None"
    if case.mask_form == "scalar":
        return "ms != 0"
    if "mask" in case.effects:
        body.append(f"mki = tl.load(mk + {_flat(ishape)})")
        return f"(mki + {EFFECT}) % 2 != 0"
    body.append(f"m = tl.load(mk + {_flat(ishape)}) != 0")
    return "m"


def _value_text(case: Case, body: list[str]) -> str:
    """Write the stored value's statement; the value's text."""
    P, ishape = case.ptile, case.ishape
    if case.value in ("row", "row_none"):
        body.append(f"v = tl.load(vals + {_flat(ishape)})")
        if case.value == "row_none" and ishape:
            return f"v[{', '.join(['None'] * len(P) + [':'] * len(ishape))}]"
        return "v"
    if case.value == "full":
        body.append(f"v = tl.load(vals + {_flat(P + ishape)})")
        return "v"
    return "3"


def _call(fn: str, first: str, case: Case, texts: dict[str, str]) -> str:
    args, positional = call_form(case)
    written = [first] + [texts[s] if i < positional else f"{s}={texts[s]}" for i, s in enumerate(args)]
    return f"{fn}({', '.join(written)})"


def _reduction(case: Case, reduced: str) -> str:
    """``tl.<op>(X, axis=0)`` and its other spellings."""
    keyword_text = {
        "axis": "axis=0",
        "keep_dims": "keep_dims=True",
        "dtype": f"dtype=tl.{case.sum_dtype}",
        "return_indices": "return_indices=True",
        "return_indices_tie_break_left": f"return_indices_tie_break_left={case.tie_break_left}",
        "input": f"input={reduced}",
    }
    keywords = (
        [keyword_text[k] for k in case.reduce_order] if case.reduce_order else (["axis=0"] if case.axis_keyword else [])
    )
    axis = [] if case.axis_keyword else ["0"]
    if case.spelling == "method":
        return f"{reduced}.{case.op}({', '.join(axis + keywords)})"
    first = [] if case.spelling == "input" else [reduced]
    return f"tl.{case.op}({', '.join(first + axis + keywords)})"


def _access(case: Case, body: list[str]) -> str:
    """Write what the access needs into ``body``; the access statement."""
    _, _, signal, wait = IMPORTS[case.importer]
    if case.tile == "plain":
        names = _index_names(case, body)
        terms = [n if s == 1 else f"({n}) * {s}" for n, s in zip(names, case.strides)]
        idx = f"example + {' + '.join(terms)}"
    else:
        idx = f"{case.bound_name}[{', '.join(_index_names(case, body))}]"
    texts = {
        "other": _with_effect(case, "other", str(case.other)),
        "cmp": _with_effect(case, "cmp", str(case.cmp)),
        "sem": f'"{case.sem}"',
        "scope": f'"{case.scope}"',
        **EXTRA_VALUES,
    }
    if case.use_mask:
        texts["mask"] = _mask_text(case, body)
    c = case.context
    if c in ("store", "tl_store", "aug", "atomic", "cas"):
        texts["value"] = texts["val"] = _with_effect(
            case, "val" if c in ("atomic", "cas") else "value", _value_text(case, body)
        )
    if c == "signal":
        texts["value"] = _with_effect(case, "value", str(case.signal_value))
        texts["wait_for"] = _with_effect(case, "wait_for", str(case.wait_for))
        texts["op"] = f'"{case.signal_op}"'
    if c == "wait":
        texts["value"] = _with_effect(case, "value", str(case.flag))
        texts["cmp"] = f'"{case.wait_cmp}"'
        texts["reset"] = "None" if case.reset_none else _with_effect(case, "reset", str(case.reset))
        texts["decrement"] = "True"
    for slot, text in _compile_time_texts(case).items():
        texts[slot] = _spelled(case, slot, text)
    if c == "load":
        return f"x = {idx}"
    if c == "store":
        return f"{idx} = {texts['value']}"
    if c == "aug":
        return f"{idx} {case.op}= {texts['value']}"
    if c == "reduce":
        reduced = {
            "access": idx,
            "to_float32": f"{idx}.to(tl.float32)",
            "tl_load": _call("tl.load", idx, case, texts),
            "to_int8": f"{idx}.to(tl.int8)",
            "to_dtype_keyword": f"{idx}.to(dtype=tl.float32)",
            "to_bitcast_keyword": f"{idx}.to(tl.float32, bitcast=False)",
        }[case.reduced]
        target = "x, xi" if case.return_indices else "x"
        return f"{target} = {_reduction(case, reduced)}"
    functions = {
        "tl_load": "tl.load",
        "tl_store": "tl.store",
        "atomic": f"tl.atomic_{case.op}",
        "cas": "tl.atomic_cas",
        "signal": _head(case, signal),
        "wait": _head(case, wait),
    }
    call = _call(functions[c], idx, case, texts)
    return f"x = {call}" if case.returns else call


def _break_points(text: str, backslashes: bool) -> list[tuple[int, str]]:
    """Where ``text`` (one statement) may continue on the next line: after a comma or '(' inside
    brackets, and (``backslashes``) after an '=', an augmented '=' or a '+' with a backslash."""
    points, depth = [], 0
    for at, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        if depth and (char == "(" or text.startswith(", ", at)):
            points.append((at + 1 + (char == ","), "bracket"))
    if backslashes:
        points += [(m.end() - 1, "backslash") for m in re.finditer(r" (?:[-+*&|^]?=|\+) ", text)]
    return sorted(points)


def _continued(statements: list[str], breaks: tuple[int, ...], backslashes: bool, indent: str) -> list[str]:
    """``statements`` with line breaks at the chosen break points (each modulo their number)."""
    points = [(s, at, how) for s, text in enumerate(statements) for at, how in _break_points(text, backslashes)]
    if not points:
        return statements
    chosen = sorted({points[b % len(points)] for b in breaks}, key=lambda p: (p[0], -p[1]))
    out = list(statements)
    for n, (s, at, how) in enumerate(chosen):
        text = out[s]
        if how == "backslash":  # ``bufs[i] += \`` and the value on the next line
            out[s] = text[:at] + " \\\n" + indent + "    " + text[at + 1 :]
        else:
            comment = "  # continued" if n % 2 else ""
            out[s] = text[:at].rstrip() + comment + "\n" + indent + "    " + text[at:]
    return out


def source(case: Case) -> str:
    """The kernel ``kernel`` of ``case`` in castpile's language."""
    body: list[str] = []
    binding = _binding(case, body)
    access = _access(case, body)
    import_line = _import_line(case)
    spelled = set(case.spellings.values())
    body[:0] = [
        f"l_{slot}: tl.constexpr = {text}"
        for slot, text in _compile_time_texts(case).items()
        if case.spellings[slot] == "local"
    ]
    statements = [*body, access]
    if case.joined and body:
        statements = [*body[:-1], f"{body[-1]}; {access}"]
    breakable = [i for i, s in enumerate(statements) if s == binding or s.endswith(access)]
    if case.breaks:
        broken = _continued(
            [statements[i] for i in breakable], case.breaks, case.backslashes, "    " * (2 if case.enclosing else 1)
        )
        for i, text in zip(breakable, broken):
            statements[i] = text
    if case.returns or case.context == "reduce":
        statements.append(f"tl.store(res + {_flat(case.result_shape)}, x)")
    if case.return_indices:
        statements.append(f"tl.store(resi + {_flat(case.result_shape)}, xi)")
    params = (
        "example, table, res, resi, vals, mk, pm, ctr, n0, n1, n2, s0, s1, s2, t0, t1, t2, r, ms, "
        "LO: tl.constexpr, R: tl.constexpr, EVEN: tl.constexpr"
    )
    params += "".join(f", {name}: tl.constexpr" for name in keyword_constexprs(case))
    triton_lines, _ = TRITON_NAMES[case.triton_names]
    if case.jit == "jit":
        triton_lines = [*triton_lines, "from triton import jit"]
    decorator = "@triton.jit" if case.jit == "triton.jit" else "@jit"
    kernel = [decorator, f"def kernel({params}):"] + ["    " + line for line in statements]
    module = ["import fuzz_options"] if "attribute" in spelled else []
    module += sorted(
        {
            f"{_value_name(text)} = tl.constexpr({text})"
            for slot, text in _compile_time_texts(case).items()
            if case.spellings[slot] == "global"
        }
    )
    if case.enclosing:
        kernel = ["def make_kernel():", f"    {import_line}", ""] + ["    " + line for line in kernel]
        kernel += ["    return kernel", "", "", "kernel = make_kernel()"]
        lines = [*triton_lines, *module, "", "", *kernel]
    elif case.head == "global":  # castpile's names (or castpile itself) bound by ``global`` and an import in a function
        setup = ["def setup():", f"    global {_bound_names(import_line)}", f"    {import_line}", "", "", "setup()"]
        lines = [*triton_lines, *module, "", "", *setup, "", "", *kernel]
    else:
        lines = [*triton_lines, import_line, *module, "", "", *kernel]
    return _spell_triton(case, "\n".join(lines) + "\n")


def _bound_names(import_line: str) -> str:
    """The names ``import_line`` binds, comma-separated: ``castpile`` (``cp``) for ``import castpile [as cp]``,
    else each name of ``from castpile import ...`` as it is bound."""
    if import_line.startswith("import "):
        return import_line.split(" as ")[-1].removeprefix("import ")
    return ", ".join(name.split(" as ")[-1] for name in import_line.removeprefix("from castpile import ").split(", "))


def _import_line(case: Case) -> str:
    """The import of castpile's names the kernel calls (the word castpile only there, with every import but
    ``import castpile``)."""
    if case.context == "wait" and case.tile == "plain" and case.importer in ("from", "from_as"):
        return "from castpile import wait" + (" as wt" if case.importer == "from_as" else "")
    import_line = IMPORTS[case.importer][0]
    if case.importer in ("from", "from_as") and case.context in FLAG_CONTEXTS:
        name = "signal" if case.context == "signal" else "wait"
        import_line += f", {name}" + (
            {"signal": " as sg", "wait": " as wt"}[name] if case.importer == "from_as" else ""
        )
    return import_line


def _spell_triton(case: Case, text: str) -> str:
    """``tl.`` written as the case's import of triton.language names it (annotations ``constexpr``: Triton 3.6's
    interpreter compiles kernels with string annotations and takes only ``tl.constexpr`` and ``constexpr``)."""
    _, prefix = TRITON_NAMES[case.triton_names]
    if prefix == "tl.":
        return text
    return re.sub(r"\btl\.", prefix, text.replace(": tl.constexpr", ": constexpr"))


def signature(case: Case) -> dict[str, str]:
    """The kernel's parameters' Triton types (for an sm_90 compile)."""
    ptr = TRITON_TYPES[case.dtype]
    return {
        "example": ptr,
        "table": "*i64",
        "res": ptr,
        "resi": "*i32",
        "vals": ptr,
        "mk": "*i32",
        "pm": "*i32",
        "ctr": "*i32",
        **{f"{c}{d}": "i32" for c in "nst" for d in range(3)},
        "r": "i32",
        "ms": "i32",
        "LO": "constexpr",
        "R": "constexpr",
        "EVEN": "constexpr",
        **dict.fromkeys(keyword_constexprs(case), "constexpr"),
    }


def constexprs(case: Case) -> dict:
    return {"LO": case.lo, "R": case.rank, "EVEN": case.mask_on, **keyword_constexprs(case)}
