"""Semantic fuzzing: random multicast kernels, their source, and an independent torch model.

A :class:`Case` describes one kernel: the stack of buffers (table slice, or a
1-D or 2-D tile of addresses with a ptr_mask), the element shape and strides,
one index per element dim (a scalar, or an ``arange`` along one axis of I, so
indices broadcast), the access context and the values.  The contexts are every
access of docs/language.md: loads, stores, augmented stores, atomics, ``signal``,
stack reductions (``tl.sum/max/min(..., axis=0)``, v1.1: only valid entries take
part) and ``wait`` on flags already set.  :func:`source` writes it in castpile's
language; :func:`expected` computes what the contract says it does, in torch,
from the Case alone; :func:`run` runs the transpiled kernel in the Triton
interpreter on host tensors (their ``data_ptr()``s stand in for GPUs), a ``wait``
in a forked process under a timeout, so that a wait on the wrong flags fails
instead of hanging.

Limits of Triton 3.6's interpreter, not of castpile, shape the cases: it
computes bf16 arithmetic wrongly and stores a scalar constant into bf16 memory
as raw integer bits (a plain ``tl.store(p, 3)`` or ``other=-1`` does it too),
so bf16 cases only move tensors (and reduce them converted to float32); it has no
floating-point ``atomic_xchg``, so flags (``signal``, ``wait``) are int32.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from hypothesis import strategies as st

import castpile
from castpile.gpu import sim
from testkit import import_file

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int32": torch.int32}
AUG_OPS = {"float": ["+", "-", "*"], "int": ["+", "-", "*", "&", "|", "^"]}
ATOMIC_OPS = {"float": ["add", "max", "min"], "int": ["add", "max", "min", "and", "or", "xor", "xchg"]}
CONTEXTS = ["load", "tl_load", "store", "tl_store", "aug", "atomic", "cas", "signal", "reduce", "wait"]
FLAG_CONTEXTS = ("signal", "wait")  # int32 flags, through ``import castpile as cp``
BF16_CONTEXTS = ("load", "tl_load", "store", "tl_store", "reduce")  # reduce through .to(tl.float32) only
REDUCTIONS = ["max", "min", "sum"]  # hypothesis favours the first; a stray identity or 0 shows in max and min
REDUCED = ["access", "to_float32", "tl_load"]  # reduce bufs[i], bufs[i].to(tl.float32), tl.load(bufs[i], ...)
WAIT_TIMEOUT = 30.0  # seconds: a wait that returns takes well under one
IMPORTS = {
    "module": ("import castpile", "castpile.multicast_like"),
    "alias": ("import castpile as cp", "cp.multicast_like"),
    "from": ("from castpile import multicast_like", "multicast_like"),
    "from_as": ("from castpile import multicast_like as mcl", "mcl"),
}


def p2(n: int) -> int:
    """The next power of two (at least 1)."""
    return 1 << max(n - 1, 0).bit_length()


@dataclass(frozen=True)
class Index:
    """An element index: ``value`` (a scalar), or ``arange(0, block) + value`` along ``axis`` of I."""

    value: int
    block: int = 0
    axis: int = -1
    runtime: bool = False  # a scalar passed as a kernel argument instead of a literal

    @property
    def is_scalar(self) -> bool:
        return self.axis < 0


@dataclass
class Case:
    """One generated kernel and its data."""

    tile: str  # "slice", "slice_lo", "tile1", "tile2"
    ptile: tuple[int, ...]  # P, every dim a power of two
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
    reduced: str = "access"  # reduce: what is reduced (REDUCED)
    axis_keyword: bool = True  # reduce: ``axis=0``, else ``0``
    shift: int = 0  # added to every buffer's values: all negative or all positive, a max or min shows any stray 0
    flag: int | None = None  # wait: ``value=`` (None: the default, 1)
    reset: int | None = None  # wait: ``reset=`` (None: the default, 0)
    data: dict = field(default_factory=dict, repr=False)

    @property
    def nbuf(self) -> int:
        return sum(e is not None for e in self.entries)

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
        """The shape of what the kernel stores into ``res``: P + I, or P[1:] + I for a reduction over axis 0."""
        if self.context == "reduce":
            return self.ptile[1:] + self.ishape
        return self.full_shape if self.returns else ()

    @property
    def flag_value(self) -> int:
        return 1 if self.flag is None else self.flag

    @property
    def reset_value(self) -> int:
        return 0 if self.reset is None else self.reset


@st.composite
def cases(draw, contexts=tuple(CONTEXTS)) -> Case:
    """A random, valid Case in one of ``contexts``."""
    context = draw(st.sampled_from(contexts))
    if context in FLAG_CONTEXTS:
        dtype = "int32"
    else:
        dtype = draw(st.sampled_from(list(DTYPES) if context in BF16_CONTEXTS else ["float32", "int32"]))
    kind = "int" if dtype == "int32" else "float"
    tile = draw(st.sampled_from(["slice", "slice_lo", "tile1", "tile2"]))
    world = draw(st.integers(1, 8))
    lo = draw(st.integers(1, 3)) if tile == "slice_lo" else 0
    if tile in ("slice", "slice_lo"):
        ptile = (p2(world),)
        entries = list(range(world)) + [None] * (p2(world) - world)
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
    ndim = draw(st.integers(1, 3))
    with_shape = ndim > 1 or draw(st.booleans())
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
            indices.append(Index(draw(st.integers(low, high)), runtime=draw(st.booleans())))
        else:
            low, high = (-3, extent) if shape else (0, extent - blocks[axis])
            indices.append(Index(draw(st.integers(low, high)), blocks[axis], axis))
    explicit = with_shape and draw(st.booleans())
    extents = shape or (24,)
    if explicit:
        order = draw(st.permutations(range(ndim)))
        strides, step = [0] * ndim, 1
        for d in reversed(order):
            strides[d] = step
            step *= extents[d] + draw(st.integers(0, 2))
        strides = tuple(strides)
    else:
        strides = tuple(math.prod(extents[d + 1:]) for d in range(ndim))
    op, value = "", "scalar"
    if context == "aug":
        op = draw(st.sampled_from(AUG_OPS[kind]))
    elif context == "atomic":
        op = draw(st.sampled_from(ATOMIC_OPS[kind]))
    if context in ("store", "tl_store", "aug", "atomic", "cas"):
        value = draw(st.sampled_from(["row", "row_none", "full"] + ([] if dtype == "bfloat16" else ["scalar"])))
    reduced, axis_keyword, shift, flag, reset = "access", True, 0, None, None
    if context == "reduce":
        op = draw(st.sampled_from(REDUCTIONS))
        reduced = "to_float32" if dtype == "bfloat16" else draw(st.sampled_from(REDUCED))
        axis_keyword = draw(st.booleans())
        shift = draw(st.sampled_from([-10, 0, 10]))
    elif context == "wait":
        flag = draw(st.sampled_from([None, 5, -3]))
        reset = draw(st.sampled_from([None, 2]))
    use_mask = (context in ("tl_load", "tl_store") or (context == "reduce" and reduced == "tl_load")
                or (context in ("atomic", "wait") and draw(st.booleans())))
    takes_other = context == "tl_load" or (context == "reduce" and reduced == "tl_load")
    case = Case(
        tile, ptile, entries, lo, dtype, shape, strides, explicit, indices, irank, context, op, value, use_mask,
        "alias" if context in FLAG_CONTEXTS else draw(st.sampled_from(list(IMPORTS))), draw(st.integers(0, 2**31 - 1)),
        other=draw(st.integers(-3, 3)) if takes_other and dtype != "bfloat16" else 0,
        cmp=draw(st.integers(-2, 2)), reduced=reduced, axis_keyword=axis_keyword, shift=shift, flag=flag, reset=reset,
    )
    return case


# -- source --------------------------------------------------------------------------------


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
        stride = math.prod(shape[axis + 1:])
        terms.append(f"{_along(f'tl.arange(0, {n})', axis, len(shape))} * {stride}")
    return " + ".join(terms)


def source(case: Case) -> str:
    """The kernel ``kernel`` of ``case`` in castpile's language."""
    import_line, mcl = IMPORTS[case.importer]
    body = []
    P, I = case.ptile, case.ishape
    smask = ""
    if case.tile == "slice":
        tile = f"table[:{case.nbuf}]"
    elif case.tile == "slice_lo":
        tile = f"table[LO:LO + {case.nbuf}]"
    else:
        body.append(f"tile = tl.load(table + {_flat(P)})")
        if any(e is None for e in case.entries):
            body.append(f"pmask = tl.load(pm + {_flat(P)}) != 0")
            smask = ", ptr_mask=pmask"
        tile = "tile"
    args = ""
    if case.shape is not None:
        args += f", shape=({''.join(f'n{d}, ' for d in range(len(case.shape)))})"
    if case.explicit_strides:
        args += f", strides=({''.join(f'{s}, ' for s in case.strides)})"
    body.append(f"bufs = {mcl}(example, {tile}{args}{smask})")
    names = []
    for d, index in enumerate(case.indices):
        if index.is_scalar:
            names.append(f"s{d}" if index.runtime else str(index.value))
        else:
            body.append(f"i{d} = {_along(f'tl.arange(0, {index.block}) + {index.value}', index.axis, case.irank)}")
            names.append(f"i{d}")
    idx = f"bufs[{', '.join(names)}]"
    if case.use_mask:
        body.append(f"m = tl.load(mk + {_flat(I)}) != 0")
    v = {"scalar": "3"}.get(case.value, "v")
    if case.value in ("row", "row_none"):
        body.append(f"v = tl.load(vals + {_flat(I)})")
        if case.value == "row_none" and I:
            v = f"v[{', '.join(['None'] * len(P) + [':'] * len(I))}]"
    elif case.value == "full":
        body.append(f"v = tl.load(vals + {_flat(P + I)})")
    mask = ", mask=m" if case.use_mask else ""
    c = case.context
    if c == "load":
        body.append(f"x = {idx}")
    elif c == "tl_load":
        body.append(f"x = tl.load({idx}{mask}, other={case.other})")
    elif c == "store":
        body.append(f"{idx} = {v}")
    elif c == "tl_store":
        body.append(f"tl.store({idx}, {v}{mask})")
    elif c == "aug":
        body.append(f"{idx} {case.op}= {v}")
    elif c == "atomic":
        body.append(f"x = tl.atomic_{case.op}({idx}, {v}{mask})")
    elif c == "cas":
        body.append(f"x = tl.atomic_cas({idx}, {case.cmp}, {v})")
    elif c == "signal":
        body.append(f"cp.signal({idx}, value=7)")
    elif c == "reduce":
        reduced = {"access": idx, "to_float32": f"{idx}.to(tl.float32)",
                   "tl_load": f"tl.load({idx}{mask}, other={case.other})"}[case.reduced]
        body.append(f"x = tl.{case.op}({reduced}, {'axis=0' if case.axis_keyword else '0'})")
    else:
        flag = "" if case.flag is None else f", value={case.flag}"
        reset = "" if case.reset is None else f", reset={case.reset}"
        body.append(f"cp.wait({idx}{flag}{reset}{mask})")
    if case.returns or c == "reduce":
        body.append(f"tl.store(res + {_flat(case.result_shape)}, x)")
    params = "example, table, res, vals, mk, pm, n0, n1, n2, s0, s1, s2, LO: tl.constexpr"
    lines = ["import triton", "import triton.language as tl", import_line, "", "", "@triton.jit", f"def kernel({params}):"]
    return "\n".join(lines + ["    " + line for line in body]) + "\n"


