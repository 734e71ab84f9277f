"""The fuzz generator: :func:`cases` draws random :class:`~fuzz_case.Case` kernels (hypothesis), v1's spellings and
the :data:`~fuzz_case.FEATURES` asked for.

Every field of a case is drawn here; what the kernel does with them is tests/fuzz_model.py's.
"""

from __future__ import annotations

import math

from fuzz_case import (
    ATOMIC_OPS,
    AUG_OPS,
    BF16_CONTEXTS,
    CALL_PARAMS,
    CONTEXTS,
    DTYPES,
    EXTRAS,
    FLAG_CONTEXTS,
    HEADS,
    IMPORTS,
    KEYWORD_SPELLINGS,
    MASKED_SLOTS,
    REDUCED,
    REDUCED_MORE,
    REDUCTIONS,
    SEMS,
    WAIT_HOLDS,
    Case,
    Index,
    call_form,
    has_ptr_mask,
    p2,
    v1_call,
)
from hypothesis import strategies as st


def _call_slots(draw, case: Case, on) -> None:
    """The call's value arguments: which are present, how many by position, the keywords' order."""
    kind = "tl_load" if case.context == "reduce" else case.context
    params = CALL_PARAMS[kind]
    present = set()
    if kind in ("tl_load", "tl_store", "atomic", "signal", "wait") and case.use_mask:
        present.add("mask")
    present |= {"tl_load": {"other"}, "tl_store": {"value"}, "atomic": {"val"}, "cas": {"cmp", "val"}}.get(kind, set())
    if kind == "signal":
        present |= {"value"} if case.signal_value is not None else set()
        present |= {"wait_for"} if case.wait_for is not None else set()
        present |= {"op"} if case.signal_op is not None else set()
    if kind == "wait":
        present |= {"value"} if case.flag is not None else set()
        present |= {"cmp"} if case.wait_cmp is not None else set()
        present |= {"reset"} if case.reset is not None or case.reset_none else set()
        present |= {"decrement"} if case.decrement else set()
    if on("keyword_orders") and kind in SEMS:
        if draw(st.booleans()):
            case.sem = draw(st.sampled_from(SEMS[kind]))
            present.add("sem")
        if draw(st.booleans()):
            case.scope = draw(st.sampled_from(["gpu", "sys"]))
            present.add("scope")
    prefix = 0
    while prefix < len(params) and params[prefix] in present:
        prefix += 1
    written = [p for p in params if p in present]
    if on("keyword_orders"):
        extra = draw(st.sampled_from((None, *EXTRAS.get(kind, ()))))  # one: ptxas refuses .volatile with .cg, say
        written += [extra] if extra else []
        positional = draw(st.integers(0, prefix))
        case.call_args = tuple(written[:positional]) + tuple(draw(st.permutations(written[positional:])))
        case.positional = positional
    else:
        case.call_args, case.positional = v1_call(case, kind)


def _strides(draw, case_shape, ndim, with_shape, on) -> tuple[tuple[int, ...], bool]:
    """Strides and whether ``strides=`` is written: row-major, permuted and padded, or (features) any integers."""
    modes = ["default"]
    if with_shape or on("strides_no_shape"):
        modes.append("permuted")
        if on("strides_any"):
            modes[:0] = ["any", "any"]  # the others are v1's and have run for long
    mode = draw(st.sampled_from(modes))
    if not with_shape and ndim > 1 and mode == "default":
        mode = "permuted"
    extents = case_shape or (24,) * ndim
    if mode == "default":
        return tuple(math.prod(extents[d + 1 :]) for d in range(ndim)), False
    if mode == "permuted":
        order = draw(st.permutations(range(ndim)))
        strides, step = [0] * ndim, 1
        for d in reversed(order):
            strides[d] = step
            step *= extents[d] + draw(st.integers(0, 2))
        return tuple(strides), True
    return tuple(draw(st.sampled_from([0, 1, -1, 2, 3, -2, 5])) for _ in range(ndim)), True


