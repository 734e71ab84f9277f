"""The mask rule (castpile/compiler/mask_bounds.py; docs/language.md, "What castpile emits for an index").

An access to a 1-D binding ``shape=(M * D,)`` at ``row * D + cols`` whose ``mask=`` holds ``cols < D``, in a loop
that keeps ``row < M``, has no bounds mask and its row offset in ``base=``: the mask proves the index inside the
extent.  Here: (source, whether the bounds go) pairs with the cases left alone, and drawn flat row loops (the
proof's forms and near misses of each of its conditions, under both strategies) run in the interpreter against a
model of the contract, with sentinels around the extent, and compiled for sm_90.  tests/test_index_rule.py holds
the semantics (the flat row loops, in the interpreter against torch, and compiled for sm_90) and the PTX of the
issue-35 sweep's 1-D kernels equal to their hand twins'.
"""

import random

import libcst as cst
import pytest
import torch

import castpile
from compile_sm90 import Job, compile_for_sm90, signature
from testkit import address_table, transpiled

HEAD = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def k(out, table, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
"""
ROWS = (
    "    bufs = multicast_like(out, table[:W], shape=(M * D,))\n    cols = tl.arange(0, BLOCK)\n    mask = cols < D\n"
)
FOR = "    for row in range(tl.program_id(0), M, tl.num_programs(0)):\n"
READ = "        x = tl.load(bufs[row * D + cols], mask=mask, other=0)\n"
#: :data:`READ` in the function's own block (no loop).
TOP = READ[4:]


def at(index: str, read: str = READ) -> str:
    """``read`` with its index spelt ``index``: ``at("offs")`` reads ``bufs[offs]``."""
    return read.replace("row * D + cols", index)


PROVEN = {
    "for, named mask and lanes": ROWS + FOR + READ,
    "while, the step after the access": ROWS
    + "    row = tl.program_id(0)\n    while row < M:\n"
    + READ
    + "        row += tl.num_programs(0)\n",
    "inline arange and mask": "    bufs = multicast_like(out, table[:W], shape=(M * D,))\n"
    + FOR
    + "        x = tl.load(bufs[row * D + tl.arange(0, BLOCK)], mask=tl.arange(0, BLOCK) < D, other=0)\n",
    "summands and factors swapped, D > cols among other conditions": ROWS.replace("M * D", "D * M")
    + FOR
    + "        x = tl.load(bufs[cols + D * row], mask=(row < M) & (D > cols) & (cols >= 0))\n",
    "a store": ROWS + FOR + "        tl.store(bufs[row * D + cols], 1.0, mask=mask)\n",
    "an atomic": ROWS + FOR + "        tl.atomic_add(bufs[row * D + cols], 1.0, mask=mask)\n",
    "a reduction of a load": ROWS + FOR + "        x = tl.sum(tl.load(bufs[row * D + cols], mask=mask), axis=0)\n",
    "a reduction of a load through casts": ROWS
    + FOR
    + "        x = tl.sum(tl.load(bufs[row * D + cols], mask=mask).to(tl.float16).to(tl.float32), axis=0)\n",
    "tl.range with its options": ROWS + FOR.replace("range(", "tl.range(").replace("):", ", num_stages=2):") + READ,
    "a literal row length": ROWS.replace("M * D", "M * 64").replace("cols < D", "cols < 64")
    + FOR
    + READ.replace("row * D", "row * 64"),
    "the access in a branch of the loop": ROWS + FOR + "        if row % 2 == 0:\n    " + READ,
    "a named index in the loop": ROWS + FOR + "        offs = row * D + cols\n" + at("offs"),
    "the row offset named in the loop": ROWS + FOR + "        start = row * D\n" + at("start + cols"),
    "an int64 row offset": ROWS + FOR + READ.replace("row * D", "row.to(tl.int64) * D"),
    "an int64 row offset, named, after the lanes": ROWS
    + FOR
    + "        start = D * row.to(dtype=tl.int64)\n"
    + at("cols + start"),
    "hinted lanes and row offset": ROWS.replace(
        "tl.arange(0, BLOCK)", "tl.max_contiguous(tl.multiple_of(tl.arange(0, BLOCK), BLOCK), BLOCK)"
    )
    + FOR
    + READ.replace("row * D", "tl.multiple_of(row * D, 16)"),
    "tl.range with step=": ROWS
    + FOR.replace(
        "range(tl.program_id(0), M, tl.num_programs(0))", "tl.range(tl.program_id(0), M, step=tl.num_programs(0))"
    )
    + READ,
    "tl.range of the stop alone, with step=": ROWS + "    for row in tl.range(M, step=2):\n" + READ,
    "a row guarded by if": ROWS + "    row = tl.program_id(0)\n    if row < M:\n" + READ,
    "a row guarded by if, its offset named there": ROWS
    + "    row = tl.program_id(0)\n    if row < M:\n        start = row * D\n"
    + at("start + cols"),
    "an early return": ROWS + "    row = tl.program_id(0)\n    if row >= M:\n        return\n" + TOP,
    "an early return on one line, the test reversed, the offset named after it": ROWS
    + "    row = tl.program_id(0)\n    if M <= row: return\n    start = row * D\n"
    + at("start + cols", TOP),
    "a continue in a loop": ROWS
    + "    for r in range(0, 4):\n        row = tl.program_id(0) * 4 + r\n        if row >= M:\n            continue\n"
    + READ,
    "a guard and a while with the test reversed": ROWS
    + "    row = tl.program_id(0)\n    if M > row:\n"
    + READ
    + "    while M > row:\n"
    + READ
    + "        row += tl.num_programs(0)\n",
    "an extent over two lines, with a comment": ROWS.replace("shape=(M * D,)", "shape=(M *  # rows\n        D,)")
    + FOR
    + READ,
    "a named index in the while, the step after both": ROWS
    + "    row = tl.program_id(0)\n    while row < M:\n        offs = cols + row * D\n"
    + at("offs")
    + "        row += tl.num_programs(0)\n",
}
#: A flat buffer read block by block (a collective's ``offs < n``): the mask bounds the index itself.
BLOCKS = "    bufs = multicast_like(out, table[:W], shape=(M,))\n"
OFFS = "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
OFFS_READ = "    x = tl.load(bufs[offs], mask=offs < M, other=0)\n"
PROVEN |= {
    "a block per program, offs < n": BLOCKS + OFFS + OFFS_READ,
    "a block per program, the mask named and reversed among other conditions": BLOCKS
    + OFFS
    + "    mask = (M > offs) & (offs >= 0)\n"
    + OFFS_READ.replace("offs < M", "mask"),
    "a grid-stride while over blocks": BLOCKS
    + "    start = tl.program_id(0) * BLOCK\n    while start < M:\n        offs = start + tl.arange(0, BLOCK)\n"
    + "    "
    + OFFS_READ
    + "        start += tl.num_programs(0) * BLOCK\n",
    "a for over blocks, its step the arange's end": BLOCKS
    + "    for start in range(0, M, BLOCK):\n        offs = start + tl.arange(0, BLOCK)\n        mask = offs < M\n"
    + "    "
    + OFFS_READ.replace("offs < M", "mask"),
    "a block per program, an extent of a product": BLOCKS.replace("(M,)", "(M * D,)")
    + OFFS
    + OFFS_READ.replace("offs < M", "offs < D * M"),
}
#: A row read in column blocks (Triton's layer-norm tutorial): the lanes are the block's, named in the inner loop.
COLUMN_BLOCKS = "        for off in range(0, D, BLOCK):\n            cols = off + tl.arange(0, BLOCK)\n"
COLUMNS_READ = "            x = tl.load(bufs[row * D + cols], mask=cols < D, other=0)\n"
FLAT_ROWS = "    bufs = multicast_like(out, table[:W], shape=(M * D,))\n"
PROVEN |= {
    "column blocks, the mask in the access": FLAT_ROWS + FOR + COLUMN_BLOCKS + COLUMNS_READ,
    "column blocks, the mask named after the lanes": FLAT_ROWS
    + FOR
    + COLUMN_BLOCKS
    + "            mask = cols < D\n"
    + COLUMNS_READ.replace("cols < D", "mask"),
    "column blocks, the index named after the lanes, the arange first": FLAT_ROWS
    + FOR
    + COLUMN_BLOCKS.replace("off + tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) + off")
    + "            offs = cols + D * row\n"
    + at("offs", COLUMNS_READ),
    "column blocks in two loops (the lanes and the loop variable assigned twice)": FLAT_ROWS
    + FOR
    + COLUMN_BLOCKS
    + COLUMNS_READ.replace("x = ", "y = ")
    + COLUMN_BLOCKS
    + COLUMNS_READ,
    "column blocks in a while, the lanes assigned twice, the mask in the access": FLAT_ROWS
    + "    cols = tl.arange(0, BLOCK)\n"
    + FOR
    + "        off = 0\n        while off < D:\n            cols = off + tl.arange(0, BLOCK)\n"
    + COLUMNS_READ
    + "            off += BLOCK\n",
}
#: The row kept below M by the mask itself: a row per program, or a tile of rows (``rows[:, None] * D + cols[None, :]``).
ONE_ROW = FLAT_ROWS + "    row = tl.program_id(0)\n    cols = tl.arange(0, BLOCK)\n"
TILE = (
    FLAT_ROWS
    + "    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    cols = tl.arange(0, BLOCK)\n"
    + "    offs = rows[:, None] * D + cols[None, :]\n"
)
TILE_READ = "    x = tl.load(bufs[offs], mask=(rows[:, None] < M) & (cols[None, :] < D), other=0)\n"
PROVEN |= {
    "a row per program, its test in the mask": ONE_ROW
    + at("row * D + cols", TOP).replace("mask=mask", "mask=(row < M) & (cols < D)"),
    "a row per program, the mask named, its test reversed": ONE_ROW + "    mask = (cols < D) & (M > row)\n" + TOP,
    "a tile of rows, the mask in the call": TILE + TILE_READ,
    "a tile of rows, the mask named": TILE
    + "    mask = (rows[:, None] < M) & (cols[None, :] < D)\n"
    + TILE_READ.replace("(rows[:, None] < M) & (cols[None, :] < D)", "mask"),
    "a tile of rows in column blocks": FLAT_ROWS
    + "    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    + "    for off in range(0, D, BLOCK):\n        cols = off + tl.arange(0, BLOCK)\n"
    + "        offs = rows[:, None] * D + cols[None, :]\n"
    + "    "
    + TILE_READ,
}
LEFT_ALONE = {
    "a block size no arange of the index bounds": BLOCKS
    + "    offs = tl.program_id(0) * D + tl.arange(0, BLOCK)\n"
    + OFFS_READ,
    "a block before the first": BLOCKS
    + "    offs = (tl.program_id(0) - 1) * BLOCK + tl.arange(0, BLOCK)\n"
    + OFFS_READ,
    "offs <= n": BLOCKS + OFFS + OFFS_READ.replace("offs < M", "offs <= M"),
    "the mask of another extent": BLOCKS + OFFS + OFFS_READ.replace("offs < M", "offs < M + 1"),
    "another index than the mask's": BLOCKS + OFFS + OFFS_READ.replace("bufs[offs]", "bufs[offs + 1]"),
    "the mask's index assigned twice": BLOCKS + OFFS + "    offs = offs + 0\n" + OFFS_READ,
    "the mask made before the index (a global's value, or the last pass's)": BLOCKS
    + "    for start in range(0, M, BLOCK):\n        mask = offs < M\n        offs = start + tl.arange(0, BLOCK)\n"
    + "    "
    + OFFS_READ.replace("offs < M", "mask"),
    "the arange's end assigned": BLOCKS + "    BLOCK = BLOCK * 1\n" + OFFS + OFFS_READ,
    "a reduction of a load whose other is not 0": ROWS
    + FOR
    + "        x = tl.sum(tl.load(bufs[row * D + cols], mask=mask, other=-5.0), axis=0)\n",
    "a reduction of a load through a step that does not keep 0": ROWS
    + FOR
    + "        x = tl.sum(-tl.load(bufs[row * D + cols], mask=mask, other=0), axis=0)\n",
    "a block's reduction of a load through a cast, then a step": BLOCKS
    + OFFS
    + "    x = tl.max(tl.load(bufs[offs], mask=offs < M, other=0).to(tl.float32) * 2.0, axis=0)\n",
    "a block's reduction of a load whose other is not 0": BLOCKS
    + OFFS
    + "    x = tl.min(tl.load(bufs[offs], mask=offs < M, other=1), axis=0)\n",
    "the index assigned in both branches, in one of them not proven non-negative": BLOCKS
    + "    if D > 0:\n    "
    + OFFS
    + "    else:\n        offs = tl.program_id(0) * D + tl.arange(0, BLOCK)\n"
    + OFFS_READ,
    "the mask assigned in a branch": BLOCKS
    + OFFS
    + "    if D > 0:\n        mask = offs < M\n"
    + OFFS_READ.replace("offs < M", "mask"),
    "the arange only where a constexpr may prune it": BLOCKS
    + "    offs = tl.program_id(0) * BLOCK + (tl.arange(0, BLOCK) if W > 1 else 0)\n"
    + OFFS_READ,
    "no mask": ROWS + FOR + "        x = bufs[row * D + cols]\n",
    "a mask that proves nothing": ROWS.replace("cols < D", "cols < D + 1") + FOR + READ,
    "<= D": ROWS.replace("cols < D", "cols <= D") + FOR + READ,
    "|": ROWS.replace("cols < D", "(cols < D) | (cols < 4)") + FOR + READ,
    "another extent": ROWS.replace("M * D", "M * D + 1") + FOR + READ,
    "a loop past the extent": ROWS + FOR.replace("M, tl", "M + 1, tl") + READ,
    "no loop": ROWS + "    row = tl.program_id(0)\n" + TOP,
    "the step before the access": ROWS
    + "    row = tl.program_id(0)\n    while row < M:\n        row += tl.num_programs(0)\n"
    + READ,
    "<= in the while": ROWS + "    row = tl.program_id(0)\n    while row <= M:\n" + READ + "        row += 1\n",
    "D assigned": "    D = D + 0\n" + ROWS + FOR + READ,
    "the mask assigned twice": ROWS + "    mask = cols < 2 * D\n" + FOR + READ,
    "lanes that may be negative": ROWS.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) - 1") + FOR + READ,
    "a third summand": ROWS + FOR + at("row * D + cols + 1"),
    "a difference": ROWS + FOR + at("row * D - cols"),
    "a row counting down": ROWS + "    for row in range(M, 0, -1):\n" + READ,
    "the row assigned in the loop": ROWS + FOR + "        row = row + 0\n" + READ,
    "a named index assigned before the loop": ROWS
    + "    row = tl.program_id(0)\n    offs = row * D + cols\n    while row < M:\n"
    + at("offs")
    + "        row += tl.num_programs(0)\n",
    "a named index after the step": ROWS
    + "    row = tl.program_id(0)\n    while row < M:\n        row += tl.num_programs(0)\n        offs = row * D + cols\n"
    + at("offs"),
    "lanes of a tl.static_range variable, the mask of its first pass": ROWS
    + FOR
    + "        for c in tl.static_range(2):\n            if c == 0:\n"
    + "                mask = tl.arange(c, c + BLOCK) < D\n"
    + "            x = tl.load(bufs[row * D + tl.arange(c, c + BLOCK)], mask=mask, other=0)\n",
    "the row offset named before the loop": ROWS
    + "    row = tl.program_id(0)\n    start = row * D\n    while row < M:\n"
    + at("start + cols")
    + "        row += tl.num_programs(0)\n",
    "the row offset plus one": ROWS + FOR + "        start = row * D + 1\n" + at("start + cols"),
    "the row offset named twice": ROWS
    + FOR
    + "        start = row * D\n        start = start + 0\n"
    + at("start + cols"),
    "a narrowing cast of the row": ROWS + FOR + READ.replace("row * D", "row.to(tl.int16) * D"),
    "the access in the else of if row < M": ROWS
    + "    row = tl.program_id(0)\n    if row < M:\n        pass\n    else:\n"
    + READ,
    "if row <= M": ROWS + "    row = tl.program_id(0)\n    if row <= M:\n" + READ,
    "the row stepped in the if before the access": ROWS
    + "    row = tl.program_id(0)\n    if row < M:\n        row += 1\n"
    + READ,
    "the row offset named before the if": ROWS
    + "    row = tl.program_id(0)\n    start = row * D\n    if row < M:\n"
    + at("start + cols"),
    "a comprehension's variable rebinding the row (Triton leaks it)": ROWS
    + FOR
    + "        t = [0 for row in (M,)]\n"
    + READ,
    "a comprehension's variable rebinding D": "    t = [0 for D in (BLOCK,)]\n" + ROWS + FOR + READ,
    "the row offset read before its assignment (a global of that name)": ROWS
    + FOR
    + at("start + cols")
    + "        start = row * D\n",
    "the row offset assigned in a branch only": ROWS
    + FOR
    + "        if D > 1:\n            start = row * D\n"
    + at("start + cols"),
    "the mask assigned after the access": ROWS.replace("    mask = cols < D\n", "")
    + FOR
    + READ
    + "        mask = cols < D\n",
    "the lanes assigned after the access": ROWS.replace("    cols = tl.arange(0, BLOCK)\n", "")
    + FOR
    + READ
    + "        cols = tl.arange(0, BLOCK)\n",
    "an early return off by one": ROWS + "    row = tl.program_id(0)\n    if row > M:\n        return\n" + TOP,
    "an early return with an else": ROWS
    + "    row = tl.program_id(0)\n    if row >= M:\n        return\n    else:\n        pass\n"
    + TOP,
    "an early exit that does more than exit": ROWS
    + "    row = tl.program_id(0)\n    if row >= M:\n        row = 0\n"
    + TOP,
    "the row stepped after the early return": ROWS
    + "    row = tl.program_id(0)\n    if row >= M:\n        return\n    row += 1\n"
    + TOP,
    "the offset named before the early return": ROWS
    + "    row = tl.program_id(0)\n    start = row * D\n    if row >= M:\n        return\n"
    + at("start + cols", TOP),
    "column blocks from before the row": FLAT_ROWS
    + FOR
    + COLUMN_BLOCKS.replace("range(0, D", "range(0 - BLOCK, D")
    + COLUMNS_READ,
    "column blocks, the lanes assigned twice, the mask named": FLAT_ROWS
    + "    cols = tl.arange(0, BLOCK)\n"
    + FOR
    + COLUMN_BLOCKS
    + "            mask = cols < D\n"
    + COLUMNS_READ.replace("cols < D", "mask"),
    "column blocks, the mask made before the lanes (the last block's)": FLAT_ROWS
    + "    cols = tl.arange(0, BLOCK)\n"
    + FOR
    + "        for off in range(0, D, BLOCK):\n            mask = cols < D\n"
    + "            cols = off + tl.arange(0, BLOCK)\n"
    + COLUMNS_READ.replace("cols < D", "mask"),
    "column blocks, the lanes changed between the named index and the mask": FLAT_ROWS
    + FOR
    + COLUMN_BLOCKS
    + "            offs = row * D + cols\n            cols = cols * 0\n"
    + at("offs", COLUMNS_READ),
    "column blocks, a step no arange of the index bounds": FLAT_ROWS
    + FOR
    + "        for off in range(0, D, D - BLOCK):\n            cols = off + tl.arange(0, BLOCK)\n"
    + COLUMNS_READ,
    "a row per program, its test <= M in the mask": ONE_ROW
    + at("row * D + cols", TOP).replace("mask=mask", "mask=(row <= M) & (cols < D)"),
    "a row per program, its test of another extent": ONE_ROW
    + at("row * D + cols", TOP).replace("mask=mask", "mask=(row < M + 1) & (cols < D)"),
    "a row per program, its test under |": ONE_ROW
    + at("row * D + cols", TOP).replace("mask=mask", "mask=(row < M) | (cols < D)"),
    "a row per program, the mask made before the row changes": ONE_ROW
    + "    mask = (row < M) & (cols < D)\n    row = row + 1\n"
    + TOP,
    "a tile of rows from before the first": TILE.replace("tl.program_id(0) * BLOCK", "(tl.program_id(0) - 1) * BLOCK")
    + TILE_READ,
    "a tile of rows, the mask's rows the other way": TILE + TILE_READ.replace("rows[:, None] < M", "rows[None, :] < M"),
    "a named index assigned twice": ROWS
    + FOR
    + "        offs = row * D + cols\n        offs = offs + 0\n"
    + at("offs"),
}


#: Left alone where a module-level statement may bind a name the proof reads (Triton reads that global where the
#: function reads the name before assigning it): (module head, body).
GLOBALS = {
    "the lanes also a global, the mask made before them": (
        "cols = tl.constexpr(0)\n",
        "    bufs = multicast_like(out, table[:W], shape=(M * D,))\n    mask = cols < D\n    cols = tl.arange(0, BLOCK)\n"
        + FOR
        + READ,
    ),
    "a star import, the row read before its assignment": (
        "from consts import *\n",
        ROWS + "    if row >= M:\n        return\n" + TOP + "    row = tl.program_id(0)\n",
    ),
    "a module-level match capture": (
        "match tl.constexpr(-1):\n    case row:\n        pass\n",
        ROWS + "    if D > 0:\n        row = tl.program_id(0)\n    if row >= M:\n        return\n" + TOP,
    ),
}


def lowered(body: str, head: str = "") -> str:
    """The line of ``body``'s first multicast access, as castpile lowers it (the loop strategy)."""
    text = castpile.transpile((head + HEAD + body).encode(), "k.py", strategy="loop").decode()
    return next(line for line in text.splitlines() if "_castpile_" in line and "bufs" in line and "=" in line)


def bounds(line: str) -> str:
    """The bounds argument of the helper call in ``line`` (the sixth: after the stack, W, the tile, the example and
    the offsets), or the whole line where the call has no such argument (an index helper's)."""
    call = next(
        node
        for node in _calls(cst.parse_module(line.strip() + "\n"))
        if isinstance(node.func, cst.Name)
        and node.func.value.startswith("_castpile_")
        and node.func.value != "_castpile_index"
    )
    return cst.Module([]).code_for_node(call.args[5].value) if len(call.args) > 5 else line


def _calls(node: cst.CSTNode):
    if isinstance(node, cst.Call):
        yield node
    for child in node.children:
        yield from _calls(child)


@pytest.mark.parametrize("case", PROVEN)
def test_the_mask_proves_the_bounds(case):
    line = lowered(PROVEN[case])
    assert bounds(line).startswith("_castpile_unbounded("), line  # no bounds
    assert ("base=" in line) is ("offs" not in PROVEN[case]), line  # the row in base=, unless the index is a name
    # (a tile's index is a name: its row offsets are a tensor)


@pytest.mark.parametrize("case", LEFT_ALONE)
def test_left_alone(case):
    line = lowered(LEFT_ALONE[case])
    assert "_castpile_unbounded" not in bounds(line) and " < " in bounds(line), line  # the bounds (or the index helper)


@pytest.mark.parametrize("case", GLOBALS)
def test_left_alone_where_a_global_may_stand_for_a_name(case):
    head, body = GLOBALS[case]
    line = lowered(body, "import triton.language as tl\n" + head)
    assert "_castpile_unbounded" not in bounds(line) and " < " in bounds(line), line


OTHER = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def rows(out, table, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(M * D,))
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    while row < M:
        tl.store(out + row * BLOCK + cols, tl.sum(tl.load(bufs[row * D + cols], mask=cols < D, other=-50.0), axis=0))
        row += tl.num_programs(0)


@triton.jit
def block(out, table, M, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(M,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(tl.load(bufs[offs], mask=offs < M, other=-50.0), axis=0))


@triton.jit
def stepped(out, table, M, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(M,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(tl.load(bufs[offs], mask=offs < M, other=0).to(tl.float32) + 1, axis=0))


@triton.jit
def stepped_rows(out, table, M, D, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(M * D,))
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    while row < M:
        x = tl.max(tl.load(bufs[row * D + cols], mask=cols < D, other=0) * 1 + 100, axis=0)
        tl.store(out + row * BLOCK + cols, x)
        row += tl.num_programs(0)


@triton.jit
def counted(a, b):
    return a + b + 1


@triton.jit
def folded(out, table, M, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(M,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.reduce(tl.load(bufs[offs], mask=offs < M, other=0), 0, counted))
"""


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
def test_out_of_bounds_lanes_take_no_part_in_a_reduction_whatever_other_is(strategy, tmp_path):
    """A lane the mask turns off inside the extent gives ``other`` from each buffer; past the extent, no buffer takes
    part and the lane is 0 (the contract's v1.1 reductions), so a mask with an ``other`` that is not 0 proves no
    bounds."""
    kernels = transpiled(tmp_path, OTHER, f"other_{strategy}", strategy=strategy)
    M, D, B, w = 2, 3, 4, 2
    bufs = [torch.arange(M * D, dtype=torch.float32) + 10 * j for j in range(w)]
    out = torch.zeros(M * B)
    kernels.rows[(1,)](out, address_table(bufs), M, D, w, B)
    total = sum(bufs).view(M, D)
    assert out.view(M, B).tolist() == [[*total[0].tolist(), -100.0], [*total[1].tolist(), 0.0]]
    out = torch.zeros(2 * B)
    kernels.block[(2,)](out, address_table(bufs), 5, w, B)
    assert out.tolist() == [*sum(bufs)[:5].tolist(), 0.0, 0.0, 0.0]
    out = torch.zeros(2 * B)  # a combine that is not 0 of zeros: past the extent still 0
    kernels.folded[(2,)](out, address_table(bufs), 5, w, B)
    assert out.tolist() == [*(sum(bufs)[:5] + 1).tolist(), 0.0, 0.0, 0.0]
    out = torch.zeros(2 * B)  # a step that makes 1 of 0 (a cast keeps it): past the extent still 0
    kernels.stepped[(2,)](out, address_table(bufs), 5, w, B)
    assert out.tolist() == [*(sum(bufs)[:5] + w).tolist(), 0.0, 0.0, 0.0]
    out = torch.zeros(M * B)  # a lane the mask turns off inside the extent: each buffer's 0 * 1 + 100
    kernels.stepped_rows[(1,)](out, address_table(bufs), M, D, w, B)
    top = bufs[-1].view(M, D) + 100
    assert out.view(M, B).tolist() == [[*top[0].tolist(), 100.0], [*top[1].tolist(), 0.0]]


#: 2-D bindings: a block size is non-negative where the index evaluates ``tl.arange(0, BLOCK)`` (Triton refuses an
#: arange whose end is not above its start), so the column's ``>= 0`` goes: (body, whether it goes).
COLUMNS = "    bufs = multicast_like(out, table[:W], shape=(M, D))\n    row = tl.program_id(0)\n"
BLOCK_SIZES = {
    "column blocks, the loop's step the arange's end": (
        COLUMNS
        + "    for c in range(0, D, BLOCK):\n        cols = c + tl.arange(0, BLOCK)\n"
        + "        x = tl.load(bufs[row, cols], mask=cols < D, other=0)\n",
        True,
    ),
    "a column block per program": (
        COLUMNS + "    x = tl.load(bufs[row, tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)])\n",
        True,
    ),
    "a block size no arange of the index bounds": (
        COLUMNS + "    x = tl.load(bufs[row, tl.program_id(1) * D + tl.arange(0, BLOCK)])\n",
        False,
    ),
    "the arange in another statement": (
        COLUMNS + "    y = tl.arange(0, BLOCK)\n    x = tl.load(bufs[row, tl.program_id(1) * BLOCK])\n",
        False,
    ),
    "a step whose arange comes after the access": (
        COLUMNS
        + "    for c in range(0, D, BLOCK):\n        x = tl.load(bufs[row, c])\n        cols = c + tl.arange(0, BLOCK)\n",
        False,
    ),
}


@pytest.mark.parametrize("case", BLOCK_SIZES)
def test_a_block_size_under_an_arange_is_non_negative(case):
    body, goes = BLOCK_SIZES[case]
    checked = bounds(lowered(body))
    assert (">= 0" not in checked) is goes, checked
    assert "(row < M)" in checked and "< D)" in checked, checked  # the other bounds stay


# -- drawn forms against a model ------------------------------------------------------------------------------
#
# Random flat row loops, the proof's forms and their near misses drawn together (a seeded generator: the same
# cases every run), run in the interpreter and compared with what the contract says (tl.load / tl.atomic_add:
# the mask ANDed with the bounds; out-of-bounds elements are never touched).  The buffers carry a margin of
# sentinels on both sides of the extent, so bounds dropped where the mask does not prove them read or write it.

FLAT = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def flat_load(out, table, M{m_type}, D, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{setup}
{loop}
{pre}        x = tl.load(bufs[{access}], mask={mask}, other=0)
        tl.store(out + row * BLOCK + tl.arange(0, BLOCK), tl.sum(x, axis=0))
{step}

@triton.jit
def flat_add(out, table, M{m_type}, D, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{setup}
{loop}
{pre}        tl.atomic_add(bufs[{access}], 1.0, mask={mask})
{step}
"""
FLAT_M = (2, 3, 5)
FLAT_D = (3, 8, 12)
FLAT_BLOCK, MARGIN = 16, 40


def draw_flat(rng, k: int) -> dict:
    """One case: the kernel's text pieces and what the model needs of them."""
    M, D = rng.choice(FLAT_M), rng.choice(FLAT_D)
    miss = rng.choice((None, None, None, "stop", "lanes", "bound", "extent", "stepped", "named", "narrowed"))
    loop = rng.choice(("for", "tl.range", "while", "if", "exit")) if miss not in ("stepped", "named") else "while"
    loop = "while stepped first" if miss == "stepped" else loop
    # offs = the index, or start = the row offset: in the loop, or (a miss) before it
    naming = rng.choice(("before", "start before")) if miss == "named" else rng.choice((None, None, "in", "start"))
    stop = rng.choice(("M - 1", "M + 1")) if miss == "stop" else "M"
    literal = rng.random() < 0.3
    c = str(D) if literal else "D"
    lanes_shift = -1 if miss == "lanes" else 0
    arange = "tl.arange(0, BLOCK)" + (" - 1" if lanes_shift else "")
    named_lanes, named_mask = rng.random() < 0.7, rng.random() < 0.6
    t = "cols" if named_lanes else (f"({arange})" if lanes_shift else arange)
    bound, bound_c = rng.choice((("<", 1), ("<=", 0), ("|", 0)) if miss == "bound" else (("<", 0), (">", 0)))
    if bound == "<":
        mask, limit = (f"{t} < {c} + 1", 1) if bound_c else (f"{t} < {c}", 0)
    elif bound == ">":
        mask, limit = f"{c} > {t}", 0
    elif bound == "<=":
        mask, limit = f"{t} <= {c}", 1
    else:
        mask, limit = f"({t} < {c}) | ({t} < 2)", None
    if rng.random() < 0.3:
        mask = f"({mask}) & (row >= 0)"
    extents = (("M * D - D", -1), ("M * D + 3", 3)) if miss == "extent" else (("M * D", 0), ("D * M", 0))
    extent, extent_shift = rng.choice(extents)
    if loop in ("for", "tl.range"):  # the interpreter runs ranges of constexprs only
        start, step = rng.choice((("0", "1"), ("1", "2")))
    elif loop in ("if", "exit"):
        start, step = "tl.program_id(0)", None
    else:
        start, step = rng.choice((("0", "1"), ("tl.program_id(0)", "tl.num_programs(0)"), ("0", "tl.num_programs(0)")))
    width = "tl.int16" if miss == "narrowed" else rng.choice((None, None, "tl.int64"))
    row = "row"
    if width is not None:  # x.to(): where row is a tensor in the interpreter too (ranges give it ints)
        row = f"row.to({width})" if start == "tl.program_id(0)" else f"tl.cast(row, {width})"
    offset = rng.choice(("{row} * {c}", "{c} * {row}")).format(c=c, row=row)
    if rng.random() < 0.2:
        offset = f"tl.multiple_of({offset}, 1)"
    if naming in ("start", "start before"):
        index = rng.choice(("start + {t}", "{t} + start")).format(t=t)
    else:
        index = rng.choice(("{o} + {t}", "{t} + {o}")).format(o=offset, t=t)
    setup = []
    if named_lanes:
        hinted = rng.random() < 0.3 and not lanes_shift
        setup.append(f"    cols = {f'tl.max_contiguous(tl.multiple_of({arange}, BLOCK), BLOCK)' if hinted else arange}")
    if named_mask and "row" not in mask:
        setup.append(f"    mask = {mask}")
        mask_text = "mask"
    else:
        mask_text = mask
    if loop in ("for", "tl.range"):
        head = "range" if loop == "for" else "tl.range"
        stepping = f"step={step}" if loop == "tl.range" and rng.random() < 0.5 else step
        loop_text, step_text = f"    for row in {head}({start}, {stop}, {stepping}):", ""
    elif loop == "if":
        setup.append(f"    row = {start}")
        loop_text, step_text = f"    if row < {stop}:", ""
    elif loop == "exit":  # an early return, then the rest in a block of its own
        setup.append(f"    row = {start}")
        loop_text, step_text = f"    if row >= {stop}:\n        return\n    if tl.program_id(0) >= 0:", ""
    else:
        setup.append(f"    row = {start}")
        if naming == "before":
            setup.append(f"    offs = {index}")
        if naming == "start before":
            setup.append(f"    start = {offset}")
        loop_text = f"    while row < {stop}:"
        step_text = f"        row += {step}"
        if loop == "while stepped first":
            loop_text += "\n" + step_text
            step_text = ""
    source = FLAT.format(
        m_type=": tl.constexpr" if loop in ("for", "tl.range") else "",
        extent=extent if not literal else extent.replace("D", c),
        setup="\n".join(setup),
        loop=loop_text,
        pre={"in": f"        offs = {index}\n", "start": f"        start = {offset}\n"}.get(naming, ""),
        access="offs" if naming in ("in", "before") else index,
        mask=mask_text,
        step=step_text + "\n" if step_text else "",
    )
    return dict(
        source=source,
        name=f"flat_{k}",
        M=M,
        D=D,
        stop={"M": M, "M - 1": M - 1, "M + 1": M + 1}[stop],
        start=start,
        step=step,
        guarded=loop in ("if", "exit"),
        stepped_first=loop == "while stepped first",
        index_row_first=naming in ("before", "start before"),
        lanes_shift=lanes_shift,
        bound=(bound, limit),
        extent=M * D + extent_shift * (D if extent_shift == -1 else 1),
        w=rng.choice((1, 2, 3)),
        grid=rng.choice((1, 2, 3)),
        strategy=rng.choice(castpile.STRATEGIES),
    )


def flat_rows(case: dict) -> list[tuple[int, int]]:
    """The rows the kernel's programs store to and index, in order, as Python runs the loops (repeats included)."""
    rows = []
    for program in range(case["grid"]):
        if case["guarded"]:
            rows += [(program, program)] if program < case["stop"] else []
            continue
        start = program if case["start"] == "tl.program_id(0)" else int(case["start"])
        step = case["grid"] if case["step"] == "tl.num_programs(0)" else int(case["step"])
        for r in range(start, case["stop"], step):
            row = r + step if case["stepped_first"] else r
            rows.append((row, start if case["index_row_first"] else row))
    return rows


def flat_active(case: dict, col: int) -> bool:
    """Whether the mask holds for lane column ``col``."""
    bound, limit = case["bound"]
    D = case["D"]
    if bound == "|":
        return col < D or col < 2
    return col < D + limit if limit is not None else col < D


def touched(out: torch.Tensor, slot, bufs: list[torch.Tensor], added: list[torch.Tensor], i: int) -> None:
    """What the contract says of an element ``i`` the mask and the bounds let through: the load stores the sum of the
    buffers' elements at ``out[slot]``, the add adds 1 to each (``added``)."""
    out[slot] = sum(float(b[MARGIN + i]) for b in bufs)
    for a in added:
        a[MARGIN + i] += 1


def flat_model(case: dict, bufs: list[torch.Tensor], out_rows: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What the contract says flat_load stores in ``out`` and flat_add leaves in the buffers (with their margins)."""
    out = torch.zeros(out_rows, FLAT_BLOCK)
    added = [b.clone() for b in bufs]
    for row, indexed in flat_rows(case):
        for lane in range(FLAT_BLOCK):
            col = lane + case["lanes_shift"]
            i = indexed * case["D"] + col
            if flat_active(case, col) and 0 <= i < case["extent"]:
                touched(out, (row, lane), bufs, added, i)
    return out, added


def sentinelled(case: dict, elements: int) -> list[torch.Tensor]:
    """``case``'s buffers: ``elements`` random integers (and 3 more), behind and ahead of them ``MARGIN`` sentinels,
    the elements from the case's extent on sentinels too (never read, never written where the bounds hold)."""
    generator = torch.Generator().manual_seed(len(case["source"]))
    bufs = [torch.randint(-9, 9, (2 * MARGIN + elements + 3,), generator=generator).float() for _ in range(case["w"])]
    for b in bufs:
        b[:MARGIN] = 1000.0
        b[MARGIN + case["extent"] :] = 1000.0
    return bufs


def dropped_bounds(cases: list[dict]) -> list[bool]:
    """Whether each case's accesses all lose their bounds (the loop strategy); at least 5 do and 5 do not (else the
    model checked one side of the rule only)."""
    dropped = []
    for case in cases:
        text = castpile.transpile(case["source"].encode(), "k.py", strategy="loop").decode()
        dropped.append(all("_castpile_unbounded" in line for line in text.splitlines() if "(bufs, W" in line))
    assert 5 <= sum(dropped) <= len(dropped) - 5, dropped
    return dropped


def compiled_for_sm90(cases: list[dict], kernels: tuple[str, str], constexprs, tmp_path) -> dict:
    """The failures of compiling both ``kernels`` of every case for sm_90 (``constexprs``: a case's values for the
    parameters its kernels may take as constexprs)."""
    jobs = []
    for case in cases:
        path = tmp_path / f"{case['name']}.py"
        path.write_bytes(castpile.transpile(case["source"].encode(), str(path), strategy=case["strategy"]))
        for kernel in kernels:
            sig = signature(case["source"], kernel, {"out": "*fp32", "table": "*i64"})
            values = {name: value for name, value in constexprs(case).items() if sig.get(name) == "constexpr"}
            jobs.append(Job(path, kernel, sig, values, name=f"{case['name']} {kernel}"))
    results = compile_for_sm90(jobs, tmp_path, processes=2)
    return {name: result.error for name, result in results.items() if not result.ok}


FLAT_CASES = [draw_flat(random.Random(k), k) for k in range(64)]


def runs_as_modelled(case: dict, tmp_path, elements: int, size: int, model, kernels: tuple[str, str], *args) -> None:
    """``case``'s load kernel stores what ``model`` (given ``size``) says in ``out`` and its add kernel leaves the
    buffers as it says (``elements`` in each buffer between the sentinels; the kernels' arguments ``out, table,
    *args``)."""
    module = transpiled(tmp_path, case["source"], case["name"], strategy=case["strategy"])
    bufs = sentinelled(case, elements)
    want_out, want_bufs = model(case, bufs, size)
    table = torch.tensor([b[MARGIN:].data_ptr() for b in bufs], dtype=torch.int64)
    out = torch.zeros_like(want_out)
    getattr(module, kernels[0])[(case["grid"],)](out, table, *args)
    assert torch.equal(out, want_out), case["source"]
    getattr(module, kernels[1])[(case["grid"],)](out, table, *args)
    assert all(torch.equal(b, e) for b, e in zip(bufs, want_bufs)), case["source"]


@pytest.mark.parametrize("case", FLAT_CASES, ids=lambda c: c["name"])
def test_drawn_flat_row_loops_do_what_the_contract_says(case, tmp_path):
    M, D, w = case["M"], case["D"], case["w"]
    rows = case["stop"] + case["grid"] + 1
    runs_as_modelled(case, tmp_path, M * D, rows, flat_model, ("flat_load", "flat_add"), M, D, w, FLAT_BLOCK)


def test_the_drawn_forms_reach_both_sides_of_the_rule():
    """Some drawn cases drop the bounds and some keep them (else the model checked one side only)."""
    dropped = dropped_bounds(FLAT_CASES)
    for form in ("offs = ", "start = ", "if row < ", "if row >= ", ".to(tl.int64)", "step=", "tl.multiple_of("):
        assert any(form in case["source"] and d for case, d in zip(FLAT_CASES, dropped)), f"no {form!r} proven"


def test_the_drawn_forms_compile_for_sm90(tmp_path):
    constexprs = lambda case: {"M": case["M"], "W": case["w"], "BLOCK": FLAT_BLOCK}  # noqa: E731
    failed = compiled_for_sm90(FLAT_CASES, ("flat_load", "flat_add"), constexprs, tmp_path)
    assert not failed, failed


def test_a_float_extent_is_an_error_where_triton_compiles_the_access(tmp_path):
    """``row < M`` bounds nothing for a float ``M`` (``x.numel() / D``): the access's helper refuses the extent."""
    source = HEAD.replace("M, D, W", "M, D, W") + ROWS + "    row = tl.program_id(0)\n    while row < M:\n" + READ
    source += "        tl.store(out + row * BLOCK + cols, tl.sum(x, axis=0))\n        row += tl.num_programs(0)\n"
    path = tmp_path / "float_rows.py"
    path.write_bytes(castpile.transpile(source.encode(), str(path), strategy="loop"))
    assert "_castpile_unbounded(bufs_shape0)" in path.read_text()
    jobs = [
        Job(path, "k", signature(source, "k", {"out": "*fp32", "table": "*i64", "M": m}), {"W": 2, "BLOCK": 16}, name=m)
        for m in ("i32", "fp32")
    ]
    results = compile_for_sm90(jobs, tmp_path, processes=1)
    assert results["i32"].ok, results["i32"].error
    assert not results["fp32"].ok and "the extent is not an integer" in results["fp32"].error


# -- drawn block loops against a model --------------------------------------------------------------------------
#
# A flat buffer read and updated block by block, as collectives do (``offs = pid * BLOCK + tl.arange(0, BLOCK)``,
# ``mask = offs < n``): one block per program, a grid-stride ``while``, or a ``for`` over the blocks; the proof's
# forms and near misses of each condition, run against the contract with sentinels around the extent.

BLOCKED = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def block_load(out, table, n{n_type}, S{n_type}, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{body}        x = tl.load(bufs[{access}], mask={mask}, other=0)
        tl.store(out + {slot} + tl.arange(0, BLOCK), tl.sum(x, axis=0))
{step}

@triton.jit
def block_add(out, table, n{n_type}, S{n_type}, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{body}        tl.atomic_add(bufs[{access}], 1.0, mask={mask})
{step}
"""
BLOCK_N = (5, 16, 23, 40)


def draw_blocks(rng, k: int) -> dict:
    """One case: the kernel's text pieces and what the model needs of them."""
    n = rng.choice(BLOCK_N)
    miss = rng.choice((None, None, None, "lanes", "bound", "extent", "index", "block", "before"))
    loop = rng.choice(("one", "while", "for"))
    lanes = "tl.arange(0, BLOCK)" + (" - 1" if miss == "lanes" else "")
    size = "S" if miss == "block" else "BLOCK"
    first = "(tl.program_id(0) - 1)" if miss == "before" else "tl.program_id(0)"
    bound, limit = rng.choice((("<=", 1), ("< n + 1", 1), ("|", None)) if miss == "bound" else (("<", 0), (">", 0)))
    subject = rng.choice(("offs", "offs", "offs + 0"))
    mask = {"<": f"{subject} < n", ">": f"n > {subject}", "<=": "offs <= n", "< n + 1": "offs < n + 1"}.get(
        bound, "(offs < n) | (offs < 2)"
    )
    if rng.random() < 0.3:
        mask = f"({mask}) & (offs >= 0)"
    named_mask = rng.random() < 0.6
    extent, extent_n = ("n - 3", n - 3) if miss == "extent" else rng.choice((("n", n), ("n * 1", n)))
    lines = []
    if loop == "one":
        lines += [f"    offs = {first} * {size} + ({lanes})", "    if 0 == 0:"]
        slot, step_text, starts = "tl.program_id(0) * BLOCK", "", "program"
    elif loop == "while":
        lines += [f"    start = {first} * {size}", "    while start < n:", f"        offs = start + ({lanes})"]
        slot, step_text, starts = "start + BLOCK", f"        start += tl.num_programs(0) * {size}\n", "strided"
    else:
        lines += [f"    for start in range(0, n, {size}):", f"        offs = start + ({lanes})"]
        slot, step_text, starts = "start + BLOCK", "", "all"
    if named_mask:
        lines.append(f"        mask = {mask}")
    source = BLOCKED.format(
        n_type=": tl.constexpr" if loop == "for" else "",
        extent=extent,
        body="\n".join(lines) + "\n",
        access="offs + 1" if miss == "index" else "offs",
        mask="mask" if named_mask else mask,
        slot=slot,
        step=step_text,
    )
    return dict(
        source=source,
        name=f"blocks_{k}",
        n=n,
        starts=starts,
        first=-1 if miss == "before" else 0,
        lanes_shift=-1 if miss == "lanes" else 0,
        index_shift=1 if miss == "index" else 0,
        limit=limit,
        extent=extent_n,
        w=rng.choice((1, 2, 3)),
        grid=rng.choice((1, 2, 3)),
        strategy=rng.choice(castpile.STRATEGIES),
    )


def block_starts(case: dict) -> list[tuple[int, int]]:
    """(slot, start) of every block the programs read, in order, as Python runs the loops (repeats included)."""
    found = []
    for program in range(case["grid"]):
        if case["starts"] == "program":
            found.append((program * FLAT_BLOCK, (program + case["first"]) * FLAT_BLOCK))
        elif case["starts"] == "strided":
            start = (program + case["first"]) * FLAT_BLOCK
            while start < case["n"]:
                found.append((start + FLAT_BLOCK, start))
                start += case["grid"] * FLAT_BLOCK
        else:
            found += [(start + FLAT_BLOCK, start) for start in range(0, case["n"], FLAT_BLOCK)]
    return found


def block_model(case: dict, bufs: list[torch.Tensor], out_size: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What the contract says block_load stores in ``out`` and block_add leaves in the buffers (with margins)."""
    out = torch.zeros(out_size)
    added = [b.clone() for b in bufs]
    for slot, start in block_starts(case):
        for lane in range(FLAT_BLOCK):
            offs = start + lane + case["lanes_shift"]
            i = offs + case["index_shift"]
            limit = case["limit"]
            active = offs < case["n"] + limit if limit is not None else (offs < case["n"] or offs < 2)
            if active and 0 <= i < case["extent"]:
                touched(out, slot + lane, bufs, added, i)
    return out, added


BLOCK_CASES = [draw_blocks(random.Random(1000 + k), k) for k in range(48)]


@pytest.mark.parametrize("case", BLOCK_CASES, ids=lambda c: c["name"])
def test_drawn_block_loops_do_what_the_contract_says(case, tmp_path):
    n, w = case["n"], case["w"]
    size = (case["grid"] + 2) * FLAT_BLOCK + n
    runs_as_modelled(case, tmp_path, n, size, block_model, ("block_load", "block_add"), n, FLAT_BLOCK, w, FLAT_BLOCK)


def test_the_drawn_block_loops_reach_both_sides_of_the_rule():
    dropped = dropped_bounds(BLOCK_CASES)
    for form in ("if 0 == 0", "while start", "for start", "mask = ", "n > ", "offs + 0 <"):
        assert any(form in case["source"] and d for case, d in zip(BLOCK_CASES, dropped)), f"no {form!r} proven"


def test_the_drawn_block_loops_compile_for_sm90(tmp_path):
    constexprs = lambda case: {"n": case["n"], "S": FLAT_BLOCK, "W": case["w"], "BLOCK": FLAT_BLOCK}  # noqa: E731
    failed = compiled_for_sm90(BLOCK_CASES, ("block_load", "block_add"), constexprs, tmp_path)
    assert not failed, failed


# -- drawn column-block loops against a model -------------------------------------------------------------------
#
# A flat row read in column blocks (Triton's layer-norm tutorial: ``cols = off + tl.arange(0, BLOCK)`` under
# ``cols < D`` in a ``for`` or a ``while`` over the row), the proof's forms and near misses of each condition (lanes
# from before the row or shifted, the mask made before the lanes, the lanes changed between the named index and the
# mask, a bound or an extent that proves nothing), run against the contract with sentinels around the extent.

COLUMNED = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def columns_load(out, table, M: tl.constexpr, D{d_type}, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{setup}    for row in range({start}, {stop}, {step}):
{body}            x = tl.load(bufs[{access}], mask={mask}, other=0)
            tl.store(out + row * 64 + off + BLOCK + tl.arange(0, BLOCK), tl.sum(x, axis=0))
{after}

@triton.jit
def columns_add(out, table, M: tl.constexpr, D{d_type}, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{setup}    for row in range({start}, {stop}, {step}):
{body}            tl.atomic_add(bufs[{access}], 1.0, mask={mask})
{after}
"""
COLUMN_D, COLUMN_BLOCK = (6, 8, 10), 4


def draw_columns(rng, k: int) -> dict:
    """One case: the kernel's text pieces and what the model needs of them."""
    M, D = rng.choice((2, 3)), rng.choice(COLUMN_D)
    miss = rng.choice((None, None, None, "first", "lanes", "before", "changed", "bound", "stop", "extent"))
    inner = rng.choice(("for", "while"))
    first = "0 - BLOCK" if miss == "first" else "0"
    shift = -1 if miss == "lanes" else 0
    lanes = rng.choice(("off + tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) + off")) + (" - 1" if shift else "")
    twice = miss == "before" or rng.random() < 0.3  # cols assigned before the loops too
    naming = "changed" if miss == "changed" else rng.choice((None, None, "offs"))
    index = rng.choice(("row * D + cols", "cols + D * row"))
    bound, limit = ("<=", 1) if miss == "bound" else rng.choice((("<", 0), (">", 0)))
    condition = {"<": "cols < D", ">": "D > cols", "<=": "cols <= D"}[bound]
    if rng.random() < 0.3:
        condition = f"({condition}) & (row >= 0)"
    named_mask = miss == "before" or rng.random() < 0.4
    stop = "M + 1" if miss == "stop" else "M"
    extent, extent_n = (
        ("M * D - 1", M * D - 1) if miss == "extent" else rng.choice((("M * D", M * D), ("D * M", M * D)))
    )
    start, step = rng.choice((("0", "1"), ("1", "2")))
    head = (
        "        for off in range({first}, D, BLOCK):"
        if inner == "for"
        else "        off = {first}\n        while off < D:"
    )
    lines = [head.format(first=first)]
    if miss == "before":
        lines.append("            mask = " + condition)
    lines.append(f"            cols = {lanes}")
    if naming is not None:
        lines.append(f"            offs = {index}")
    if naming == "changed":
        lines.append("            cols = cols * 0")
    if named_mask and miss != "before":
        lines.append("            mask = " + condition)
    source = COLUMNED.format(
        d_type=": tl.constexpr" if inner == "for" else "",
        extent=extent,
        setup="    cols = tl.arange(0, BLOCK)\n" if twice else "",
        start=start,
        stop=stop,
        step=step,
        body="\n".join(lines) + "\n",
        access="offs" if naming else index,
        mask="mask" if named_mask else condition,
        after="            off += BLOCK\n" if inner == "while" else "",
    )
    return dict(
        source=source,
        name=f"columns_{k}",
        M=M,
        D=D,
        rows=range(int(start), M + (miss == "stop"), int(step)),
        first=-COLUMN_BLOCK if miss == "first" else 0,
        shift=shift,
        mask_lags=miss == "before",
        mask_zero=miss == "changed",
        limit=limit,
        extent=extent_n,
        w=rng.choice((1, 2, 3)),
        grid=rng.choice((1, 2)),
        strategy=rng.choice(castpile.STRATEGIES),
    )


def columns_model(case: dict, bufs: list[torch.Tensor], out_size: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What the contract says columns_load stores in ``out`` and columns_add leaves in the buffers (with margins)."""
    out = torch.zeros(out_size)
    added = [b.clone() for b in bufs]
    D = case["D"]
    for _ in range(case["grid"]):
        masked = 0  # the first lane of the cols the mask reads: a lagging mask reads the last block's
        for row in case["rows"]:
            for off in range(case["first"], D, COLUMN_BLOCK):
                lanes = off + case["shift"]
                masked = lanes if not case["mask_lags"] else masked
                for lane in range(COLUMN_BLOCK):
                    col = 0 if case["mask_zero"] else masked + lane
                    i = row * D + lanes + lane
                    if col < D + case["limit"] and 0 <= i < case["extent"]:
                        touched(out, row * 64 + off + COLUMN_BLOCK + lane, bufs, added, i)
                masked = lanes
    return out, added


COLUMN_CASES = [draw_columns(random.Random(2000 + k), k) for k in range(40)]


@pytest.mark.parametrize("case", COLUMN_CASES, ids=lambda c: c["name"])
def test_drawn_column_blocks_do_what_the_contract_says(case, tmp_path):
    M, D, w = case["M"], case["D"], case["w"]
    kernels = ("columns_load", "columns_add")
    runs_as_modelled(case, tmp_path, M * D, 64 * (M + 2), columns_model, kernels, M, D, w, COLUMN_BLOCK)


def test_the_drawn_column_blocks_reach_both_sides_of_the_rule():
    dropped = dropped_bounds(COLUMN_CASES)
    for form in ("while off", "for off", "offs = ", "mask = ", "D > cols", "tl.arange(0, BLOCK) + off", "    cols = "):
        assert any(form in case["source"] and d for case, d in zip(COLUMN_CASES, dropped)), f"no {form!r} proven"


def test_the_drawn_column_blocks_compile_for_sm90(tmp_path):
    constexprs = lambda case: {"M": case["M"], "D": case["D"], "W": case["w"], "BLOCK": COLUMN_BLOCK}  # noqa: E731
    failed = compiled_for_sm90(COLUMN_CASES, ("columns_load", "columns_add"), constexprs, tmp_path)
    assert not failed, failed


# -- drawn rows the mask bounds, against a model ----------------------------------------------------------------
#
# A row per program or a tile of rows per program whose own test is in the mask (``(row < M) & (cols < D)``,
# ``(rows[:, None] < M) & (cols[None, :] < D)``), more programs than rows: the proof's forms and near misses (a
# test that proves nothing, rows from before the first, the mask made before the row changes, another extent), run
# against the contract with sentinels around the extent.

MASKED = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def masked_load(out, table, M, D, W: tl.constexpr, BM: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{body}    x = tl.load(bufs[{access}], mask={mask}, other=0)
    tl.store(out + {slots}, tl.sum(x, axis=0))


@triton.jit
def masked_add(out, table, M, D, W: tl.constexpr, BM: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=({extent},))
{body}    tl.atomic_add(bufs[{access}], 1.0, mask={mask})
"""
MASKED_BM = 2


def draw_masked(rng, k: int) -> dict:
    """One case: the kernel's text pieces and what the model needs of them."""
    M, D = rng.choice((2, 3, 5)), rng.choice((3, 8, 12))
    miss = rng.choice((None, None, None, "test", "before", "changed", "extent"))
    tile = rng.random() < 0.5
    first = "(tl.program_id(0) - 1)" if miss == "before" else "tl.program_id(0)"
    r, c = ("rows[:, None]", "cols[None, :]") if tile else ("row", "cols")
    test, shift = rng.choice(((f"{r} <= M", 1), (f"{r} < M + 1", 1))) if miss == "test" else (f"{r} < M", 0)
    test = test if rng.random() < 0.7 or miss == "test" else f"M > {r}"
    lanes = rng.choice((f"{c} < D", f"D > {c}"))
    mask = " & ".join(f"({part})" for part in rng.sample([test, lanes], 2))
    named_mask = miss == "changed" or rng.random() < 0.5
    index = rng.choice((f"{r} * D + {c}", f"{c} + D * {r}"))
    lines = ["    cols = tl.arange(0, BLOCK)"]
    lines.append(f"    rows = {first} * BM + tl.arange(0, BM)" if tile else f"    row = {first}")
    if named_mask:
        lines.append(f"    mask = {mask}")
    if miss == "changed":
        lines.append("    rows = rows + 1" if tile else "    row = row + 1")
    named_index = tile and rng.random() < 0.6
    if named_index:
        lines.append(f"    offs = {index}")
    extent, extent_n = (
        ("M * D - 1", M * D - 1) if miss == "extent" else rng.choice((("M * D", M * D), ("D * M", M * D)))
    )
    slots = "(rows[:, None] + BM) * BLOCK + cols[None, :]" if tile else "(row + 1) * BLOCK + cols"
    source = MASKED.format(
        extent=extent,
        body="\n".join(lines) + "\n",
        access="offs" if named_index else index,
        mask="mask" if named_mask else mask,
        slots=slots,
    )
    return dict(
        source=source,
        name=f"masked_{k}",
        M=M,
        D=D,
        tile=tile,
        first=-1 if miss == "before" else 0,
        limit=shift,
        changed=miss == "changed",
        extent=extent_n,
        w=rng.choice((1, 2, 3)),
        grid=M + rng.choice((0, 1, 2)),
        strategy=rng.choice(castpile.STRATEGIES),
    )


def masked_model(case: dict, bufs: list[torch.Tensor], out_size: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What the contract says masked_load stores in ``out`` and masked_add leaves in the buffers (with margins)."""
    out = torch.zeros(out_size)
    added = [b.clone() for b in bufs]
    D, bm = case["D"], MASKED_BM if case["tile"] else 1
    for program in range(case["grid"]):
        for r in range(bm):
            tested = (program + case["first"]) * bm + r  # the row the mask tests; the index's, one on where changed
            row = tested + case["changed"]
            slot = (row + (MASKED_BM if case["tile"] else 1)) * FLAT_BLOCK
            for col in range(FLAT_BLOCK):
                i = row * D + col
                if tested < case["M"] + case["limit"] and col < D and 0 <= i < case["extent"]:
                    touched(out, slot + col, bufs, added, i)
    return out, added


MASKED_CASES = [draw_masked(random.Random(3000 + k), k) for k in range(40)]


@pytest.mark.parametrize("case", MASKED_CASES, ids=lambda c: c["name"])
def test_drawn_rows_the_mask_bounds_do_what_the_contract_says(case, tmp_path):
    M, D, w = case["M"], case["D"], case["w"]
    size = (case["grid"] + 2) * MASKED_BM * FLAT_BLOCK + 2 * FLAT_BLOCK
    kernels = ("masked_load", "masked_add")
    runs_as_modelled(case, tmp_path, M * D, size, masked_model, kernels, M, D, w, MASKED_BM, FLAT_BLOCK)


def test_the_drawn_masked_rows_reach_both_sides_of_the_rule():
    dropped = dropped_bounds(MASKED_CASES)
    for form in ("rows[:, None] < M", "(row < M)", "M > ", "mask = ", "offs = ", "D * "):
        assert any(form in case["source"] and d for case, d in zip(MASKED_CASES, dropped)), f"no {form!r} proven"


def test_the_drawn_masked_rows_compile_for_sm90(tmp_path):
    constexprs = lambda case: {"W": case["w"], "BM": MASKED_BM, "BLOCK": FLAT_BLOCK}  # noqa: E731
    failed = compiled_for_sm90(MASKED_CASES, ("masked_load", "masked_add"), constexprs, tmp_path)
    assert not failed, failed
