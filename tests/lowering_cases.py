"""(source, expected) pairs for tests/test_lowering.py, in the style of pyupgrade's tests.

Each ``KERNEL_CASES`` entry is ``(id, source, expected)``: ``source`` is a few lines of
a kernel body, put inside ``HEADER``'s kernel by ``kernel_module``; ``expected`` is
what castpile must write in their place, line for line.  In ``expected``, ``{s}``
stands for the strategy (``loop`` or ``gather``) where the two lowerings differ only
in the helper's suffix; a dict gives each strategy's text where they differ more.

Every expected value was read once from castpile's output and checked by hand against
docs/language.md (the helpers' parameter order is that of castpile's helpers.py:
``src, count, smask, example, offs, bounds``, then the user's value arguments by
position in the contract's order, then options by keyword).
"""

from castpile.options import VERSION

HEADER = (
    "import triton\n"
    "import triton.language as tl\n"
    "import castpile\n"
    "from castpile import multicast_like\n"
    "\n"
    "\n"
    "@triton.jit\n"
    "def k(out, table, tile, pm, ptrs, idx, ctr, n, m, i, j, v,\n"
    "      W: tl.constexpr, C: tl.constexpr, BLOCK: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK)\n"
)

HELPERS_MARK = "\n\n# ---- castpile "
"""What starts the appended helpers, right after the last input line."""


def indent(lines: str, by: str = "    ") -> str:
    """``lines`` indented by ``by`` (where castpile keeps a rewritten expression's line count, the
    closing parenthesis it moves to the next line is indented as the code above it)."""
    return "".join(by + line + "\n" for line in lines.splitlines())


def kernel_module(body: str) -> str:
    """``HEADER`` with ``body``'s lines as the rest of the kernel."""
    return HEADER + indent(body)


def expected_for(expected, strategy: str) -> str:
    """The expected body lines under ``strategy``."""
    if isinstance(expected, dict):
        return expected[strategy]
    return expected.replace("{s}", strategy)


TABLE = "bufs = multicast_like(out, table[:W])\n"
TABLE_N = "bufs = multicast_like(out, table[:W], shape=(n,))\n"
# The bounds mask of a 1-D access at `offs` with shape=(n,): 0 <= offs < n.
IN_N = "(offs >= 0) & (offs < n)"