@st.composite
def cases(draw, contexts=tuple(CONTEXTS), features=frozenset()) -> Case:
    """A random, valid Case in one of ``contexts``, using the spellings of ``features`` (FEATURES' keys)."""
    on = frozenset(features).__contains__
    context = draw(st.sampled_from(contexts))
    if context in FLAG_CONTEXTS:
        dtype = "int32"
    else:
        dtype = draw(st.sampled_from(list(DTYPES) if context in BF16_CONTEXTS else ["float32", "int32"]))
    kind = "int" if dtype == "int32" else "float"
    tiles = ["slice", "slice_lo", "slice_named", "tile1", "tile2"]
    if context != "reduce":
        tiles += (["peer"] if on("peer_index") else []) + (["peer0d"] if on("peer_tile") else [])
    if (on("scalar_flags") and context == "wait") or (on("plain_signals") and context == "signal"):
        tiles += ["plain"]
    tile = draw(st.sampled_from(tiles))
    world = draw(st.integers(1, 8))
    lo = draw(st.integers(1, 3)) if tile == "slice_lo" else 0
    rank, rank_constexpr = 0, False
    count, slice_mask, pm_padding = 0, False, False
    if tile in ("slice", "slice_lo", "slice_named"):
        ptile = (p2(world),)
        entries = list(range(world)) + [None] * (p2(world) - world)
        if on("slice_ptr_mask") and draw(st.booleans()):
            valid = draw(st.lists(st.booleans(), min_size=world, max_size=world))
            numbers = iter(range(world))
            entries = [next(numbers) if v else None for v in valid] + [None] * (p2(world) - world)
            count, slice_mask, pm_padding = world, True, draw(st.booleans())
    elif tile in ("peer", "peer0d", "plain"):
        ptile, entries = (), [0]
        rank, rank_constexpr = draw(st.integers(0, 3)), draw(st.booleans())
    else:
        ptile = (
            (p2(world),) if tile == "tile1" else (draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 4])))
        )
        size = math.prod(ptile)
        valid = draw(st.lists(st.booleans(), min_size=size, max_size=size))
        if tile == "tile1" and draw(st.booleans()):
            valid = [p < world for p in range(size)]
        order = draw(st.permutations(range(size)))
        entries, n = [None] * size, 0
        for p in order:
            if valid[p] and n < 8:
                entries[p], n = n, n + 1
    plain = tile == "plain"
    ndim = 1 if plain else draw(st.integers(1, 3))
    with_shape = not plain and (ndim > 1 or draw(st.booleans()))
    if not with_shape and not plain and on("strides_no_shape") and draw(st.booleans()):
        ndim = draw(st.integers(1, 3))
    irank = draw(st.integers(0, min(ndim, 2)))
    axes = list(range(irank)) + [draw(st.integers(-1, irank - 1)) for _ in range(ndim - irank)]
    axes = draw(st.permutations(axes))
    blocks = {a: draw(st.sampled_from([1, 2, 4, 8, 16])) for a in range(irank)}
    shape = tuple(draw(st.integers(1, 13)) for _ in range(ndim)) if with_shape else None
    indices = []
    for d, axis in enumerate(axes):
        extent = shape[d] if shape else 24
        if axis < 0:
            low, high = (-2, extent + 2) if shape else (0, extent - 1)
            spelled = draw(st.sampled_from(["literal", "runtime"] + (["pid"] if on("scalar_flags") else [])))
            indices.append(Index(draw(st.integers(low, high)), runtime=spelled == "runtime", pid=spelled == "pid"))
        else:
            sign = draw(st.sampled_from([1, -1])) if on("strides_any") else 1
            block = blocks[axis]
            if sign > 0:
                low, high = (-3, extent) if shape else (0, extent - block)
            else:
                low, high = (-2, extent + block) if shape else (block - 1, extent - 1)
            indices.append(Index(draw(st.integers(low, high)), block, axis, sign=sign))
    strides, explicit = _strides(draw, shape, ndim, with_shape, on)
    inline = on("strides_any") and irank > 0 and draw(st.booleans())
    op, value = "", "scalar"
    if context == "aug":
        op = draw(st.sampled_from(AUG_OPS[kind]))
    elif context == "atomic":
        op = draw(st.sampled_from(ATOMIC_OPS[kind]))
    if context in ("store", "tl_store", "aug", "atomic", "cas"):
        value = draw(st.sampled_from(["row", "row_none", "full"] + ([] if dtype == "bfloat16" else ["scalar"])))
    case = Case(
        tile=tile,
        ptile=ptile,
        entries=entries,
        lo=lo,
        dtype=dtype,
        shape=shape,
        strides=strides,
        explicit_strides=explicit,
        indices=indices,
        irank=irank,
        context=context,
        op=op,
        value=value,
        use_mask=False,
        importer="alias",
        seed=draw(st.integers(0, 2**31 - 1)),
        cmp=draw(st.integers(-2, 2)),
        rank=rank,
        rank_constexpr=rank_constexpr,
        inline_indices=inline,
        count=count,
        slice_mask=slice_mask,
        pm_padding=pm_padding,
    )
    # a dtype example: not where a compare-and-swap of a tensor tile needs memory at the example (an error)
    if on("dtype_example") and tile != "plain" and draw(st.booleans()):
        case.dtype_example = tile not in ("tile1", "tile2", "peer0d") or context not in ("cas", "signal")
    if context == "reduce":
        case.op = draw(st.sampled_from(REDUCTIONS))
        reduced = REDUCED + (REDUCED_MORE if on("reduce_keywords") else [])
        if dtype == "bfloat16":
            reduced = [r for r in reduced if r.startswith("to_") and r != "to_int8"]
        elif dtype != "int32":
            reduced = [r for r in reduced if r != "to_int8"]
        case.reduced = draw(st.sampled_from(reduced))
        case.axis_keyword = draw(st.booleans())
        case.shift = draw(st.sampled_from([-10, 0, 10]))
        if on("reduce_keywords") or on("reduce_indices"):
            _reduce_keywords(draw, case, on)
    elif context == "wait":
        case.flag = draw(st.sampled_from([None, 5, -3]))
        case.reset = draw(st.sampled_from([None, 2]))
        if on("flag_ops"):
            case.wait_cmp = draw(st.sampled_from([None, *WAIT_HOLDS]))
            case.reset_none = case.reset is None and draw(st.booleans())
        if on("counting_waits") and draw(st.booleans()):  # a counting semaphore: n or more there, n taken
            case.flag = draw(st.sampled_from([None, 5, 2]))
            case.decrement, case.reset, case.reset_none = True, None, False
            case.wait_cmp = draw(st.sampled_from([None, "ge"]))
            case.surplus = draw(st.sampled_from([0, 1, 3]))
        case.wait_value = on("wait_values") and draw(st.booleans())
    elif context == "signal":
        case.signal_value = draw(st.sampled_from([7, None])) if on("keyword_orders") else 7
        if on("signal_wait_for") and draw(st.booleans()):
            case.wait_for = draw(st.sampled_from([0, -2]))
        if on("flag_ops") and case.wait_for is None:
            case.signal_op = draw(st.sampled_from([None, "set", "add"]))
    takes_mask = context in ("tl_load", "tl_store") or (context == "reduce" and case.reduced == "tl_load")
    takes_mask = takes_mask or (context in ("atomic", "wait") and draw(st.booleans()))
    takes_mask = takes_mask or (context == "signal" and on("mask_forms") and draw(st.booleans()))
    case.use_mask = takes_mask
    forms = (
        ["tensor"] + (["none", "scalar"] if on("mask_forms") else []) + (["constexpr"] if on("constexpr_masks") else [])
    )
    if takes_mask and len(forms) > 1:
        case.mask_form = draw(st.sampled_from(forms))
        case.mask_on = draw(st.booleans())
    takes_other = context == "tl_load" or (context == "reduce" and case.reduced == "tl_load")
    case.other = draw(st.integers(-3, 3)) if takes_other and dtype != "bfloat16" else 0
    importers = list(IMPORTS) if context not in FLAG_CONTEXTS or on("castpile_names") else ["alias"]
    case.importer = draw(st.sampled_from(importers))
    if _is_call(case):
        _call_slots(draw, case, on)
    _binding_spelling(draw, case, on)
    if on("side_effects") and dtype != "bfloat16":
        case.effects = _effects(draw, case, on)
    if on("triton_names") or on("triton_assign"):
        names = ["from", "dotted", "renamed"] if on("triton_names") else []
        case.triton_names = draw(st.sampled_from(["as"] + names + (["assign"] if on("triton_assign") else [])))
        case.jit = draw(st.sampled_from(["triton.jit"] + (["jit"] if on("triton_names") else [])))
    if on("enclosing"):
        case.enclosing = draw(st.booleans())
    if on("keyword_spellings") and _is_call(case):
        compile_time = {"sem", "scope", "decrement", "eviction_policy", "cache_modifier", "volatile"}
        compile_time |= {"wait": {"cmp"}, "signal": {"op"}}.get(context, set())
        case.spellings = {
            slot: draw(st.sampled_from(KEYWORD_SPELLINGS)) for slot in call_form(case)[0] if slot in compile_time
        }
    if on("heads"):
        heads = [h for h in HEADS if h != "global" or not case.enclosing]
        case.head = draw(st.sampled_from(heads))
    if on("continued") or on("backslashes"):
        case.breaks = tuple(draw(st.lists(st.integers(0, 40), max_size=3)))
        case.backslashes = on("backslashes")
        case.joined = on("continued") and draw(st.booleans())
    if (context == "wait" or case.wait_for is not None) and case.races:
        _unaliased(case)
    return case


