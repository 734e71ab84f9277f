"""Semantic fuzzing: random multicast kernels (:class:`Case`) and what the contract says they do, in torch.

A :class:`Case` describes one kernel: the stack of buffers (a table slice, named or
not, with or without a ptr_mask of its padded extent; a 1-D or 2-D tile of addresses
with a ptr_mask; one peer ``table[r]`` or a rank-0 tile, P = (); or, for ``wait``, a
plain pointer; the example a pointer or a dtype), the element shape and
strides (any integers: zero, repeated, overlapping, negative), one index per element
dim (a scalar, or ``c + arange`` / ``c - arange`` along one axis of I, so indices
broadcast), the access context and how its source is spelled.  The contexts are
every access of the contract: loads, stores, augmented stores, atomics,
``atomic_cas``, ``signal``, stack reductions with every keyword and ``wait`` on
flags already set.  The spellings are what :data:`FEATURES` lists: names the
binding used rebound after it, every way to name triton and castpile, arguments
by position or keyword in any order, ``tl.atomic_add(ctr, 1)`` in any argument,
constexpr and scalar masks, statements continued across lines.  :func:`cases`
draws them (hypothesis).

:func:`make_data` makes a case's host tensors and :func:`expected` computes what the
contract says the kernel does to them, from the Case alone: it never looks at
castpile's output (tests/fuzz_source.py writes the kernel, tests/fuzz_run.py runs
and checks it).  Where lanes of one buffer alias (zero or overlapping strides),
stores race: the model accepts any lane's value for such an element, folds
commutative atomics exactly, and leaves the old values those lanes return
undefined.  Waits and ``wait_for`` signals never alias (a lane that resets a flag
another lane waits on would hang it).

Limits of Triton 3.6's interpreter, not of castpile, shape the cases: it
computes bf16 arithmetic wrongly and stores a scalar constant into bf16 memory
as raw integer bits (a plain ``tl.store(p, 3)`` or ``other=-1`` does it too),
so bf16 cases only move tensors (and reduce them converted to float32); it has no
floating-point ``atomic_xchg``, so flags (``signal``, ``wait``) are int32.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int32": torch.int32}
AUG_OPS = {"float": ["+", "-", "*"], "int": ["+", "-", "*", "&", "|", "^"]}
ATOMIC_OPS = {"float": ["add", "max", "min"], "int": ["add", "max", "min", "and", "or", "xor", "xchg"]}
CONTEXTS = ["load", "tl_load", "store", "tl_store", "aug", "atomic", "cas", "signal", "reduce", "wait"]
FLAG_CONTEXTS = ("signal", "wait")  # int32 flags
BF16_CONTEXTS = ("load", "tl_load", "store", "tl_store", "reduce")  # reduce through .to(tl.float32) only
REDUCTIONS = ["max", "min", "sum"]  # hypothesis favours the first; a stray identity or 0 shows in max and min
# What a reduction reduces: bufs[i], bufs[i].to(tl.float32), tl.load(bufs[i], ...), and (feature
# reduce_keywords) bufs[i].to(tl.int8), bufs[i].to(dtype=tl.float32), bufs[i].to(tl.float32, bitcast=False).
REDUCED = ["access", "to_float32", "tl_load"]
REDUCED_MORE = ["to_int8", "to_dtype_keyword", "to_bitcast_keyword"]
IMPORTS = {  # castpile's import forms: the import line and the names of multicast_like, signal, wait
    "module": ("import castpile", "castpile.multicast_like", "castpile.signal", "castpile.wait"),
    "alias": ("import castpile as cp", "cp.multicast_like", "cp.signal", "cp.wait"),
    "from": ("from castpile import multicast_like", "multicast_like", "signal", "wait"),
    "from_as": ("from castpile import multicast_like as mcl", "mcl", "sg", "wt"),
}
TRITON_NAMES = {  # triton's import forms: the lines, and what ``tl.`` is written as
    "as": (["import triton", "import triton.language as tl"], "tl."),
    "assign": (["import triton", "", "tl = triton.language"], "tl."),
    "from": (["import triton", "from triton import language as tl"], "tl."),
    "dotted": (["import triton", "import triton.language", "from triton.language import constexpr"], "triton.language."),
    "renamed": (["import triton", "import triton.language as tlang", "from triton.language import constexpr"], "tlang."),
}
# The value parameters after the pointer, in each call's order (Triton's and the contract's);
# positional arguments are a prefix of these.  Keyword-only extras come after.
CALL_PARAMS = {
    "tl_load": ("mask", "other"),
    "tl_store": ("value", "mask"),
    "atomic": ("val", "mask", "sem", "scope"),
    "cas": ("cmp", "val", "sem", "scope"),
    "signal": ("value", "wait_for", "sem", "scope", "mask", "op"),
    "wait": ("value", "cmp", "sem", "scope", "reset", "mask"),
}
EXTRAS = {"tl_load": ("eviction_policy", "cache_modifier", "volatile"), "tl_store": ("eviction_policy", "cache_modifier")}
SEMS = {"atomic": ("relaxed", "acq_rel"), "cas": ("relaxed", "acq_rel"), "signal": ("release", "relaxed"),
        "wait": ("acquire", "relaxed")}
MASKED_SLOTS = ("mask", "other", "value", "val", "cmp", "wait_for", "reset")  # slots an effect may sit in
# wait's cmp=: where each comparison holds, as an offset from value= (the flags are preset there): at the
# boundary where equality satisfies it.
WAIT_HOLDS = {"eq": 0, "ne": 3, "ge": 0, "gt": 2, "le": 0, "lt": -1}

# The spellings beyond v1's that the generator can use, by name: cases(features=...) takes a set of
# these keys (tests/test_fuzz_semantics.py leaves out those with an open bug).
FEATURES = {
    "rebind": "names the binding used (shape, strides, example, tile, ptr_mask, table, rank) rebound after it, "
              "and the bound name reusing its example's name (v1.2 binding time)",
    "strides_any": "zero, repeated, overlapping and negative strides; indices c - arange, written in the "
                   "subscript too (bufs[3 - j, j]), that cancel (v1.2 any strides)",
    "strides_names": "strides given as run-time names",
    "strides_no_shape": "strides= without shape=, 1-3 element dims",
    "reduce_keywords": "tl.sum/max/min with dtype=, keep_dims=, input=, as methods, keywords in any order; "
                       "reducing .to(tl.int8), .to(dtype=...)",
    "reduce_indices": "tl.max/min with return_indices=True, return_indices_tie_break_left=",
    "triton_names": "from triton import language as tl, triton.language.x, another alias, from triton import jit",
    "triton_assign": "tl = triton.language",
    "castpile_names": "signal and wait through every castpile import form",
    "enclosing": "the kernel defined in a function that imports castpile (kernel = make_kernel())",
    "keyword_orders": "call arguments by position or keyword in any order, sem=/scope=, eviction_policy= and "
                      "the like; the binding's keywords in any order, shape and strides by position",
    "side_effects": "tl.atomic_add(ctr, 1) in indices, values, masks, other, cmp, wait_for, reset: each evaluated "
                    "once, in source order",
    "effects_reordered": "with side_effects: effects in call arguments written in another order than the call's "
                         "parameters (castpile.signal(f[i], mask=m(), value=v()))",
    "peer_index": "one peer table[r], r run-time or constexpr: P = () (v1.2)",
    "peer_tile": "one peer as a rank-0 tile tl.load(table + r): P = () (v1.2)",
    "slice_ptr_mask": "ptr_mask= on a table slice, of its padded extent, entries past the slice true or false (v1.2)",
    "dtype_example": "the binding's example a dtype (tl.float32, ...) instead of a pointer (v1.2)",
    "scalar_flags": "castpile.wait on a plain pointer (flag + pid, or a vector), scalar program_id indices",
    "mask_forms": "mask=None, a run-time scalar mask; signal with a mask",
    "constexpr_masks": "mask=EVEN, a tl.constexpr",
    "signal_wait_for": "castpile.signal with wait_for= (flags set to wait_for first)",
    "flag_ops": "castpile.wait with cmp= (flags preset where the comparison holds) and reset=None (flags left as "
                "they are); castpile.signal with op=\"set\" or op=\"add\" (v1.2)",
    "continued": "statements continued inside brackets (with comments), joined with ';'",
    "backslashes": "statements continued with a backslash: bufs[i] += \\ and the value on the next line",
}


def p2(n: int) -> int:
    """The next power of two (at least 1)."""
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class Index:
    """An element index: ``value`` (a scalar), or ``value + sign * arange(0, block)`` along ``axis`` of I."""

    value: int
    block: int = 0
    axis: int = -1
    runtime: bool = False  # a scalar passed as a kernel argument instead of a literal
    sign: int = 1
    pid: bool = False  # a scalar written ``tl.program_id(0) + value`` (the grid is one program)

    @property
    def is_scalar(self) -> bool:
        return self.axis < 0


@dataclass
class Case:
    """One generated kernel and its data (every field after ``seed`` has a default: the v1 spelling)."""

    tile: str  # "slice", "slice_lo", "slice_named", "tile1", "tile2", "peer", "peer0d", "plain"
    ptile: tuple[int, ...]  # P, every dim a power of two; () for one peer and a plain pointer
    entries: list[int | None]  # flattened P -> buffer number, None: padded or ptr_mask-false
    lo: int
    dtype: str
    shape: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    explicit_strides: bool
    indices: list[Index]
    irank: int
    context: str
    op: str
    value: str  # "scalar", "row", "row_none", "full"
    use_mask: bool
    importer: str
    seed: int
    other: int = 0
    cmp: int = 0
    reduced: str = "access"  # reduce: what is reduced (REDUCED, REDUCED_MORE)
    axis_keyword: bool = True  # reduce: ``axis=0``, else ``0``
    shift: int = 0  # added to every buffer's values: all negative or all positive, a max or min shows any stray 0
    flag: int | None = None  # wait: ``value=`` (None: the default, 1)
    reset: int | None = None  # wait: ``reset=`` (None: the default, 0)
    wait_cmp: str | None = None  # wait: ``cmp=`` (None: the default, "eq")
    reset_none: bool = False  # wait: ``reset=None`` written (the flags are left as they are)
    data: dict = field(default_factory=dict, repr=False)
    # -- the binding
    rank: int = 0  # peer, peer0d: the table entry of the one buffer
    rank_constexpr: bool = False  # peer, peer0d: the rank is the constexpr R, else the run-time r
    count: int = 0  # slices: hi - lo (0: every entry before the padding is a buffer)
    slice_mask: bool = False  # slices: a ptr_mask (entries None before ``count`` are masked off)
    pm_padding: bool = False  # slice_mask: the ptr_mask's entries past ``count`` are true (and ignored)
    dtype_example: bool = False  # the binding's example is ``tl.<dtype>``, not the pointer ``example``
    strides_names: bool = False  # strides=(t0, t1, ...), run-time arguments
    binding_order: tuple[str, ...] = ()  # keywords of the binding in written order (empty: shape, strides, ptr_mask)
    binding_positional: int = 0  # how many of shape, strides, ptr_mask are passed by position
    self_bound: bool = False  # ``example = multicast_like(example, ...)``: the bound name is the example's
    rebound: tuple[str, ...] = ()  # names rebound after the binding: n t example tile pmask table r
    # -- the access
    call_args: tuple[str, ...] = ()  # the call's value arguments in written order (empty: the v1 spelling)
    positional: int = 0  # how many of call_args are passed by position
    sem: str | None = None
    scope: str | None = None
    signal_value: int | None = 7  # signal: ``value=`` (None: the default, 1)
    wait_for: int | None = None  # signal: ``wait_for=``
    signal_op: str | None = None  # signal: ``op=`` (None: the default, "set")
    effects: tuple[str, ...] = ()  # slots (MASKED_SLOTS, "index<d>") holding ``tl.atomic_add(ctr, 1)``
    mask_form: str = "tensor"  # "tensor", "constexpr" (EVEN), "none" (mask=None), "scalar" (ms != 0)
    mask_on: bool = True  # constexpr, scalar: the mask's value
    # -- reductions
    spelling: str = "call"  # "call" tl.max(X, ...), "input" tl.max(input=X, ...), "method" X.max(...)
    keep_dims: bool = False
    sum_dtype: str | None = None  # sum: ``dtype=tl.<sum_dtype>``
    return_indices: bool = False  # max, min
    tie_break_left: bool | None = None  # max, min with return_indices: ``return_indices_tie_break_left=``
    reduce_order: tuple[str, ...] = ()  # the reduction's keywords in written order (empty: axis only)
    # -- names and layout
    triton_names: str = "as"
    jit: str = "triton.jit"  # or "jit": ``from triton import jit``
    enclosing: bool = False  # the castpile import and the kernel inside ``def make_kernel()``
    inline_indices: bool = False  # arange indices written in the subscript: ``bufs[3 - a0, a0 + 1]``
    breaks: tuple[int, ...] = ()  # line breaks at these break points of the binding and access (modulo their count)
    backslashes: bool = False  # break points include backslash continuations, not only breaks inside brackets
    joined: bool = False  # the access joined to the statement before it with ``;``

    @property
    def nbuf(self) -> int:
        return sum(e is not None for e in self.entries)

    @property
    def slice_count(self) -> int:
        """A table slice's ``hi - lo``."""
        return self.count or self.nbuf

    @property
    def ishape(self) -> tuple[int, ...]:
        blocks = {i.axis: i.block for i in self.indices if not i.is_scalar}
        return tuple(blocks[a] for a in range(self.irank))

    @property
    def full_shape(self) -> tuple[int, ...]:
        return self.ptile + self.ishape

    @property
    def returns(self) -> bool:
        """The kernel stores the access's P + I result."""
        return self.context in ("load", "tl_load", "atomic", "cas")

    @property
    def result_shape(self) -> tuple[int, ...]:
        """What the kernel stores into ``res``: P + I, P[1:] + I for a reduction over axis 0, (1,) + P[1:] + I with keep_dims."""
        if self.context == "reduce":
            return ((1,) if self.keep_dims else ()) + self.ptile[1:] + self.ishape
        return self.full_shape if self.returns else ()

    @property
    def flag_value(self) -> int:
        return 1 if self.flag is None else self.flag

    @property
    def reset_value(self) -> int:
        return 0 if self.reset is None else self.reset

    @property
    def bound_name(self) -> str:
        return "example" if self.self_bound else "bufs"

    @property
    def races(self) -> bool:
        """Two in-bounds lanes of I address one element (zero or overlapping strides)."""
        offs, bounds = _offsets(self)
        used = offs[bounds]
        return used.unique().numel() < used.numel()


