"""Kernels of language v1.3's synchronization: counting semaphores, waits that return what they saw, signals
on plain pointers and compile-time option values (tests/test_language_v13_sync.py runs and compiles them)."""

import triton
import triton.language as tl

import castpile
from castpile import multicast_like


@triton.jit
def take_counts(flag, seen, n, FORM: tl.constexpr):
    """Each program takes ``n`` from the counting semaphore at ``flag`` and records the value it saw there:
    ``FORM`` 0 through the scalar pointer, 1 through a one-element pointer tensor."""
    pid = tl.program_id(0)
    if FORM == 0:
        v = castpile.wait(flag, value=n, decrement=True)
        tl.store(seen + pid, v)
    else:
        one = tl.arange(0, 1)
        v = castpile.wait(flag + one, value=n, decrement=True)
        tl.store(seen + pid + one, v)


@triton.jit
def seen_stack(out, table, value, W: tl.constexpr, WP: tl.constexpr, BLOCK: tl.constexpr, RESET: tl.constexpr):
    """The values a wait on every buffer's first ``BLOCK`` flags saw (``flag >= value``), shape P + I, into
    ``out`` (WP x BLOCK); with ``RESET`` the flags are set to 0 after, else left as they are."""
    flags = multicast_like(tl.int32, table[:W], shape=(BLOCK,))
    offs = tl.arange(0, BLOCK)
    if RESET:
        v = castpile.wait(flags[offs], value, cmp="ge", reset=0)
    else:
        v = castpile.wait(flags[offs], value, cmp="ge", reset=None)
    rows = tl.arange(0, WP)
    tl.store(out + rows[:, None] * BLOCK + offs[None, :], v)


@triton.jit
def seen_one_peer(out, table, r, value):
    """The value a wait on buffer ``r``'s flag 0 saw (a rank-0 tile: a scalar), into ``out[0]``."""
    one = multicast_like(tl.int32, table[r], shape=(1,))
    v = castpile.wait(one[0], value, cmp="ge", decrement=True)
    tl.store(out, v)


@triton.jit
def local_flags(flags, seen, n, BLOCK: tl.constexpr, OP: tl.constexpr, CMP: tl.constexpr):
    """Signals and waits on this program's own flags, plain pointers: set (or add, by ``OP``) 1 on the first
    ``n`` flags, wait for them by ``CMP`` against 1 and record what the wait saw; then a scalar flag's
    release handshake: wait_for 1 -> set 2, then wait until it is 2 and reset it to 0."""
    offs = tl.arange(0, BLOCK)
    castpile.signal(flags + offs, op=OP, mask=offs < n)
    v = castpile.wait(flags + offs, 1, cmp=CMP, reset=None, mask=offs < n)
    tl.store(seen + offs, v, mask=offs < n)
    castpile.signal(flags + BLOCK, 1, sem="relaxed")
    castpile.signal(flags + BLOCK, 2, wait_for=1, scope="gpu")
    v0 = castpile.wait(flags + BLOCK, 2, reset=0)
    tl.store(seen + BLOCK, v0)


@triton.jit
def options_from_parameters(flags, table, rank, OP: tl.constexpr, CMP: tl.constexpr, SEM: tl.constexpr,
                            SCOPE: tl.constexpr, W: tl.constexpr):
    """Signal with ``OP`` on every buffer's flag ``rank``, then wait with ``CMP`` on this rank's own flags: each
    option a constexpr parameter."""
    pads = multicast_like(flags, table[:W], shape=(W,))
    castpile.signal(pads[rank], op=OP, sem=SEM, scope=SCOPE)
    castpile.wait(flags + tl.arange(0, W), 1, cmp=CMP, sem="acquire" if SEM == "release" else SEM, scope=SCOPE)


@triton.jit
def wait_maybe_counting(flag, seen, value, D: tl.constexpr):
    """A wait whose ``decrement=`` is a constexpr: with ``D`` a counting wait for ``value``, else a wait until the
    flag equals ``value`` (the default comparison), then reset to 0; what it saw into ``seen[0]``."""
    v = castpile.wait(flag, value, decrement=D)
    tl.store(seen, v)


@triton.jit
def counting_with_eq(flag, D: tl.constexpr):
    """A wait with ``cmp="eq"`` written and a constexpr ``decrement=``: an error naming this line when ``D``."""
    castpile.wait(flag, 1, cmp="eq", decrement=D)


@triton.jit
def raise_root(pad, pad_ptrs, n):
    """Add ``n`` to rank 0's counting semaphore (flag 0 of its pad)."""
    at_root = multicast_like(pad, pad_ptrs[0], shape=(1,))
    castpile.signal(at_root[0], n, op="add")


@triton.jit
def take_from_root(pad, pad_ptrs, seen, takes):
    """``takes`` times take 1 from rank 0's counting semaphore, recording in ``seen`` what each take saw there."""
    at_root = multicast_like(pad, pad_ptrs[0], shape=(1,))
    t = 0
    while t < takes:  # a while loop: Triton 3.6's interpreter cannot loop to a run-time range bound
        v = castpile.wait(at_root[0], 1, decrement=True)
        tl.store(seen + t, v)
        t += 1


@triton.jit
def _bump(counter):
    """The counter's value, then one more there: an argument with a side effect."""
    return tl.atomic_add(counter, 1)


@triton.jit
def seen_in_written_order(flags, counters, seen):
    """A wait whose value is used, its mask and value written out of the helper's order, each with a side effect:
    the mask's bump happens first (counter 0), then the value's (counter 1)."""
    two = tl.arange(0, 2)
    v = castpile.wait(flags + two, mask=_bump(counters) < 5, value=_bump(counters + 1) + two * 0)
    tl.store(seen + two, v)