def _is_call(case: Case) -> bool:
    """The access is an argument of a call (tl.load, tl.store, an atomic, signal, wait)."""
    return case.context in CALL_PARAMS or (case.context == "reduce" and case.reduced == "tl_load")


def _unaliased(case: Case) -> None:
    """Row-major strides (and no effect in an index) for a wait or a wait_for signal whose lanes alias:
    a lane resetting a flag that another lane waits on would hang it."""
    ndim = len(case.indices)
    case.strides = tuple(math.prod((case.shape or (24,) * ndim)[d + 1 :]) for d in range(ndim))
    case.explicit_strides = case.shape is None and ndim > 1
    case.strides_names = case.strides_names and case.explicit_strides
    case.rebound = tuple(n for n in case.rebound if n != "t" or case.strides_names)
    if not case.explicit_strides and "strides" in case.binding_order:
        case.binding_positional = min(case.binding_positional, case.binding_order.index("strides"))
        case.binding_order = tuple(k for k in case.binding_order if k != "strides")
    if case.races:
        case.effects = tuple(e for e in case.effects if not e.startswith("index"))


def _reduce_keywords(draw, case: Case, on) -> None:
    """Spelling and keywords of a reduction (features reduce_keywords, reduce_indices)."""
    keywords = []
    if on("reduce_keywords"):
        case.spelling = draw(st.sampled_from(["call", "input", "method"]))
        case.axis_keyword = case.axis_keyword or case.spelling == "input"  # a positional axis would be the input
        case.keep_dims = draw(st.booleans())
        keywords += ["keep_dims"] if case.keep_dims else []
    if case.op == "sum" and on("reduce_keywords"):
        choices = [None, "float32"] + (["int32"] if case.dtype == "int32" else [])
        case.sum_dtype = draw(st.sampled_from(choices))
        keywords += ["dtype"] if case.sum_dtype else []
    elif case.op != "sum" and on("reduce_indices"):
        case.return_indices = draw(st.booleans())
        if case.return_indices:
            keywords.append("return_indices")
            case.tie_break_left = draw(st.sampled_from([None, True, False]))
            keywords += [] if case.tie_break_left is None else ["return_indices_tie_break_left"]
    if case.axis_keyword:
        keywords.append("axis")
    if case.spelling == "input":
        keywords.append("input")
    case.reduce_order = tuple(draw(st.permutations(keywords)))