# -- the generator -------------------------------------------------------------------------


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
        extra = draw(st.sampled_from((None,) + EXTRAS.get(kind, ())))  # one: ptxas refuses .volatile with .cg, say
        written += [extra] if extra else []
        positional = draw(st.integers(0, prefix))
        case.call_args = tuple(written[:positional]) + tuple(draw(st.permutations(written[positional:])))
        case.positional = positional
    else:
        case.call_args, case.positional = _v1_call(case, kind)


def _v1_call(case: Case, kind: str) -> tuple[tuple[str, ...], int]:
    """The v1 spelling of each call: ``tl.store(p, v, mask=m)``, ``tl.atomic_cas(p, cmp, v)``, keywords otherwise."""
    mask = ("mask",) if case.use_mask else ()
    if kind == "tl_load":
        return mask + ("other",), 0
    if kind == "tl_store":
        return ("value",) + mask, 1
    if kind == "atomic":
        return ("val",) + mask, 1
    if kind == "cas":
        return ("cmp", "val"), 2
    if kind == "signal":
        given = (("value", case.signal_value), ("wait_for", case.wait_for), ("op", case.signal_op))
        return tuple(s for s, v in given if v is not None) + mask, 0
    given = (("value", case.flag), ("cmp", case.wait_cmp), ("reset", True if case.reset_none else case.reset))
    return tuple(s for s, v in given if v is not None) + mask, 0


