"""The command line tests' inputs (tests/test_cli.py, tests/test_cli_files.py): a kernel file and a plain one."""

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