KERNEL_CASES = [
    # -- bindings: table form ----------------------------------------------------------------
    (
        "table[:W]",
        TABLE + "x = bufs[offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, None)\n",
    ),
    (
        "table[1:W]: start and count",
        "bufs = multicast_like(out, table[1:W])\n"
        "x = bufs[offs]\n",
        "bufs = table + 1\n"
        "x = _castpile_load_{s}(bufs, W - 1, None, out, offs, None)\n",
    ),
    (
        "table[2:5]: literal count",
        "bufs = multicast_like(out, table[2:5])\n"
        "x = bufs[offs]\n",
        "bufs = table + 2\n"
        "x = _castpile_load_{s}(bufs, 3, None, out, offs, None)\n",
    ),
    (
        "table[W:2 * W]",
        "bufs = multicast_like(out, table[W:2 * W])\n"
        "x = bufs[offs]\n",
        "bufs = W + table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, None)\n",
    ),
    (
        "shape=(n,): bounds mask",
        TABLE_N + "x = bufs[offs]\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N})\n",
    ),
    (
        "shape=(n, m): row-major offsets",
        "bufs = multicast_like(out, table[:W], shape=(n, m))\n"
        "x = bufs[i, offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, i*m + offs, (i >= 0) & (i < n) & (offs >= 0) & (offs < m))\n",
    ),
    (
        "shape=(n, 8): constant stride folded, broadcast indices",
        "bufs = multicast_like(out, table[:W], shape=(n, 8))\n"
        "x = bufs[offs[:, None], offs[None, :]]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, 8*offs[:, None] + offs[None, :], "
        "(offs[:, None] >= 0) & (offs[:, None] < n) & (offs[None, :] >= 0) & (offs[None, :] < 8))\n",
    ),
    (
        "shape=(n, n, n): products, never powers",
        "bufs = multicast_like(out, table[:W], shape=(n, n, n))\n"
        "x = bufs[i, j, offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, i*n*n + j*n + offs, "
        "(i >= 0) & (i < n) & (j >= 0) & (j < n) & (offs >= 0) & (offs < n))\n",
    ),
    (
        "strides without shape: no bounds",
        "bufs = multicast_like(out, table[:W], strides=(m, 1))\n"
        "x = bufs[i, offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, i*m + offs, None)\n",
    ),
    (
        "shape and column-major strides",
        "bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1, n))\n"
        "x = bufs[i, offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, i + n*offs, (i >= 0) & (i < n) & (offs >= 0) & (offs < m))\n",
    ),
    (
        "hoisted example, shape and strides, in argument order",
        "bufs = multicast_like(out + 1, table[:W], shape=(n - 1, m), strides=(m * 2, 1))\n"
        "x = bufs[i, offs]\n",
        "bufs_example = out + 1; bufs = table; bufs_shape0 = n - 1; bufs_stride0 = m * 2\n"
        "x = _castpile_load_{s}(bufs, W, None, bufs_example, bufs_stride0*i + offs, "
        "(i >= 0) & (i < bufs_shape0) & (offs >= 0) & (offs < m))\n",
    ),
    (
        "align=16",
        "bufs = multicast_like(out, table[:W], shape=(n,), align=16)\n"
        "x = bufs[offs]\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}, align=16)\n",
    ),
    # -- bindings: tile form -----------------------------------------------------------------
    (
        "tile",
        "bufs = multicast_like(out, tile)\n"
        "x = bufs[offs]\n",
        "bufs = tile\n"
        "x = _castpile_load_{s}(bufs, bufs.numel, None, out, offs, None)\n",
    ),
    (
        "tile with ptr_mask",
        "bufs = multicast_like(out, tile, ptr_mask=pm)\n"
        "x = bufs[offs]\n",
        "bufs = tile; bufs_mask = pm\n"
        "x = _castpile_load_{s}(bufs, bufs.numel, bufs_mask, out, offs, None)\n",
    ),
    (
        "tile with shape and a ptr_mask expression",
        "bufs = multicast_like(out, tile, shape=(n,), ptr_mask=pm != 0)\n"
        "x = bufs[offs]\n",
        "bufs = tile; bufs_mask = pm != 0\n"
        f"x = _castpile_load_{{s}}(bufs, bufs.numel, bufs_mask, out, offs, {IN_N})\n",
    ),
    # -- named table slice and static_range slice bounds ----------------------------------------
    (
        "named slice table[:W]",
        "rows = table[:W]\n"
        "bufs = multicast_like(out, rows, shape=(n,))\n"
        "x = bufs[offs]\n",
        "rows = table\n"
        "bufs = rows\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N})\n",
    ),
    (
        "named slice table[1:W]",
        "rows = table[1:W]\n"
        "bufs = multicast_like(out, rows, shape=(n,))\n"
        "x = bufs[offs]\n",
        "rows = table + 1\n"
        "bufs = rows\n"
        f"x = _castpile_load_{{s}}(bufs, W - 1, None, out, offs, {IN_N})\n",
    ),
    (
        "static_range variable in the slice bounds",
        "for r in tl.static_range(2):\n"
        "    bufs = multicast_like(out, table[r * C:(r + 1) * C], shape=(n,))\n"
        "    x = bufs[offs]\n",
        "for r in tl.static_range(2):\n"
        "    bufs = C*r + table\n"
        # (r + 1) * C - r * C, as sympy leaves it: C, evaluated when Triton compiles.
        f"    x = _castpile_load_{{s}}(bufs, C, None, out, offs, {IN_N})\n",
    ),
    # -- load, store, augmented store ---------------------------------------------------------
    (
        "load in an expression",
        TABLE_N + "x = bufs[offs] * 2\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}) * 2\n",
    ),
    (
        "store",
        TABLE_N + "bufs[offs] = v\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, v)\n",
    ),
    (
        "store of a multicast load (pure index: no temporary)",
        TABLE_N + "bufs[offs] = bufs[offs + 1]\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, "
        "_castpile_load_{s}(bufs, W, None, out, offs + 1, (offs + 1 >= 0) & (offs + 1 < n)))\n",
    ),
    (
        "augmented store +=",
        TABLE_N + "bufs[offs] += v\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, "
        f"_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}) + v)\n",
    ),
    (
        "augmented store *= parenthesises the value",
        TABLE_N + "bufs[offs] *= v + 1\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, "
        f"_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}) * (v + 1))\n",
    ),
    (
        "augmented store <<=",
        TABLE_N + "bufs[offs] <<= 1\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, "
        f"_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}) << 1)\n",
    ),
    (
        "two statements on a line",
        TABLE_N + "bufs[offs] = v; x = bufs[offs]\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, v); "
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N})\n",
    ),
    # -- tl.load / tl.store -------------------------------------------------------------------
    (
        "tl.load with mask and other",
        TABLE_N + "x = tl.load(bufs[offs], mask=offs < m, other=-1.0)\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}, offs < m, -1.0)\n",
    ),
    (
        "tl.load keywords out of order: by position in the contract's order",
        TABLE_N + "x = tl.load(bufs[offs], other=-1.0, mask=offs < m)\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}, offs < m, -1.0)\n",
    ),
    (
        "tl.load with other only: mask defaults to None",
        TABLE_N + "x = tl.load(bufs[offs], other=-1.0)\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}, None, -1.0)\n",
    ),
    (
        "tl.load with a positional mask and options",
        TABLE_N + "x = tl.load(bufs[offs], offs < m, cache_modifier='.cg', volatile=True)\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}, offs < m, cache_modifier='.cg', volatile=True)\n",
    ),
    (
        "tl.store with mask",
        TABLE_N + "tl.store(bufs[offs], v, mask=offs < m)\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, v, offs < m)\n",
    ),
    (
        "tl.store with keyword value after mask",
        TABLE_N + "tl.store(bufs[offs], mask=offs < m, value=v)\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, v, offs < m)\n",
    ),
    (
        "tl.store with eviction_policy",
        TABLE_N + "tl.store(bufs[offs], v, eviction_policy='evict_last')\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, v, eviction_policy='evict_last')\n",
    ),
    # -- atomics ------------------------------------------------------------------------------
    *[
        (
            f"tl.atomic_{op}",
            TABLE_N + f"x = tl.atomic_{op}(bufs[offs], v)\n",
            "bufs = table\n"
            f'x = _castpile_atomic_{{s}}(bufs, W, None, out, offs, {IN_N}, "{op}", v)\n',
        )
        for op in ("add", "max", "min", "and", "or", "xor", "xchg")
    ],
    (
        "tl.atomic_max with mask",
        TABLE_N + "x = tl.atomic_max(bufs[offs], v, mask=offs < m)\n",
        "bufs = table\n"
        f'x = _castpile_atomic_{{s}}(bufs, W, None, out, offs, {IN_N}, "max", v, offs < m)\n',
    ),
    (
        "tl.atomic_min with sem and scope",
        TABLE_N + "x = tl.atomic_min(bufs[offs], v, sem='relaxed', scope='gpu')\n",
        "bufs = table\n"
        f"x = _castpile_atomic_{{s}}(bufs, W, None, out, offs, {IN_N}, \"min\", v, sem='relaxed', scope='gpu')\n",
    ),
    (
        "tl.atomic_cas",
        TABLE_N + "x = tl.atomic_cas(bufs[offs], 0, v)\n",
        "bufs = table\n"
        f"x = _castpile_atomic_cas_{{s}}(bufs, W, None, out, offs, {IN_N}, 0, v)\n",
    ),
    (
        "tl.atomic_cas keywords out of order",
        TABLE_N + "x = tl.atomic_cas(bufs[offs], val=v, cmp=0, sem='acq_rel')\n",
        "bufs = table\n"
        f"x = _castpile_atomic_cas_{{s}}(bufs, W, None, out, offs, {IN_N}, 0, v, sem='acq_rel')\n",
    ),
    (
        "unused atomic result: keep_old=False",
        TABLE_N + "tl.atomic_add(bufs[offs], v)\n",
        "bufs = table\n"
        f'_castpile_atomic_{{s}}(bufs, W, None, out, offs, {IN_N}, "add", v, keep_old=False)\n',
    ),
    (
        "unused atomic_xchg with mask and sem",
        TABLE_N + "tl.atomic_xchg(bufs[offs], v, mask=offs < m, sem='release')\n",
        "bufs = table\n"
        f"_castpile_atomic_{{s}}(bufs, W, None, out, offs, {IN_N}, "
        "\"xchg\", v, offs < m, sem='release', keep_old=False)\n",
    ),
    (
        "unused atomic_cas result",
        TABLE_N + "tl.atomic_cas(bufs[offs], 0, v)\n",
        "bufs = table\n"
        f"_castpile_atomic_cas_{{s}}(bufs, W, None, out, offs, {IN_N}, 0, v, keep_old=False)\n",
    ),
    # -- signal and wait (one lowering under both strategies) --------------------------------------
    (
        "signal",
        TABLE + "castpile.signal(bufs[0])\n",
        "bufs = table\n"
        "_castpile_signal(bufs, W, None, out, 0, None)\n",
    ),
    (
        "signal with value and wait_for",
        TABLE + "castpile.signal(bufs[0], 2, wait_for=0)\n",
        "bufs = table\n"
        "_castpile_signal(bufs, W, None, out, 0, None, 2, 0)\n",
    ),
    (
        "signal with mask, sem and scope: value and wait_for defaults filled in",
        TABLE + "castpile.signal(bufs[offs], mask=offs < m, sem='relaxed', scope='gpu')\n",
        "bufs = table\n"
        "_castpile_signal(bufs, W, None, out, offs, None, 1, None, offs < m, sem='relaxed', scope='gpu')\n",
    ),
    (
        "wait on an access",
        TABLE + "castpile.wait(bufs[0])\n",
        "bufs = table\n"
        "_castpile_wait(bufs, W, None, out, 0, None)\n",
    ),
    (
        "wait on an access with value, reset, mask and scope",
        TABLE + "castpile.wait(bufs[offs], 2, reset=1, mask=offs < m, scope='gpu')\n",
        "bufs = table\n"
        "_castpile_wait(bufs, W, None, out, offs, None, 2, 1, offs < m, scope='gpu')\n",
    ),
    (
        "wait on plain pointers",
        "castpile.wait(ptrs + offs)\n",
        "_castpile_wait_flags(ptrs + offs)\n",
    ),
    (
        "wait on plain pointers with value, mask and sem",
        "castpile.wait(ptrs + offs, 3, mask=offs < m, sem='relaxed')\n",
        "_castpile_wait_flags(ptrs + offs, 3, 0, offs < m, sem='relaxed')\n",
    ),
    (
        "wait on plain pointers with reset",
        "castpile.wait(ptrs + offs, reset=5)\n",
        "_castpile_wait_flags(ptrs + offs, 1, 5)\n",
    ),
    # -- value arguments with side effects written out of the helper's order: evaluated in the order
    # written.  A call that stands alone as a statement puts them (and impure indices before them) in
    # fresh names on its line; inside an expression they are handed over rearranged.
    (
        "signal: mask then value, wait_for's default between them",
        TABLE + "castpile.signal(bufs[0], mask=tl.atomic_add(ctr, 1) > 0, value=tl.atomic_add(ctr, 1))\n",
        "bufs = table\n"
        "_castpile_v0 = tl.atomic_add(ctr, 1) > 0; _castpile_v1 = tl.atomic_add(ctr, 1); "
        "_castpile_signal(bufs, W, None, out, 0, None, _castpile_v1, None, _castpile_v0)\n",
    ),
    (
        "signal at an impure index: mask then wait_for, value's default first",
        TABLE + "castpile.signal(bufs[tl.atomic_add(ctr, 1)], mask=tl.load(idx) > 0, wait_for=tl.load(idx + 1))\n",
        "bufs = table\n"
        "_castpile_i0 = tl.atomic_add(ctr, 1); _castpile_v1 = tl.load(idx) > 0; _castpile_v2 = tl.load(idx + 1); "
        "_castpile_signal(bufs, W, None, out, _castpile_i0, None, 1, _castpile_v2, _castpile_v1)\n",
    ),
    (
        "wait: mask then value, reset's default between them",
        TABLE + "castpile.wait(bufs[offs], mask=tl.load(idx + offs) > 0, value=tl.load(idx))\n",
        "bufs = table\n"
        "_castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); "
        "_castpile_wait(bufs, W, None, out, offs, None, _castpile_v1, 0, _castpile_v0)\n",
    ),
    (
        "wait on plain pointers: the pointers first, then mask and value",
        "castpile.wait(ptrs + offs, mask=tl.load(idx + offs) > 0, value=tl.load(idx))\n",
        "_castpile_p0 = ptrs + offs; _castpile_v1 = tl.load(idx + offs) > 0; _castpile_v2 = tl.load(idx); "
        "_castpile_wait_flags(_castpile_p0, _castpile_v2, 0, _castpile_v1)\n",
    ),
    (
        "an unused atomic: mask then val, in fresh names",
        TABLE + "tl.atomic_add(bufs[offs], mask=tl.load(idx + offs) > 0, val=tl.load(idx))\n",
        "bufs = table\n"
        "_castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); "
        '_castpile_atomic_{s}(bufs, W, None, out, offs, None, "add", _castpile_v1, _castpile_v0, keep_old=False)\n',
    ),
    (
        "tl.store: mask then value, in fresh names",
        TABLE_N + "tl.store(bufs[offs], mask=tl.load(idx + offs) > 0, value=tl.load(idx))\n",
        "bufs = table\n"
        "_castpile_v0 = tl.load(idx + offs) > 0; _castpile_v1 = tl.load(idx); "
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, _castpile_v1, _castpile_v0)\n",
    ),
    (
        "an atomic inside an expression: mask then val, handed over rearranged",
        TABLE + "x = tl.atomic_add(bufs[offs], mask=tl.load(idx + offs) > 0, val=tl.load(idx))\n",
        "bufs = table\n"
        'x = _castpile_atomic_{s}(bufs, W, None, out, offs, None, "add", '
        "*_castpile_in_order((tl.load(idx + offs) > 0, tl.load(idx)), (1, 0)))\n",
    ),
    (
        "a parenthesised two-line signal out of order: statements without the parentheses, the line break inside the last",
        TABLE + "(castpile.signal(bufs[0], mask=tl.atomic_add(ctr, 1) > 0,\n"
        "                 value=tl.atomic_add(ctr, 1)))\n",
        "bufs = table\n"
        "_castpile_v0 = tl.atomic_add(ctr, 1) > 0; _castpile_v1 = tl.atomic_add(ctr, 1); "
        "_castpile_signal(bufs, W, None, out, 0, None, _castpile_v1, None, _castpile_v0\n"
        ")\n",
    ),
    # -- stack reductions: a table's buffer by buffer under both strategies, a tile's through P + I ------------
    *[
        (
            f"tl.{op}(bufs[offs], axis=0)",
            TABLE_N + f"s = tl.{op}(bufs[offs], axis=0)\n",
            "bufs = table\n"
            f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "{op}")\n',
        )
        for op in ("sum", "max", "min")
    ],
    (
        "tl.min with a positional axis 0",
        TABLE_N + "s = tl.min(bufs[offs], 0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "min")\n',
    ),
    (
        "tl.sum of .to(T): a step",
        TABLE_N + "s = tl.sum(bufs[offs].to(tl.float32), axis=0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "sum", steps="to", operands=(tl.float32,))\n',
    ),
    (
        "tl.sum of .to(T) with dtype=: the cast, then dtype=",
        TABLE_N + "s = tl.sum(bufs[offs].to(tl.int8), axis=0, dtype=tl.int32)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "sum", steps="to", operands=(tl.int8,), '
        "dtype=tl.int32)\n",
    ),
    (
        "the method with a positional dtype",
        TABLE_N + "s = bufs[offs].sum(0, False, tl.int8)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "sum", keep_dims=False, dtype=tl.int8)\n',
    ),
    (
        "casts with bitcast= and fp_downcast_rounding= literals",
        TABLE_N + "s = tl.max(bufs[offs].to(tl.float32, bitcast=True).to(tl.float16, fp_downcast_rounding='rtz'), axis=0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "max", steps="bitcast to_rtz", '
        "operands=(tl.float32, tl.float16))\n",
    ),
    (
        "arithmetic with literals and constexprs, either side: steps in order",
        TABLE_N + "s = tl.sum(3 * (bufs[offs].to(tl.float32) / 2.0 - C), axis=0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "sum", steps="to truediv sub rmul", '
        "operands=(tl.float32, 2.0, C, 3))\n",
    ),
    (
        "a negation has no operand",
        TABLE_N + "s = tl.max(-bufs[offs], axis=0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "max", steps="neg")\n',
    ),
    (
        "a step over tl.load",
        TABLE_N + "s = tl.min(-1 - tl.load(bufs[offs], mask=offs < m), axis=0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "min", offs < m, steps="rsub", operands=(-1,))\n',
    ),
    (
        "tl.sum of tl.load with mask",
        TABLE_N + "s = tl.sum(tl.load(bufs[offs], mask=offs < m), axis=0)\n",
        "bufs = table\n"
        f's = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "sum", offs < m)\n',
    ),
    (
        "tl.max of tl.load with mask, other and an option",
        TABLE_N + "s = tl.max(tl.load(bufs[offs], mask=offs < m, other=-5.0, eviction_policy='evict_first'), axis=0)\n",
        "bufs = table\n"
        f"s = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "
        "\"max\", offs < m, -5.0, eviction_policy='evict_first')\n",
    ),
    (
        "return_indices and its tie-break, by keyword",
        TABLE_N + "s, at = tl.max(bufs[offs], axis=0, return_indices=True, return_indices_tie_break_left=False)\n",
        "bufs = table\n"
        f's, at = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "max", return_indices=True, '
        "return_indices_tie_break_left=False)\n",
    ),
    (
        "return_indices and keep_dims by position",
        TABLE_N + "s, at = tl.min(bufs[offs], 0, True, True, C)\n",
        "bufs = table\n"
        f's, at = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "min", return_indices=True, '
        "return_indices_tie_break_left=True, keep_dims=C)\n",
    ),
    (
        "reduction over a tile: the gather reduction under both strategies",
        "bufs = multicast_like(out, tile, shape=(n,))\n"
        "s = tl.sum(bufs[offs].to(tl.float32) * 2, axis=0)\n",
        "bufs = tile\n"
        f's = _castpile_reduce_gather(bufs, bufs.numel, None, out, offs, {IN_N}, "sum", steps="to mul", '
        "operands=(tl.float32, 2))\n",
    ),
    (
        "tl.sum over another axis: a plain load, reduced",
        TABLE_N + "s = tl.sum(bufs[offs], axis=1)\n",
        "bufs = table\n"
        f"s = tl.sum(_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}), axis=1)\n",
    ),
    (
        "tl.sum without an axis: a plain load, reduced",
        TABLE_N + "s = tl.sum(bufs[offs].to(tl.float32))\n",
        "bufs = table\n"
        f"s = tl.sum(_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}).to(tl.float32))\n",
    ),
    (
        "arithmetic with a tensor: a plain load, reduced",
        TABLE_N + "s = tl.sum(bufs[offs] * v, axis=0)\n",
        "bufs = table\n"
        f"s = tl.sum(_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}) * v, axis=0)\n",
    ),
    (
        "arithmetic of two accesses: plain loads, reduced",
        TABLE_N + "s = tl.max(bufs[offs] - bufs[offs + 1], axis=0)\n",
        "bufs = table\n"
        f"s = tl.max(_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}) - "
        "_castpile_load_{s}(bufs, W, None, out, offs + 1, (offs + 1 >= 0) & (offs + 1 < n)), axis=0)\n",
    ),
    (
        "a cast whose bitcast= is not a literal: a plain load, reduced",
        TABLE_N + "s = tl.max(bufs[offs].to(tl.int32, bitcast=C), axis=0)\n",
        "bufs = table\n"
        f"s = tl.max(_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}).to(tl.int32, bitcast=C), axis=0)\n",
    ),
    (
        "tl.sum with keep_dims=True: a stack reduction that keeps the stack dim",
        TABLE_N + "s = tl.sum(bufs[offs], axis=0, keep_dims=True)\n",
        f'bufs = table\ns = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "sum", keep_dims=True)\n',
    ),
    # -- Ellipsis --------------------------------------------------------------------------------
    (
        "bufs[...]",
        "bufs = multicast_like(out, table[:W], shape=(BLOCK,))\n"
        "x = bufs[...]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), "
        "(_castpile_span(BLOCK, 0, 1) >= 0) & (_castpile_span(BLOCK, 0, 1) < BLOCK))\n",
    ),
    (
        "bufs[i, ...]",
        "bufs = multicast_like(out, table[:W], shape=(C, BLOCK))\n"
        "x = bufs[i, ...]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, BLOCK*_castpile_trailing(i, 1) + _castpile_span(BLOCK, 0, 1), "
        "(_castpile_trailing(i, 1) >= 0) & (_castpile_trailing(i, 1) < C) "
        "& (_castpile_span(BLOCK, 0, 1) >= 0) & (_castpile_span(BLOCK, 0, 1) < BLOCK))\n",
    ),
    (
        "bufs[0, ...]: a literal index needs no trailing dims",
        "bufs = multicast_like(out, table[:W], shape=(C, BLOCK))\n"
        "x = bufs[0, ...]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, _castpile_span(BLOCK, 0, 1), "
        "(0 < C) & (_castpile_span(BLOCK, 0, 1) >= 0) & (_castpile_span(BLOCK, 0, 1) < BLOCK))\n",
    ),
    (
        "bufs[...] = v over two dims",
        "bufs = multicast_like(out, table[:W], shape=(C, BLOCK))\n"
        "bufs[...] = v\n",
        "bufs = table\n"
        "_castpile_store_{s}(bufs, W, None, out, BLOCK*_castpile_span(C, 0, 2) + _castpile_span(BLOCK, 1, 2), "
        "(_castpile_span(C, 0, 2) >= 0) & (_castpile_span(C, 0, 2) < C) "
        "& (_castpile_span(BLOCK, 1, 2) >= 0) & (_castpile_span(BLOCK, 1, 2) < BLOCK), v)\n",
    ),
    # -- indices evaluated once -------------------------------------------------------------------
    (
        "pure tl calls may repeat",
        TABLE + "x = bufs[tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, BLOCK*tl.program_id(0) + tl.arange(0, BLOCK), None)\n",
    ),
    (
        "atomic index in a load: _castpile_index",
        TABLE_N + "x = bufs[tl.atomic_add(ctr, 1)]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)))\n",
    ),
    (
        "atomic index among two: every index and stride to _castpile_index",
        "bufs = multicast_like(out, table[:W], shape=(n, m))\n"
        "x = bufs[tl.atomic_add(ctr, 1), offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1), offs), (n, m), (m, 1)))\n",
    ),
    (
        "tl.load index inside an expression",
        TABLE_N + "x = bufs[tl.load(idx + offs)] + 1\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, *_castpile_index((tl.load(idx + offs),), (n,), (1,))) + 1\n",
    ),
    (
        "multicast load as an index",
        TABLE_N + "idxs = multicast_like(idx, table[:W], shape=(n,))\n"
        "x = bufs[idxs[0]]\n",
        "bufs = table\n"
        "idxs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, "
        "*_castpile_index((_castpile_load_{s}(idxs, W, None, idx, 0, (0 < n)),), (n,), (1,)))\n",
    ),
    (
        "atomic index in a reduction",
        TABLE_N + "x = tl.sum(bufs[tl.atomic_add(ctr, 1)], axis=0)\n",
        "bufs = table\n"
        'x = _castpile_reduce_loop(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), "sum")\n',
    ),
    (
        "atomic index in an atomic",
        TABLE_N + "x = tl.atomic_add(bufs[tl.atomic_add(ctr, 1)], v)\n",
        "bufs = table\n"
        "x = _castpile_atomic_{s}(bufs, W, None, out, "
        '*_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), "add", v)\n',
    ),
    (
        "atomic index in tl.store: an expression, index before value",
        TABLE_N + "tl.store(bufs[tl.atomic_add(ctr, 1)], v)\n",
        "bufs = table\n"
        "_castpile_store_{s}(bufs, W, None, out, *_castpile_index((tl.atomic_add(ctr, 1),), (n,), (1,)), v)\n",
    ),
    (
        "atomic index in a store statement: a temporary",
        TABLE_N + "bufs[tl.atomic_add(ctr, 1)] = v\n",
        "bufs = table\n"
        "_castpile_i0 = tl.atomic_add(ctr, 1); "
        "_castpile_store_{s}(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n), v)\n",
    ),
    (
        "atomic index among two in a store statement",
        "bufs = multicast_like(out, table[:W], shape=(n, m))\n"
        "bufs[tl.atomic_add(ctr, 1), offs] = v\n",
        "bufs = table\n"
        "_castpile_i0 = tl.atomic_add(ctr, 1); "
        "_castpile_store_{s}(bufs, W, None, out, _castpile_i0*m + offs, "
        "(_castpile_i0 >= 0) & (_castpile_i0 < n) & (offs >= 0) & (offs < m), v)\n",
    ),
    (
        "impure value and index in a store statement: the value first",
        TABLE_N + "bufs[tl.atomic_add(ctr, 1)] = tl.load(idx)\n",
        "bufs = table\n"
        "_castpile_v0 = tl.load(idx); _castpile_i1 = tl.atomic_add(ctr, 1); "
        "_castpile_store_{s}(bufs, W, None, out, _castpile_i1, "
        "(_castpile_i1 >= 0) & (_castpile_i1 < n), _castpile_v0)\n",
    ),
    (
        "atomic index in an augmented store: index, load, then value",
        TABLE_N + "bufs[tl.atomic_add(ctr, 1)] += tl.load(idx)\n",
        "bufs = table\n"
        "_castpile_i0 = tl.atomic_add(ctr, 1); "
        "_castpile_store_{s}(bufs, W, None, out, _castpile_i0, (_castpile_i0 >= 0) & (_castpile_i0 < n), "
        "_castpile_load_{s}(bufs, W, None, out, _castpile_i0, "
        "(_castpile_i0 >= 0) & (_castpile_i0 < n)) + tl.load(idx))\n",
    ),
    # -- binding time (v1.2): arguments evaluated where the binding stands -------------------------
    (
        "a shape name rebound after the binding is copied at it",
        TABLE_N + "n = n + 4\n"
        "x = bufs[offs]\n",
        "bufs = table; bufs_shape0 = n\n"
        "n = n + 4\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, (offs >= 0) & (offs < bufs_shape0))\n",
    ),
    (
        "left alone: a name assigned only before the binding is used as it is",
        "m = n + 1\n"
        "bufs = multicast_like(out, table[:W], shape=(m,))\n"
        "x = bufs[offs]\n",
        "m = n + 1\n"
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, (offs >= 0) & (offs < m))\n",
    ),
    (
        "left alone: a name rebound after the binding's last use is used as it is",
        TABLE_N + "x = bufs[offs]\n"
        "n = n + 4\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N})\n"
        "n = n + 4\n",
    ),
    (
        "left alone: a static_range variable reused by a later loop, after the binding's uses",
        "for r in tl.static_range(W):\n"
        "    tail = multicast_like(out, table[r:W])\n"
        "    x = tail[offs]\n"
        "for r in tl.static_range(C):\n"
        "    y = r\n",
        "for r in tl.static_range(W):\n"
        "    tail = r + table\n"
        "    x = _castpile_load_{s}(tail, -r + W, None, out, offs, None)\n"
        "for r in tl.static_range(C):\n"
        "    y = r\n",
    ),
    (
        "a name rebound later in a loop around the uses but not the binding",
        TABLE_N + "for _ in range(2):\n"
        "    x = bufs[offs]\n"
        "    n = n - 1\n",
        "bufs = table; bufs_shape0 = n\n"
        "for _ in range(2):\n"
        "    x = _castpile_load_{s}(bufs, W, None, out, offs, (offs >= 0) & (offs < bufs_shape0))\n"
        "    n = n - 1\n",
    ),
    (
        "a strides name rebound in the loop around the binding",
        "for _ in range(2):\n"
        "    bufs = multicast_like(out, table[:W], strides=(m,))\n"
        "    m = m + 1\n"
        "    x = bufs[offs]\n",
        "for _ in range(2):\n"
        "    bufs = table; bufs_stride0 = m\n"
        "    m = m + 1\n"
        "    x = _castpile_load_{s}(bufs, W, None, out, bufs_stride0*offs, None)\n",
    ),
    (
        "the example bound to its own name: copied before the name takes the stack",
        "out = multicast_like(out, table[:W], shape=(n,))\n"
        "x = out[offs]\n",
        "out_example = out; out = table\n"
        f"x = _castpile_load_{{s}}(out, W, None, out_example, offs, {IN_N})\n",
    ),
    (
        "read before its own binding; the stack stored last",
        "y = tl.load(out)\n"
        "out = multicast_like(out, table[:W], shape=(n - 1,))\n"
        "x = out[offs]\n",
        "y = tl.load(out)\n"
        "out_example = out; out_shape0 = n - 1; out = table\n"
        "x = _castpile_load_{s}(out, W, None, out_example, offs, (offs >= 0) & (offs < out_shape0))\n",
    ),
    (
        "a tile bound to its own name, its ptr_mask reading it first",
        "tile = multicast_like(out, tile, ptr_mask=tile != 0)\n"
        "x = tile[offs]\n",
        "tile_mask = tile != 0; tile = tile\n"
        "x = _castpile_load_{s}(tile, tile.numel, tile_mask, out, offs, None)\n",
    ),
    (
        "a constexpr slice bound rebound after the binding: the count stays a constexpr",
        TABLE + "W = W + 1\n"
        "x = bufs[offs]\n",
        "bufs_count: tl.constexpr = W; bufs = table\n"
        "W = W + 1\n"
        "x = _castpile_load_{s}(bufs, bufs_count, None, out, offs, None)\n",
    ),
    (
        "a constexpr extent rebound after the binding",
        "bufs = multicast_like(out, table[:W], shape=(C, BLOCK))\n"
        "C = C + 1\n"
        "x = bufs[i, ...]\n",
        "bufs = table; bufs_shape0: tl.constexpr = C\n"
        "C = C + 1\n"
        "x = _castpile_load_{s}(bufs, W, None, out, BLOCK*_castpile_trailing(i, 1) + _castpile_span(BLOCK, 0, 1), "
        "(_castpile_trailing(i, 1) >= 0) & (_castpile_trailing(i, 1) < bufs_shape0) & "
        "(_castpile_span(BLOCK, 0, 1) >= 0) & (_castpile_span(BLOCK, 0, 1) < BLOCK))\n",
    ),
    (
        "left alone: the table rebound after the binding (the stack holds its start)",
        TABLE + "table = table + W\n"
        "x = bufs[offs]\n",
        "bufs = table\n"
        "table = table + W\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, None)\n",
    ),
    (
        "a named slice rebound after the binding",
        "rows = table[:W]\n"
        "bufs = multicast_like(out, rows)\n"
        "rows = ptrs\n"
        "x = bufs[offs]\n",
        "rows = table\n"
        "bufs = rows\n"
        "rows = ptrs\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, None)\n",
    ),
    (
        "align=None is no alignment",
        "bufs = multicast_like(out, table[:W], shape=(n,), align=None)\n"
        "x = bufs[offs]\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N})\n",
    ),
    # -- strides of any value: the offsets keep the shape of the indices ---------------------------
    (
        "strides=(0,): 0*offs",
        "bufs = multicast_like(out, table[:W], shape=(n,), strides=(0,))\n"
        "x = bufs[offs]\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, 0*offs, {IN_N})\n",
    ),
    (
        "strides=(0,) without shape, in a store",
        "bufs = multicast_like(out, table[:W], strides=(0,))\n"
        "bufs[offs] = v\n",
        "bufs = table\n"
        "_castpile_store_{s}(bufs, W, None, out, 0*offs, None, v)\n",
    ),
    (
        "index terms that cancel: bufs[3 - offs, offs] with strides=(1, 1)",
        "bufs = multicast_like(out, table[:W], shape=(n, m), strides=(1, 1))\n"
        "x = bufs[3 - offs, offs]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, 3 + 0*offs, "
        "(-offs + 3 >= 0) & (-offs + 3 < n) & (offs >= 0) & (offs < m))\n",
    ),
    (
        "a broadcast view read whole: strides=(0, 1)",
        "bufs = multicast_like(out, table[:W], shape=(C, BLOCK), strides=(0, 1))\n"
        "x = bufs[...]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, _castpile_span(BLOCK, 1, 2) + 0*_castpile_span(C, 0, 2), "
        "(_castpile_span(C, 0, 2) >= 0) & (_castpile_span(C, 0, 2) < C) & "
        "(_castpile_span(BLOCK, 1, 2) >= 0) & (_castpile_span(BLOCK, 1, 2) < BLOCK))\n",
    ),
    (
        "left alone: a stride of 0 with an index evaluated once (the index helper keeps its shape)",
        "bufs = multicast_like(out, table[:W], shape=(n, m), strides=(0, 1))\n"
        "x = bufs[i, tl.atomic_add(ctr, 1)]\n",
        "bufs = table\n"
        "x = _castpile_load_{s}(bufs, W, None, out, *_castpile_index((i, tl.atomic_add(ctr, 1)), (n, m), (0, 1)))\n",
    ),
    # -- layout: line numbers kept, untouched bytes kept ------------------------------------------
    (
        "an access spanning two lines keeps both",
        TABLE_N + "x = bufs[\n    offs]\n",
        "bufs = table\n"
        f"x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}\n"
        ")\n",
    ),
    (
        "a parenthesised expression spanning two lines",
        TABLE_N + "x = (bufs[offs]\n     + 1)\n",
        "bufs = table\n"
        f"x = (_castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N})\n"
        "     + 1)\n",
    ),
    (
        "a store whose value spans two lines",
        TABLE_N + "bufs[offs] = (v +\n              1)\n",
        "bufs = table\n"
        f"_castpile_store_{{s}}(bufs, W, None, out, offs, {IN_N}, (v + 1)\n"
        ")\n",
    ),
    (
        "comments and other statements are kept",
        "# bind\n"
        "bufs = multicast_like(out, table[:W])  # the stack\n"
        "y = tl.load(out + offs)\n"
        "x = bufs[offs]  # read\n",
        "# bind\n"
        "bufs = table  # the stack\n"
        "y = tl.load(out + offs)\n"
        "x = _castpile_load_{s}(bufs, W, None, out, offs, None)  # read\n",
    ),
    (
        "a hoisted name that is taken gets a _ suffix",
        "bufs_shape0 = 1\n"
        "bufs = multicast_like(out, table[:W], shape=(n - 1,))\n"
        "x = bufs[0]\n",
        "bufs_shape0 = 1\n"
        "bufs = table; bufs_shape0_ = n - 1\n"
        "x = _castpile_load_{s}(bufs, W, None, out, 0, (0 < bufs_shape0_))\n",
    ),
    (
        "a _castpile_ name in the file: helpers and temporaries use _castpile2_",
        "_castpile_mine = 1\n"
        "bufs = multicast_like(out, table[:W], shape=(n - 1,))\n"
        "bufs[tl.atomic_add(ctr, 1)] = 1.0\n",
        "_castpile_mine = 1\n"
        "bufs = table; bufs_shape0 = n - 1\n"
        "_castpile2_i0 = tl.atomic_add(ctr, 1); _castpile2_store_{s}(bufs, W, None, out, _castpile2_i0, "
        "(_castpile2_i0 >= 0) & (_castpile2_i0 < bufs_shape0), 1.0)\n",
    ),
]

