"""The ``castpile run`` tests' inputs: a script and the kernel module next to it, both in the castpile language."""

MODULE = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def stack_max(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.max(bufs[offs], axis=0), mask=offs < n)


def fail():
    raise ValueError("raised in the module")
"""
"""``kernels_next_door.py``: imported by the script, through the import hook."""

SCRIPT = """\
import os
import sys

import torch
import triton
import triton.language as tl
from castpile import multicast_like

import kernels_next_door


@triton.jit
def stack_sum(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.sum(bufs[offs], axis=0), mask=offs < n)


if __name__ == "__main__":
    bufs = [torch.arange(10, dtype=torch.float32) * (w + 1) - 4 for w in range(3)]
    table = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    out = torch.zeros(10)
    stack_sum[(1,)](out, table, 10, W=3, BLOCK=16)
    ok = torch.equal(out, torch.stack(bufs).sum(dim=0))
    kernels_next_door.stack_max[(1,)](out, table, 10, W=3, BLOCK=16)
    ok = ok and torch.equal(out, torch.stack(bufs).max(dim=0).values)
    main = sys.modules["__main__"]
    print("argv:", sys.argv, "kernels:", ok, "rank:", os.environ.get("RANK"))
    print("main:", main.__file__ == __file__ == os.path.abspath(sys.argv[0]), sys.path[0] == os.path.dirname(__file__))
    if sys.argv[1:2] == ["fail"]:
        kernels_next_door.fail()
    if sys.argv[1:2] == ["message"]:
        sys.exit("leaving with a message")
    sys.exit(int(sys.argv[1]) if sys.argv[1:2] and sys.argv[1].isdigit() else None)
"""
"""``script.py``: launches its own kernel and the module's, prints what the tests check, then exits
with ``argv[1]`` (a number), raises in the module (``fail``) or exits with a message (``message``)."""
FAIL_LINE = SCRIPT.splitlines().index("        kernels_next_door.fail()") + 1