def call_form(case: Case) -> tuple[tuple[str, ...], int]:
    """The call's value arguments in written order and how many are positional."""
    if case.call_args or case.positional:
        return case.call_args, case.positional
    return _v1_call(case, "tl_load" if case.context == "reduce" else case.context)


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
        return tuple(math.prod(extents[d + 1:]) for d in range(ndim)), False
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
    if on("scalar_flags") and context == "wait":
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
        ptile = (p2(world),) if tile == "tile1" else (draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 4])))
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
        tile=tile, ptile=ptile, entries=entries, lo=lo, dtype=dtype, shape=shape, strides=strides,
        explicit_strides=explicit, indices=indices, irank=irank, context=context, op=op, value=value,
        use_mask=False, importer="alias", seed=draw(st.integers(0, 2**31 - 1)), cmp=draw(st.integers(-2, 2)),
        rank=rank, rank_constexpr=rank_constexpr, inline_indices=inline, count=count, slice_mask=slice_mask,
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
    forms = ["tensor"] + (["none", "scalar"] if on("mask_forms") else []) + (["constexpr"] if on("constexpr_masks") else [])
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
    case.strides = tuple(math.prod((case.shape or (24,) * ndim)[d + 1:]) for d in range(ndim))
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
    present = [k for k, there in (("shape", case.shape is not None), ("strides", case.explicit_strides),
                                  ("ptr_mask", has_ptr_mask(case))) if there]
    if on("keyword_orders"):
        prefix = 0
        while prefix < 3 and prefix < len(present) and present[prefix] == ("shape", "strides", "ptr_mask")[prefix]:
            prefix += 1
        case.binding_positional = draw(st.integers(0, prefix))
        case.binding_order = tuple(present[:case.binding_positional]) + tuple(
            draw(st.permutations(present[case.binding_positional:])))
    if on("rebind"):
        case.self_bound = draw(st.booleans())
        names = [n for n, there in (
            ("n", case.shape is not None), ("t", case.strides_names), ("example", not case.self_bound),
            ("tile", case.tile in ("tile1", "tile2", "peer0d")), ("pmask", has_ptr_mask(case)),
            ("table", case.tile in ("slice", "slice_lo", "slice_named", "peer")), ("r", case.tile in ("peer", "peer0d") and not case.rank_constexpr),
        ) if there]
        case.rebound = tuple(n for n in names if draw(st.booleans()))