# Whole files whose lowering does not fit HEADER's kernel: import forms and scopes.
# (id, source, expected head: everything before the appended helpers).
FILE_CASES = [
    (
        "import castpile as cp",
        "import triton\n"
        "import triton.language as tl\n"
        "import castpile as cp\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = cp.multicast_like(out, table[:W])\n"
        "    cp.signal(bufs[0])\n"
        "    cp.wait(bufs[0])\n",
        "import triton\n"
        "import triton.language as tl\n"
        "import castpile as cp\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = table\n"
        "    _castpile_signal(bufs, W, None, out, 0, None)\n"
        "    _castpile_wait(bufs, W, None, out, 0, None)\n",
    ),
    (
        "from castpile import ... as ...",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like as mcl, wait as cwait\n"
        "\n"
        "\n"
        "@triton.jit(do_not_specialize=['n'])\n"
        "def k(out, table, n, W: tl.constexpr):\n"
        "    bufs = mcl(out, table[:W])\n"
        "    cwait(bufs[n])\n",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like as mcl, wait as cwait\n"
        "\n"
        "\n"
        "@triton.jit(do_not_specialize=['n'])\n"
        "def k(out, table, n, W: tl.constexpr):\n"
        "    bufs = table\n"
        "    _castpile_wait(bufs, W, None, out, n, None)\n",
    ),
    (
        "import in an enclosing function",
        "import triton\n"
        "import triton.language as tl\n"
        "\n"
        "\n"
        "def make():\n"
        "    from castpile import multicast_like\n"
        "\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = multicast_like(out, table[:W])\n"
        "        x = bufs[0]\n"
        "\n"
        "    return k\n",
        "import triton\n"
        "import triton.language as tl\n"
        "\n"
        "\n"
        "def make():\n"
        "    from castpile import multicast_like\n"
        "\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = table\n"
        "        x = _castpile_load_{s}(bufs, W, None, out, 0, None)\n"
        "\n"
        "    return k\n",
    ),
    (
        "import fallback: what the except handler binds does not shadow",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "try:\n"
        "    from castpile import signal\n"
        "except ImportError:\n"
        "    signal = None\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    signal(bufs[0])\n",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "try:\n"
        "    from castpile import signal\n"
        "except ImportError:\n"
        "    signal = None\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = table\n"
        "    _castpile_signal(bufs, W, None, out, 0, None)\n",
    ),
    (
        "code outside @triton.jit is left alone",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "def host(bufs, table):\n"
        "    x = bufs[0]\n"
        "    bufs[1] = x\n"
        "    return tl.sum(bufs[0:2])\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    x = bufs[0]\n"
        "\n"
        "\n"
        "class Host:\n"
        "    bufs = [1, 2]\n"
        "    y = bufs[0]\n",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "def host(bufs, table):\n"
        "    x = bufs[0]\n"
        "    bufs[1] = x\n"
        "    return tl.sum(bufs[0:2])\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = table\n"
        "    x = _castpile_load_{s}(bufs, W, None, out, 0, None)\n"
        "\n"
        "\n"
        "class Host:\n"
        "    bufs = [1, 2]\n"
        "    y = bufs[0]\n",
    ),
    (
        "CRLF line endings and tabs",
        "import triton\r\n"
        "import triton.language as tl\r\n"
        "from castpile import multicast_like\r\n"
        "\r\n"
        "\r\n"
        "@triton.jit\r\n"
        "def k(out, table, n, W: tl.constexpr):\r\n"
        "\tbufs = multicast_like(out, table[:W])  # bind\r\n"
        "\tx = bufs[0]\t# read\r\n"
        "\ty = tl.load(out)\r\n",
        "import triton\r\n"
        "import triton.language as tl\r\n"
        "from castpile import multicast_like\r\n"
        "\r\n"
        "\r\n"
        "@triton.jit\r\n"
        "def k(out, table, n, W: tl.constexpr):\r\n"
        "\tbufs = table  # bind\r\n"
        "\tx = _castpile_load_{s}(bufs, W, None, out, 0, None)\t# read\r\n"
        "\ty = tl.load(out)\r\n",
    ),
]



