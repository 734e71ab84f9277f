"""The mask rule (castpile/compiler/mask_bounds.py; docs/language.md, "What castpile emits for an index").

An access to a 1-D binding ``shape=(M * D,)`` at ``row * D + cols`` whose ``mask=`` holds ``cols < D``, in a loop
that keeps ``row < M``, has no bounds mask and its row offset in ``base=``: the mask proves the index inside the
extent.  Here: (source, whether the bounds go) pairs with the cases left alone.  tests/test_index_rule.py holds
the semantics (the flat row loops, in the interpreter against torch, and compiled for sm_90) and the PTX of the
issue-35 sweep's 1-D kernels equal to their hand twins'.
"""

import pytest

import castpile

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
    "tl.range with its options": ROWS + FOR.replace("range(", "tl.range(").replace("):", ", num_stages=2):") + READ,
    "a literal row length": ROWS.replace("M * D", "M * 64").replace("cols < D", "cols < 64")
    + FOR
    + READ.replace("row * D", "row * 64"),
    "the access in a branch of the loop": ROWS + FOR + "        if row % 2 == 0:\n    " + READ,
}
LEFT_ALONE = {
    "no mask": ROWS + FOR + "        x = bufs[row * D + cols]\n",
    "a mask that proves nothing": ROWS.replace("cols < D", "cols < D + 1") + FOR + READ,
    "<= D": ROWS.replace("cols < D", "cols <= D") + FOR + READ,
    "|": ROWS.replace("cols < D", "(cols < D) | (cols < 4)") + FOR + READ,
    "another extent": ROWS.replace("M * D", "M * D + 1") + FOR + READ,
    "a loop past the extent": ROWS + FOR.replace("M, tl", "M + 1, tl") + READ,
    "no loop": ROWS + "    row = tl.program_id(0)\n" + READ[4:],
    "the step before the access": ROWS
    + "    row = tl.program_id(0)\n    while row < M:\n        row += tl.num_programs(0)\n"
    + READ,
    "<= in the while": ROWS + "    row = tl.program_id(0)\n    while row <= M:\n" + READ + "        row += 1\n",
    "D assigned": "    D = D + 0\n" + ROWS + FOR + READ,
    "the mask assigned twice": ROWS + "    mask = cols < 2 * D\n" + FOR + READ,
    "lanes that may be negative": ROWS.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) - 1") + FOR + READ,
    "a third summand": ROWS + FOR + READ.replace("row * D + cols", "row * D + cols + 1"),
    "a difference": ROWS + FOR + READ.replace("row * D + cols", "row * D - cols"),
    "a row counting down": ROWS + "    for row in range(M, 0, -1):\n" + READ,
    "the row assigned in the loop": ROWS + FOR + "        row = row + 0\n" + READ,
}


def lowered(body: str) -> str:
    """The line of ``body``'s first multicast access, as castpile lowers it (the loop strategy)."""
    text = castpile.transpile((HEAD + body).encode(), "k.py", strategy="loop").decode()
    return next(line for line in text.splitlines() if "_castpile_" in line and "bufs" in line and "=" in line)


@pytest.mark.parametrize("case", PROVEN)
def test_the_mask_proves_the_bounds(case):
    line = lowered(PROVEN[case])
    assert "bufs_shape0" not in line and "base=" in line, line  # no bounds (they name the extent), the row in base=


@pytest.mark.parametrize("case", LEFT_ALONE)
def test_left_alone(case):
    line = lowered(LEFT_ALONE[case])
    assert "bufs_shape0" in line, line  # the bounds (or the index helper) name the extent