def _effects(draw, case: Case, on) -> tuple[str, ...]:
    """Up to three slots that get ``tl.atomic_add(ctr, 1)`` added (feature side_effects); without
    effects_reordered, call arguments with effects are written in the call's parameter order."""
    slots = [] if case.tile == "plain" else [f"index{d}" for d in range(len(case.indices))]
    args = call_form(case)[0] if _is_call(case) else ()
    literal = {"cmp"} if case.context == "wait" else set()  # wait's cmp= is a string literal
    literal |= {"reset"} if case.reset_none else set()
    args = [s for s in args if s in MASKED_SLOTS and s not in literal and not (s == "mask" and case.mask_form != "tensor")]
    if case.context in ("store", "aug"):
        slots.append("value")
    chosen = [s for s in slots + args if draw(st.integers(0, 3)) == 0][:3]
    params = CALL_PARAMS["tl_load" if case.context == "reduce" else case.context] if args else ()
    written = [s for s in chosen if s in args]
    if not on("effects_reordered") and written != sorted(written, key=params.index):
        chosen = [s for s in chosen if s not in args] + written[:1]
    return tuple(chosen)


def has_ptr_mask(case: Case) -> bool:
    return (case.tile in ("tile1", "tile2") and any(e is None for e in case.entries)) or case.slice_mask


