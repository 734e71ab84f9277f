"""Which helpers a lowered module gets appended: those its lines call, with the helpers they call, no others."""

import pytest

import castpile
from testkit.lowering import head_and_helpers, kernel_module, transpile

# Which helpers get appended: those called, with the helpers they call (castpile's helpers.py), no others.
LOAD_LOOP = {"load_loop", "offsets", "positions", "zeros", "prepend", "peer", "entry_valid", "lane_mask", "rebased"}
LOAD_GATHER = {"load_gather", "pointers", "offsets", "prepend", "rebased"}
STORE_LOOP = {
    "store_loop",
    "offsets",
    "positions",
    "peer",
    "entry_valid",
    "slice",
    "leading_ones",
    "lane_mask",
    "fits",
    "stack_shape",
    "rebased",
}
STORE_GATHER = {"store_gather", "pointers", "full", "offsets", "prepend", "fits", "rebased"}
REDUCE_LOOP = {
    "reduce_loop",
    "offsets",
    "rebased",
    "peer",
    "entry_valid",
    "lane_mask",
    "apply",
    "apply_one",
    "math",
    "is_math",
    "step_count",
    "step",
    "operand",
    "accumulator",
    "fold",
    "identity",
    "folded",
    "keeps_zero",
    "combines",
    "combine",
}
HELPERS = [
    ("x = bufs[offs]\n", LOAD_LOOP, LOAD_GATHER),
    ("bufs[offs] = v\n", STORE_LOOP, STORE_GATHER),
    ("bufs[offs] += v\n", LOAD_LOOP | STORE_LOOP, LOAD_GATHER | STORE_GATHER),
    ("x = bufs[tl.atomic_add(ctr, 1)]\n", LOAD_LOOP | {"index", "bound"}, LOAD_GATHER | {"index", "bound"}),
    (  # a temporary, not _castpile_index
        "bufs[tl.atomic_add(ctr, 1)] = v\n",
        STORE_LOOP,
        STORE_GATHER,
    ),
    ("s = tl.sum(bufs[offs], axis=0)\n", REDUCE_LOOP, REDUCE_LOOP),  # a table's: buffer by buffer under both
    (
        "t = multicast_like(out, tile)\ns = tl.sum(t[offs], axis=0)\n",
        {
            "reduce_gather",
            "pointers",
            "offsets",
            "rebased",
            "prepend",
            "apply",
            "apply_one",
            "math",
            "is_math",
            "step_count",
            "step",
            "operand",
            "accumulator",
            "identity",
            "first_max",
            "first_min",
            "combines",
            "combine",
            "tree",
            "columns",
            "ended",
            "halvings",
            "paired",
            "keep_left",
        },
        {
            "reduce_gather",
            "pointers",
            "offsets",
            "rebased",
            "prepend",
            "apply",
            "apply_one",
            "math",
            "is_math",
            "step_count",
            "step",
            "operand",
            "accumulator",
            "identity",
            "first_max",
            "first_min",
            "combines",
            "combine",
            "tree",
            "columns",
            "ended",
            "halvings",
            "paired",
            "keep_left",
        },
    ),
    (
        "x = tl.atomic_cas(bufs[offs], 0, v)\n",
        {
            "atomic_cas_loop",
            "offsets",
            "positions",
            "zeros",
            "prepend",
            "peer",
            "entry_valid",
            "cas",
            "full",
            "lane_mask",
            "slice",
            "leading_ones",
            "rebased",
        },
        {"atomic_cas_gather", "pointers", "cas", "full", "offsets", "prepend", "rebased"},
    ),
    (
        "castpile.signal(bufs[0])\n",
        {"signal", "signal_lanes", "flag_options", "pointers", "cas", "full", "offsets", "prepend", "any", "rebased"},
        {"signal", "signal_lanes", "flag_options", "pointers", "cas", "full", "offsets", "prepend", "any", "rebased"},
    ),
    (
        "castpile.wait(ptrs + offs)\n",
        {"wait_flags", "flag_options", "arrive", "lane_mask", "any", "anchored", "holds"},
        {"wait_flags", "flag_options", "arrive", "lane_mask", "any", "anchored", "holds"},
    ),
]


@pytest.mark.parametrize("strategy", castpile.STRATEGIES)
@pytest.mark.parametrize("line,loop,gather", HELPERS, ids=[h[0].strip() for h in HELPERS])
def test_appended_helpers(line, loop, gather, strategy):
    source = kernel_module("bufs = multicast_like(out, table[:W], shape=(n,))\n" + line)
    _, helpers = head_and_helpers(transpile(source, strategy))
    expected = loop if strategy == "loop" else gather
    assert sorted(helpers) == sorted(f"_castpile_{name}" for name in expected)


def test_helpers_renamed_with_the_free_prefix():
    source = kernel_module("_castpile_mine = 1\nbufs = multicast_like(out, table[:W])\nx = bufs[offs]\n")
    _, helpers = head_and_helpers(transpile(source, "gather"))
    assert sorted(helpers) == sorted(f"_castpile2_{name}" for name in LOAD_GATHER)
