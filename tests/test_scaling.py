"""Transpiling does work linear in the source, counted in function calls, never timed in seconds.

A source grows three ways: more kernels in a file, more terms in one index, more
accesses in one kernel.  For each, the function calls that one more unit adds
(Python and C calls, counted by a profile hook in the calling thread and in
castpile's worker thread) must stay within ``TOLERANCE`` as the source doubles
three times: work quadratic in the source would double them at every step.  A
count does not depend on how loaded the machine is.
``benchmarks/bench_transpile_scaling.py`` times the same sources in seconds.
"""

import sys
import threading
from itertools import pairwise

import pytest

from castpile import transpile

HEAD = "import triton\nimport triton.language as tl\nfrom castpile import multicast_like\n"
KERNEL = """

@triton.jit
def kern_{tag}_{i}(out, dev_ptrs, res, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.sum(bufs[offs], axis=0)
    bufs[offs] = total[None, :] * 2
    tl.store(res + offs, total, mask=offs < n)
"""
HELPER = "\n\ndef helper_{tag}_{i}(x, y):\n    z = x * {i} + y\n    return z\n"


def kernels_in_a_file(units: int, tag: str) -> bytes:
    """``units`` times a kernel with two multicast accesses and nine plain helper functions (about 100 lines)."""
    blocks = [(KERNEL if i % 10 == 0 else HELPER).format(i=i, tag=tag) for i in range(10 * units)]
    return (HEAD + "".join(blocks)).encode()


def terms_in_one_index(terms: int, tag: str) -> bytes:
    """One load whose index sums ``terms`` names."""
    index = " + ".join(f"a_{tag}_{i}" for i in range(terms))
    return (
        HEAD
        + f"""

@triton.jit
def kern(out, table, W: tl.constexpr):
    bufs = multicast_like(out, table[:W])
    x = bufs[{index}]
"""
    ).encode()


def accesses_in_one_kernel(accesses: int, tag: str) -> bytes:
    """One kernel with ``accesses`` loads and as many stores, each at its own offset."""
    body = "".join(
        f"    x{i} = bufs[offs_{tag} + {i}]\n    bufs[offs_{tag} - {i}] = x{i} * 2\n" for i in range(accesses)
    )
    return (
        HEAD
        + f"""

@triton.jit
def kern(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs_{tag} = tl.arange(0, BLOCK)
{body}"""
    ).encode()


SOURCES = {
    "kernels_in_a_file": (kernels_in_a_file, (5, 10, 20, 40), b"_castpile_reduce_loop("),
    "terms_in_one_index": (terms_in_one_index, (250, 500, 1000, 2000), b" + a_"),
    "accesses_in_one_kernel": (accesses_in_one_kernel, (25, 50, 100, 200), b"_castpile_load_loop("),
}
"""name -> (source(size, tag), sizes, each twice the last, and a text the output holds about ``size`` times).
Names carry a tag per source, so caches filled by one source do not serve the next."""

TOLERANCE = 1.15


def calls_to_transpile(source: bytes) -> tuple[int, bytes]:
    """The function calls (Python and C) made while transpiling ``source``, and the output."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    threading.setprofile(count)  # castpile transpiles in a worker thread with a deep stack
    try:
        out = transpile(source, "scaling.py")
    finally:
        threading.setprofile(None)
        sys.setprofile(None)
    return calls, out


@pytest.mark.parametrize("name", SOURCES)
def test_calls_per_added_unit_stay_constant(name):
    make, sizes, marker = SOURCES[name]
    transpile(make(sizes[0], "warmup"), "warmup.py")  # imports and first-use work
    counts = []
    for size in sizes:
        calls, out = calls_to_transpile(make(size, f"s{size}"))
        assert abs(out.count(marker) - size) <= 1, f"{name}: the source of size {size} did not transpile as meant"
        counts.append(calls)
    per_unit = [(c1 - c0) / (n1 - n0) for (n0, c0), (n1, c1) in pairwise(zip(sizes, counts))]
    report = ", ".join(f"{n}: {c:,} calls" for n, c in zip(sizes, counts))
    assert max(per_unit) <= TOLERANCE * min(per_unit), f"{name}: calls per added unit grow {per_unit}: {report}"