def _alias_case(name: str, head: str, mcl: str, arange: str, top: str, load: str, signal: str) -> tuple[str, str, str]:
    """A file case whose module names castpile and triton.language as ``head`` does, and whose kernel calls
    them as ``mcl``, ``arange``, ``top`` (a stack max), ``load`` and ``signal``."""
    kernel = "\n\n@triton.jit\ndef k(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):\n"
    source = (
        f"{head}{kernel}"
        f"    bufs = {mcl}(out, table[:W], shape=(n,))\n"
        f"    offs = {arange}(0, BLOCK)\n"
        f"    top = {top}(bufs[offs], axis=0)\n"
        f"    x = {load}(bufs[offs], mask=offs < 2, other=-1)\n"
        f"    {signal}(bufs[0])\n"
    )
    expected = (
        f"{head}{kernel}"
        "    bufs = table\n"
        f"    offs = {arange}(0, BLOCK)\n"
        f'    top = _castpile_reduce_loop(bufs, W, None, out, offs, {IN_N}, "max")\n'
        f"    x = _castpile_load_{{s}}(bufs, W, None, out, offs, {IN_N}, offs < 2, -1)\n"
        "    _castpile_signal(bufs, W, None, out, 0, (0 < n))\n"
    )
    return name, source, expected


# Every way a module names triton.language and castpile that Python resolves statically (docs/language.md, Names).
FILE_CASES += [
    _alias_case("tl = triton.language", "import triton\nimport castpile\ntl = triton.language\n",
                "castpile.multicast_like", "tl.arange", "tl.max", "tl.load", "castpile.signal"),
    _alias_case("language = triton.language, next to tl",
                "import triton\nimport triton.language as tl\nimport castpile\nlanguage = triton.language\n",
                "castpile.multicast_like", "language.arange", "language.max", "language.load", "castpile.signal"),
    _alias_case("import triton; triton.language.max",
                "import triton\nimport triton.language as tl\nfrom castpile import multicast_like, signal\n",
                "multicast_like", "triton.language.arange", "triton.language.max", "triton.language.load", "signal"),
    _alias_case("from triton import language as tl; import castpile as cp",
                "import triton\nfrom triton import language as tl\nimport castpile as cp\n",
                "cp.multicast_like", "tl.arange", "tl.max", "tl.load", "cp.signal"),
    _alias_case("cp = castpile, mcl = cp.multicast_like, sig = castpile.signal, ld = tl.load, mx = tl.max",
                "import triton\nimport triton.language as tl\nimport castpile\ncp = castpile\nmcl = cp.multicast_like\n"
                "sig = castpile.signal\nld = tl.load\nmx = tl.max\n",
                "mcl", "tl.arange", "mx", "ld", "sig"),
    _alias_case("aliases of aliases: T = triton, L = T.language",
                "import triton\nimport triton.language as tl\nimport castpile\nT = triton\nL = T.language\n",
                "castpile.multicast_like", "L.arange", "L.max", "L.load", "castpile.signal"),
    _alias_case("an annotated alias and one by :=",
                "import triton\nimport castpile\ntl: object = triton.language\nprint(cp := castpile)\n",
                "cp.multicast_like", "tl.arange", "tl.max", "tl.load", "cp.signal"),
    _alias_case("an import fallback: except ImportError does not shadow the try body's import",
                "import triton\nimport castpile\ntry:\n    import triton.language as tl\nexcept ImportError:\n    tl = None\n",
                "castpile.multicast_like", "tl.arange", "tl.max", "tl.load", "castpile.signal"),
    _alias_case("if/else imports that agree",
                "import triton\nimport castpile\nif castpile:\n    import triton.language as tl\nelse:\n"
                "    from triton import language as tl\n",
                "castpile.multicast_like", "tl.arange", "tl.max", "tl.load", "castpile.signal"),
    (
        "aliases in an enclosing function",
        "import triton\n"
        "import triton.language as tl\n"
        "import castpile\n"
        "\n"
        "\n"
        "def make():\n"
        "    lang = triton.language\n"
        "    mcl = castpile.multicast_like\n"
        "\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = mcl(out, table[:W])\n"
        "        top = lang.max(bufs[0], axis=0)\n"
        "\n"
        "    return k\n",
        "import triton\n"
        "import triton.language as tl\n"
        "import castpile\n"
        "\n"
        "\n"
        "def make():\n"
        "    lang = triton.language\n"
        "    mcl = castpile.multicast_like\n"
        "\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = table\n"
        '        top = _castpile_reduce_loop(bufs, W, None, out, 0, None, "max")\n'
        "\n"
        "    return k\n",
    ),
]


