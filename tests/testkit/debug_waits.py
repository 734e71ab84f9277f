"""Debug-mode waits' kernels (tests/test_debug_waits.py runs them in the interpreter and compiles them for sm_90), and a
clock to make them give up there.

Under ``TRITON_INTERPRET=1`` the debug helpers read no clock, so they wait as the normal ones do; a test that wants
one to give up replaces the module's clock with :func:`ticking_clock`, which moves on a second at each reading.
"""

from pathlib import Path

import triton.language as tl

import castpile
from testkit import import_file

KERNELS = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def wait_plain(pad, n, BLOCK: tl.constexpr):
    """Wait for the first n flags of this rank's pad, lowering them (a wait on plain pointers)."""
    offs = tl.arange(0, BLOCK)
    cp.wait(pad + offs, mask=offs < n)


@triton.jit
def wait_multicast(pad, pad_ptrs, W: tl.constexpr):
    """Wait for flag 0 of every rank's pad to reach 2 or more, leaving it as it is (a multicast wait)."""
    pads = cp.multicast_like(pad, pad_ptrs[:W], shape=(4,))
    cp.wait(pads[0], 2, cmp="ge", reset=None)


@triton.jit
def signal_lowered(pad, pad_ptrs, W: tl.constexpr):
    """Raise flag 1 on every rank's pad once it is 0."""
    pads = cp.multicast_like(pad, pad_ptrs[:W], shape=(4,))
    cp.signal(pads[1], wait_for=0)


@triton.jit
def wait_scalar(pad, slot):
    """Wait for flag ``slot`` of this rank's pad (a scalar pointer)."""
    cp.wait(pad + slot)


@triton.jit
def signal_one_peer(pad, pad_ptrs, peer):
    """Raise flag 2 on rank ``peer``'s pad once it is 0 (a rank-0 tile: P + I = ())."""
    to_peer = cp.multicast_like(pad, tl.load(pad_ptrs + peer), shape=(4,))
    cp.signal(to_peer[2], wait_for=0)
'''

REMOTE_KERNEL = '''
import triton
import triton.language as tl

import castpile as cp


@triton.jit
def wait_remote(pad, pad_ptrs, W: tl.constexpr):
    """Wait for flag 0 of every rank's pad through NVSHMEM (compiled for sm_90 only: no interpreter run)."""
    pads = cp.multicast_like(pad, pad_ptrs[:W], shape=(4,), remote="nvshmem")
    cp.wait(pads[0])
'''

SECONDS = 2.0


def line_of(source: str, text: str) -> int:
    """The 1-based number of the one line of ``source`` that is ``text`` (blanks around it aside)."""
    [number] = [n for n, line in enumerate(source.splitlines(), 1) if line.strip() == text]
    return number


def transpiled_file(directory: Path, source: str, name: str, strategy: str, debug_waits: float | None) -> Path:
    """``source`` transpiled (with ``debug_waits``, the path named ``name``.py) into ``directory / name``.py."""
    path = directory / f"{name}.py"
    path.write_bytes(castpile.transpile(source, f"{name}.py", strategy=strategy, debug_waits=debug_waits))
    return path


def debug_kernels(directory: Path, strategy: str):
    """:data:`KERNELS` transpiled with ``debug_waits=SECONDS``, imported."""
    name = f"debug_waits_{strategy}"
    return import_file(transpiled_file(directory, KERNELS, name, strategy, SECONDS), name)


def ticking_clock():
    """A stand-in for the debug helpers' clock: one second later at each reading (from a jit function's frame)."""
    ticking_clock.now += 10**9
    return tl.full((), ticking_clock.now, tl.int64)


ticking_clock.now = 0
