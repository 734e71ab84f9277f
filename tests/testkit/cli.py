"""The command line tests' inputs (tests/test_cli.py, tests/test_cli_files.py, tests/test_show_cache.py): kernel files and a plain one."""

# A kernel file with one table binding: castpile rewrites it.
KERNEL = b"""import triton
import triton.language as tl
import castpile as cp


@triton.jit
def kern(out, dev_ptrs, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = cp.multicast_like(out, dev_ptrs[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    x = bufs[offs]
"""
# A file that never mentions castpile, not UTF-8 and with CRLF: it comes back byte for byte.
PLAIN = b"import triton\r\n# caf\xe9, no BOM and CRLF: bytes pass through as they are\r\nx = 1\r\n"

# A broadcast store, which the two strategies write with different helpers (tests/test_show_cache.py,
# tests/test_testing_api.py): castpile rewrites lines 8 and 10.
STORE_KERNEL = """\
import triton
import triton.language as tl
from castpile import multicast_like


@triton.jit
def spread(out, table, n, W: tl.constexpr, BLOCK: tl.constexpr):
    bufs = multicast_like(out, table[:W], shape=(n,))
    offs = tl.arange(0, BLOCK)
    bufs[offs] = tl.load(out + offs, mask=offs < n)
"""
STORE_BINDING = "    bufs = table"
"""Line 8 as castpile writes it, under either strategy."""
STORE = "    _castpile_store_{}(bufs, W, None, out, offs, (offs < n), tl.load(out + offs, mask=offs < n), site='{}:10')"
"""Line 10 as castpile writes it from the file at ``path``: ``STORE.format(strategy, path)``."""