def _binding_spelling(draw, case: Case, on) -> None:
    """Strides as names, the binding's argument order, the bound name, names rebound after it."""
    if case.tile == "plain":
        return
    case.strides_names = case.explicit_strides and on("strides_names") and draw(st.booleans())
    present = [
        k
        for k, there in (
            ("shape", case.shape is not None),
            ("strides", case.explicit_strides),
            ("ptr_mask", has_ptr_mask(case)),
        )
        if there
    ]
    if on("keyword_orders"):
        prefix = 0
        while prefix < 3 and prefix < len(present) and present[prefix] == ("shape", "strides", "ptr_mask")[prefix]:
            prefix += 1
        case.binding_positional = draw(st.integers(0, prefix))
        case.binding_order = tuple(present[: case.binding_positional]) + tuple(
            draw(st.permutations(present[case.binding_positional :]))
        )
    if on("rebind"):
        case.self_bound = draw(st.booleans())
        names = [
            n
            for n, there in (
                ("n", case.shape is not None),
                ("t", case.strides_names),
                ("example", not case.self_bound),
                ("tile", case.tile in ("tile1", "tile2", "peer0d")),
                ("pmask", has_ptr_mask(case)),
                ("table", case.tile in ("slice", "slice_lo", "slice_named", "peer")),
                ("r", case.tile in ("peer", "peer0d") and not case.rank_constexpr),
            )
            if there
        ]
        case.rebound = tuple(n for n in names if draw(st.booleans()))


def _effects(draw, case: Case, on) -> tuple[str, ...]:
    """Up to three slots that get ``tl.atomic_add(ctr, 1)`` added (feature side_effects); without
    effects_reordered, call arguments with effects are written in the call's parameter order."""
    slots = [] if case.tile == "plain" else [f"index{d}" for d in range(len(case.indices))]
    args = call_form(case)[0] if _is_call(case) else ()
    literal = {"cmp"} if case.context == "wait" else set()  # wait's cmp= is a string literal
    literal |= {"reset"} if case.reset_none else set()
    args = [
        s for s in args if s in MASKED_SLOTS and s not in literal and not (s == "mask" and case.mask_form != "tensor")
    ]
    if case.context in ("store", "aug"):
        slots.append("value")
    chosen = [s for s in slots + args if draw(st.integers(0, 3)) == 0][:3]
    params = CALL_PARAMS["tl_load" if case.context == "reduce" else case.context] if args else ()
    written = [s for s in chosen if s in args]
    if not on("effects_reordered") and written != sorted(written, key=params.index):
        chosen = [s for s in chosen if s not in args] + written[:1]
    return tuple(chosen)