# -- data and the model --------------------------------------------------------------------


def effect_positions(case: Case) -> dict[str, int]:
    """How many effects ran before each slot's (``tl.atomic_add(ctr, 1)`` returns that), in Python's order:
    the value of ``bufs[i] = v`` before ``i``; in ``bufs[i] += v``, ``i`` then ``v``; a call's arguments as written."""
    index = [f"index{d}" for d in range(len(case.indices))]
    c = case.context
    if c == "store":
        order = ["value"] + index
    elif c == "aug":
        order = index + ["value"]
    elif c == "load" or (c == "reduce" and case.reduced != "tl_load"):
        order = index
    else:
        order = index + list(call_form(case)[0])
    return {slot: k for k, slot in enumerate(s for s in order if s in case.effects)}


def _index_tensors(case: Case) -> list[torch.Tensor]:
    """Each index's values (an effect adds its position), broadcast to I."""
    shift = effect_positions(case)
    out = []
    for d, index in enumerate(case.indices):
        if index.is_scalar:
            t = torch.tensor(index.value, dtype=torch.int64)
        else:
            t = index.value + index.sign * torch.arange(index.block, dtype=torch.int64)
            shape = [1] * case.irank
            shape[index.axis] = index.block
            t = t.reshape(shape)
        out.append(t.expand(case.ishape) + shift.get(f"index{d}", 0))
    return out