# -- data and the model --------------------------------------------------------------------


def _extent(case: Case) -> int:
    """Elements per buffer: every in-bounds offset, and some slack."""
    extents = case.shape or (24,)
    return sum((n - 1) * s for n, s in zip(extents, case.strides)) + 1 + 3


def make_data(case: Case) -> dict:
    """Host tensors for ``case``: buffers, a poison buffer for masked entries, table, values, masks.

    For ``wait``, the flags the kernel waits on (valid entries, in-bounds lanes with the
    mask on) are set, so that it must return; every other element keeps its random value.
    """
    g = torch.Generator().manual_seed(case.seed)
    dt = DTYPES[case.dtype]
    n = _extent(case)

    def small(shape):
        return torch.randint(-4, 5, shape, generator=g).to(dt)

    bufs = [small((n,)) + case.shift for _ in range(case.nbuf)]
    poison = small((n,)) + case.shift
    addrs = [bufs[e].data_ptr() if e is not None else poison.data_ptr() for e in case.entries]
    if case.tile == "slice_lo":
        addrs = [poison.data_ptr()] * case.lo + addrs
    table = torch.tensor(addrs + [poison.data_ptr()] * 2, dtype=torch.int64)
    mk = torch.randint(0, 2, (max(math.prod(case.ishape), 1),), generator=g, dtype=torch.int32)
    if case.context == "wait":
        offs, bounds, user = _lanes(case, mk)
        for buf in bufs:
            buf[offs[bounds & user]] = case.flag_value
    return {
        "bufs": bufs,
        "poison": poison,
        "table": table,
        "pm": torch.tensor([e is not None for e in case.entries], dtype=torch.int32),
        "mk": mk,
        "vals": small((math.prod(case.full_shape) if case.value == "full" else max(math.prod(case.ishape), 1),)),
        "res": torch.zeros(max(math.prod(case.result_shape), 1), dtype=dt),
        "example": torch.zeros(4, dtype=dt),
    }