_KERNEL_TAIL = (
    "\n"
    "\n"
    "@triton.jit\n"
    "def k(out, table, W: tl.constexpr):\n"
    "    bufs = multicast_like(out, table[:W])\n"
    "    x = bufs[0]\n"
)

_LAUNCHED = "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n" + _KERNEL_TAIL
_LAUNCHED_OUT = _LAUNCHED.replace("    bufs = multicast_like(out, table[:W])\n    x = bufs[0]\n",
                                  "    bufs = table\n    x = _castpile_load_{s}(bufs, W, None, out, 0, None)\n")
_EARLY = '__import__("castpile").define_helpers(globals())'

# Module-level code after a rewritten kernel: the first statement that calls anything defines the helpers first.
FILE_CASES += [
    (name, _LAUNCHED + "\n\n" + after, _LAUNCHED_OUT + "\n\n" + expected)
    for name, after, expected in [
        ("an `if __name__ == '__main__':` block",
         "N = 4\n\n\ndef main():\n    k[(1,)](None, None, N)\n\n\nif __name__ == '__main__':\n    main()\n",
         f"N = 4\n\n\ndef main():\n    k[(1,)](None, None, N)\n\n\nif {_EARLY} or (__name__ == '__main__'):\n    main()\n"),
        ("a launch at import, then more",
         "k[(1,)](None, None, 4)  # at import\nk[(2,)](None, None, 4)\n",
         f"{_EARLY}; k[(1,)](None, None, 4)  # at import\nk[(2,)](None, None, 4)\n"),
        ("a for loop, its iterable in parentheses",
         "for grid in (1,), (2,):\n    k[grid](None, None, 4)\n",
         f"for grid in {_EARLY} or ((1,), (2,)):\n    k[grid](None, None, 4)\n"),
        ("a with statement",
         "with open('log') as log, open('x'):\n    k[(1,)](None, None, 4)\n",
         f"with {_EARLY} or (open('log')) as log, open('x'):\n    k[(1,)](None, None, 4)\n"),
        ("a try statement: its body's first statement",
         "try:\n    def helper():\n        pass\n    k[(1,)](None, None, 4)\nexcept RuntimeError:\n    pass\n",
         f"try:\n    def helper():\n        pass\n    {_EARLY}; k[(1,)](None, None, 4)\nexcept RuntimeError:\n    pass\n"),
        ("a one-line try",
         "try: k[(1,)](None, None, 4)\nexcept RuntimeError: pass\n",
         f"try: {_EARLY}; k[(1,)](None, None, 4)\nexcept RuntimeError: pass\n"),
        ("definitions and constants only: nothing changes",
         "BLOCK = 4\n\n\n@triton.jit(do_not_specialize=['n'])\ndef other(out, n):\n    tl.store(out, tl.load(out) + n)\n\n\n"
         "class Host:\n    size = len('abc')\n",
         "BLOCK = 4\n\n\n@triton.jit(do_not_specialize=['n'])\ndef other(out, n):\n    tl.store(out, tl.load(out) + n)\n\n\n"
         "class Host:\n    size = len('abc')\n"),
    ]
]


