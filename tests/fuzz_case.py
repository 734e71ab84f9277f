"""A fuzz case: the vocabulary the generator draws from, the :class:`Case` record, and what a case's text and lanes are.

The vocabulary is every dtype, context, operator, import form and call parameter a kernel can have, and
:data:`FEATURES`, the spellings beyond v1's by name.  A :class:`Case` (tests/fuzz_model.py describes one in full)
says how its call is written (:func:`call_form`), in which order its effects run (:func:`effect_positions`), and
which element each lane of I addresses (:func:`offsets`); tests/fuzz_generate.py draws cases and
tests/fuzz_model.py computes what they do.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

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
    "dotted": (
        ["import triton", "import triton.language", "from triton.language import constexpr"],
        "triton.language.",
    ),
    "renamed": (
        ["import triton", "import triton.language as tlang", "from triton.language import constexpr"],
        "tlang.",
    ),
}
# The value parameters after the pointer, in each call's order (Triton's and the contract's);
# positional arguments are a prefix of these.  Keyword-only extras come after.
CALL_PARAMS = {
    "tl_load": ("mask", "other"),
    "tl_store": ("value", "mask"),
    "atomic": ("val", "mask", "sem", "scope"),
    "cas": ("cmp", "val", "sem", "scope"),
    "signal": ("value", "wait_for", "sem", "scope", "mask", "op"),
    "wait": ("value", "cmp", "sem", "scope", "reset", "mask", "decrement"),
}
EXTRAS = {
    "tl_load": ("eviction_policy", "cache_modifier", "volatile"),
    "tl_store": ("eviction_policy", "cache_modifier"),
}
SEMS = {
    "atomic": ("relaxed", "acq_rel"),
    "cas": ("relaxed", "acq_rel"),
    "signal": ("release", "relaxed"),
    "wait": ("acquire", "relaxed"),
}
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
    'they are); castpile.signal with op="set" or op="add" (v1.2)',
    "continued": "statements continued inside brackets (with comments), joined with ';'",
    "backslashes": "statements continued with a backslash: bufs[i] += \\ and the value on the next line",
    "keyword_spellings": "compile-time keyword values (sem=, scope=, op=, cmp=, decrement=, eviction_policy=, "
    "cache_modifier=, volatile=) as a literal, a constexpr parameter, a conditional of constexprs, a constexpr "
    "global, a module's attribute or a local annotated tl.constexpr (v1.3)",
    "heads": "castpile's names called through parentheses, (cp.wait)(...), or bound by global + import in a "
    "set-up function: global wait + from castpile import wait, global castpile + import castpile, global cp + "
    "import castpile as cp (v1.3)",
    "counting_waits": "castpile.wait(..., value=n, decrement=True): flags preset to n or more, n taken (v1.3)",
    "wait_values": "v = castpile.wait(...): the values the wait saw, stored and checked, 0 where masked off (v1.3)",
    "plain_signals": "castpile.signal on a plain pointer (flag + pid, or a vector) (v1.3)",
}
# How a compile-time keyword value can be spelled (feature keyword_spellings, v1.3)
KEYWORD_SPELLINGS = ("literal", "parameter", "conditional", "global", "attribute", "local")
# The keyword slots whose values are compile-time, and another allowed value of each (a conditional's other branch)
COMPILE_TIME_SLOTS = ("sem", "scope", "op", "cmp", "decrement", "eviction_policy", "cache_modifier", "volatile")
HEADS = ("name", "paren", "global")  # how castpile's names are reached (feature heads)


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
    decrement: bool = False  # wait: ``decrement=True`` (a counting semaphore: cmp "ge", no reset)
    surplus: int = 0  # wait with decrement: how far above ``value=`` the flags are preset
    wait_value: bool = False  # wait: ``x = wait(...)``, the values seen stored into ``res``
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
    # -- v1.3
    spellings: dict = field(default_factory=dict)  # compile-time keyword slot -> KEYWORD_SPELLINGS (else literal)
    head: str = "name"  # HEADS: castpile's names called as imported, in parentheses, or bound by ``global``

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
        return self.context in ("load", "tl_load", "atomic", "cas") or (self.context == "wait" and self.wait_value)

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
        offs, bounds = offsets(self)
        used = offs[bounds]
        return used.unique().numel() < used.numel()


def has_ptr_mask(case: Case) -> bool:
    return (case.tile in ("tile1", "tile2") and any(e is None for e in case.entries)) or case.slice_mask


def v1_call(case: Case, kind: str) -> tuple[tuple[str, ...], int]:
    """The v1 spelling of each call: ``tl.store(p, v, mask=m)``, ``tl.atomic_cas(p, cmp, v)``, keywords otherwise."""
    mask = ("mask",) if case.use_mask else ()
    if kind == "tl_load":
        return (*mask, "other"), 0
    if kind == "tl_store":
        return ("value", *mask), 1
    if kind == "atomic":
        return ("val", *mask), 1
    if kind == "cas":
        return ("cmp", "val"), 2
    if kind == "signal":
        given = (("value", case.signal_value), ("wait_for", case.wait_for), ("op", case.signal_op))
        return tuple(s for s, v in given if v is not None) + mask, 0
    given = (
        ("value", case.flag),
        ("cmp", case.wait_cmp),
        ("reset", True if case.reset_none else case.reset),
        ("decrement", case.decrement or None),
    )
    return tuple(s for s, v in given if v is not None) + mask, 0


def call_form(case: Case) -> tuple[tuple[str, ...], int]:
    """The call's value arguments in written order and how many are positional."""
    if case.call_args or case.positional:
        return case.call_args, case.positional
    return v1_call(case, "tl_load" if case.context == "reduce" else case.context)


def effect_positions(case: Case) -> dict[str, int]:
    """How many effects ran before each slot's (``tl.atomic_add(ctr, 1)`` returns that), in Python's order:
    the value of ``bufs[i] = v`` before ``i``; in ``bufs[i] += v``, ``i`` then ``v``; a call's arguments as written."""
    index = [f"index{d}" for d in range(len(case.indices))]
    c = case.context
    if c == "store":
        order = ["value", *index]
    elif c == "aug":
        order = [*index, "value"]
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


def offsets(case: Case, strides: tuple[int, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each lane of I, flattened: its element offset and whether it is in bounds."""
    ishape = case.ishape
    idx = _index_tensors(case)
    offs = sum((i * s for i, s in zip(idx, strides or case.strides)), torch.zeros(ishape, dtype=torch.int64))
    bounds = torch.ones(ishape, dtype=torch.bool)
    if case.shape is not None:
        for i, n in zip(idx, case.shape):
            bounds &= (i >= 0) & (i < n)
    return offs.reshape(-1), bounds.reshape(-1)