def _offsets(case: Case, strides: tuple[int, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each lane of I, flattened: its element offset and whether it is in bounds."""
    I = case.ishape
    idx = _index_tensors(case)
    offs = sum((i * s for i, s in zip(idx, strides or case.strides)), torch.zeros(I, dtype=torch.int64))
    bounds = torch.ones(I, dtype=torch.bool)
    if case.shape is not None:
        for i, n in zip(idx, case.shape):
            bounds &= (i >= 0) & (i < n)
    return offs.reshape(-1), bounds.reshape(-1)


def _user_mask(case: Case, mk: torch.Tensor) -> torch.Tensor:
    """The user's mask over I, flattened (all true without one)."""
    I = case.ishape
    lanes = max(math.prod(I), 1)
    if not case.use_mask or case.mask_form == "none":
        return torch.ones(lanes, dtype=torch.bool)
    if case.mask_form in ("constexpr", "scalar"):
        return torch.full((lanes,), case.mask_on, dtype=torch.bool)
    k = effect_positions(case).get("mask")
    m = mk[:lanes]
    return ((m + k) % 2 != 0) if k is not None else m != 0


def _lanes(case: Case, mk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each lane of I, flattened: its element offset, whether it is in bounds, whether the user's mask is on."""
    offs, bounds = _offsets(case)
    return offs, bounds, _user_mask(case, mk)


def layout(case: Case) -> tuple[int, int]:
    """Where offset 0 sits in each buffer's allocation and the allocation's length: room for every lane,
    in bounds or not, under the strides and (so that a lowering that reads a rebound name stays in memory)
    under strides rebound to ``t + 1`` or derived from a shape rebound to ``n + 4``."""
    offs, _ = _offsets(case)
    reach = [offs, torch.zeros(1, dtype=torch.int64)]
    if "t" in case.rebound:
        reach.append(_offsets(case, tuple(s + 1 for s in case.strides))[0])
    if "n" in case.rebound and not case.explicit_strides:
        grown = [n + 4 for n in case.shape]
        reach.append(_offsets(case, tuple(math.prod(grown[d + 1:]) for d in range(len(grown))))[0])
    reach = torch.cat(reach)
    low, high = int(reach.min()), int(reach.max())
    return -low, high - low + 1 + 3


def poison_slot(case: Case) -> int:
    """A table entry that points at the poison buffer (what rebound tiles point at)."""
    return case.rank + 1 if case.tile in ("peer", "peer0d") else len(case.entries)


def make_data(case: Case) -> dict:
    """Host tensors for ``case``: buffers, a poison buffer for masked entries, table, values, masks, counter.

    For ``wait`` (and ``signal`` with ``wait_for``) the flags the kernel waits on (valid
    entries, in-bounds lanes with the mask on) are set, so that it must return; every other
    element keeps its random value.
    """
    g = torch.Generator().manual_seed(case.seed)
    dt = DTYPES[case.dtype]
    base, n = layout(case)

    def small(shape):
        return torch.randint(-4, 5, shape, generator=g).to(dt)

    bufs = [small((n,)) + case.shift for _ in range(case.nbuf)]
    poison = small((n,)) + case.shift
    size = poison.element_size()

    def address(t):
        return t.data_ptr() + base * size

    addrs = [address(bufs[e]) if e is not None else address(poison) for e in case.entries]
    if case.tile == "slice_lo":
        addrs = [address(poison)] * case.lo + addrs
    if case.tile in ("peer", "peer0d"):
        addrs = [address(poison)] * case.rank + addrs
    table = torch.tensor(addrs + [address(poison)] * 2, dtype=torch.int64)
    mk = torch.randint(0, 2, (max(math.prod(case.ishape), 1),), generator=g, dtype=torch.int32)
    k = effect_positions(case)
    if case.context == "wait" or case.wait_for is not None:
        offs, bounds, user = _lanes(case, mk)
        if case.context == "wait":
            preset = case.flag_value + k.get("value", 0) + WAIT_HOLDS[case.wait_cmp or "eq"]
        else:
            preset = case.wait_for + k.get("wait_for", 0)
        for buf in bufs:
            buf[base + offs[bounds & user]] = preset
    return {
        "bufs": bufs,
        "poison": poison,
        "table": table,
        "pm": torch.tensor([e is not None or (case.pm_padding and p >= case.slice_count) for p, e in enumerate(case.entries)],
                           dtype=torch.int32),
        "mk": mk,
        "ctr": torch.zeros(1, dtype=torch.int32),
        "vals": small((math.prod(case.full_shape) if case.value == "full" else max(math.prod(case.ishape), 1),)),
        "res": torch.zeros(max(math.prod(case.result_shape), 1), dtype=dt),
        "resi": torch.zeros(max(math.prod(case.result_shape), 1), dtype=torch.int32),
        "example": bufs[0][base:] if case.tile == "plain" else torch.zeros(4, dtype=dt),
    }


def _apply(op: str, old: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    ops = {
        "+": torch.add, "-": torch.sub, "*": torch.mul, "&": torch.bitwise_and, "|": torch.bitwise_or,
        "^": torch.bitwise_xor, "add": torch.add, "max": torch.maximum, "min": torch.minimum,
        "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor, "xchg": lambda a, b: b,
    }
    return ops[op](old, v).to(old.dtype)


@dataclass
class Expected:
    """What the contract says a case does.

    ``bufs``: each buffer afterwards, where ``choices[b]`` (element -> admissible values)
    overrides elements that racing lanes store to; ``res``/``defined``: the result
    (flattened ``result_shape``) and which of its lanes the contract defines; ``indices``:
    for ``return_indices``, each lane's admissible indices (empty: undefined); ``ctr``: how
    many effects ran.
    """

    bufs: list[torch.Tensor]
    choices: list[dict[int, set]]
    res: torch.Tensor
    defined: torch.Tensor
    indices: list[set[int]] | None = None
    ctr: int = 0


def _reduced(case: Case, bufs: list[torch.Tensor], base: int, offs, bounds, user) -> tuple[torch.Tensor, list[set[int]]]:
    """The stack reduction over axis 0 (v1.1): valid entries only (not padded, ptr_mask true, in bounds),
    lanes the user's mask turns off as ``other``, 0 where a lane has no valid entry; and for
    ``return_indices`` the admissible indices along axis 0 of each lane.  Flattened P[1:] + I."""
    lanes = offs.numel()
    other = case.other + effect_positions(case).get("other", 0)
    values = torch.zeros(len(case.entries), lanes, dtype=torch.float64)  # exact for these small integers
    valid = torch.zeros(len(case.entries), lanes, dtype=torch.bool)
    for p, e in enumerate(case.entries):
        if e is not None:
            loaded = bufs[e][(base + offs).clamp(0, bufs[e].numel() - 1)].double()
            values[p] = torch.where(user, loaded, float(other))
            valid[p] = bounds
    values, valid = values.reshape(case.ptile + (lanes,)), valid.reshape(case.ptile + (lanes,))
    if case.op == "sum":
        result = torch.where(valid, values, 0.0).sum(0)
    elif case.op == "max":
        result = torch.where(valid, values, -math.inf).amax(0)
    else:
        result = torch.where(valid, values, math.inf).amin(0)
    hits = valid & (values == result.unsqueeze(0))  # entries along axis 0 that attain the extreme
    hits = hits.reshape(case.ptile[0], -1)
    admissible = []
    for lane in range(hits.shape[1]):
        at = hits[:, lane].nonzero().reshape(-1).tolist()
        admissible.append(set(at[:1]) if case.tie_break_left in (None, True) else set(at))
    return torch.where(valid.any(0), result, 0.0).reshape(-1).to(DTYPES[case.dtype]), admissible


def expected(case: Case, data: dict) -> Expected:
    """What the contract says: final buffers (racing stores: any lane's value), the result and its defined lanes."""
    P, I = case.ptile, case.ishape
    full = P + I
    dt = DTYPES[case.dtype]
    base, _ = layout(case)
    k = effect_positions(case)
    bufs = [b.clone() for b in data["bufs"]]
    choices: list[dict[int, set]] = [{} for _ in bufs]
    flat_offs, bounds, user = _lanes(case, data["mk"])
    if case.context == "reduce":
        res, indices = _reduced(case, bufs, base, flat_offs, bounds, user)
        return Expected(bufs, choices, res, torch.ones_like(res, dtype=torch.bool),
                        indices if case.return_indices else None, len(case.effects))
    flat_inb = bounds & user
    slot = "val" if case.context in ("atomic", "cas") else "value"
    if case.value == "scalar":
        v = torch.full(full, 3, dtype=dt)
    elif case.value == "full":
        v = data["vals"].reshape(full)
    else:
        v = data["vals"][: max(math.prod(I), 1)].reshape(I).expand(full)
    v = (v + k.get(slot, 0)).to(dt).reshape(len(case.entries), -1)
    other = case.other + k.get("other", 0) if case.context == "tl_load" else 0
    res = torch.full(full, other, dtype=dt).reshape(len(case.entries), -1)
    defined = torch.full_like(res, case.context in ("load", "tl_load"), dtype=torch.bool)
    cmp = case.cmp + k.get("cmp", 0)
    adds = (case.context == "atomic" and case.op != "xchg") or (case.context == "signal" and case.signal_op == "add")
    lanes = flat_inb.nonzero().reshape(-1)
    where = base + flat_offs[lanes]
    for p, e in enumerate(case.entries):
        if e is None:
            continue
        old = bufs[e][where].clone()
        if case.returns:
            res[p, lanes] = old
            defined[p, lanes] = True
        new = _stored(case, old, v[p, lanes], cmp, k)
        if new is None:
            continue
        for element in where.unique().tolist():
            at = (where == element).nonzero().reshape(-1)
            if adds:  # commutative: every lane's operand applies
                operands = v[p, lanes] if case.context == "atomic" else new - old
                value = old[at[0]]
                for lane in at.tolist():
                    value = _apply(case.op if case.context == "atomic" else "add", value.reshape(1),
                                   operands[lane].reshape(1))[0]
                bufs[e][element] = value
            else:
                admissible = {x.item() for x in new[at]}
                bufs[e][element] = new[at[-1]]
                if len(admissible) > 1:
                    choices[e][element] = admissible
            if at.numel() > 1 and case.returns and case.context != "tl_load" and case.context != "load":
                defined[p, lanes[at]] = False  # which racing lane saw which old value is not defined
    if not case.returns:
        res, defined = torch.zeros(1, dtype=dt), torch.zeros(1, dtype=torch.bool)
    return Expected(bufs, choices, res.reshape(-1), defined.reshape(-1), None, len(case.effects))


def _stored(case: Case, old: torch.Tensor, v: torch.Tensor, cmp: int, k: dict[str, int]) -> torch.Tensor | None:
    """What each lane would leave in its element, alone (None: the access stores nothing)."""
    c = case.context
    if c in ("store", "tl_store"):
        return v
    if c in ("aug", "atomic"):
        return _apply(case.op, old, v)
    if c == "cas":
        return torch.where(old == cmp, v, old)
    if c == "signal":
        value = 1 if case.signal_value is None else case.signal_value
        return (old if case.signal_op == "add" else torch.zeros_like(old)) + value + k.get("value", 0)
    if c == "wait" and not case.reset_none:
        return torch.full_like(old, case.reset_value + k.get("reset", 0))
    return None