_WITH_OTHER = (  # a kernel's head in a module that imports castpile and a lookalike module `other`
    "import triton\n"
    "import triton.language as tl\n"
    "import castpile\n"
    "import other\n"
    "\n"
    "\n"
    "@triton.jit\n"
    "def k(out, table, W: tl.constexpr):\n"
)

# Files castpile must return byte for byte: nothing in them is castpile's.
LEFT_ALONE = [
    (
        "a lookalike module-level function named multicast_like",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "def multicast_like(example, tile):\n"
        "    return tile\n" + _KERNEL_TAIL,
    ),
    (
        "a lookalike local function of an enclosing function",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "def make():\n"
        "    def multicast_like(a, b):\n"
        "        return b\n"
        "\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = multicast_like(out, table[:W])\n"
        "        x = bufs[0]\n"
        "\n"
        "    return k\n",
    ),
    (
        "a parameter shadowing the import",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, multicast_like, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    x = bufs[0]\n",
    ),
    (
        "a parameter of an enclosing function shadowing the import",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "def make(multicast_like):\n"
        "    @triton.jit\n"
        "    def k(out, table, W: tl.constexpr):\n"
        "        bufs = multicast_like(out, table[:W])\n"
        "        x = bufs[0]\n"
        "\n"
        "    return k\n",
    ),
    (
        "a local variable shadowing the import",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import multicast_like\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    multicast_like = tl.load\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    x = bufs[0]\n",
    ),
    (
        "other.multicast_like, other.signal, other.wait",
        _WITH_OTHER + "    bufs = other.multicast_like(out, table[:W])\n"
        "    x = bufs[0]\n"
        "    other.signal(bufs[0])\n"
        "    other.wait(out)\n",
    ),
    (
        "remote= on a lookalike multicast_like and on other calls",
        _WITH_OTHER + "    bufs = other.multicast_like(out, table[:W], remote=\"nvshmem\")\n"
        "    x = bufs[0]\n"
        "    other.put(out, remote=\"ucx\")\n",
    ),
    (
        "signal and wait from other modules, no castpile anywhere",
        "import triton\n"
        "import triton.language as tl\n"
        "from signal import signal\n"
        "from threading import Event\n"
        "wait = Event().wait\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out):\n"
        "    signal(out)\n"
        "    wait(out)\n",
    ),
    (
        "a local def named multicast_like and a parameter named wait, no castpile import",
        "import triton\n"
        "import triton.language as tl\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, wait, W: tl.constexpr):\n"
        "    def multicast_like(a, b):\n"
        "        return b\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    wait(bufs[0])\n",
    ),
    (
        "aliases of another module's names",
        "import triton\n"
        "import triton.language as tl\n"
        "import castpile as cp\n"
        "import other\n"
        "multicast_like = other.multicast_like\n"
        "signal = other.signal\n"
        "cp = other\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    more = cp.multicast_like(out, table[:W])\n"
        "    signal(bufs[0])\n",
    ),
    (
        "star import",
        "import triton\n"
        "import triton.language as tl\n"
        "from castpile import *\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def k(out, table, W: tl.constexpr):\n"
        "    bufs = multicast_like(out, table[:W])\n"
        "    x = bufs[0]\n"
        "    signal(bufs[0])\n"
        "    wait(out)\n",
    ),
]


