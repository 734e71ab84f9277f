"""The semantic kernels with remote="nvshmem" bindings, and symmetric tables for them (tests/test_remote.py, test_scalar_forms.py)."""

import ast
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
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "multicast_like":
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
