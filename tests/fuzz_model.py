"""Semantic fuzzing's model: what the contract says a random multicast kernel (:class:`Case`) does, in torch.

A :class:`Case` describes one kernel: the stack of buffers (a table slice, named or
not, with or without a ptr_mask of its padded extent; a 1-D or 2-D tile of addresses
with a ptr_mask; one peer ``table[r]`` or a rank-0 tile, P = (); or, for ``wait``, a
plain pointer; the example a pointer or a dtype), the element shape and
strides (any integers: zero, repeated, overlapping, negative), one index per element
dim (a scalar, or ``c + arange`` / ``c - arange`` along one axis of I, so indices
broadcast), the access context and how its source is spelled.  The contexts are
every access of the contract: loads, stores, augmented stores, atomics,
``atomic_cas``, ``signal``, stack reductions with every keyword and ``wait`` on
flags already set; and v1.3's: counting waits (``decrement=True``: the flags preset to ``value=`` or
more, which the wait takes from each), waits whose values (``x = wait(...)``: the flags seen, 0 where
masked off) are stored and checked, signals on plain pointers, compile-time keyword values in every
spelling and castpile's names through parentheses or ``global``.  The spellings are what :data:`FEATURES` lists: names the
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

This module is the model (:func:`make_data`, :func:`expected`) and the fuzzer's one entry point: the case
vocabulary and record come from tests/fuzz_case.py, the generator from tests/fuzz_generate.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from fuzz_case import (
    CONTEXTS,
    DTYPES,
    FEATURES,
    FLAG_CONTEXTS,
    IMPORTS,
    TRITON_NAMES,
    WAIT_HOLDS,
    Case,
    Index,
    call_form,
    effect_positions,
    has_ptr_mask,
    offsets,
)
from fuzz_generate import cases

__all__ = [
    "CONTEXTS",
    "FEATURES",
    "FLAG_CONTEXTS",
    "IMPORTS",
    "TRITON_NAMES",
    "Case",
    "Expected",
    "Index",
    "call_form",
    "cases",
    "expected",
    "has_ptr_mask",
    "layout",
    "make_data",
    "poison_slot",
]


def _user_mask(case: Case, mk: torch.Tensor) -> torch.Tensor:
    """The user's mask over I, flattened (all true without one)."""
    ishape = case.ishape
    lanes = max(math.prod(ishape), 1)
    if not case.use_mask or case.mask_form == "none":
        return torch.ones(lanes, dtype=torch.bool)
    if case.mask_form in ("constexpr", "scalar"):
        return torch.full((lanes,), case.mask_on, dtype=torch.bool)
    k = effect_positions(case).get("mask")
    m = mk[:lanes]
    return ((m + k) % 2 != 0) if k is not None else m != 0


def _lanes(case: Case, mk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each lane of I, flattened: its element offset, whether it is in bounds, whether the user's mask is on."""
    offs, bounds = offsets(case)
    return offs, bounds, _user_mask(case, mk)


def layout(case: Case) -> tuple[int, int]:
    """Where offset 0 sits in each buffer's allocation and the allocation's length: room for every lane,
    in bounds or not, under the strides and (so that a lowering that reads a rebound name stays in memory)
    under strides rebound to ``t + 1`` or derived from a shape rebound to ``n + 4``."""
    offs, _ = offsets(case)
    reach = [offs, torch.zeros(1, dtype=torch.int64)]
    if "t" in case.rebound:
        reach.append(offsets(case, tuple(s + 1 for s in case.strides))[0])
    if "n" in case.rebound and not case.explicit_strides:
        grown = [n + 4 for n in case.shape]
        reach.append(offsets(case, tuple(math.prod(grown[d + 1 :]) for d in range(len(grown))))[0])
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
            preset = case.flag_value + k.get("value", 0) + WAIT_HOLDS[case.wait_cmp or "eq"] + case.surplus
        else:
            preset = case.wait_for + k.get("wait_for", 0)
        for buf in bufs:
            buf[base + offs[bounds & user]] = preset
    return {
        "bufs": bufs,
        "poison": poison,
        "table": table,
        "pm": torch.tensor(
            [e is not None or (case.pm_padding and p >= case.slice_count) for p, e in enumerate(case.entries)],
            dtype=torch.int32,
        ),
        "mk": mk,
        "ctr": torch.zeros(1, dtype=torch.int32),
        "vals": small((math.prod(case.full_shape) if case.value == "full" else max(math.prod(case.ishape), 1),)),
        "res": torch.zeros(max(math.prod(case.result_shape), 1), dtype=dt),
        "resi": torch.zeros(max(math.prod(case.result_shape), 1), dtype=torch.int32),
        "example": bufs[0][base:] if case.tile == "plain" else torch.zeros(4, dtype=dt),
    }


def _apply(op: str, old: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    ops = {
        "+": torch.add,
        "-": torch.sub,
        "*": torch.mul,
        "&": torch.bitwise_and,
        "|": torch.bitwise_or,
        "^": torch.bitwise_xor,
        "add": torch.add,
        "max": torch.maximum,
        "min": torch.minimum,
        "and": torch.bitwise_and,
        "or": torch.bitwise_or,
        "xor": torch.bitwise_xor,
        "xchg": lambda a, b: b,
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


def _reduced(
    case: Case, bufs: list[torch.Tensor], base: int, offs, bounds, user
) -> tuple[torch.Tensor, list[set[int]]]:
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
    values, valid = values.reshape((*case.ptile, lanes)), valid.reshape((*case.ptile, lanes))
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
    P, ishape = case.ptile, case.ishape
    full = P + ishape
    dt = DTYPES[case.dtype]
    base, _ = layout(case)
    k = effect_positions(case)
    bufs = [b.clone() for b in data["bufs"]]
    choices: list[dict[int, set]] = [{} for _ in bufs]
    flat_offs, bounds, user = _lanes(case, data["mk"])
    if case.context == "reduce":
        res, indices = _reduced(case, bufs, base, flat_offs, bounds, user)
        return Expected(
            bufs,
            choices,
            res,
            torch.ones_like(res, dtype=torch.bool),
            indices if case.return_indices else None,
            len(case.effects),
        )
    flat_inb = bounds & user
    slot = "val" if case.context in ("atomic", "cas") else "value"
    if case.value == "scalar":
        v = torch.full(full, 3, dtype=dt)
    elif case.value == "full":
        v = data["vals"].reshape(full)
    else:
        v = data["vals"][: max(math.prod(ishape), 1)].reshape(ishape).expand(full)
    v = (v + k.get(slot, 0)).to(dt).reshape(len(case.entries), -1)
    other = case.other + k.get("other", 0) if case.context == "tl_load" else 0
    res = torch.full(full, other, dtype=dt).reshape(len(case.entries), -1)
    # a wait's values are defined everywhere: what it saw, 0 at lanes and entries masked off (v1.3)
    defined = torch.full_like(res, case.context in ("load", "tl_load", "wait"), dtype=torch.bool)
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
                    value = _apply(
                        case.op if case.context == "atomic" else "add", value.reshape(1), operands[lane].reshape(1)
                    )[0]
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
    if c == "wait" and case.decrement:  # a counting semaphore takes value= from each flag it saw
        return old - (case.flag_value + k.get("value", 0))
    if c == "wait" and not case.reset_none:
        return torch.full_like(old, case.reset_value + k.get("reset", 0))
    return None
