"""Semantic fuzzing: random multicast kernels, their source, and an independent torch model.

A :class:`Case` describes one kernel: the stack of buffers (table slice, or a
1-D or 2-D tile of addresses with a ptr_mask), the element shape and strides,
one index per element dim (a scalar, or an ``arange`` along one axis of I, so
indices broadcast), the access context and the values.  :func:`source` writes
it in castpile's language; :func:`expected` computes what the contract says it
does, in torch, from the Case alone; :func:`run` runs the transpiled kernel in
the Triton interpreter on host tensors (their ``data_ptr()``s stand in for GPUs).

Limits of Triton 3.6's interpreter, not of castpile, shape the cases: it
computes bf16 arithmetic wrongly and stores a scalar constant into bf16 memory
as raw integer bits (a plain ``tl.store(p, 3)`` or ``other=-1`` does it too),
so bf16 cases only move tensors; it has no floating-point ``atomic_xchg``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
from hypothesis import strategies as st

import castpile
from testkit import import_file

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int32": torch.int32}
AUG_OPS = {"float": ["+", "-", "*"], "int": ["+", "-", "*", "&", "|", "^"]}
ATOMIC_OPS = {"float": ["add", "max", "min"], "int": ["add", "max", "min", "and", "or", "xor", "xchg"]}
CONTEXTS = ["load", "tl_load", "store", "tl_store", "aug", "atomic", "cas", "signal"]
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
    def writes(self) -> bool:
        return self.context not in ("load", "tl_load")

    @property
    def returns(self) -> bool:
        return self.context in ("load", "tl_load", "atomic", "cas")


@st.composite
def cases(draw) -> Case:
    """A random, valid Case."""
    dtype = draw(st.sampled_from(list(DTYPES)))
    kind = "int" if dtype == "int32" else "float"
    contexts = CONTEXTS if dtype != "bfloat16" else ["load", "tl_load", "store", "tl_store"]
    if dtype != "int32":
        contexts = [c for c in contexts if c != "signal"]
    context = draw(st.sampled_from(contexts))
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
    use_mask = context in ("tl_load", "tl_store") or (context == "atomic" and draw(st.booleans()))
    case = Case(
        tile, ptile, entries, lo, dtype, shape, strides, explicit, indices, irank, context, op, value, use_mask,
        "alias" if context == "signal" else draw(st.sampled_from(list(IMPORTS))), draw(st.integers(0, 2**31 - 1)),
        other=draw(st.integers(-3, 3)) if context == "tl_load" and dtype != "bfloat16" else 0,
        cmp=draw(st.integers(-2, 2)),
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
    else:
        body.append(f"cp.signal({idx}, value=7)")
    if case.returns:
        body.append(f"tl.store(res + {_flat(P + I)}, x)")
    params = "example, table, res, vals, mk, pm, n0, n1, n2, s0, s1, s2, LO: tl.constexpr"
    lines = ["import triton", "import triton.language as tl", import_line, "", "", "@triton.jit", f"def kernel({params}):"]
    return "\n".join(lines + ["    " + line for line in body]) + "\n"


# -- data and the model --------------------------------------------------------------------


def _extent(case: Case) -> int:
    """Elements per buffer: every in-bounds offset, and some slack."""
    extents = case.shape or (24,)
    return sum((n - 1) * s for n, s in zip(extents, case.strides)) + 1 + 3


def make_data(case: Case) -> dict:
    """Host tensors for ``case``: buffers, a poison buffer for masked entries, table, values, masks."""
    g = torch.Generator().manual_seed(case.seed)
    dt = DTYPES[case.dtype]
    n = _extent(case)

    def small(shape):
        return torch.randint(-4, 5, shape, generator=g).to(dt)

    bufs = [small((n,)) for _ in range(case.nbuf)]
    poison = small((n,))
    addrs = [bufs[e].data_ptr() if e is not None else poison.data_ptr() for e in case.entries]
    if case.tile == "slice_lo":
        addrs = [poison.data_ptr()] * case.lo + addrs
    table = torch.tensor(addrs + [poison.data_ptr()] * 2, dtype=torch.int64)
    full = case.full_shape
    return {
        "bufs": bufs,
        "poison": poison,
        "table": table,
        "pm": torch.tensor([e is not None for e in case.entries], dtype=torch.int32),
        "mk": torch.randint(0, 2, (max(math.prod(case.ishape), 1),), generator=g, dtype=torch.int32),
        "vals": small((math.prod(full) if case.value == "full" else max(math.prod(case.ishape), 1),)),
        "res": torch.zeros(math.prod(full), dtype=dt),
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


def _apply(kind: str, op: str, old: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    ops = {
        "+": torch.add, "-": torch.sub, "*": torch.mul, "&": torch.bitwise_and, "|": torch.bitwise_or,
        "^": torch.bitwise_xor, "add": torch.add, "max": torch.maximum, "min": torch.minimum,
        "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor, "xchg": lambda a, b: b,
    }
    return ops[op](old, v).to(old.dtype)


def expected(case: Case, data: dict) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """What the contract says: final buffers, result (P + I, flattened), and which result lanes are defined."""
    P, I = case.ptile, case.ishape
    full = P + I
    dt = DTYPES[case.dtype]
    bufs = [b.clone() for b in data["bufs"]]
    idx = _index_tensors(case)
    offs = sum((i * s for i, s in zip(idx, case.strides)), torch.zeros(I, dtype=torch.int64))
    inb = torch.ones(I, dtype=torch.bool)
    if case.shape is not None:
        for i, n in zip(idx, case.shape):
            inb &= (i >= 0) & (i < n)
    if case.use_mask:
        inb = inb & (data["mk"][: max(math.prod(I), 1)].reshape(I) != 0)
    if case.value == "scalar":
        v = torch.full(full, 3, dtype=dt)
    elif case.value == "full":
        v = data["vals"].reshape(full)
    else:
        v = data["vals"][: max(math.prod(I), 1)].reshape(I).expand(full)
    res = torch.full(full, case.other if case.context == "tl_load" else 0, dtype=dt).reshape(len(case.entries), -1)
    defined = torch.ones_like(res, dtype=torch.bool) if case.context in ("load", "tl_load") else torch.zeros_like(res, dtype=torch.bool)
    v = v.reshape(len(case.entries), -1)
    flat_offs, flat_inb = offs.reshape(-1), inb.reshape(-1)
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
    kernel[(1,)](
        data["example"], data["table"], data["res"], data["vals"], data["mk"], data["pm"],
        shape[0], shape[1], shape[2], scalars[0], scalars[1], scalars[2], case.lo,
    )
    return {"before": before, "after": data}, out


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
        f"result differs:\ngot  {got.reshape(case.full_shape).tolist()}\nwant {res.reshape(case.full_shape).tolist()}\n{where}"
    )