REMOTE = 'bufs = multicast_like(out, table[:W], shape=(n,), remote="nvshmem")\n'
# Kernels with remote="nvshmem" bindings (docs/nvshmem.md): every access calls a ``_remote`` helper,
# under both strategies, with the table (whose header names the scratch) after the bounds mask; the
# kernel is rebound after the helpers (REMOTE_TAIL).  They need NVSHMEM's device library to compile
# for a GPU, so they are kept out of KERNEL_CASES (whose test compiles every case for sm_90).
REMOTE_CASES = [
    ("remote load", REMOTE + "x = bufs[offs]\n",
     f"bufs = table\nx = _castpile_load_remote(bufs, W, None, out, offs, {IN_N}, table)\n"),
    ("remote store", REMOTE + "bufs[offs] = v\n",
     f"bufs = table\n_castpile_store_remote(bufs, W, None, out, offs, {IN_N}, table, v)\n"),
    ("remote augmented store", REMOTE + "bufs[offs] += v\n",
     f"bufs = table\n_castpile_store_remote(bufs, W, None, out, offs, {IN_N}, table, "
     f"_castpile_load_remote(bufs, W, None, out, offs, {IN_N}, table) + v)\n"),
    ("remote tl.load and tl.store with masks", REMOTE + "y = tl.load(bufs[offs], mask=offs < m, other=-1)\n"
     "tl.store(bufs[offs], v, mask=offs < m)\n",
     f"bufs = table\ny = _castpile_load_remote(bufs, W, None, out, offs, {IN_N}, table, offs < m, -1)\n"
     f"_castpile_store_remote(bufs, W, None, out, offs, {IN_N}, table, v, offs < m)\n"),
    ("remote reduction", REMOTE + "s = tl.sum(bufs[offs], axis=0)\n",
     f'bufs = table\ns = _castpile_reduce_remote(bufs, W, None, out, offs, {IN_N}, table, "sum")\n'),
    ("remote signal and wait", REMOTE + "castpile.signal(bufs[0], wait_for=0)\ncastpile.wait(bufs[0])\n",
     "bufs = table\n_castpile_signal_remote(bufs, W, None, out, 0, (0 < n), table, 1, 0)\n"
     "_castpile_wait_remote(bufs, W, None, out, 0, (0 < n), table)\n"),
    ("remote named slice with align", 'rows = table[1:W]\npeers = multicast_like(out, rows, remote="nvshmem", align=16)\n'
     "z = tl.max(peers[offs], axis=0)\n",
     'rows = table + 1\npeers = rows\nz = _castpile_reduce_remote(peers, W - 1, None, out, offs, None, table, "max", align=16)\n'),
    ("remote table expression, hoisted", 'far = multicast_like(out, (table + 2)[:C], remote="nvshmem")\nfar[offs] = v\n',
     "far = table + 2; far_table = (table + 2)\n_castpile_store_remote(far, C, None, out, offs, None, far_table, v)\n"),
    ("remote table rebound after the binding: copied at it", REMOTE + "table = table + 1\nx = bufs[offs]\n",
     f"bufs = table; bufs_table = table\ntable = table + 1\n"
     f"x = _castpile_load_remote(bufs, W, None, out, offs, {IN_N}, bufs_table)\n"),
    ("a binding without remote= next to one with it", REMOTE + 'near = multicast_like(out, table[:W])\nx = bufs[offs] + near[offs]\n',
     {s: f"bufs = table\nnear = table\nx = _castpile_load_remote(bufs, W, None, out, offs, {IN_N}, table) + "
         f"_castpile_load_{s}(near, W, None, out, offs, None)\n" for s in ("loop", "gather")}),
]
REMOTE_TAIL = f"\n\n# ---- castpile {VERSION} the kernels with remote= bindings, launched with NVSHMEM ----\nk = _castpile_remote_kernel(k)\n"
"""How a module with a remote kernel ``k`` ends: ``k`` rebound, wrapped for NVSHMEM."""