def _index_tensors(case: Case) -> list[torch.Tensor]:
    """Each index's values, broadcast to I."""
    out = []
    for index in case.indices:
        if index.is_scalar:
            t = torch.tensor(index.value, dtype=torch.int64)
        else:
            t = torch.arange(index.block, dtype=torch.int64) + index.value
            shape = [1] * case.irank
            shape[index.axis] = index.block
            t = t.reshape(shape)
        out.append(t.expand(case.ishape))
    return out


def _lanes(case: Case, mk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each lane of I, flattened: its element offset, whether it is in bounds, whether the user's mask is on."""
    I = case.ishape
    idx = _index_tensors(case)
    offs = sum((i * s for i, s in zip(idx, case.strides)), torch.zeros(I, dtype=torch.int64))
    bounds = torch.ones(I, dtype=torch.bool)
    if case.shape is not None:
        for i, n in zip(idx, case.shape):
            bounds &= (i >= 0) & (i < n)
    user = mk[: max(math.prod(I), 1)].reshape(I) != 0 if case.use_mask else torch.ones(I, dtype=torch.bool)
    return offs.reshape(-1), bounds.reshape(-1), user.reshape(-1)


def _apply(kind: str, op: str, old: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    ops = {
        "+": torch.add, "-": torch.sub, "*": torch.mul, "&": torch.bitwise_and, "|": torch.bitwise_or,
        "^": torch.bitwise_xor, "add": torch.add, "max": torch.maximum, "min": torch.minimum,
        "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor, "xchg": lambda a, b: b,
    }
    return ops[op](old, v).to(old.dtype)


def _reduced(case: Case, bufs: list[torch.Tensor], offs, bounds, user) -> torch.Tensor:
    """The stack reduction over axis 0 (v1.1): valid entries only (not padded, ptr_mask true, in bounds),
    lanes the user's mask turns off as ``other``, 0 where a lane has no valid entry.  Flattened P[1:] + I."""
    lanes = offs.numel()
    values = torch.zeros(len(case.entries), lanes, dtype=torch.float64)  # exact for these small integers
    valid = torch.zeros(len(case.entries), lanes, dtype=torch.bool)
    for p, e in enumerate(case.entries):
        if e is not None:
            loaded = bufs[e][offs.clamp(0, bufs[e].numel() - 1)].double()
            values[p] = torch.where(user, loaded, float(case.other))
            valid[p] = bounds
    values, valid = values.reshape(case.ptile + (lanes,)), valid.reshape(case.ptile + (lanes,))
    if case.op == "sum":
        result = torch.where(valid, values, 0.0).sum(0)
    elif case.op == "max":
        result = torch.where(valid, values, -math.inf).amax(0)
    else:
        result = torch.where(valid, values, math.inf).amin(0)
    return torch.where(valid.any(0), result, 0.0).reshape(-1).to(DTYPES[case.dtype])


def expected(case: Case, data: dict) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """What the contract says: final buffers, result (flattened ``result_shape``), and which result lanes are defined."""
    P, I = case.ptile, case.ishape
    full = P + I
    dt = DTYPES[case.dtype]
    bufs = [b.clone() for b in data["bufs"]]
    flat_offs, bounds, user = _lanes(case, data["mk"])
    if case.context == "reduce":
        res = _reduced(case, bufs, flat_offs, bounds, user)
        return bufs, res, torch.ones_like(res, dtype=torch.bool)
    flat_inb = bounds & user
    if case.value == "scalar":
        v = torch.full(full, 3, dtype=dt)
    elif case.value == "full":
        v = data["vals"].reshape(full)
    else:
        v = data["vals"][: max(math.prod(I), 1)].reshape(I).expand(full)
    res = torch.full(full, case.other if case.context == "tl_load" else 0, dtype=dt).reshape(len(case.entries), -1)
    defined = torch.ones_like(res, dtype=torch.bool) if case.context in ("load", "tl_load") else torch.zeros_like(res, dtype=torch.bool)
    v = v.reshape(len(case.entries), -1)
    kind = "int" if case.dtype == "int32" else "float"
    for p, e in enumerate(case.entries):
        if e is None:
            continue
        lanes = flat_inb.nonzero().reshape(-1)
        where = flat_offs[lanes]
        old = bufs[e][where].clone()
        if case.returns:
            res[p, lanes] = old
            defined[p, lanes] = True
        c = case.context
        if c in ("store", "tl_store"):
            bufs[e][where] = v[p, lanes]
        elif c in ("aug", "atomic"):
            bufs[e][where] = _apply(kind, case.op, old, v[p, lanes])
        elif c == "cas":
            bufs[e][where] = torch.where(old == case.cmp, v[p, lanes], old)
        elif c == "signal":
            bufs[e][where] = 7
        elif c == "wait":
            bufs[e][where] = case.reset_value
    if not case.returns:
        res, defined = torch.zeros(1, dtype=dt), torch.zeros(1, dtype=torch.bool)
    return bufs, res.reshape(-1), defined.reshape(-1)


# -- running -------------------------------------------------------------------------------


def load_kernel(text: bytes, directory: Path):
    """Import transpiled source from a real file (Triton reads kernels from their file)."""
    name = "fuzz_" + hashlib.sha256(text).hexdigest()[:16]
    path = directory / f"{name}.py"
    if not path.exists():
        path.write_bytes(text)
    return import_file(path, name).kernel


def run(case: Case, strategy: str, directory: Path) -> tuple[dict, bytes]:
    """Transpile ``case`` with ``strategy`` and run it on fresh data; the data afterwards and the output."""
    out = castpile.transpile(source(case).encode(), "fuzz_case.py", strategy=strategy)
    kernel = load_kernel(out, directory)
    data = make_data(case)
    before = {k: ([b.clone() for b in v] if isinstance(v, list) else v.clone()) for k, v in data.items()}
    shape = list(case.shape or ()) + [1] * 3
    scalars = [i.value if i.is_scalar else 0 for i in case.indices] + [0] * 3

    def launch(rank=0):
        kernel[(1,)](
            data["example"], data["table"], data["res"], data["vals"], data["mk"], data["pm"],
            shape[0], shape[1], shape[2], scalars[0], scalars[1], scalars[2], case.lo,
        )
        return data

    if case.context == "wait":  # one forked rank: it sees the same addresses, and a hang is reported
        [after] = sim.run(launch, 1, timeout=WAIT_TIMEOUT)
    else:
        after = launch()
    return {"before": before, "after": after}, out


def check(case: Case, strategy: str, directory: Path) -> None:
    """Run ``case`` and assert the result matches the model (raises AssertionError with the source)."""
    ran, out = run(case, strategy, directory)
    before, after = ran["before"], ran["after"]
    bufs, res, defined = expected(case, before)
    where = f"strategy={strategy}\n--- source ---\n{source(case)}"
    for b, (got, want) in enumerate(zip(after["bufs"], bufs)):
        assert torch.equal(got, want), f"buffer {b} differs: got {got.tolist()} want {want.tolist()}\n{where}"
    assert torch.equal(after["poison"], before["poison"]), f"a masked/padded stack entry was written\n{where}"
    got = after["res"]
    assert torch.equal(got[defined], res[defined]), (
        f"result differs:\ngot  {got.reshape(case.result_shape).tolist()}\nwant {res.reshape(case.result_shape).tolist()}\n{where}"
    )
