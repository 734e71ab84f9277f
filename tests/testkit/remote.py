"""The semantic kernels with remote="nvshmem" bindings, symmetric tables for them, more remote kernels, and one
forked rank to run them in (tests/test_remote.py, test_remote_modules.py, test_reductions.py, test_scalar_forms.py)."""

import ast
import contextlib
import faulthandler
from pathlib import Path

from castpile.gpu import sim

SEMANTIC_KERNELS = Path(__file__).parents[1] / "kernels_semantics.py"
LEFT_OUT = {"atomics", "tile_2d", "tile_1d_sum"}  # refused with remote= (atomics), or tensor tiles


def remote_source(path: Path = SEMANTIC_KERNELS, drop=LEFT_OUT) -> str:
    """``path``'s kernels with ``remote="nvshmem"`` on every table binding (a slice ``table[lo:hi]`` or one entry
    ``table[r]``), ``drop`` left out."""
    tree = ast.parse(path.read_text())
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name in drop)]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "multicast_like"
        ):
            tile = node.args[1]
            if isinstance(tile, ast.Subscript):
                node.keywords.append(ast.keyword("remote", ast.Constant("nvshmem")))
    return ast.unparse(tree) + "\n"


def symmetric(w, lws, n, dtype, fill):
    """``sim.symmetric_scratch`` tensors (with ``lws`` GPUs per simulated node), rank j's holding ``fill[j]``."""
    scratch = sim.symmetric_scratch(w, (n,), dtype, local_world_size=lws)
    for s, values in zip(scratch, fill):
        s.tensor.copy_(values)
    return scratch


_CRASH_EXPECTED = []


@contextlib.contextmanager
def crash_expected():
    """Ranks forked inside die on purpose: they print no faulthandler traceback (the RankError says how they died)."""
    _CRASH_EXPECTED.append(True)
    try:
        yield
    finally:
        _CRASH_EXPECTED.pop()


def on_rank(fn, timeout=60.0):
    """``fn()`` in a forked simulated rank: a crash (a load from a remote entry) fails the test as a RankError."""

    def body(_):
        if _CRASH_EXPECTED:
            faulthandler.disable()
        return fn()

    return sim.run(body, 1, timeout=timeout)[0]


# Transfers larger than the scratch, offsets that are not one run, ranks signalling each other.
TRANSFER_KERNELS = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def gather_scatter(out, src, table, n, STRIDE: tl.constexpr, REVERSE: tl.constexpr, W: tl.constexpr,
                   BLOCK: tl.constexpr):
    """out[p, lanes] = buffer p at lanes * STRIDE; then buffer p at perm(lanes) = src[lanes] (perm: reversed
    within the program's block, or lanes * STRIDE)."""
    bufs = cp.multicast_like(out, table[:W], shape=(n,), remote="nvshmem")
    lanes = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    rows = tl.arange(0, triton.next_power_of_2(W))
    x = tl.load(bufs[lanes * STRIDE], mask=lanes % 3 != 1, other=-5)
    tl.store(out + rows[:, None] * (tl.num_programs(0) * BLOCK) + lanes[None, :], x)
    if REVERSE:
        at = tl.program_id(0) * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))
    else:
        at = lanes * STRIDE
    bufs[at] = tl.load(src + lanes)[None, :] + rows[:, None] * 1000


@triton.jit
def publish_remote(data, src, buf_ptrs, pad, pad_ptrs, rank, n, W: tl.constexpr, BLOCK: tl.constexpr, WAIT_FOR: tl.constexpr):
    """Write ``src`` into row ``rank`` of every rank's ``data``, then raise flag ``rank`` on every rank."""
    rows = cp.multicast_like(data, buf_ptrs[:W], shape=(W, n), remote="nvshmem")
    offs = tl.arange(0, BLOCK)
    rows[rank, offs] = tl.load(src + offs, mask=offs < n)
    tl.debug_barrier()
    flags = cp.multicast_like(pad, pad_ptrs[:W], shape=(W,), remote="nvshmem")
    if WAIT_FOR:
        cp.signal(flags[rank], wait_for=0)
    else:
        cp.signal(flags[rank])


@triton.jit
def signal_rounds_remote(pad, pad_ptrs, rank, W: tl.constexpr, ROUNDS: tl.constexpr):
    """ROUNDS times: raise flag ``rank`` on every rank once its owner has lowered it, and lower this rank's own."""
    flags = cp.multicast_like(pad, pad_ptrs[:W], shape=(W,), remote="nvshmem")
    for _ in tl.static_range(ROUNDS):
        cp.signal(flags[rank], wait_for=0)
        cp.wait(pad + rank + tl.arange(0, 1))
'''
